"""The Chapter 7 checkers accept right answers and name the mistake in wrong ones."""

from __future__ import annotations

import contextlib
import itertools
import math

import pytest
import torch
from test_exercises_checking import disguises

import transformer_book.efficient as efficient
from transformer_book.efficient import online_softmax_update, sliding_window_mask
from transformer_book.exercises import (
    check_online_softmax_update,
    check_sliding_window_mask,
)

# -- Exercise: the online softmax update ------------------------------------------


def update(row_max, row_sum, acc, scores, v_block, **mistakes):
    """The step written out; keyword arguments switch on one mistake at a time."""
    m_new = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
    m_ref = m_new
    if not mistakes.get("nan_rows"):
        m_ref = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
    if mistakes.get("tile_guard"):  # tests the tile's maximum, not the running one
        tile_max = scores.amax(dim=-1, keepdim=True)
        m_ref = torch.where(tile_max == -math.inf, torch.zeros_like(m_new), m_new)
    if mistakes.get("raw"):
        m_ref = torch.zeros_like(m_new)
    if mistakes.get("old_max"):
        m_ref = torch.where(row_max == -math.inf, torch.zeros_like(row_max), row_max)
    p = torch.exp(scores - (row_max if mistakes.get("naive_old") else m_ref))
    alpha = torch.exp(row_max - m_ref)
    sum_scale = 1.0 if mistakes.get("no_alpha_sum") else alpha
    acc_scale = 1.0 if mistakes.get("no_alpha_acc") else alpha
    new_sum = sum_scale * row_sum + p.sum(dim=-1, keepdim=True)
    new_acc = acc_scale * acc + p @ v_block
    if mistakes.get("normalised"):
        new_acc = new_acc / new_sum.clamp(min=1e-30)
    if mistakes.get("sum_over_rows"):
        new_sum = sum_scale * row_sum + p.sum(dim=-2, keepdim=True).sum(-1)[..., None]
    if mistakes.get("in_place"):
        acc.mul_(alpha).add_(p @ v_block)
        return m_new, new_sum, acc
    if mistakes.get("order"):
        return new_acc, new_sum, m_new
    return m_new, new_sum, new_acc


def published_update(row_max, row_sum, acc, scores, v_block):
    """The notebook's solution."""
    m_new = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))  # (..., Br, 1)
    m_ref = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
    p = torch.exp(scores - m_ref)  # (..., Br, Bc): this tile's unnormalised weights
    alpha = torch.exp(row_max - m_ref)  # (..., Br, 1): below 1 where the max grew
    new_sum = alpha * row_sum + p.sum(dim=-1, keepdim=True)
    return m_new, new_sum, alpha * acc + p @ v_block


def update_with_nan_to_num(row_max, row_sum, acc, scores, v_block):
    """Another right answer: compute naively, then repair the empty rows."""
    m_new = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
    p = torch.nan_to_num(torch.exp(scores - m_new), nan=0.0)
    alpha = torch.nan_to_num(torch.exp(row_max - m_new), nan=0.0)
    return m_new, alpha * row_sum + p.sum(-1, keepdim=True), alpha * acc + p @ v_block


def update_in_float64(row_max, row_sum, acc, scores, v_block):
    out = update(*(x.double() for x in (row_max, row_sum, acc, scores, v_block)))
    return tuple(out)


def update_as_list(row_max, row_sum, acc, scores, v_block):
    return list(update(row_max, row_sum, acc, scores, v_block))


def update_row_by_row(row_max, row_sum, acc, scores, v_block):
    """Loops over the rows, in Python floats for the maximum."""
    m_new, s_new, acc_new = row_max.clone(), row_sum.clone(), acc.clone()
    for idx in itertools.product(*(range(n) for n in scores.shape[:-1])):
        m_old = row_max[idx].item()
        m = max(m_old, scores[idx].max().item())
        if m == -math.inf:
            continue  # nothing allowed yet: the state stays (-inf, 0, 0)
        p = torch.exp(scores[idx] - m)
        alpha = math.exp(m_old - m)
        m_new[idx] = m
        s_new[idx] = alpha * row_sum[idx] + p.sum()
        acc_new[idx] = alpha * acc[idx] + p @ v_block[idx[:-1]]
    return m_new, s_new, acc_new


@pytest.mark.parametrize(
    "right",
    [
        update,
        update_with_nan_to_num,
        update_in_float64,
        update_as_list,
        update_row_by_row,
        published_update,
    ],
)
def test_online_softmax_checker_accepts_right_answers(right, capsys):
    assert check_online_softmax_update(right) is None
    assert "online_softmax_update: all checks passed" in capsys.readouterr().out


def mistake(**kind):
    return lambda *args: update(*args, **kind)


def calls_the_package(row_max, row_sum, acc, scores, v_block):
    return online_softmax_update(row_max, row_sum, acc, scores, v_block)


def calls_the_subpackage(row_max, row_sum, acc, scores, v_block):
    return efficient.online_softmax_update(row_max, row_sum, acc, scores, v_block)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (mistake(nan_rows=True), "holds NaN"),
        (mistake(raw=True), "with the new row_max"),
        (mistake(old_max=True), "with the new row_max"),
        (mistake(naive_old=True), "overflows to inf"),
        (mistake(no_alpha_sum=True), "row_sum is not rescaled"),
        (mistake(no_alpha_acc=True), "acc is not rescaled"),
        (mistake(normalised=True), "acc is normalised"),
        (mistake(sum_over_rows=True), "row_sum is wrong"),
        (mistake(in_place=True), "in place"),
        (mistake(order=True), "shape"),
        (lambda m, s, a, sc, v: (m, s), "three updated tensors"),
        (
            lambda m, s, a, sc, v: (torch.maximum(m, sc.amax(-1, True) - 1), s, a),
            "row_max is wrong",
        ),
        (calls_the_package, "without calling the package's online_softmax_update"),
        (calls_the_subpackage, "without calling the package's online_softmax_update"),
        (mistake(tile_guard=True), "meets a tile where all its keys are blocked"),
        (lambda *args: (*update(*args), None), "got a tuple of 4"),
        *[
            (fn, "package's online_softmax_update")
            for original in (online_softmax_update, efficient.tiled._update)
            for fn in disguises(original)
        ],
    ],
)
def test_online_softmax_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_online_softmax_update(wrong)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", ["fully blocked tile", "near 100"])
def test_the_tile_guard_fails_on_each_fully_blocked_tile_case(case, dtype):
    """Either new case alone rejects the guard on the tile's maximum: off by a
    factor exp(row_max) with moderate scores, inf or NaN near 100 in float32."""
    import transformer_book.exercises.ch07_efficient as ch07

    (where, inputs), *_ = (c for c in ch07._online_cases() if case in c[0])
    ch07._check_one_update(update, where, inputs, dtype)
    with pytest.raises(AssertionError, match="must stay as they were"):
        ch07._check_one_update(mistake(tile_guard=True), where, inputs, dtype)


@pytest.mark.parametrize(
    ("kind", "message"),
    [("raw", "with the new row_max"), ("old_max", "not the one from before")],
)
def test_the_weights_reference_point_is_named_after_the_first_block(kind, message):
    import transformer_book.exercises.ch07_efficient as ch07

    where, inputs = ch07._online_cases()[1]  # a block whose maximum is larger
    with pytest.raises(AssertionError, match=message):
        ch07._check_one_update(mistake(**{kind: True}), where, inputs, torch.float32)


def test_the_package_update_passes_when_it_is_not_forbidden(capsys, monkeypatch):
    import transformer_book.exercises.ch07_efficient as ch07

    monkeypatch.setattr(ch07, "forbidden", lambda *a, **k: contextlib.nullcontext())
    assert check_online_softmax_update(online_softmax_update) is None
    assert check_sliding_window_mask(sliding_window_mask) is None
    assert capsys.readouterr().out.count("all checks passed") == 2


def test_the_forbidden_functions_are_restored_after_a_check():
    with pytest.raises(AssertionError):
        check_online_softmax_update(calls_the_subpackage)
    assert efficient.online_softmax_update is online_softmax_update
    assert efficient.tiled.online_softmax_update is online_softmax_update
    q = torch.randn(1, 5, 4)
    efficient.blockwise_attention(q, q, q, block_size=2)  # _update works again


# -- Exercise: a sliding-window mask ----------------------------------------------


def window_mask(t, window):
    i = torch.arange(t)[:, None]
    j = torch.arange(t)[None, :]
    return (i - j >= 0) & (i - j < window)


def window_by_bands(t, window):
    ones = torch.ones(t, t, dtype=torch.bool)
    return ones.tril() & ones.triu(-(window - 1))


def window_from_the_causal_mask(t, window):
    """The causal mask of Chapter 2, minus the keys too far back."""
    causal = torch.ones(t, t).tril().bool()
    too_far = torch.ones(t, t).tril(-window).bool()
    return causal & ~too_far


def window_loops(t, window):
    mask = torch.zeros(t, t, dtype=torch.bool)
    for i in range(t):
        for j in range(max(0, i - window + 1), i + 1):
            mask[i, j] = True
    return mask


@pytest.mark.parametrize(
    "right", [window_mask, window_by_bands, window_from_the_causal_mask, window_loops]
)
def test_window_checker_accepts_right_answers(right, capsys):
    assert check_sliding_window_mask(right) is None
    assert "sliding_window_mask: all checks passed" in capsys.readouterr().out


def offsets(t):
    return torch.arange(t)[:, None] - torch.arange(t)[None, :]


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda t, w: ~window_mask(t, w), "inverted"),
        (lambda t, w: window_mask(t, w).T, "transposed"),
        (lambda t, w: offsets(t).abs() < w, "looks both ways"),
        (lambda t, w: (offsets(t) >= 0) & (offsets(t) <= w), "one key too many"),
        (lambda t, w: (offsets(t) > 0) & (offsets(t) <= w), "must see itself"),
        (lambda t, w: (offsets(t) >= 0) & (offsets(t) < w - 1), "one key too few"),
        (lambda t, w: window_mask(t, w).float(), "bool"),
        (lambda t, w: window_mask(t + 1, w), "shape"),
        (lambda t, w: torch.ones(t, t, dtype=torch.bool).tril(), "mask is wrong"),
        (lambda t, w: sliding_window_mask(t, w), "package's sliding_window_mask"),
        (lambda t, w: efficient.sliding_window_mask(t, w), "sliding_window_mask"),
        *[
            (fn, "package's sliding_window_mask")
            for fn in disguises(efficient.sparse.sliding_window_mask)
        ],
    ],
)
def test_window_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_sliding_window_mask(wrong)
