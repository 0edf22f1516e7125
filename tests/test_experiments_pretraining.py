"""Chapter 8's sample-efficiency experiment: its data, its learners, its claims."""

from __future__ import annotations

import pytest
import torch

from transformer_book.experiments import pretraining as pt
from transformer_book.pretrained import load_minilm


@pytest.fixture(scope="session")  # make seeds runs these tests between others
def minilm():
    return load_minilm()


@pytest.fixture(scope="module")
def tokenizer(minilm):
    return minilm[1]


def test_topic_data_is_fixed_and_every_topic_is_tested(tokenizer):
    data = pt.topic_data(tokenizer)
    assert len(data.train_texts) == 1058 and len(data.test_texts) == pt.N_TEST
    assert data.train_ids.shape[0] == 1058 and data.train_ids.shape[1] <= pt.MAX_TOKENS
    assert set(data.test_labels.tolist()) == set(range(len(pt.TOPICS)))
    assert not set(data.train_texts) & set(data.test_texts)
    again = pt.topic_data(tokenizer)
    assert torch.equal(again.test_ids, data.test_ids)


def test_label_subsets_are_nested_and_seeded():
    small, big = pt.label_subset(100, 16, seed=3), pt.label_subset(100, 64, seed=3)
    assert torch.equal(big[:16], small) and len(set(big.tolist())) == 64
    assert not torch.equal(pt.label_subset(100, 16, seed=4), small)
    with pytest.raises(ValueError, match="n=101"):
        pt.label_subset(100, 101, seed=0)
    with pytest.raises(ValueError, match="n"):
        pt.label_subset(100, 0, seed=0)


def test_probe_separates_separable_features():
    gen = torch.Generator().manual_seed(0)
    centres = torch.randn(3, 8, generator=gen) * 3
    labels = torch.arange(60) % 3
    x = centres[labels] + 0.3 * torch.randn(60, 8, generator=gen)
    probe = pt.train_probe(x, labels, 3, seed=0)
    assert (probe(x).argmax(-1) == labels).float().mean() == 1.0


def test_scratch_classifier_learns_a_keyword_task():
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 50, (64, 10), generator=gen)
    labels = torch.arange(64) % 2
    ids[:, 4] = 1 + labels  # the label is written at position 4
    model = pt.train_scratch(ids, labels, vocab_size=50, n_classes=2, seed=0, steps=60)
    assert model(ids).shape == (64, 2)
    assert (model(ids).argmax(-1) == labels).float().mean() == 1.0


def test_claims_read_the_gaps():
    counts = (16, 64, 256, 1024)
    good = pt.SampleEfficiency(
        counts, [0.4, 0.5, 0.6, 0.7], [0.2, 0.3, 0.5, 0.62], 0.22
    )
    assert all(pt.sample_efficiency_claims(good).values())
    behind = pt.SampleEfficiency(
        counts, [0.4, 0.5, 0.52, 0.7], [0.2, 0.3, 0.5, 0.66], 0.22
    )
    claims = pt.sample_efficiency_claims(behind)
    assert not claims[
        f"pretrained ahead at every count, by {pt.PRETRAINED_MARGIN} or more"
    ]
    assert not claims[
        f"pretrained with 256 labels within {pt.FOUR_TIMES_SLACK} of scratch with 1,024"
    ]
    wider = pt.SampleEfficiency(
        counts, [0.4, 0.5, 0.6, 0.9], [0.2, 0.45, 0.5, 0.6], 0.22
    )
    assert not pt.sample_efficiency_claims(wider)[
        "the gap narrows from 64 to 1,024 labels"
    ]
    with pytest.raises(ValueError, match="label counts"):
        pt.sample_efficiency_claims(pt.SampleEfficiency((16,), [0.4], [0.2], 0.2))


def test_finetune_step_seconds_times_one_step():
    from transformer_book.models import BERT, BERTConfig

    model = BERT(BERTConfig(20, 8, d_model=16, n_heads=2, n_layers=1, d_ff=16))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    seconds = pt.finetune_step_seconds(model, torch.randint(1, 20, (2, 8)), repeats=2)
    assert seconds > 0
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    with pytest.raises(ValueError, match="repeats"):
        pt.finetune_step_seconds(model, torch.randint(1, 20, (2, 8)), repeats=0)


def _tiny_task(seed: int = 0, n: int = 40):
    """A TopicData whose label is written at position 1 (ten labels, ids 3..12)."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(13, 30, (n, 6), generator=gen)
    labels = torch.arange(n) % len(pt.TOPICS)
    ids[:, 1] = 3 + labels
    ids[:, 0], ids[::2, 5] = 1, 0  # a [CLS] of sorts; half the rows padded
    texts = [str(i) for i in range(n)]
    return pt.TopicData(ids, labels, ids[: n // 2], labels[: n // 2], texts, texts)


def _tiny_bert():
    from transformer_book.models import BERT, BERTConfig

    torch.manual_seed(0)
    cfg = BERTConfig(30, 8, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.1)
    return BERT(cfg).eval()


def test_finetune_starts_from_the_probe_and_leaves_the_model_alone():
    data, model = _tiny_task(), _tiny_bert()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    # a vanishing learning rate: the fine-tuned classifier is still the probe
    still = pt.finetune_minilm(model, data, n=20, seed=3, steps=2, lr=1e-30, warmup=1)
    assert isinstance(still, pt.MiniLMClassifier) and not still.training
    rows = pt.label_subset(len(data.train_labels), 20, 3)
    with torch.no_grad():
        feats = torch.nn.functional.normalize(
            model.pooled(data.train_ids[rows], "mean"), dim=-1
        )
    probe = pt.train_probe(feats, data.train_labels[rows], len(pt.TOPICS), seed=3)
    assert torch.allclose(still.head.weight, probe.weight)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert pt.topic_accuracy(still, data) == pytest.approx(
        (
            probe(pt.F.normalize(model.pooled(data.test_ids, "mean"), dim=-1)).argmax(
                -1
            )
            == data.test_labels
        )
        .float()
        .mean()
        .item()
    )
    # a real learning rate moves every part: the encoder's weights and the head's
    tuned = pt.finetune_minilm(model, data, n=20, seed=3, steps=4, lr=1e-2, warmup=1)
    assert not torch.equal(tuned.encoder.token.weight, model.token.weight)
    assert not torch.equal(
        tuned.encoder.blocks[0].self_attn.q_proj.weight,
        model.blocks[0].self_attn.q_proj.weight,
    )
    assert not torch.equal(tuned.head.weight, probe.weight)
    again = pt.finetune_minilm(model, data, n=20, seed=3, steps=4, lr=1e-2, warmup=1)
    assert torch.equal(again.head.weight, tuned.head.weight)  # seeded


def test_finetune_learns_a_keyword_task():
    data, model = _tiny_task(), _tiny_bert()
    tuned = pt.finetune_minilm(model, data, n=40, seed=0, steps=60, lr=3e-2, warmup=5)
    assert pt.topic_accuracy(tuned, data, batch_size=7) == 1.0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"model": "MiniLM"}, TypeError, "model"),
        ({"data": (1, 2)}, TypeError, "data"),
        ({"n": 0}, ValueError, "n"),
        ({"n": 41}, ValueError, "n=41"),
        ({"n": 2.0}, TypeError, "n"),
        ({"seed": -1}, ValueError, "seed"),
        ({"steps": 0}, ValueError, "steps"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"lr": 0.0}, ValueError, "lr"),
        ({"lr": float("nan")}, ValueError, "lr"),
        ({"warmup": 4}, ValueError, "warmup"),
        ({"warmup": -1}, ValueError, "warmup"),
    ],
)
def test_finetune_names_a_bad_argument(kwargs, error, match):
    args = {
        "model": _tiny_bert(),
        "data": _tiny_task(),
        "n": 8,
        "seed": 0,
        "steps": 4,
        "warmup": 1,
    } | kwargs
    with pytest.raises(error, match=match):
        pt.finetune_minilm(**args)


def test_minilm_classifier_checks_its_parts():
    model = _tiny_bert()
    with pytest.raises(ValueError, match="head"):
        pt.MiniLMClassifier(model, torch.nn.Linear(8, 10))
    with pytest.raises(TypeError, match="encoder"):
        pt.MiniLMClassifier(torch.nn.Linear(16, 16), torch.nn.Linear(16, 10))
    out = pt.MiniLMClassifier(model, torch.nn.Linear(16, 10))(torch.ones(2, 5).long())
    assert out.shape == (2, 10)


@pytest.fixture(scope="session")  # once per process: 18 s on 2 cores
def features(minilm):
    return pt.topic_features(*minilm)


@pytest.mark.seeds
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sample_efficiency_claims_hold_for_other_seeds(features, seed):
    result = pt.run_sample_efficiency(*features, seed=seed)
    claims = pt.sample_efficiency_claims(result)
    assert all(claims.values()), (claims, result)


def test_finetune_claims_read_the_three_scores():
    assert all(pt.finetune_claims(0.45, 0.48, 0.28).values())
    worse = pt.finetune_claims(0.45, 0.45 - pt.FINETUNE_SLACK - 0.01, 0.28)
    assert not worse[f"fine-tuned at least the probe's score, less {pt.FINETUNE_SLACK}"]
    close = pt.finetune_claims(0.45, 0.45, 0.45 - pt.FINETUNE_LEAD + 0.01)
    assert not close[f"fine-tuned ahead of scratch by {pt.FINETUNE_LEAD} or more"]
    with pytest.raises(ValueError, match="finetuned"):
        pt.finetune_claims(0.4, 1.5, 0.2)


@pytest.mark.seeds
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_finetune_claims_hold_for_other_seeds(minilm, features, seed):
    # measured (one thread): fine-tuned - probe -0.004, +0.039, +0.004 for seeds 1-3
    n = pt.FINETUNE_LABELS
    result = pt.run_sample_efficiency(*features, seed=seed, label_counts=(n,))
    tuned = pt.finetune_minilm(minilm[0], features[0], n, seed=seed)
    finetuned = pt.topic_accuracy(tuned, features[0])
    claims = pt.finetune_claims(result.pretrained[0], finetuned, result.scratch[0])
    assert all(claims.values()), (claims, result, finetuned)


def test_topic_accuracy_names_a_model_without_weights():
    """A module with no parameters (nothing trained, and no device to read) is named,
    not met as a StopIteration."""
    data = _tiny_task()
    with pytest.raises(ValueError, match="model has no parameters"):
        pt.topic_accuracy(torch.nn.Identity(), data)


def test_the_scratch_runs_side_by_side_equal_them_in_turn(monkeypatch):
    """The from-scratch classifiers train in forked workers on a CPU
    (``_parallel.map_runs``): the numbers are the same bit for bit."""
    import transformer_book._parallel as parallel

    data, gen = _tiny_task(), torch.Generator().manual_seed(0)
    features = torch.randn(40, 8, generator=gen), torch.randn(20, 8, generator=gen)
    side_by_side = pt.run_sample_efficiency(data, *features, label_counts=(10, 20))
    monkeypatch.setattr(parallel, "can_fork", lambda device: False)
    assert pt.run_sample_efficiency(data, *features, label_counts=(10, 20)) == (
        side_by_side
    )
