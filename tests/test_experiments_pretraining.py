"""Chapter 8's sample-efficiency experiment: its data, its learners, its claims."""

from __future__ import annotations

import pytest
import torch

from transformer_book.experiments import pretraining as pt
from transformer_book.pretrained import load_minilm


@pytest.fixture(scope="module")
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


@pytest.fixture(scope="module")
def features(minilm):
    return pt.topic_features(*minilm)


@pytest.mark.seeds
@pytest.mark.xdist_group("minilm")  # one process loads MiniLM for these (make seeds)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sample_efficiency_claims_hold_for_other_seeds(features, seed):
    result = pt.run_sample_efficiency(*features, seed=seed)
    claims = pt.sample_efficiency_claims(result)
    assert all(claims.values()), (claims, result)
