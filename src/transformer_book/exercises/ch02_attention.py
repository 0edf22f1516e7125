"""Checkers for Chapter 2 (query, key, value: scaled dot-product attention)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import attention
from ._checking import (
    call,
    checker,
    expect_close,
    expect_shape,
    expect_unchanged,
    forbidden,
    matches,
)

__all__ = [
    "check_causal_mask",
    "check_masked_softmax",
    "check_scaled_dot_product_attention",
]


def _attention(q, k, v, mask=None, scale=None, fill=-math.inf, dim=-1, after=False):
    """(output, weights) in float64; the keywords reproduce common mistakes.

    ``scale``: the divisor of the scores (sqrt(d_k) when None); ``fill``: what the
    masked scores become; ``dim``: the softmax's axis; ``after``: mask the weights
    after the softmax instead of the scores before it.
    """
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / (scale or math.sqrt(q.shape[-1]))
    if mask is not None and not after:
        scores = scores.masked_fill(~mask, fill)
    weights = torch.softmax(scores, dim=dim)
    if mask is not None:
        weights = weights.masked_fill(~mask if after else ~mask.any(-1, True), 0.0)
    return weights @ v, weights  # (..., Tq, Dv), (..., Tq, Tk)


def _attention_cases() -> list[tuple[str, tuple[Tensor, ...], Tensor | None]]:
    """(description, (q, k, v), mask): masks of every broadcastable shape."""
    gen = torch.Generator().manual_seed(2)
    B, H, Tq, Tk = 2, 3, 5, 7
    q = torch.randn(B, H, Tq, 8, generator=gen)  # (B, H, Tq, Dk)
    k = torch.randn(B, H, Tk, 8, generator=gen)  # (B, H, Tk, Dk)
    v = torch.randn(B, H, Tk, 4, generator=gen)  # (B, H, Tk, Dv)
    mask = torch.rand(Tq, Tk, generator=gen) > 0.4
    mask[:, 0] = True  # every query may see at least one key
    empty_row = mask.clone()
    empty_row[2] = False  # query 2 may see nothing
    per_head = torch.rand(B, H, Tq, Tk, generator=gen) > 0.4
    per_head[..., 0] = True
    per_head[1, 2, 3] = False  # one query of one head of one example sees nothing
    eye = torch.eye(Tq, Tk, dtype=torch.bool)
    per_example = (torch.rand(B, 1, Tq, Tk, generator=gen) > 0.4) | eye
    per_example[0, 0, 4] = False
    padding = torch.ones(B, 1, 1, Tk, dtype=torch.bool)  # (B, 1, 1, Tk)
    padding[0, ..., 4:] = False
    qkv = (q, k, v)
    return [
        ("without a mask", qkv, None),
        ("with a (Tq, Tk) mask", qkv, mask),
        ("with a (Tq, Tk) mask whose query 2 sees no key", qkv, empty_row),
        ("with a (B, 1, Tq, Tk) mask", qkv, per_example),
        ("with a (B, H, Tq, Tk) mask", qkv, per_head),
        ("with a (B, 1, 1, Tk) padding mask", qkv, padding),
        ("for q, k, v without batch axes", (q[0, 0], k[0, 0], v[0, 0]), mask),
        ("for q, k, v without heads", (q[:, 0], k[:, 0], v[:, 0]), mask[None]),
    ]


def _output_and_weights(result, shape, what: str) -> tuple[Tensor, Tensor | None]:
    """Accept ``output`` or ``(output, weights)``."""
    if isinstance(result, tuple):
        if len(result) != 2:
            raise AssertionError(
                f"return the output, or (output, weights); got a tuple of {len(result)}"
            )
        expect_shape(result[1], shape, f"the weights {what}")
        return result
    return result, None


def _diagnose_attention(out: Tensor, q, k, v, mask, what: str) -> None:
    """Name the mistake whose output ``out`` equals, if any."""
    d_k, d_v, tq, tk = q.shape[-1], v.shape[-1], q.shape[-2], k.shape[-2]
    mistakes = [
        ({"scale": 1.0}, "the scores are not scaled: divide them by sqrt(d_k)"),
        ({"scale": d_k}, "the scores are divided by d_k; divide by sqrt(d_k)"),
        (
            {"scale": math.sqrt(d_v)},
            "the scores are divided by sqrt(d_v), the width of v; d_k is the last "
            "axis of q and k",
        ),
        (
            {"scale": math.sqrt(tk)},
            "the scores are divided by the square root of the number of keys; "
            "d_k is the last axis of q and k",
        ),
        (
            {"scale": math.sqrt(tq)},
            "the scores are divided by the square root of the number of queries; "
            "d_k is the last axis of q and k",
        ),
        (
            {"dim": -2},
            "the softmax runs over the queries: each query's weights over the keys "
            "(the last axis) must sum to 1",
        ),
    ]
    if mask is not None:
        mistakes += [
            ({"mask": None}, "the mask is ignored: masked keys must get zero weight"),
            ({"mask": ~mask}, "the mask is read the wrong way round: True means "
             "'may attend'"),
            ({"fill": 0.0}, "masked keys still get weight: a masked score set to 0 "
             "is not blocked; it must become -inf (or the dtype's lowest value)"),
            ({"after": True}, "the weights are masked after the softmax, so the "
             "allowed keys' weights no longer sum to 1: mask the scores before it"),
        ]  # fmt: skip
    for change, message in mistakes:
        kwargs = {"mask": mask, **change}
        if matches(out, _attention(q, k, v, **kwargs)[0]):
            raise AssertionError(f"{what}: {message}")
    if torch.isnan(out.detach().double()).any():
        raise AssertionError(
            f"{what}: the output contains NaN; a query whose keys are all masked "
            "should give zeros"
        )
    if mask is not None:
        no_key = ~mask.expand(*q.shape[:-2], tq, tk).any(-1)  # (..., Tq)
        if no_key.any() and not out.detach()[no_key].eq(0).all():
            raise AssertionError(
                f"{what}: a query whose keys are all masked should give a zero output"
            )


_TORCH_SDPA = "torch.nn.functional.scaled_dot_product_attention"


@checker("scaled_dot_product_attention")
def check_scaled_dot_product_attention(fn: Callable) -> None:
    """``fn(q, k, v, mask=None)`` returns the output or (output, weights).

    The mask is boolean, broadcastable to (..., Tq, Tk), True = may attend; it is
    tried in every shape that broadcasts. Without PyTorch's
    ``scaled_dot_product_attention`` or the package's: while it runs, they raise.
    """
    for what, (q, k, v), mask in _attention_cases():
        expected, expected_weights = _attention(q, k, v, mask)
        inputs = {"q": q, "k": k, "v": v}
        if mask is not None:
            inputs["mask"] = mask
        given = {name: t.clone() for name, t in inputs.items()}
        with (
            forbidden(F, "scaled_dot_product_attention", _TORCH_SDPA, reader=fn),
            forbidden(attention, "scaled_dot_product_attention", reader=fn),
            forbidden(attention, "fused_scaled_dot_product_attention", reader=fn),
        ):
            try:
                result = call(fn, *given.values())
            except AssertionError as err:
                raise AssertionError(f"{what}: {err}") from None
        for name, t in inputs.items():
            expect_unchanged(given[name], t, name)
        out, weights = _output_and_weights(result, tuple(expected_weights.shape), what)
        expect_shape(out, tuple(expected.shape), f"the output {what}")
        if not matches(out, expected):
            _diagnose_attention(out, q, k, v, mask, what)
            expect_close(out, expected, f"the output {what}")
        if weights is not None:
            expect_close(weights, expected_weights, f"the weights {what}")


def _softmax_cases() -> list[tuple[Tensor, Tensor]]:
    """(scores, mask): 2-D, then 3-D (the softmax is over the last axis)."""
    gen = torch.Generator().manual_seed(3)
    scores = torch.randn(4, 6, generator=gen) * 3
    mask = torch.rand(4, 6, generator=gen) > 0.5
    mask[:, 1] = True
    mask[3] = False  # a row with nothing to attend to
    scores3 = torch.randn(2, 3, 5, generator=gen) * 3
    mask3 = torch.rand(2, 3, 5, generator=gen) > 0.5
    mask3[..., 0] = True
    mask3[1, 2] = False
    return [(scores, mask), (scores3, mask3)]


@checker("masked_softmax")
def check_masked_softmax(fn: Callable) -> None:
    """``fn(scores, mask)`` gives softmax weights on the last axis, masked keys 0.

    Half-precision scores must give weights of their own dtype; float32 scores
    may give float32 or float64 weights.
    """
    for scores, mask in _softmax_cases():
        shape = tuple(scores.shape)
        empty = ~mask.any(-1)  # (...,) rows with no allowed key
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            what = f"{str(dtype).removeprefix('torch.')} scores of shape {shape}"
            s = scores.to(dtype)
            given_s, given_mask = s.clone(), mask.clone()
            weights = call(fn, given_s, given_mask)
            expect_unchanged(given_s, s, "scores")
            expect_unchanged(given_mask, mask, "mask")
            expect_shape(weights, shape, f"the weights for {what}")
            wide = (torch.float32, torch.float64)
            if weights.dtype != dtype and not (dtype in wide and weights.dtype in wide):
                raise AssertionError(
                    f"{what} gave {weights.dtype} weights; keep the dtype"
                )
            w = weights.detach().double()
            if torch.isnan(w).any():
                raise AssertionError(f"{what} gave NaN weights")
            reference = s.double().masked_fill(~mask, -math.inf).softmax(-1)
            expected = reference.masked_fill(empty[..., None], 0.0)
            flipped = s.double().masked_fill(mask, -math.inf).softmax(-1)
            tol = 1e-5 if dtype == torch.float32 else 1e-2
            if matches(w, flipped.nan_to_num(0.0), tol, tol):
                raise AssertionError(
                    f"{what}: the mask is read the wrong way round: True means "
                    "'may attend'"
                )
            if w[empty].abs().max() > 0:
                raise AssertionError(
                    f"{what}: a row whose keys are all masked must be all zeros"
                )
            if w[~mask].abs().max() > 0:
                raise AssertionError(
                    f"{what}: masked keys must get exactly zero weight"
                )
            sums = w[~empty].sum(-1)
            if not torch.allclose(sums, torch.ones_like(sums), atol=tol):
                raise AssertionError(
                    f"{what}: the weights of a row with allowed keys must sum to 1 "
                    "(the softmax runs over the last axis, the keys)"
                )
            expect_close(w, expected, f"the weights for {what}", atol=tol, rtol=tol)


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
        i, j = (mask != expected).nonzero()[0].tolist()
        verb = "should be allowed to" if expected[i, j] else "must not"
        raise AssertionError(
            f"the mask for t={t} is wrong: query {i} {verb} attend to key {j}"
        )
