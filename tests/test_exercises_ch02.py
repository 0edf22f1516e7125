"""The Chapter 2 checkers accept right answers and explain wrong ones.

Per checker: right answers written in several ways (float64 among them) pass, and
each wrong answer is rejected with a message that names its mistake.
"""

import contextlib
import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.functional import scaled_dot_product_attention as sdpa

import transformer_book.exercises.ch02_attention as ch02
from transformer_book.attention import causal_mask, scaled_dot_product_attention
from transformer_book.exercises import (
    check_causal_mask,
    check_masked_softmax,
    check_scaled_dot_product_attention,
)

# --- Exercise 2.2: attention with a mask --------------------------------------------


def book(q, k, v, mask=None):
    """The notebook's solution."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ v, weights


def naive(q, k, v, mask=None, scale=None, fill=-math.inf, dim=-1, nan_rows=False):
    """Right by default; each keyword makes one mistake."""
    scores = q @ k.transpose(-2, -1) / (scale or math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = scores.masked_fill(~mask, fill)
    weights = torch.softmax(scores, dim)
    if not nan_rows:
        weights = weights.nan_to_num(0.0)
    return weights @ v


def lowest_value(q, k, v, mask=None):
    """finfo.min instead of -inf, then the empty rows zeroed by a product."""
    scores = torch.einsum("...qd,...kd->...qk", q / math.sqrt(q.shape[-1]), k)
    if mask is None:
        return scores.softmax(-1) @ v
    scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    return (scores.softmax(-1) * mask.any(-1, keepdim=True)) @ v


RIGHT_ATTENTION = {
    "book": book,
    "output only": lambda q, k, v, mask=None: book(q, k, v, mask)[0],
    "nan_to_num": naive,
    "float64": lambda q, k, v, mask=None: book(
        q.double(), k.double(), v.double(), mask
    ),
    "lowest value": lowest_value,
}


@pytest.mark.parametrize("right", RIGHT_ATTENTION.values(), ids=RIGHT_ATTENTION.keys())
def test_attention_checker_accepts_right_answers(right, capsys):
    assert check_scaled_dot_product_attention(right) is None
    assert "all checks passed" in capsys.readouterr().out


def test_the_package_passes_when_it_is_not_forbidden(monkeypatch, capsys):
    monkeypatch.setattr(ch02, "forbidden", lambda *a, **k: contextlib.nullcontext())
    check_scaled_dot_product_attention(scaled_dot_product_attention)
    assert "all checks passed" in capsys.readouterr().out


def scales_q_in_place(q, k, v, mask=None):
    q /= math.sqrt(q.shape[-1])
    return naive(q, k, v, mask, scale=1.0)


def with_mistake(**kwargs):
    return lambda q, k, v, mask=None: naive(q, k, v, mask, **kwargs)


def first_mask_only(q, k, v, mask=None):
    """Assumes one (Tq, Tk) mask shared by the whole batch."""
    if mask is not None:
        mask = mask.reshape(-1, *mask.shape[-2:])[0]
    return naive(q, k, v, mask)


def two_dim_mask_only(q, k, v, mask=None):
    if mask is not None:
        mask = mask.view(1, 1, *mask.shape)
    return naive(q, k, v, mask)


def four_dim_inputs_only(q, k, v, mask=None):
    return naive(q, k.transpose(2, 3).transpose(-2, -1), v, mask)


def weights_before_the_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return naive(q, k, v, mask), scores.softmax(-1)


def fused(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (with_mistake(scale=1.0), "not scaled"),
        (with_mistake(scale=8), "divided by d_k"),
        (with_mistake(scale=2), r"sqrt\(d_v\)"),
        (with_mistake(scale=math.sqrt(7)), "number of keys"),
        (with_mistake(scale=math.sqrt(5)), "number of queries"),
        (with_mistake(dim=-2), "softmax runs over the queries"),
        (lambda q, k, v, mask=None: naive(q, k, v, None), "mask is ignored"),
        (
            lambda q, k, v, mask=None: naive(q, k, v, None if mask is None else ~mask),
            "wrong way round",
        ),
        (with_mistake(fill=0.0), "set to 0 is not blocked"),
        (
            lambda q, k, v, mask=None: (
                naive(q, k, v)
                if mask is None
                else (
                    (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)
                    * mask
                )
                @ v
            ),
            "after the softmax",
        ),
        (with_mistake(nan_rows=True), "contains NaN"),
        (
            with_mistake(fill=torch.finfo(torch.float32).min),
            "should give a zero output",
        ),
        (first_mask_only, r"with a \(B, 1, Tq, Tk\) mask is wrong"),
        (two_dim_mask_only, r"with a \(B, 1, Tq, Tk\) mask has shape"),
        (four_dim_inputs_only, "without batch axes: your function raised"),
        (weights_before_the_mask, "the weights with a \\(Tq, Tk\\) mask is wrong"),
        (lambda q, k, v, mask=None: naive(q, k, v, mask)[..., :2], "shape"),
        (scales_q_in_place, "modified q in place"),
        (fused, "without calling torch.nn.functional.scaled_dot_product_attention"),
        (lambda q, k, v, mask=None: sdpa(q, k, v, mask), "torch.nn.functional"),
        (
            lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask),
            "package's scaled_dot_product_attention",
        ),
    ],
)
def test_attention_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_scaled_dot_product_attention(wrong)


def test_the_banned_functions_are_restored():
    with pytest.raises(AssertionError):
        check_scaled_dot_product_attention(fused)
    assert F.scaled_dot_product_attention is sdpa
    assert torch._C._nn.scaled_dot_product_attention is sdpa
    assert ch02.attention.scaled_dot_product_attention is scaled_dot_product_attention


# --- Exercise 2.4: a masked softmax for half precision ------------------------------


def good_masked_softmax(scores, mask):
    filled = scores.float().masked_fill(~mask, torch.finfo(torch.float32).min)
    weights = torch.softmax(filled, -1) * mask.any(-1, keepdim=True)
    return weights.to(scores.dtype)


def book_masked_softmax(scores, mask):
    filled = scores.float().masked_fill(~mask, float("-inf"))
    weights = torch.softmax(filled, dim=-1)
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0).to(scores.dtype)


def in_float64(scores, mask):
    return book_masked_softmax(scores.double(), mask).to(scores.dtype)


def float64_for_float32(scores, mask):
    weights = book_masked_softmax(scores.double(), mask)
    return weights if scores.dtype == torch.float32 else weights.to(scores.dtype)


RIGHT_SOFTMAX = {
    "book": book_masked_softmax,
    "lowest value": good_masked_softmax,
    "float64 inside": in_float64,
    "float64 out": float64_for_float32,
}


@pytest.mark.parametrize("right", RIGHT_SOFTMAX.values(), ids=RIGHT_SOFTMAX.keys())
def test_masked_softmax_checker_accepts_right_answers(right, capsys):
    assert check_masked_softmax(right) is None
    assert "all checks passed" in capsys.readouterr().out


def minus_1e9(scores, mask):  # the classic: overflows in float16
    return torch.softmax(scores.masked_fill(~mask, -1e9), -1)


def minus_1e9_empty_rows_zeroed(scores, mask):
    return minus_1e9(scores, mask) * mask.any(-1, keepdim=True)


def uniform_empty_rows(scores, mask):
    filled = scores.float().masked_fill(~mask, torch.finfo(torch.float32).min)
    return torch.softmax(filled, -1).to(scores.dtype)


def fills_in_place(scores, mask):
    scores.masked_fill_(~mask, -math.inf)
    return book_masked_softmax(scores, mask)


def second_axis(scores, mask):
    filled = scores.float().masked_fill(~mask, float("-inf"))
    weights = torch.softmax(filled, dim=1).nan_to_num(0.0)
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0).to(scores.dtype)


def masks_after(scores, mask):
    return (torch.softmax(scores.float(), -1) * mask).to(scores.dtype)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (minus_1e9, "all masked must be all zeros"),
        (minus_1e9_empty_rows_zeroed, "overflow"),
        (lambda s, m: good_masked_softmax(s, m).float(), "keep the dtype"),
        (uniform_empty_rows, "all masked must be all zeros"),
        (lambda s, m: book_masked_softmax(s, ~m), "wrong way round"),
        (lambda s, m: torch.softmax(s.masked_fill(~m, -math.inf), -1), "NaN"),
        (second_axis, r"shape \(2, 3, 5\): the weights of a row .* sum to 1"),
        (masks_after, "sum to 1"),
        (fills_in_place, "modified scores in place"),
        (lambda s, m: book_masked_softmax(s, m)[..., 1:], "shape"),
    ],
)
def test_masked_softmax_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_masked_softmax(wrong)


# --- Exercise 2.5: a causal mask ------------------------------------------------------


def by_arange(t):
    positions = torch.arange(t)
    return positions[:, None] >= positions[None, :]


RIGHT_CAUSAL = {
    "package": causal_mask,
    "arange": by_arange,
    "float then bool": lambda t: torch.ones(t, t).tril().bool(),
    "not triu": lambda t: ~torch.ones(t, t, dtype=torch.bool).triu(1),
}


@pytest.mark.parametrize("right", RIGHT_CAUSAL.values(), ids=RIGHT_CAUSAL.keys())
def test_causal_mask_checker_accepts_right_answers(right, capsys):
    assert check_causal_mask(right) is None
    assert "all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda t: ~causal_mask(t), "inverted"),
        (lambda t: causal_mask(t).T, "future"),
        (lambda t: torch.ones(t, t, dtype=torch.bool).tril(-1), "diagonal"),
        (lambda t: torch.ones(t, t).tril(), "bool"),
        (lambda t: torch.ones(t, t, dtype=torch.bool).tril(1), "query 0 must not"),
        (lambda t: torch.ones(t, t + 1, dtype=torch.bool).tril(), "shape"),
        (lambda t: causal_mask(t).tolist(), "tensor"),
    ],
)
def test_causal_mask_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_causal_mask(wrong)
