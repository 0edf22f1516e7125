"""Checkers for Chapter 3 (multi-head attention)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ._checking import (
    call,
    checker,
    expect_close,
    expect_shape,
    expect_unchanged,
    matches,
)

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
        given = x.clone()
        out = call(fn, given, H)
        expect_unchanged(given, x, "x")
        expect_shape(out, (B, H, T, D // H), f"the heads of x {(B, T, D)}, H={H}")
        expected = x.view(B, T, H, D // H).transpose(1, 2)
        if matches(out, expected, 0, 0):
            continue
        if matches(out, x.reshape(B, H, T, D // H), 0, 0):
            raise AssertionError(
                "the shape is right but the numbers are scrambled across positions: "
                "head h must hold, for every position t, that position's features "
                "h*Dh .. (h+1)*Dh - 1 (look at out[0, 0, 1] and x[0, 1])"
            )
        if matches(out, x.view(B, T, D // H, H).permute(0, 3, 1, 2), 0, 0):
            raise AssertionError(
                "each head takes every H-th feature; head h should take one "
                "contiguous block of D/H features"
            )
        raise AssertionError(f"the heads of x {(B, T, D)} with H={H} are wrong")


def _reference_causal_mha(
    x, w_q, w_k, w_v, w_o, n_heads, scale_by=None, mistake=None
) -> Tensor:
    """The right answer in float64; ``scale_by`` and ``mistake`` reproduce errors."""
    x, w_q, w_k, w_v, w_o = (t.double() for t in (x, w_q, w_k, w_v, w_o))
    if mistake == "transposed weights":  # nn.Linear's x @ W.T habit
        w_q, w_k, w_v, w_o = w_q.T, w_k.T, w_v.T, w_o.T
    B, T, D = x.shape
    dh = D // n_heads

    def split(t):
        if mistake == "mix":  # reshaped straight to (B, H, T, Dh): positions mix
            return t.reshape(B, n_heads, T, dh)
        return t.view(B, T, n_heads, dh).transpose(1, 2)  # (B, T, D) -> (B, H, T, Dh)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale_by or dh)  # (B, H, T, T)
    diagonal = -1 if mistake == "no diagonal" else 0
    causal = torch.ones(T, T, dtype=torch.bool).tril(diagonal)
    if mistake == "flipped mask":
        causal = causal.T
    if mistake != "no mask":
        scores = scores.masked_fill(~causal, -math.inf)
    heads = torch.softmax(scores, dim=-2 if mistake == "softmax over queries" else -1)
    heads = heads @ v  # (B, H, T, Dh)
    if mistake == "merge without transpose":
        return heads.reshape(B, T, D) @ w_o
    return heads.transpose(1, 2).reshape(B, T, D) @ w_o  # (B, T, D)


_MHA_MISTAKES = {
    "mix": "the heads mix up positions: when you split (B, T, D) into heads, each "
    "head must keep the T positions apart (see split_heads)",
    "merge without transpose": "the heads are merged in the wrong order: bring the "
    "positions back in front of the heads, (B, H, T, Dh) -> (B, T, H, Dh), before "
    "reshaping to (B, T, D)",
    "softmax over queries": "the softmax runs over the queries: each query's "
    "weights over the keys (the last axis) must sum to 1",
    "no mask": "the causal mask is missing: position t must not see positions after t",
    "flipped mask": "the causal mask is the wrong way round: position t may see "
    "keys 0..t, not t..T-1",
    "transposed weights": "the weights are applied transposed: here Q = x W^Q, "
    "so multiply x @ w_q (w is not an nn.Linear weight)",
}


@checker("causal_multi_head_attention")
def check_causal_multi_head_attention(fn: Callable) -> None:
    """``fn(x, w_q, w_k, w_v, w_o, n_heads)``: causal self-attention, (B, T, D)."""
    gen = torch.Generator().manual_seed(5)
    B, T, D, H = 2, 6, 12, 3
    x = torch.randn(B, T, D, generator=gen)
    w_q, w_k, w_v, w_o = (torch.randn(D, D, generator=gen) / D**0.5 for _ in range(4))
    weights = {"w_q": w_q, "w_k": w_k, "w_v": w_v, "w_o": w_o}

    def run(x: Tensor) -> Tensor:
        given = {"x": x.clone()} | {n: w.clone() for n, w in weights.items()}
        out = call(fn, *given.values(), H)
        for name, t in ({"x": x} | weights).items():
            expect_unchanged(given[name], t, name)
        expect_shape(out, (B, T, D), f"the output for x {(B, T, D)}")
        return out

    out = run(x)
    args = (w_q, w_k, w_v, w_o, H)
    expected = _reference_causal_mha(x, *args)
    if matches(out, expected):
        return
    if torch.isnan(out.detach().double()).any():
        raise AssertionError(
            "the output contains NaN: a query whose keys are all masked gets 0/0 "
            "in the softmax (may every position see itself?)"
        )
    for mistake, message in _MHA_MISTAKES.items():
        if matches(out, _reference_causal_mha(x, *args, mistake=mistake)):
            raise AssertionError(message)
    changed = x.clone()
    changed[:, -1] = torch.randn(B, D, generator=gen)
    out_changed = run(changed)
    if not matches(out[:, :-1], out_changed[:, :-1]):
        raise AssertionError(
            "changing the last token changed the outputs at earlier positions: "
            "the future leaks in (is the causal mask applied, the right way round?)"
        )
    near_misses = [
        (H, D, "the scores are divided by sqrt(d_model); each head works in "
         "d_head = d_model / n_heads dimensions"),
        (H, 1, "the scores are not scaled: divide them by sqrt(d_head)"),
        (1, None, "the output equals ONE head of width d_model: split the "
         "projections into n_heads heads"),
    ]  # fmt: skip
    for n_heads, scale_by, message in near_misses:
        wrong = _reference_causal_mha(x, w_q, w_k, w_v, w_o, n_heads, scale_by)
        if matches(out, wrong):
            raise AssertionError(message)
    no_wo = _reference_causal_mha(x, w_q, w_k, w_v, torch.eye(D), H)
    if matches(out, no_wo):
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
    given = weights.clone()
    score = call(fn, given)
    expect_unchanged(given, weights, "weights")
    expect_shape(score, (H,), "the score of weights (B=3, H=4, T=6, T=6)")
    t = torch.arange(1, T)
    previous = weights[:, :, t, t - 1]  # (B, H, T-1)
    expected = previous.mean(dim=(0, 2))
    if matches(score, expected):
        return
    self_score = weights.diagonal(dim1=-2, dim2=-1).mean(dim=(0, 2))
    if matches(score, self_score):
        raise AssertionError("you measured the weight on the query itself (key t)")
    nxt = weights[:, :, t - 1, t].mean(dim=(0, 2))
    if matches(score, nxt):
        raise AssertionError("you measured the weight on the next token (key t + 1)")
    wrapped = weights[:, :, torch.arange(T), torch.arange(T) - 1].mean(dim=(0, 2))
    if matches(score, wrapped):
        raise AssertionError(
            "query 0 has no previous token: leave it out (key -1 wraps to the end)"
        )
    if matches(score, previous.sum(dim=2).mean(dim=0) / T):
        raise AssertionError(
            "you divided by all T queries; average over the T - 1 queries "
            "t = 1 .. T-1 that have a previous token"
        )
    if abs(score[0].item() - 1.0) > 1e-5:
        raise AssertionError(
            "a perfect previous-token head (head 0 of the test weights) should "
            f"score 1.0, got {score[0].item():.3f}"
        )
    expect_close(score, expected, "the per-head scores")
