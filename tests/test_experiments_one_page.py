"""The appendix's toy tasks: their data, their errors, and the page's claims over
other seeds (``make seeds``)."""

from __future__ import annotations

import math

import pytest
import torch

import transformer_book.experiments.one_page as one_page
from transformer_book.experiments.one_page import (
    BOS,
    EOS,
    PAD,
    SEP,
    run_reverse,
    run_sort,
)

# The appendix's bounds: (token accuracy, exact match) at least
SORT_BOUNDS = (0.98, 0.95)
REVERSE_BOUNDS = (0.98, 0.95)


def test_a_sort_row_is_the_digits_the_separator_and_the_digits_sorted():
    rows = one_page._sort_batch(50, 6, torch.Generator().manual_seed(0))
    assert rows.shape == (50, 13)
    digits, sep, answer = rows[:, :6], rows[:, 6], rows[:, 7:]
    assert (sep == SEP).all() and digits.max() <= 9 and digits.min() >= 0
    assert torch.equal(answer, digits.sort(dim=1).values)
    assert (answer.diff(dim=1) >= 0).all()


def test_a_reverse_target_is_bos_the_digits_backwards_eos_then_padding():
    src, tgt = one_page._reverse_batch(200, 6, torch.Generator().manual_seed(0))
    assert src.shape == (200, 6) and tgt.shape == (200, 8)
    lengths = (src != PAD).sum(dim=1)
    assert lengths.min() == 3 and lengths.max() == 6, "every length 3..6 is drawn"
    for s, t, n in zip(src.tolist(), tgt.tolist(), lengths.tolist(), strict=True):
        assert s[n:] == [PAD] * (6 - n) and min(s[:n]) >= 3
        assert t == [BOS, *reversed(s[:n]), EOS] + [PAD] * (6 - n)


def test_the_schedule_warms_up_then_decays_to_zero():
    factor = one_page._schedule(100)
    assert factor(0) == pytest.approx(1 / one_page.WARMUP)
    assert factor(one_page.WARMUP - 1) == pytest.approx(1 - (one_page.WARMUP - 1) / 100)
    assert factor(99) == pytest.approx(0.01)


@pytest.mark.parametrize("run", [run_sort, run_reverse])
def test_a_short_run_reports_what_it_measured(run):
    result = run(seed=0, steps=2, n_test=8)
    assert len(result.losses) == 2 and all(loss > 0 for loss in result.losses)
    assert 0 <= result.exact_match <= result.token_accuracy <= 1
    assert len(result.inputs) == len(result.outputs) == 3


def test_the_same_seed_gives_the_same_run():
    a, b = run_sort(seed=3, steps=3, n_test=16), run_sort(seed=3, steps=3, n_test=16)
    assert a == b


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(seed=-1), "seed"),
        (dict(steps=0), "steps"),
        (dict(n_test=0), "n_test"),
        (dict(device="nowhere"), "device"),
    ],
)
@pytest.mark.parametrize("run", [run_sort, run_reverse])
def test_bad_arguments_are_named(run, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        run(**kwargs)


def test_too_short_sequences_are_named():
    with pytest.raises(ValueError, match="n_digits"):
        run_sort(n_digits=2)
    with pytest.raises(ValueError, match="max_len"):
        run_reverse(max_len=2)


@pytest.mark.seeds
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_appendix_claims_hold_for_other_seeds(seed):
    """§A.4 and §A.5: held-out accuracies, and where the losses start and end."""
    sorting, reversing = run_sort(seed=seed), run_reverse(seed=seed)
    for result, (token_bound, exact_bound) in (
        (sorting, SORT_BOUNDS),
        (reversing, REVERSE_BOUNDS),
    ):
        assert result.token_accuracy >= token_bound, result.token_accuracy
        assert result.exact_match >= exact_bound, result.exact_match
        assert sum(result.losses[-20:]) / 20 < 0.2, result.losses[-20:]
    assert abs(sorting.losses[0] - math.log(11)) < 0.1, "a uniform guess"
    assert reversing.losses[0] > math.log(13) + 0.5, "above a uniform guess"
