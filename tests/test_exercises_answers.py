"""The checkers of Exercises 4.4, 4.5, 6.4-6.6, 8.5 and 8.6: answers that are a
function checked on random inputs, numbers, or a measured table with the
conclusion it supports. Valid variants pass; each plausible wrong answer gets
its own message; the stub is "not attempted"."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from transformer_book.exercises import (
    ch06_answers,
    ch08_answers,
    check_bert_cache_answer,
    check_finetune_answer,
    check_gpt2_convert,
    check_head_drift,
    check_lag2_answer,
    check_rope_symmetry,
    check_vocabulary_answer,
)
from transformer_book.positional import apply_rope


def passes(check, *answers, capsys) -> None:
    assert check(*answers) is None
    assert capsys.readouterr().out.endswith("all checks passed.\n")


def fails(check, *answers, words: str) -> None:
    with pytest.raises(AssertionError) as err:
        check(*answers)
    assert words in str(err.value), str(err.value)


def not_attempted(check, *answers, capsys) -> None:
    check(*answers)
    assert "not attempted yet" in capsys.readouterr().out


# -- 4.4, part 3 ----------------------------------------------------------------------


def rope_score(q, k, offset):
    q_rot = apply_rope(q[None], torch.tensor([100 + offset]))[0]
    k_rot = apply_rope(k[None], torch.tensor([100]))[0]
    return (q_rot @ k_rot).item()


def rope_score_complex(q, k, offset):
    """Another valid answer: float64, complex numbers, the key at position 0."""
    d = q.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    zq = torch.view_as_complex(q.double().reshape(d // 2, 2))
    zk = torch.view_as_complex(k.double().reshape(d // 2, 2))
    turn = torch.polar(torch.ones_like(theta), offset * theta)
    return torch.tensor((zq * turn * zk.conj()).real.sum().item())


@pytest.mark.parametrize("fn", [rope_score, rope_score_complex])
def test_rope_symmetry_valid(fn, capsys):
    passes(check_rope_symmetry, fn, False, capsys=capsys)
    passes(check_rope_symmetry, fn, np.bool_(False), capsys=capsys)


@pytest.mark.parametrize(
    ("fn", "symmetric", "words"),
    [
        (rope_score, True, "symmetric is not right: for random q and k"),
        (lambda q, k, o: rope_score(q, k, -o), False, "is the score at offset -3"),
        (lambda q, k, o: (q @ k).item(), False, "is the plain q . k"),
        (lambda q, k, o: rope_score(k, q, o), False, "is the score at offset -3"),
        (lambda q, k, o: rope_score(q, k, 2 * o), False, "is wrong for D = 6"),
        (lambda q, k, o: "1.0", False, "should be a number"),
        (lambda q, k, o: 1 / 0, False, "raised ZeroDivisionError"),
        (rope_score, "no", "symmetric should be True or False"),
        (3, False, "should be a function"),
    ],
)
def test_rope_symmetry_wrong(fn, symmetric, words):
    fails(check_rope_symmetry, fn, symmetric, words=words)


def test_rope_symmetry_stub(capsys):
    def stub(q, k, offset):
        raise NotImplementedError

    not_attempted(check_rope_symmetry, stub, ..., capsys=capsys)
    not_attempted(check_rope_symmetry, ..., ..., capsys=capsys)


def test_rope_symmetry_varies_widths_and_offsets():
    from transformer_book.exercises.ch04_answers import _CASES

    assert len({d for d, _ in _CASES}) >= 4 and len({o for _, o in _CASES}) >= 4


# -- 4.5 ------------------------------------------------------------------------------

LAG2 = {"alibi": [0.316, 0.312, 0.308], "rope": [1.0, 0.989, 0.562]}


@pytest.mark.parametrize(
    "accuracy",
    [
        LAG2,
        {"alibi": torch.tensor([0.3, 0.31, 0.31]), "rope": (1.0, 0.99, 0.6)},
        {**LAG2, "t5": [0.9, 0.8, 0.5]},  # more schemes than asked
    ],
)
def test_lag2_valid(accuracy, capsys):
    passes(check_lag2_answer, accuracy, False, True, capsys=capsys)


@pytest.mark.parametrize(
    ("accuracy", "alibi", "rope", "words"),
    [
        (LAG2, True, True, "alibi_learns does not follow from your table"),
        (LAG2, False, False, "rope_learns does not follow from your table"),
        (
            {"alibi": [0.99, 0.98, 0.98], "rope": [1.0, 1.0, 0.9]},
            True,
            True,
            "ExtrapolationConfig(n_layers=1, lag=2)",
        ),  # the lag-1 experiment
        (
            {"alibi": [0.3, 0.3, 0.3], "rope": [0.5, 0.4, 0.3]},
            False,
            True,
            "RoPE reaches 1.00",
        ),
        (
            {"alibi": [31.6, 31.2, 30.8], "rope": [100, 98.9, 56.2]},
            False,
            True,
            "fractions of 1",
        ),  # fmt: skip
        ({"alibi": [0.3, 0.3]}, False, True, 'map "alibi" and "rope"'),
        ({"alibi": [0.3, 0.3], "rope": [1.0, 1.0]}, False, True, "3 accuracies"),
        (LAG2, "False", True, "alibi_learns should be True or False"),
    ],
)
def test_lag2_wrong(accuracy, alibi, rope, words):
    fails(check_lag2_answer, accuracy, alibi, rope, words=words)


def test_lag2_stub(capsys):
    not_attempted(check_lag2_answer, ..., ..., ..., capsys=capsys)
    not_attempted(check_lag2_answer, LAG2, ..., ..., capsys=capsys)


# -- 6.4 ------------------------------------------------------------------------------


def triangle(t):
    return t * (t + 1) // 2


@pytest.mark.parametrize(
    ("change", "bert", "gpt"),
    [
        (0.5, triangle, lambda t: t),
        (torch.tensor(2.0), lambda t: sum(range(1, t + 1)), lambda t: float(t)),
        (np.float32(0.01), lambda t: t * (t + 1) / 2, lambda t: torch.tensor(t)),
    ],
)
def test_bert_cache_valid(change, bert, gpt, capsys):
    passes(check_bert_cache_answer, change, bert, gpt, capsys=capsys)


@pytest.mark.parametrize(
    ("change", "bert", "gpt", "words"),
    [
        (0.0, triangle, lambda t: t, "no change beyond float32 rounding"),
        (3e-7, triangle, lambda t: t, "GPT's (causal) do not change"),
        (-0.5, triangle, lambda t: t, "not negative"),
        (0.5, lambda t: t * t, lambda t: t, "1, 2, ..., t), not over all t"),
        (0.5, lambda t: t * (t - 1) // 2, lambda t: t, "1 + 2 + ... + t"),
        (0.5, lambda t: t, lambda t: t, "recomputes every earlier position"),
        (0.5, triangle, triangle, "that is without the cache"),
        (0.5, triangle, lambda t: 1, "each of the t steps"),
        (0.5, triangle, lambda t: t * t, "only the new position"),
        (0.5, lambda t: 5050, lambda t: t, "bert_positions(1) is 5050"),
        (0.5, 5050, lambda t: t, "should be a function of t"),
        (0.5, triangle, lambda: 1, "raised TypeError"),
    ],
)
def test_bert_cache_wrong(change, bert, gpt, words):
    fails(check_bert_cache_answer, change, bert, gpt, words=words)


def test_bert_cache_stub(capsys):
    not_attempted(check_bert_cache_answer, ..., ..., ..., capsys=capsys)
    not_attempted(check_bert_cache_answer, 0.5, ..., ..., capsys=capsys)


# -- 6.5 ------------------------------------------------------------------------------

VOCAB = (169_728, 112_192, 3.1**2)


@pytest.mark.parametrize(
    "answers",
    [VOCAB, (169728.0, np.int64(112192), 10), (torch.tensor(169728), 112192, 9.6)],
)
def test_vocabulary_valid(answers, capsys):
    passes(check_vocabulary_answer, *answers, capsys=capsys)


@pytest.mark.parametrize(
    ("index", "value", "words"),
    [
        (0, 169_728 + 65_536, "tied to the token table"),
        (0, 65_536, "the token table alone"),
        (1, 112_192 + 8_000, "tied to the token table"),
        (1, 8_000, "the token table alone"),
        (1, 169_728, "sets the size of the token table"),
        (2, 3.1, "square of the length"),
        (2, 1 / 9.61, "upside down"),
        (2, 1 / 3.1, "upside down"),
        (2, 20, "times the right value"),
        (0, "169728", "should be a number"),
    ],
)
def test_vocabulary_wrong(index, value, words):
    answers = list(VOCAB)
    answers[index] = value
    fails(check_vocabulary_answer, *answers, words=words)


def test_vocabulary_stub(capsys):
    not_attempted(check_vocabulary_answer, ..., ..., ..., capsys=capsys)


# -- 6.6 ------------------------------------------------------------------------------

MAJORITY = 0.416  # the topic task's majority class (the chapter prints 41.6%)
FINETUNE = {"pre-trained": {100: 0.45, 200: 0.6}, "fresh": {100: 0.719, 200: 0.8}}


@pytest.fixture
def majority(monkeypatch):
    monkeypatch.setattr(ch06_answers, "_majority", lambda: MAJORITY)


def test_the_majority_is_the_chapters():
    assert round(ch06_answers._majority(), 3) == MAJORITY


@pytest.mark.parametrize(
    ("table", "helps"),
    [
        (FINETUNE, False),
        ({"fresh": {100: 0.7, 200: 0.75}, "pre-trained": {100: 0.6, 200: 0.8}}, False),
        (
            {k: {s: np.float64(a) for s, a in r.items()} for k, r in FINETUNE.items()},
            np.bool_(False),
        ),  # fmt: skip
    ],
)
def test_finetune_valid(table, helps, majority, capsys):
    passes(check_finetune_answer, table, helps, capsys=capsys)


@pytest.mark.parametrize(
    ("table", "helps", "words"),
    [
        (FINETUNE, True, "pretraining_helps does not follow"),
        ({**FINETUNE, "fresh": {100: 0.5, 200: 0.8}}, False, "at least the majority"),
        ({**FINETUNE, "pre-trained": {100: 0.75, 200: 0.8}}, True, "copy.deepcopy"),
        ({**FINETUNE, "fresh": {100: 71.9, 200: 80}}, False, "a fraction of 1"),
        ({"fresh": FINETUNE["fresh"]}, False, '"pre-trained" and "fresh"'),
        ({**FINETUNE, "fresh": [0.719, 0.8]}, False, "the steps 100 and 200"),
        (FINETUNE, 0, "pretraining_helps should be True or False"),
    ],
)
def test_finetune_wrong(table, helps, words, majority):
    fails(check_finetune_answer, table, helps, words=words)


def test_finetune_stub(capsys, majority):
    not_attempted(check_finetune_answer, ..., ..., capsys=capsys)
    not_attempted(check_finetune_answer, FINETUNE, ..., capsys=capsys)


# -- 8.5 ------------------------------------------------------------------------------


def convert(state):
    i = next(iter(state)).split(".")[1]
    h, b = f"h.{i}.", f"blocks.{i}."
    ours = {}
    w, bias = state[h + "attn.c_attn.weight"], state[h + "attn.c_attn.bias"]
    d = w.shape[0]
    for name, w_part, b_part in zip(
        ("q_proj", "k_proj", "v_proj"), w.split(d, dim=1), bias.split(d), strict=True
    ):
        ours[f"{b}self_attn.{name}.weight"] = w_part.T
        ours[f"{b}self_attn.{name}.bias"] = b_part
    for theirs, mine in (
        ("attn.c_proj", "self_attn.out_proj"),
        ("mlp.c_fc", "feed_forward.linear1"),
        ("mlp.c_proj", "feed_forward.linear2"),
    ):
        ours[f"{b}{mine}.weight"] = state[f"{h}{theirs}.weight"].T
        ours[f"{b}{mine}.bias"] = state[f"{h}{theirs}.bias"]
    for theirs, mine in (("ln_1", "norm1"), ("ln_2", "norm2")):
        for kind in ("weight", "bias"):
            ours[f"{b}{mine}.{kind}"] = state[f"{h}{theirs}.{kind}"]
    return ours


def convert_chunked(state):
    """Another valid answer: chunk, contiguous float64 copies, a loop over keys."""
    out = {}
    for key, value in state.items():
        _, i, *rest = key.split(".")
        name = ".".join(rest)
        if name.startswith("attn.c_attn"):
            for part, chunk in zip("qkv", value.chunk(3, dim=-1), strict=True):
                kind = name.rsplit(".", 1)[1]
                chunk = chunk.t() if kind == "weight" else chunk
                name_qkv = f"blocks.{i}.self_attn.{part}_proj.{kind}"
                out[name_qkv] = chunk.double().clone()
            continue
        table = {
            "attn.c_proj": "self_attn.out_proj",
            "mlp.c_fc": "feed_forward.linear1",
            "mlp.c_proj": "feed_forward.linear2",
            "ln_1": "norm1",
            "ln_2": "norm2",
        }
        module, kind = name.rsplit(".", 1)
        transpose = kind == "weight" and value.dim() == 2
        out[f"blocks.{i}.{table[module]}.{kind}"] = value.t() if transpose else value
    return out


def edited(**change):
    def fn(state):
        out = convert(state)
        for key, how in change.items():
            matching = [k for k in out if k.endswith(key.replace("__", "."))]
            for k in matching:
                if how == "drop":
                    del out[k]
                elif how == "T":
                    out[k] = out[k].T
                elif how == "swap_qk":
                    other = k.replace("q_proj", "k_proj")
                    out[k], out[other] = out[other], out[k]
                elif how == "extra":
                    out[k.replace("norm1", "ln_1")] = out[k]
        return out

    return fn


@pytest.mark.parametrize("fn", [convert, convert_chunked])
def test_convert_valid(fn, capsys):
    passes(check_gpt2_convert, fn, capsys=capsys)


def hard_coded_768(state):
    q, k, v = state["h.0.attn.c_attn.weight"].split(768, dim=1)
    return convert(state)  # right for 768; the split would fail elsewhere


def split_768(state):
    out = convert(state)
    q = state[next(k for k in state if "c_attn.weight" in k)][:, :768]
    key = next(k for k in out if "q_proj.weight" in k)
    out[key] = q.T if q.shape[1] == out[key].shape[0] else q.T[: out[key].shape[0]]
    return out


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (edited(out_proj__weight="T"), "out_proj.weight holds the transpose"),
        (edited(linear2__weight="T"), "linear2.weight has shape (3072, 768)"),
        (edited(q_proj__weight="swap_qk"), "holds what k_proj should hold"),
        (edited(q_proj__bias="swap_qk"), "holds what k_proj should hold"),
        (edited(v_proj__bias="drop"), "has no 'blocks.0.self_attn.v_proj.bias'"),
        (edited(norm1__weight="extra"), "'blocks.0.ln_1.weight' is not one of"),
        (lambda s: dict(s), "has no"),  # GPT-2's names unchanged
        (
            lambda s: {
                k.replace("blocks.3", "blocks.0"): v for k, v in convert(s).items()
            },
            "(width 32, block 3) your dict has no",
        ),  # fmt: skip
        (hard_coded_768, "raised"),
        (lambda s: list(convert(s).items()), "should return a dict"),
        (
            lambda s: {
                **convert(s),
                **{k: v.tolist() for k, v in convert(s).items() if "norm2.bias" in k},
            },
            "should be a tensor",
        ),  # fmt: skip
    ],
)
def test_convert_wrong(fn, words):
    fails(check_gpt2_convert, fn, words=words)


def test_convert_stub(capsys):
    def stub(state):
        raise NotImplementedError

    not_attempted(check_gpt2_convert, stub, capsys=capsys)


# -- 8.6 ------------------------------------------------------------------------------

RERUN = {
    "drift": torch.tensor(
        [2.8, 2.4, 1.3, 2.5, 2.9, 2.1, 1.4, 2.3, 4.3, 1.2, 1.1, 1.0],
        dtype=torch.float64,
    )
    / 1000,  # fmt: skip
    # weight on [CLS]: falls as drift grows (rank correlation with drift: -1)
    "weight": torch.linspace(0.9, 0.1, 12, dtype=torch.float64)[
        torch.tensor([2.8, 2.4, 1.3, 2.5, 2.9, 2.1, 1.4, 2.3, 4.3, 1.2, 1.1, 1.0])
        .argsort()
        .argsort()
    ],
    "norm": torch.tensor(
        [0.5, 0.1, 0.4, 0.2, 0.3, 0.6, 0.9, 0.7, 0.8, 0.05, 1.0, 0.0],
        dtype=torch.float64,
    ),  # fmt: skip
}


@pytest.fixture
def rerun(monkeypatch):
    monkeypatch.setattr(ch08_answers, "_measured", lambda: copy.deepcopy(RERUN))


def test_the_rerun_fixture_is_what_the_tests_assume():
    from transformer_book.decision import rank_correlation

    assert rank_correlation(RERUN["drift"], -RERUN["weight"]) == pytest.approx(1.0)
    assert abs(rank_correlation(RERUN["drift"], RERUN["norm"])) < 0.5


@pytest.mark.parametrize(
    "drift",
    [
        RERUN["drift"].tolist(),
        RERUN["drift"].float(),  # a tensor, float32
        (RERUN["drift"] * 1000).tolist(),  # another scale, the same ranks
        (1 - RERUN["drift"]).neg().tolist(),  # -cosine: the same ranks
        np.asarray(RERUN["drift"]).tolist(),
    ],
)
def test_head_drift_valid(drift, rerun, capsys):
    passes(check_head_drift, drift, True, False, capsys=capsys)


@pytest.mark.parametrize(
    ("drift", "weight", "norm", "words"),
    [
        (RERUN["drift"].tolist(), False, False, "weight_predicts does not follow"),
        (RERUN["drift"].tolist(), True, True, "norm_predicts does not follow"),
        ((1 - RERUN["drift"]).tolist(), True, False, "ranks the heads unlike"),
        (RERUN["drift"].flip(0).tolist(), True, False, "ranks the heads unlike"),
        (RERUN["drift"][:11].tolist(), True, False, "12 numbers"),
        (RERUN["drift"].reshape(3, 4), True, False, "12 numbers"),
        ({"h0": 0.1}, True, False, "12 numbers"),
        ([*RERUN["drift"][:11].tolist(), "x"], True, False, "should be a number"),
        (RERUN["drift"].tolist(), "yes", False, "should be True or False"),
    ],
)
def test_head_drift_wrong(drift, weight, norm, words, rerun):
    fails(check_head_drift, drift, weight, norm, words=words)


def test_head_drift_stub(capsys, rerun):
    not_attempted(check_head_drift, ..., ..., ..., capsys=capsys)
    not_attempted(check_head_drift, RERUN["drift"].tolist(), ..., ..., capsys=capsys)


# -- The experiments' checks accept real runs with other random seeds ----------------


@pytest.mark.seeds
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lag2_check_accepts_real_runs(seed, capsys):
    from transformer_book.experiments.extrapolation import (
        ExtrapolationConfig,
        run_extrapolation,
    )

    cfg = ExtrapolationConfig(n_layers=1, lag=2)
    result = run_extrapolation(seed=seed, schemes=("alibi", "rope"), cfg=cfg)
    accuracy = result.accuracy
    assert accuracy["alibi"][0] < 0.9 <= accuracy["rope"][0], accuracy
    passes(check_lag2_answer, accuracy, False, True, capsys=capsys)


# Exercise 7's checker on real runs: test_experiments_efficiency.py, with the chapter's
# KV-sharing claims (one test, so that the 12 models are trained once).


# -- Issue 44: verdicts the audit found unsound ----------------------------------------


def test_a_function_that_forgot_its_return_is_told_so():
    def rope_score_no_return(q, k, offset):
        rope_score(q, k, offset)  # computed, never returned

    fails(check_rope_symmetry, rope_score_no_return, False, words="forget `return`")

    def triangle_no_return(t):
        t * (t + 1) // 2

    fails(check_bert_cache_answer, 0.5, triangle_no_return, lambda t: t,
          words="forget `return`")  # fmt: skip
    fails(check_bert_cache_answer, None, triangle, lambda t: t, words="is None")
    fails(check_lag2_answer, None, False, True, words="is None")


@pytest.mark.parametrize(
    "accuracy",
    [
        {"alibi": np.array([0.316, 0.312, 0.308]), "rope": np.array([1.0, 0.99, 0.56])},
        {"alibi": np.float32([0.3, 0.31, 0.31]), "rope": [1.0, 0.99, 0.6]},
    ],
)
def test_lag2_takes_numpy_arrays(accuracy, capsys):
    passes(check_lag2_answer, accuracy, False, True, capsys=capsys)


@pytest.mark.parametrize(
    "accuracy",
    [
        {k: [1 - a for a in row] for k, row in LAG2.items()},  # error rates
        {"alibi": [0.06, 0.06, 0.06], "rope": [0.07, 0.06, 0.06]},  # nothing learns
        {"alibi": [0.3, 0.3, 0.3], "rope": [0.85, 0.8, 0.5]},
    ],
)
@pytest.mark.parametrize("rope", [True, False])
def test_lag2_refuses_a_rope_that_did_not_learn(accuracy, rope):
    fails(check_lag2_answer, accuracy, False, rope, words="RoPE reaches 1.00")


def test_bert_cache_refuses_the_mean_change():
    """The solution's sentence and model: the mean |change| is not the largest."""
    from transformer_book.exercises.ch06_answers import _solution_changes

    for largest, mean in _solution_changes():
        passes_ = check_bert_cache_answer(largest, triangle, lambda t: t)
        assert passes_ is None
        fails(check_bert_cache_answer, mean, triangle, lambda t: t,
              words="the mean change")  # fmt: skip


@pytest.mark.parametrize(
    "table",
    [
        {"pre-trained": {100: 0.5, 200: 0.6}, 1: {100: 0.7, 200: 0.7}},
        {"pre-trained": {100: 0.5, "200": 0.6}, "fresh": {100: 0.7, 200: 0.7}},
        {("pre", "trained"): {}, "fresh": {}},
    ],
)
def test_finetune_names_keys_of_mixed_types(table, majority):
    with pytest.raises(AssertionError, match="should map"):
        check_finetune_answer(table, False)


def test_head_drift_takes_a_numpy_array(rerun, capsys):
    passes(check_head_drift, np.asarray(RERUN["drift"]), True, False, capsys=capsys)
    passes(check_head_drift, np.float32(RERUN["drift"]), True, False, capsys=capsys)
