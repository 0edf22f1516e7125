"""The Chapter 2 checkers accept right answers and explain wrong ones."""

import math

import pytest
import torch

from transformer_book.attention import causal_mask, scaled_dot_product_attention
from transformer_book.exercises import (
    check_causal_mask,
    check_masked_softmax,
    check_scaled_dot_product_attention,
)


def test_attention_checker_accepts_the_package_and_output_only_answers(capsys):
    check_scaled_dot_product_attention(scaled_dot_product_attention)
    check_scaled_dot_product_attention(
        lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask)[0]
    )
    assert "all checks passed" in capsys.readouterr().out


def naive(q, k, v, mask=None, scale=True, flip=False, nan_rows=False):
    scores = q @ k.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(q.shape[-1])
    if mask is not None:
        blocked = mask if flip else ~mask
        scores = scores.masked_fill(blocked, -math.inf)
    weights = torch.softmax(scores, -1)
    if not nan_rows:
        weights = weights.nan_to_num(0.0)
    return weights @ v


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda q, k, v, mask=None: naive(q, k, v, mask, scale=False), "sqrt"),
        (lambda q, k, v, mask=None: naive(q, k, v, mask, flip=True), "wrong way round"),
        (lambda q, k, v, mask=None: naive(q, k, v, None), "mask is ignored"),
        (lambda q, k, v, mask=None: naive(q, k, v, mask, nan_rows=True), "NaN"),
        (lambda q, k, v, mask=None: naive(q, k, v, mask)[..., :2], "shape"),
    ],
)
def test_attention_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_scaled_dot_product_attention(wrong)


def good_masked_softmax(scores, mask):
    filled = scores.float().masked_fill(~mask, torch.finfo(torch.float32).min)
    weights = torch.softmax(filled, -1) * mask.any(-1, keepdim=True)
    return weights.to(scores.dtype)


def test_masked_softmax_checker(capsys):
    check_masked_softmax(good_masked_softmax)

    def minus_1e9(scores, mask):  # the classic: overflows in float16
        return torch.softmax(scores.masked_fill(~mask, -1e9), -1)

    with pytest.raises(AssertionError, match="all masked must be all zeros"):
        check_masked_softmax(minus_1e9)

    def minus_1e9_empty_rows_zeroed(scores, mask):
        weights = torch.softmax(scores.masked_fill(~mask, -1e9), -1)
        return weights * mask.any(-1, keepdim=True)

    with pytest.raises(AssertionError, match="overflow"):
        check_masked_softmax(minus_1e9_empty_rows_zeroed)

    def upcasts(scores, mask):
        return good_masked_softmax(scores, mask).float()

    with pytest.raises(AssertionError, match="keep the dtype"):
        check_masked_softmax(upcasts)

    def uniform_empty_rows(scores, mask):
        filled = scores.float().masked_fill(~mask, torch.finfo(torch.float32).min)
        return torch.softmax(filled, -1).to(scores.dtype)

    with pytest.raises(AssertionError, match="all masked must be all zeros"):
        check_masked_softmax(uniform_empty_rows)


def test_causal_mask_checker():
    check_causal_mask(causal_mask)
    with pytest.raises(AssertionError, match="inverted"):
        check_causal_mask(lambda t: ~causal_mask(t))
    with pytest.raises(AssertionError, match="future"):
        check_causal_mask(lambda t: causal_mask(t).T)
    with pytest.raises(AssertionError, match="diagonal"):
        check_causal_mask(lambda t: torch.ones(t, t, dtype=torch.bool).tril(-1))
    with pytest.raises(AssertionError, match="bool"):
        check_causal_mask(lambda t: torch.ones(t, t).tril())
