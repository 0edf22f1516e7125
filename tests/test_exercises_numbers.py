"""The checkers of the exercises whose answer is a number (6.3, 7.3, 7.4): the
right value passes in any numeric form, the stub is "not attempted", and each
classic mistake is named."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from transformer_book.exercises import (
    check_kv_cache_answer,
    check_t_squared_answer,
    check_targets_answer,
)
from transformer_book.exercises._checking import expect_number

TARGETS = (756, 115, 168, 6.6)
KV_CACHE = (2_621_440, 327_680, 4, 32)
T_SQUARED = (384, 4608, 24576, 0.31)


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
    ],
)
def test_right_answers_pass(check, answers, capsys):
    passes(check, answers, capsys)


@pytest.mark.parametrize(
    "check", [check_targets_answer, check_kv_cache_answer, check_t_squared_answer]
)
@pytest.mark.parametrize("stub", [..., None])
def test_the_stub_is_not_attempted(check, stub, capsys):
    check(stub, stub, stub, stub)
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
    (check_kv_cache_answer, KV_CACHE, 1, 2_621_440, "not the 64 query heads"),
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
