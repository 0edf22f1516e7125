"""The checkers of the exercises whose answer is a number or a small table (6.3,
7.3-7.6): the right value passes in any numeric form, the stub is "not
attempted", each classic mistake is named, and a conclusion must follow from the
reader's own table."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from transformer_book.exercises import (
    check_kv_cache_answer,
    check_kv_sharing_answer,
    check_t_squared_answer,
    check_targets_answer,
    check_tiling_threshold_answer,
)
from transformer_book.exercises._checking import expect_bool, expect_number
from transformer_book.exercises.ch07_answers import layer_share, tiling_threshold_kib

TARGETS = (756, 115, 168, 6.6)
KV_CACHE = (2_621_440, 327_680, 4, 32)
T_SQUARED = (384, 4608, 24576, 0.31)
TILING = (32, 127)
# Exercise 7.5: the table the book printed (seeds 0-3; 4, 2, 1 key/value heads)
PPL = {
    0: {4: 145, 2: 161, 1: 102},
    1: {4: 136, 2: 126, 1: 134},
    2: {4: 102, 2: 168, 1: 202},
    3: {4: 106, 2: 126, 1: 92},
}
KV_SHARING = (PPL, False, True)


def passes(check, answers, capsys) -> None:
    check(*answers)
    assert capsys.readouterr().out.endswith("all checks passed.\n")


@pytest.mark.parametrize(
    ("check", "answers"),
    [
        (check_targets_answer, TARGETS),
        (check_targets_answer, (756.0, 115.2, 168, 756 / 115.2)),
        (check_targets_answer, (756, 116, 168, 6.5)),
        (check_targets_answer, (torch.tensor(756), np.float64(115.2), 168, 6.56)),
        (check_kv_cache_answer, KV_CACHE),
        (check_kv_cache_answer, (2.5 * 2**20, 320 * 2**10, 4.0, np.int64(32))),
        (
            check_kv_cache_answer,
            (
                2 * 80 * 64 * 128 * 2,
                2 * 80 * 8 * 128 * 2,
                40 * 2**30 // (10 * 2**30),
                32,
            ),
        ),  # fmt: skip
        (check_t_squared_answer, T_SQUARED),
        (check_t_squared_answer, (6 * 64, 6 * 768, 6 * 4096, 8192 / 26624)),
        (check_t_squared_answer, (384.0, 4608, 24576, torch.tensor(0.3077))),
        (check_tiling_threshold_answer, TILING),
        (check_tiling_threshold_answer, (32.0, 128)),  # the formula's 2 d²
        (check_tiling_threshold_answer, (np.int64(32), torch.tensor(127))),
        (check_kv_sharing_answer, KV_SHARING),
        # a list by seed, run_kv_sharing's own dicts, NumPy's bool
        (check_kv_sharing_answer, ([PPL[s] for s in range(4)], np.bool_(False), True)),
        (
            check_kv_sharing_answer,
            (
                {
                    s: {n: {"ppl": p, "unigram_ppl": 373.0} for n, p in row.items()}
                    for s, row in PPL.items()
                },
                False,
                True,
            ),
        ),  # fmt: skip
        # a table where grouped-query is always between, and the spread is small
        (
            check_kv_sharing_answer,
            (
                {s: {4: 100.0 + s, 2: 120.0 + s, 1: 140.0 + s} for s in range(4)},
                True,
                False,
            ),
        ),  # fmt: skip
    ],
)
def test_right_answers_pass(check, answers, capsys):
    passes(check, answers, capsys)


@pytest.mark.parametrize(
    ("check", "n"),
    [
        (check_targets_answer, 4),
        (check_kv_cache_answer, 4),
        (check_t_squared_answer, 4),
        (check_tiling_threshold_answer, 2),
        (check_kv_sharing_answer, 3),
    ],
)
@pytest.mark.parametrize("stub", [...])  # None is a forgotten `return` (issue 44)
def test_the_stub_is_not_attempted(check, n, stub, capsys):
    check(*[stub] * n)
    out = capsys.readouterr().out
    assert "not attempted yet" in out and "Replace each `...`" in out


def answers_with(right, index, value):
    answers = list(right)
    answers[index] = value
    return answers


WRONG = [
    # (check, right answers, which answer, wrong value, words of the message)
    (check_targets_answer, TARGETS, 0, 768, "63 (input, next token) pairs"),
    (check_targets_answer, TARGETS, 0, 750, "times the right value"),
    (check_targets_answer, TARGETS, 1, 113.4, "all 64 tokens of each window"),
    (check_targets_answer, TARGETS, 1, 92.16, "not only those shown as [MASK]"),
    (check_targets_answer, TARGETS, 1, 12, "times the right value"),
    (check_targets_answer, TARGETS, 2, 120, "a sentinel before each"),
    (check_targets_answer, TARGETS, 2, 156, "the end token"),
    (check_targets_answer, TARGETS, 3, 4.5, "GPT's targets over T5's"),
    (check_targets_answer, TARGETS, 3, 115.2 / 756, "upside down"),
    (check_kv_cache_answer, KV_CACHE, 0, 1_310_720, "the factor 2"),
    (check_kv_cache_answer, KV_CACHE, 0, 655_360, "keys only"),
    (check_kv_cache_answer, KV_CACHE, 0, 5_242_880, "float32"),
    (check_kv_cache_answer, KV_CACHE, 0, 20_971_520, "bits"),
    (check_kv_cache_answer, KV_CACHE, 0, 32_768, "one layer"),
    (check_kv_cache_answer, KV_CACHE, 1, 2_621_440, "64 query heads"),
    (check_kv_cache_answer, KV_CACHE, 1, 163_840, "the factor 2"),
    (check_kv_cache_answer, KV_CACHE, 2, 3, "2^30 bytes, not 10^9"),
    (check_kv_cache_answer, KV_CACHE, 2, 40e9 / (2_621_440 * 4096), "whole"),
    (check_kv_cache_answer, KV_CACHE, 2, 8, "half the bytes"),
    (check_kv_cache_answer, KV_CACHE, 3, 29, "2^30 bytes, not 10^9"),
    (check_kv_cache_answer, KV_CACHE, 3, 64, "half the bytes"),
    (check_kv_cache_answer, KV_CACHE, 3, 33, "times the right value"),
    (check_t_squared_answer, T_SQUARED, 0, 128, "projections alone"),
    (check_t_squared_answer, T_SQUARED, 1, 3072, "counted as 8 T D²"),
    (check_t_squared_answer, T_SQUARED, 2, 12288, "4 T² D"),
    (check_t_squared_answer, T_SQUARED, 3, 30.77, "not a percentage"),
    (check_t_squared_answer, T_SQUARED, 3, 8192 / 14336, "without the"),
    (check_t_squared_answer, T_SQUARED, 3, 0.4, "counted as 8 T D²"),
    (check_t_squared_answer, T_SQUARED, 3, 8192 / 18432, "divides by the rest"),
    (check_t_squared_answer, T_SQUARED, 3, 0.25, "times the right value"),
    (check_kv_cache_answer, KV_CACHE, 0, 2_500_000, "2^20 bytes"),
    (check_kv_cache_answer, KV_CACHE, 1, 320_000, "2^10 bytes"),
    (check_t_squared_answer, T_SQUARED, 0, 768, "only the scores"),
    (check_t_squared_answer, T_SQUARED, 1, 2304, "counted twice"),
    (check_tiling_threshold_answer, TILING, 0, 8, "counts elements"),
    (check_tiling_threshold_answer, TILING, 0, 16, "float16"),
    (check_tiling_threshold_answer, TILING, 0, 32768, "that is bytes"),
    (check_tiling_threshold_answer, TILING, 0, 31, "smallest size"),
    (check_tiling_threshold_answer, TILING, 1, 64, "as d², not as d"),
    (check_tiling_threshold_answer, TILING, 1, 126, "smallest size"),
    (check_tiling_threshold_answer, TILING, 1, 131072, "that is bytes"),
    (check_tiling_threshold_answer, TILING, 1, 130, "times the right value"),
]


@pytest.mark.parametrize(("check", "right", "index", "value", "words"), WRONG)
def test_wrong_answers_are_named(check, right, index, value, words):
    with pytest.raises(AssertionError, match="not right") as err:
        check(*answers_with(right, index, value))
    assert words in str(err.value)


@pytest.mark.parametrize("value", ["756", True, [756], torch.tensor([756, 1]),
                                   math.nan, math.inf])  # fmt: skip
def test_a_non_number_is_refused_by_name(value):
    with pytest.raises(AssertionError, match="GPT's targets should be a"):
        check_targets_answer(*answers_with(TARGETS, 0, value))


def test_the_tolerance_is_the_stated_one():
    expect_number(100.9, 100, "x", rel=0.01)
    with pytest.raises(AssertionError, match="1.02 times"):
        expect_number(102, 100, "x", rel=0.01)
    with pytest.raises(AssertionError):
        expect_number(100.5, 100, "x")  # rel 0: exact


def test_the_answers_algebra_holds_on_the_package_counters():
    for d in (64, 768, 4096):
        assert layer_share(6 * d, d) == 0.5  # 4 T² D = 24 T D² at T = 6 D
        assert layer_share(6 * d - 1, d) < 0.5 < layer_share(6 * d + 1, d)
    assert (tiling_threshold_kib(64), tiling_threshold_kib(128)) == TILING
    # T cancels: the same thresholds at other lengths
    assert tiling_threshold_kib(64, t=1024) == 32
    assert tiling_threshold_kib(128, t=16384) == 127


def with_row(seed, **values):
    table = {s: dict(row) for s, row in PPL.items()}
    table[seed].update({int(k[1:]): v for k, v in values.items()})
    return table


KV_WRONG = [
    # (perplexities, always_between, spread_wins, words of the message)
    (PPL, True, True, "with seed 0, grouped-query's 161 is outside [102, 145]"),
    (PPL, False, False, "multi-query (1) spreads over 110"),
    (
        {s: {4: 100.0 + s, 2: 120.0 + s, 1: 140.0 + s} for s in range(4)},
        False,
        False,
        "lies between the other two with every seed",
    ),
    (
        {s: {4: 100.0 + s, 2: 120.0 + s, 1: 140.0 + s} for s in range(4)},
        True,
        True,
        "lie 40 apart",
    ),
    ({0: PPL[0], 1: PPL[1], 2: PPL[2]}, False, True, "each random seed 0, 1, 2, 3"),
    ({**PPL, 3: {4: 106, 1: 92}}, False, True, "the key/value heads 4, 2 and 1"),
    ({**PPL, 3: [106, 126, 92]}, False, True, "the key/value heads 4, 2 and 1"),
    (with_row(1, k2=0.3), False, True, "not losses or accuracies"),
    (with_row(0, k4=380.0), False, True, "not what run_kv_sharing measures"),
    # the held-out losses in nats (ln of the perplexities), and the same in bits
    (
        {s: {k: math.log(v) for k, v in row.items()} for s, row in PPL.items()},
        False,
        True,
        "not losses or accuracies",
    ),
    (
        {s: {k: math.log2(v) for k, v in row.items()} for s, row in PPL.items()},
        False,
        True,
        "not losses or accuracies",
    ),
    (with_row(0, k4="145"), False, True, "should be a number"),
    (PPL, "no", True, "always_between should be True or False"),
    (PPL, False, 1, "spread_wins should be True or False"),
]


@pytest.mark.parametrize(("table", "between", "spread", "words"), KV_WRONG)
def test_kv_sharing_conclusions_must_follow_from_the_table(
    table, between, spread, words
):
    with pytest.raises(AssertionError) as err:
        check_kv_sharing_answer(table, between, spread)
    assert words in str(err.value)


def test_expect_bool():
    assert expect_bool(np.bool_(True), "x") is True
    assert expect_bool(torch.tensor(False), "x") is False
    for wrong in (1, "True", [True]):
        with pytest.raises(AssertionError, match="x should be True or False"):
            expect_bool(wrong, "x")


# -- Issue 44 ------------------------------------------------------------------------


@pytest.mark.parametrize("d", [64, 768, 4096])
def test_t_squared_reads_from_which_alike_at_every_width(d):
    """ "From which T² costs more" strictly: 6 D + 1, accepted at every D."""
    answers = dict(zip((64, 768, 4096), T_SQUARED[:3], strict=True))
    answers[d] = 6 * d + 1
    check_t_squared_answer(*answers.values(), T_SQUARED[3])
    answers[d] = 6 * d - 0.01 * d  # 1% off: outside the stated 0.1%
    with pytest.raises(AssertionError, match=r"not right \(0\.998"):
        check_t_squared_answer(*answers.values(), T_SQUARED[3])


@pytest.mark.parametrize(
    "answers", [(31.004, 127), (31748 / 1024, 129028 / 1024), (32, 126.004)]
)
def test_tiling_takes_the_byte_exact_threshold(answers, capsys):
    passes(check_tiling_threshold_answer, answers, capsys)


def test_kv_sharing_names_a_row_without_ppl():
    table = {s: {n: {"ppl": v} for n, v in row.items()} for s, row in PPL.items()}
    del table[2][1]["ppl"]
    table[2][1]["loss"] = 5.3
    with pytest.raises(AssertionError, match="seed 2, 1 key/value heads.*'ppl'"):
        check_kv_sharing_answer(table, False, True)


def test_kv_sharing_refuses_four_identical_rows():
    table = {s: dict(PPL[0]) for s in range(4)}
    with pytest.raises(AssertionError, match="identical"):
        check_kv_sharing_answer(table, False, False)


def test_the_stub_none_is_a_forgotten_return():
    with pytest.raises(AssertionError, match="forget `return`"):
        check_targets_answer(None, *TARGETS[1:])
