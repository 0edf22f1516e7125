"""Checkers for Chapter 3 (multi-head attention)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ._checking import call, checker, expect_close, expect_shape

__all__ = [
    "check_split_heads",
    "check_causal_multi_head_attention",
    "check_previous_token_score",
]


@checker("split_heads")
def check_split_heads(fn: Callable) -> None:
    """``fn(x, n_heads)`` turns (B, T, D) into (B, H, T, D / H)."""
    gen = torch.Generator().manual_seed(4)
    for B, T, D, H in ((2, 5, 12, 3), (1, 7, 8, 2), (3, 4, 6, 1)):
        x = torch.randn(B, T, D, generator=gen)
        out = call(fn, x, H)
        expect_shape(out, (B, H, T, D // H), f"the heads of x {(B, T, D)}, H={H}")
        expected = x.view(B, T, H, D // H).transpose(1, 2)
        if torch.equal(out, expected):
            continue
        if torch.equal(out, x.reshape(B, H, T, D // H)):
            raise AssertionError(
                "the shape is right but the numbers are scrambled across positions: "
                "head h must hold, for every position t, that position's features "
                "h*Dh .. (h+1)*Dh - 1 (look at out[0, 0, 1] and x[0, 1])"
            )
        if torch.equal(out, x.view(B, T, D // H, H).permute(0, 3, 1, 2)):
            raise AssertionError(
                "each head takes every H-th feature; head h should take one "
                "contiguous block of D/H features"
            )
        raise AssertionError(f"the heads of x {(B, T, D)} with H={H} are wrong")


def _reference_causal_mha(x, w_q, w_k, w_v, w_o, n_heads, scale_by=None, mix=False):
    """The right answer; ``scale_by`` and ``mix`` reproduce two common mistakes."""
    B, T, D = x.shape
    dh = D // n_heads

    def split(t):
        if mix:  # reshaped straight to (B, H, T, Dh): positions get mixed
            return t.reshape(B, n_heads, T, dh)
        return t.view(B, T, n_heads, dh).transpose(1, 2)  # (B, T, D) -> (B, H, T, Dh)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale_by or dh)  # (B, H, T, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, -math.inf)
    heads = torch.softmax(scores, dim=-1) @ v  # (B, H, T, Dh)
    return heads.transpose(1, 2).reshape(B, T, D) @ w_o  # (B, T, D)


@checker("causal_multi_head_attention")
def check_causal_multi_head_attention(fn: Callable) -> None:
    """``fn(x, w_q, w_k, w_v, w_o, n_heads)``: causal self-attention, (B, T, D)."""
    gen = torch.Generator().manual_seed(5)
    B, T, D, H = 2, 6, 12, 3
    x = torch.randn(B, T, D, generator=gen)
    w_q, w_k, w_v, w_o = (torch.randn(D, D, generator=gen) / D**0.5 for _ in range(4))
    args = (w_q, w_k, w_v, w_o, H)
    out = call(fn, x, *args)
    expect_shape(out, (B, T, D), f"the output for x {(B, T, D)}")

    if torch.allclose(out, _reference_causal_mha(x, *args, mix=True), atol=1e-5):
        raise AssertionError(
            "the heads mix up positions: when you split (B, T, D) into heads, each "
            "head must keep the T positions apart (see split_heads)"
        )
    changed = x.clone()
    changed[:, -1] = torch.randn(B, D, generator=gen)
    out_changed = call(fn, changed, *args)
    if not torch.allclose(out[:, :-1], out_changed[:, :-1], atol=1e-5):
        raise AssertionError(
            "changing the last token changed the outputs at earlier positions: "
            "the future leaks in (is the causal mask applied, the right way round?)"
        )
    expected = _reference_causal_mha(x, *args)
    if torch.allclose(out, expected, atol=1e-5, rtol=1e-4):
        return
    near_misses = [
        (H, D, "the scores are divided by sqrt(d_model); each head works in "
         "d_head = d_model / n_heads dimensions"),
        (H, 1, "the scores are not scaled: divide them by sqrt(d_head)"),
        (1, None, "the output equals ONE head of width d_model: split the "
         "projections into n_heads heads"),
    ]  # fmt: skip
    for n_heads, scale_by, message in near_misses:
        wrong = _reference_causal_mha(x, w_q, w_k, w_v, w_o, n_heads, scale_by)
        if torch.allclose(out, wrong, atol=1e-5):
            raise AssertionError(message)
    no_wo = _reference_causal_mha(x, w_q, w_k, w_v, torch.eye(D), H)
    if torch.allclose(out, no_wo, atol=1e-5):
        raise AssertionError("the concatenated heads must still go through w_o")
    expect_close(out, expected, "the causal multi-head output")


@checker("previous_token_score")
def check_previous_token_score(fn: Callable) -> None:
    """``fn(weights)`` for weights (B, H, T, T) returns (H,): the mean weight that
    each head puts on key t - 1, over the batch and the queries t = 1 .. T - 1."""
    gen = torch.Generator().manual_seed(6)
    B, H, T = 3, 4, 6
    weights = torch.softmax(torch.randn(B, H, T, T, generator=gen) * 2, dim=-1)
    weights[:, 0] = torch.eye(T).roll(-1, dims=1)  # a perfect previous-token head...
    weights[:, 0, 0] = 1.0 / T  # ...whose first query has no previous token
    score = call(fn, weights)
    expect_shape(score, (H,), "the score of weights (B=3, H=4, T=6, T=6)")
    t = torch.arange(1, T)
    expected = weights[:, :, t, t - 1].mean(dim=(0, 2))
    if torch.allclose(score, expected, atol=1e-5):
        return
    self_score = weights.diagonal(dim1=-2, dim2=-1).mean(dim=(0, 2))
    if torch.allclose(score, self_score, atol=1e-5):
        raise AssertionError("you measured the weight on the query itself (key t)")
    nxt = weights[:, :, t - 1, t].mean(dim=(0, 2))
    if torch.allclose(score, nxt, atol=1e-5):
        raise AssertionError("you measured the weight on the next token (key t + 1)")
    wrapped = weights[:, :, torch.arange(T), torch.arange(T) - 1].mean(dim=(0, 2))
    if torch.allclose(score, wrapped, atol=1e-5):
        raise AssertionError(
            "query 0 has no previous token: leave it out (key -1 wraps to the end)"
        )
    if abs(score[0].item() - 1.0) > 1e-5:
        raise AssertionError(
            "a perfect previous-token head (head 0 of the test weights) should "
            f"score 1.0, got {score[0].item():.3f}"
        )
    expect_close(score, expected, "the per-head scores")
