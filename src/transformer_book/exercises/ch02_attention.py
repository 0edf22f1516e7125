"""Checkers for Chapter 2 (query, key, value: scaled dot-product attention)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ._checking import call, checker, expect_close, expect_shape

__all__ = [
    "check_causal_mask",
    "check_masked_softmax",
    "check_scaled_dot_product_attention",
]


def _output_of(result):
    """Accept ``output`` or ``(output, weights)``."""
    if isinstance(result, tuple):
        if len(result) != 2:
            raise AssertionError(
                f"return the output, or (output, weights); got a tuple of {len(result)}"
            )
        return result[0]
    return result


@checker("scaled_dot_product_attention")
def check_scaled_dot_product_attention(fn: Callable) -> None:
    """``fn(q, k, v, mask=None)`` returns the output or (output, weights)."""
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(2, 3, 5, 8, generator=gen)  # (B, H, Tq, Dk)
    k = torch.randn(2, 3, 7, 8, generator=gen)  # (B, H, Tk, Dk)
    v = torch.randn(2, 3, 7, 4, generator=gen)  # (B, H, Tk, Dv)

    out = _output_of(call(fn, q, k, v))
    expect_shape(
        out, (2, 3, 5, 4), "the output for q (2,3,5,8), k (2,3,7,8), v (2,3,7,4)"
    )
    expected = F.scaled_dot_product_attention(q, k, v)
    unscaled = F.scaled_dot_product_attention(q, k, v, scale=1.0)
    if torch.allclose(out, unscaled, atol=1e-5):
        raise AssertionError(
            "the output matches attention without scaling: "
            "divide the scores by sqrt(d_k)"
        )
    over = F.scaled_dot_product_attention(q, k, v, scale=1.0 / 8)
    if torch.allclose(out, over, atol=1e-5):
        raise AssertionError("the scores are divided by d_k; divide by sqrt(d_k)")
    expect_close(out, expected, "the output without a mask")

    mask = torch.rand(5, 7, generator=gen) > 0.4
    mask[:, 0] = True  # every query may see at least one key
    out = _output_of(call(fn, q, k, v, mask=mask))
    if torch.allclose(out, expected, atol=1e-5):
        raise AssertionError("the mask is ignored: masked keys must get zero weight")
    flipped = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask)
    if torch.allclose(out, flipped, atol=1e-5):
        raise AssertionError(
            "the mask is read the wrong way round: True means 'may attend'"
        )
    expect_close(
        out,
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        "the output with a (Tq, Tk) mask",
    )

    mask = mask.clone()
    mask[2] = False  # query 2 may see nothing
    out = _output_of(call(fn, q, k, v, mask=mask))
    if torch.isnan(out).any():
        raise AssertionError(
            "a query whose keys are all masked gives NaN; it should give zeros"
        )
    if not torch.equal(out[..., 2, :], torch.zeros_like(out[..., 2, :])):
        raise AssertionError(
            "a query whose keys are all masked should give a zero output"
        )


@checker("masked_softmax")
def check_masked_softmax(fn: Callable) -> None:
    """``fn(scores, mask)`` gives softmax weights on the last axis, masked keys 0."""
    gen = torch.Generator().manual_seed(3)
    scores = torch.randn(4, 6, generator=gen) * 3
    mask = torch.rand(4, 6, generator=gen) > 0.5
    mask[:, 1] = True
    mask[3] = False  # a row with nothing to attend to

    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        s = scores.to(dtype)
        weights = call(fn, s, mask)
        expect_shape(weights, (4, 6), f"the weights for {dtype} scores of shape (4, 6)")
        if weights.dtype != dtype:
            raise AssertionError(
                f"{dtype} scores gave {weights.dtype} weights; keep the dtype"
            )
        if torch.isnan(weights.float()).any():
            raise AssertionError(f"{dtype} scores gave NaN weights")
        if weights.float()[3].abs().max() > 0:
            raise AssertionError(
                f"{dtype}: a row whose keys are all masked must be all zeros"
            )
        if weights.float()[~mask].abs().max() > 0:
            raise AssertionError(f"{dtype}: masked keys must get exactly zero weight")
        expected = torch.softmax(s.float().masked_fill(~mask, -math.inf), dim=-1)[:3]
        tol = 1e-5 if dtype == torch.float32 else 1e-2
        expect_close(
            weights[:3].float(),
            expected,
            f"the {dtype} weights of the normal rows",
            atol=tol,
            rtol=tol,
        )


@checker("causal_mask")
def check_causal_mask(fn: Callable) -> None:
    """``fn(t)`` returns a (t, t) bool mask, True where query i may see key j."""
    for t in (4, 9, 1):
        mask = call(fn, t)
        expect_shape(mask, (t, t), f"the mask for t={t}")
        if mask.dtype != torch.bool:
            raise AssertionError(f"the mask should be bool, got {mask.dtype}")
        expected = torch.ones(t, t, dtype=torch.bool).tril()
        if torch.equal(mask, expected):
            continue
        if torch.equal(mask, torch.ones(t, t, dtype=torch.bool).tril(-1)):
            raise AssertionError(
                "a query must also see its own position (the diagonal)"
            )
        if torch.equal(mask, ~expected):
            raise AssertionError("the mask is inverted: True means 'may attend'")
        if torch.equal(mask, expected.T):
            raise AssertionError(
                "the mask lets each query see the future, not the past"
            )
        if not torch.equal(mask, expected):
            raise AssertionError(f"the mask for t={t} is wrong")
