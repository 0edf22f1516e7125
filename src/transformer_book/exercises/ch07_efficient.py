"""Checkers for Chapter 7 (complexity and efficient attention).

``check_online_softmax_update(fn)``: one step of FlashAttention's online softmax.
``check_sliding_window_mask(fn)``: a causal sliding-window mask.
(The answers of Exercises 7.3-7.6, numbers and a table, are checked in
``ch07_answers``.)

Both exercises ask the reader to write the function, not to call the package's
(``efficient.online_softmax_update``, ``efficient.sliding_window_mask``): while a
check runs, those raise.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..efficient import sparse, tiled
from ._checking import (
    call,
    checker,
    expect_shape,
    expect_unchanged,
    expect_values,
    forbidden,
)

__all__ = ["check_online_softmax_update", "check_sliding_window_mask"]


# -- Exercise: the online softmax update ------------------------------------------


def _update(m: Tensor, s: Tensor, acc: Tensor, scores: Tensor, v: Tensor, **wrong):
    """The update in float64; the keywords reproduce common mistakes.

    ``raw``: weights exp(scores) with no maximum subtracted; ``old_max``: subtract
    the old maximum; ``no_alpha_sum`` / ``no_alpha_acc``: forget to rescale the
    running sum / the accumulator.
    """
    m, s, acc, scores, v = (x.double() for x in (m, s, acc, scores, v))
    m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
    m_ref = m_new.masked_fill(m_new == -math.inf, 0.0)
    if wrong.get("raw"):
        m_ref = torch.zeros_like(m_new)
    if wrong.get("old_max"):
        m_ref = m.masked_fill(m == -math.inf, 0.0)
    p = torch.exp(scores - m_ref)
    alpha = torch.exp(m - m_ref)
    alpha_sum = torch.ones_like(alpha) if wrong.get("no_alpha_sum") else alpha
    alpha_acc = torch.ones_like(alpha) if wrong.get("no_alpha_acc") else alpha
    return m_new, alpha_sum * s + p.sum(-1, keepdim=True), alpha_acc * acc + p @ v


def _start(shape: tuple[int, ...], d_v: int) -> tuple[Tensor, Tensor, Tensor]:
    """m = -inf, l = 0, acc = 0 for rows of ``shape`` (..., Br)."""
    return (
        torch.full((*shape, 1), -math.inf),
        torch.zeros(*shape, 1),
        torch.zeros(*shape, d_v),
    )


def _online_cases() -> list[tuple[str, tuple[Tensor, ...]]]:
    """(description, (row_max, row_sum, acc, scores, v_block)), one step each."""
    gen = torch.Generator().manual_seed(7)
    br, bc, d_v = 3, 4, 2
    first = torch.randn(br, bc, generator=gen)
    v1 = torch.randn(bc, d_v, generator=gen)
    after_first = _update(*_start((br,), d_v), first, v1)
    after_first = tuple(x.float() for x in after_first)
    larger = first + 2.0 + torch.rand(br, bc, generator=gen)  # every row's max grows
    smaller = first - 3.0  # no row's max changes
    mixed = torch.randn(br, bc, generator=gen) * 2.0
    huge = torch.randn(br, bc, generator=gen) * 30.0 + 200.0  # exp overflows float32
    state_huge = tuple(x.float() for x in _update(*_start((br,), d_v), huge - 5.0, v1))
    blocked = mixed.clone()
    blocked[0, 1:] = -math.inf  # row 0: one allowed key
    blocked[2, :2] = -math.inf
    none_yet = mixed.clone()
    none_yet[1] = -math.inf  # row 1 has no allowed key in this block
    still_none = (
        torch.tensor([[0.5], [-math.inf], [1.0]]),  # row 1 has seen nothing so far
        torch.tensor([[1.5], [0.0], [2.0]]),
        torch.tensor([[0.3, -0.2], [0.0, 0.0], [1.0, 0.5]]),
    )
    batch_scores = torch.randn(2, 3, br, bc, generator=gen)
    batch_v = torch.randn(2, 3, bc, d_v, generator=gen)
    batch_state = tuple(
        x.float()
        for x in _update(
            *_start((2, 3, br), d_v), torch.randn(2, 3, br, bc, generator=gen), batch_v
        )
    )
    v2 = torch.randn(bc, d_v, generator=gen)
    fresh = _start((br,), d_v)
    # Rows that have seen keys meet a tile where all their keys are blocked: their
    # state must stay as it was. Near 100, exp(row_max) overflows float32.
    closed = mixed.clone()
    closed[1] = -math.inf
    near_100 = torch.randn(br, bc, generator=gen) + 100.0
    state_100 = tuple(x.float() for x in _update(*_start((br,), d_v), near_100, v1))
    closed_100 = near_100 + torch.randn(br, bc, generator=gen)
    closed_100[0] = -math.inf
    closed_100[2] = -math.inf
    return [
        ("the first block (m = -inf, l = 0, acc = 0)", (*fresh, first, v1)),
        ("a block whose maximum is larger", (*after_first, larger, v2)),
        ("a block whose maximum is smaller", (*after_first, smaller, v2)),
        ("a block with a larger maximum in some rows", (*after_first, mixed, v2)),
        ("scores near 200 (exp overflows float32)", (*state_huge, huge, v2)),
        ("blocked keys (scores of -inf)", (*after_first, blocked, v2)),
        ("a row whose keys are all blocked", (*still_none, none_yet, v2)),
        (
            "a row that has seen keys meets a fully blocked tile",
            (*after_first, closed, v2),
        ),
        (
            "scores near 100, and rows that have seen keys meet a fully blocked tile",
            (*state_100, closed_100, v2),
        ),
        ("batch and head axes", (*batch_state, batch_scores, batch_v)),
    ]


def _same(got: Tensor, expected: Tensor) -> bool:
    """Equal infinities in the same places, and close finite values (any dtype)."""
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        return False
    got, expected = got.detach().double(), expected.detach().double()
    if not torch.equal(torch.isinf(got), torch.isinf(expected)):
        return False
    if not torch.equal(got[torch.isinf(got)], expected[torch.isinf(expected)]):
        return False
    finite = ~torch.isinf(expected)
    return torch.allclose(got[finite], expected[finite], atol=1e-5, rtol=1e-5)


def _diagnose_update(got: tuple, inputs: tuple, where: str) -> None:
    m_got, s_got, acc_got = got
    expected = _update(*inputs)
    row_max, _, _, scores, _ = inputs
    closed = (scores == -math.inf).all(dim=-1, keepdim=True) & (row_max > -math.inf)
    if closed.any():  # (..., Br, 1): rows whose tile holds no allowed key
        for g, before in zip(got, inputs[:3], strict=False):
            rows = closed.expand_as(before)
            if not _same(g[rows], before[rows]):
                raise AssertionError(
                    f"for {where}, a row that has already seen allowed keys meets a "
                    "tile where all its keys are blocked: its row_max, row_sum and "
                    "acc must stay as they were (your update changes them, or turns "
                    "them into inf or NaN)"
                )
    names = ("row_max", "row_sum", "acc")
    for name, g in zip(names, got, strict=True):
        if torch.isnan(g.double()).any():
            raise AssertionError(
                f"for {where}, {name} holds NaN. A row with no allowed key so far "
                "has row_max = -inf, and exp(-inf - (-inf)) is NaN: such a row must "
                "keep row_max = -inf, row_sum = 0 and acc = 0"
            )
    for name, g in zip(("row_sum", "acc"), (s_got, acc_got), strict=True):
        if torch.isinf(g.double()).any():
            raise AssertionError(
                f"for {where}, {name} overflows to inf: the weights must be "
                "exp(score - maximum), never exp(score) alone"
            )
    m_exp, s_exp, acc_exp = expected
    if not _same(m_got, m_exp):
        raise AssertionError(
            f"for {where}, row_max is wrong: it is the largest score seen so far, "
            "over the earlier blocks (row_max) and this one"
        )
    s_ok, acc_ok = _same(s_got, s_exp), _same(acc_got, acc_exp)
    if s_ok and acc_ok:
        return
    if acc_ok is False and _same(acc_got, acc_exp / s_exp.clamp(min=1e-300)):
        raise AssertionError(
            f"for {where}, acc is normalised: keep it unnormalised (the weighted "
            "sum of exp(score - maximum) times the values); only after the last "
            "block is it divided by row_sum"
        )
    for mistake, message in (
        ("raw", "the weights must be exp(score - row_max), with the new row_max"),
        ("old_max", "subtract the new maximum, not the one from before this block"),
    ):
        wrong = _update(*inputs, **{mistake: True})
        if _same(s_got, wrong[1]) or _same(acc_got, wrong[2]):
            raise AssertionError(f"for {where}, {message}")
    if acc_ok and _same(s_got, _update(*inputs, no_alpha_sum=True)[1]):
        raise AssertionError(
            f"for {where}, row_sum is not rescaled: when the maximum grows, what "
            "was summed under the old maximum must be multiplied by "
            "exp(old max - new max)"
        )
    if s_ok and _same(acc_got, _update(*inputs, no_alpha_acc=True)[2]):
        raise AssertionError(
            f"for {where}, acc is not rescaled: when the maximum grows, the old acc "
            "must be multiplied by exp(old max - new max), as row_sum is"
        )
    raise AssertionError(
        f"for {where}, {'row_sum' if not s_ok else 'acc'} is wrong: row_sum adds "
        "this block's weights, acc their weighted sum of the values"
    )


def _check_one_update(fn: Callable, where: str, inputs: tuple, dtype) -> None:
    inputs = tuple(x.to(dtype) for x in inputs)
    given = tuple(x.clone() for x in inputs)
    got = call(fn, *given)
    for name, g, x in zip(
        ("row_max", "row_sum", "acc", "scores", "v_block"), given, inputs, strict=True
    ):
        expect_unchanged(g, x, name)
    got = expect_values(got, 3, "the three updated tensors (row_max, row_sum, acc)")
    for name, g, x in zip(("row_max", "row_sum", "acc"), got, inputs, strict=False):
        expect_shape(g, tuple(x.shape), f"the returned {name} for {where}")
    _diagnose_update(got, inputs, where)


def _check_chain(fn: Callable) -> None:
    """Fold a whole row block by block; acc / row_sum must be softmax(S) V."""
    gen = torch.Generator().manual_seed(8)
    scores = torch.randn(4, 12, generator=gen) * 3.0  # (Br, Tk)
    scores[0, 3:6] = -math.inf  # a whole tile of row 0 is blocked
    scores[2, :3] = -math.inf  # row 2 sees nothing in the first tile
    v = torch.randn(12, 5, generator=gen)  # (Tk, Dv)
    state = _start((4,), 5)
    for j in range(0, 12, 3):
        state = call(fn, *state, scores[:, j : j + 3].clone(), v[j : j + 3].clone())
        state = expect_values(state, 3, "(row_max, row_sum, acc)")
    out = state[2].double() / state[1].double()
    expected = torch.softmax(scores.double(), dim=-1) @ v.double()
    if not torch.allclose(out, expected, atol=1e-5, rtol=1e-5):
        raise AssertionError(
            "after four blocks, acc / row_sum is not softmax(scores) @ v: check how "
            "the state carries over from one block to the next"
        )


@checker("online_softmax_update")
def check_online_softmax_update(fn: Callable) -> None:
    """``fn(row_max, row_sum, acc, scores, v_block)`` -> (row_max, row_sum, acc).

    FlashAttention's step: m_new = max(m, rowmax(S)), P = exp(S - m_new),
    l_new = exp(m - m_new) l + rowsum(P), acc_new = exp(m - m_new) acc + P V. Rows
    with no allowed key so far keep m = -inf, l = 0, acc = 0 (no NaN); a row whose
    tile is all blocked keeps its state. Checked on ten cases, in float32 and
    float64, and on a whole row folded block by block.
    """
    with (
        forbidden(tiled, "online_softmax_update", reader=fn),
        forbidden(tiled, "_update", "the package's online_softmax_update", fn),
    ):
        for where, inputs in _online_cases():
            _check_one_update(fn, where, inputs, torch.float32)
            _check_one_update(fn, f"{where} (float64)", inputs, torch.float64)
        _check_chain(fn)


# -- Exercise: a sliding-window mask ----------------------------------------------


def _window(t: int, low: int, high: int, both: bool = False) -> Tensor:
    """True where low <= i - j < high (or |i - j| < high if ``both``)."""
    offset = torch.arange(t)[:, None] - torch.arange(t)[None, :]  # (t, t): i - j
    if both:
        return offset.abs() < high
    return (offset >= low) & (offset < high)


WINDOW_CASES = [(8, 3), (6, 2), (12, 4), (5, 1), (16, 5), (7, 7), (5, 9), (1, 1)]


def _diagnose_window(got: Tensor, t: int, window: int) -> None:
    expected = _window(t, 0, window)
    if torch.equal(got, expected):
        return
    where = f"t={t}, window={window}"
    clues = (
        (~expected, "True must mean may attend: the mask is inverted"),
        (
            expected.T,
            "the mask is transposed: row i is the query, column j the key, and "
            "query i sees keys j <= i",
        ),
        (
            _window(t, 0, window, both=True),
            "the window looks both ways: a causal window sees only keys j <= i",
        ),
        (
            _window(t, 0, window + 1),
            "one key too many per row: the window of `window` positions holds the "
            "query itself and the window - 1 keys before it",
        ),
        (
            _window(t, 1, window + 1),
            "the query must see itself (i - j = 0 is inside the window)",
        ),
        (
            _window(t, 0, window - 1),
            "one key too few per row: query i sees keys i - window + 1 to i",
        ),
    )
    for wrong, message in clues:
        if torch.equal(got, wrong):
            raise AssertionError(f"for {where}: {message}")
    raise AssertionError(
        f"for {where}, the mask is wrong: it must be True exactly where "
        "0 <= i - j < window"
    )


@checker("sliding_window_mask")
def check_sliding_window_mask(fn: Callable) -> None:
    """``fn(t, window)`` -> a (t, t) bool mask, True where 0 <= i - j < window."""
    with forbidden(sparse, "sliding_window_mask", reader=fn):
        for t, window in WINDOW_CASES:
            got = call(fn, t, window)
            expect_shape(got, (t, t), f"the mask for t={t}, window={window}")
            if got.dtype != torch.bool:
                raise AssertionError(
                    f"the mask has dtype {got.dtype}: return a bool tensor (True = "
                    "may attend), e.g. from a comparison"
                )
            _diagnose_window(got, t, window)
