"""Checkers of Chapter 4's answers that are a measured score or a measured table
(Exercises 4.4 and 4.5).

``check_rope_symmetry(fn, symmetric)``: a RoPE score at offset d against -d, on
random vectors, and whether it is symmetric.
``check_lag2_answer(accuracy, alibi_learns, rope_learns)``: the reader's
accuracies of one-layer ALiBi and RoPE models on the lag-2 task, and whether
each learned it, which must follow from the table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from ..positional import apply_rope
from ._checking import (
    as_list,
    as_number,
    attempted,
    call,
    checker,
    expect_bool,
    seeded,
    shown_keys,
)

__all__ = ["check_rope_symmetry", "check_lag2_answer"]


# -- Exercise 4.4, part 3: is RoPE's score symmetric in the offset? ------------------


def _rope_score(q, k, offset: int) -> float:
    """q at position p + offset against k at position p (p = 5), rotated as
    ``apply_rope`` does; the score depends only on the offset."""
    p = 5 + max(0, -offset)
    q_rot = apply_rope(q.double()[None], torch.tensor([p + offset]))[0]
    k_rot = apply_rope(k.double()[None], torch.tensor([p]))[0]
    return (q_rot @ k_rot).item()


_CASES = [(6, 3), (16, 1), (8, 7), (32, 20), (4, 2)]  # (D, offset)


@checker("rope_symmetry", todo="Write rope_score and answer `symmetric`")
def check_rope_symmetry(fn: Callable, symmetric) -> None:
    """Exercise 4.4, part 3: ``fn(q, k, offset)`` is the RoPE score of a query
    ``offset`` positions after the key (q, k of shape (D,)), checked at +offset,
    -offset and 0 on random vectors of several widths (within 1e-4); and
    ``symmetric``, whether the score at d equals the one at -d for every q, k."""
    if not callable(attempted(fn, "rope_score")):
        raise AssertionError(f"rope_score should be a function, got {type(fn)}")
    for n, (d, offset) in enumerate(_CASES):
        with seeded(100 + n):
            q, k = torch.randn(d), torch.randn(d)
        for shift in (offset, -offset, 0):
            got = as_number(
                call(fn, q.clone(), k.clone(), shift), f"rope_score(q, k, {shift})"
            )
            right = _rope_score(q, k, shift)
            if abs(got - right) <= 1e-4 * max(1.0, abs(right)):
                continue
            if abs(got - _rope_score(q, k, -shift)) <= 1e-4 * max(1.0, abs(right)):
                raise AssertionError(
                    f"rope_score(q, k, {shift}) (D = {d}) is the score at offset "
                    f"{-shift}: the query should be `offset` positions after the key"
                )
            if abs(got - (q.double() @ k.double()).item()) <= 1e-4 * max(1, abs(got)):
                raise AssertionError(
                    f"rope_score(q, k, {shift}) (D = {d}) is the plain q . k: rotate "
                    "q and k by their positions first"
                )
            raise AssertionError(
                f"rope_score(q, k, {shift}) is wrong for D = {d} (got {got:.4g})"
            )
    if expect_bool(symmetric, "symmetric"):
        with seeded(7):
            q, k = torch.randn(8), torch.randn(8)
        plus, minus = call(fn, q.clone(), k.clone(), 3), call(fn, q.clone(), k, -3)
        raise AssertionError(
            f"symmetric is not right: for random q and k, your rope_score gives "
            f"{float(plus):.3f} at offset 3 and {float(minus):.3f} at -3"
        )


# -- Exercise 4.5: what ALiBi cannot do in one layer ---------------------------------

# An accuracy at L of at least LEARNED means the model learned the task; the
# one-layer runs of seeds 0-3 gave RoPE 1.00 and ALiBi 0.29-0.32 (chance: 1/16).
LEARNED = 0.9


def _accuracy_rows(table) -> dict[str, list[float]]:
    attempted(table, "accuracy")
    if not isinstance(table, Mapping) or not {"alibi", "rope"} <= set(table):
        raise AssertionError(
            'accuracy should map "alibi" and "rope" to their accuracies at L, 2L '
            f"and 4L, as run_extrapolation's result.accuracy does; got "
            f"{shown_keys(table)}"
        )
    rows = {}
    for scheme in ("alibi", "rope"):
        row = as_list(table[scheme])
        if row is None or len(row) != 3:
            raise AssertionError(
                f'accuracy["{scheme}"] should hold 3 accuracies (at L, 2L, 4L)'
            )
        rows[scheme] = [as_number(a, f'an accuracy of "{scheme}"') for a in row]
        if not all(0 <= a <= 1 for a in rows[scheme]):
            raise AssertionError(
                f'accuracy["{scheme}"] should hold fractions of 1, got {rows[scheme]}'
            )
    return rows


@checker("lag2_answer", todo="Replace each `...` with your result or answer")
def check_lag2_answer(accuracy, alibi_learns, rope_learns) -> None:
    """Exercise 4.5: ``accuracy``, run_extrapolation's ``result.accuracy`` for
    "alibi" and "rope" with ``n_layers=1, lag=2``, and whether each model learned
    the task at the training length (accuracy at L of at least 0.9), which must
    follow from the table. An ALiBi at 0.9 or more means the run was not the
    one-layer lag-2 one: one layer of ALiBi cannot single out distance 2."""
    rows = _accuracy_rows(accuracy)
    alibi, rope = rows["alibi"][0], rows["rope"][0]
    if rope < LEARNED:
        raise AssertionError(
            f"RoPE reaches 1.00 at L with every seed the book ran; your table has "
            f"{rope:.2f}. Pass the accuracies (not error rates) of "
            "run_extrapolation(schemes=('alibi', 'rope'), cfg=ExtrapolationConfig("
            "n_layers=1, lag=2))"
        )
    if alibi >= LEARNED:
        raise AssertionError(
            f"ALiBi reaches {alibi:.2f} at L: check that you trained with "
            "ExtrapolationConfig(n_layers=1, lag=2); the lag-1 task, or two "
            "layers, is another experiment"
        )
    for name, value, answer in (
        ("alibi_learns", alibi, alibi_learns),
        ("rope_learns", rope, rope_learns),
    ):
        if expect_bool(answer, name) != (value >= LEARNED):
            raise AssertionError(
                f"{name} does not follow from your table: the accuracy at L is "
                f"{value:.2f}, and a model that learned the task is at "
                f"{LEARNED} or above"
            )
