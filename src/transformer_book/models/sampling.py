"""Choosing the next token from a model's logits: temperature, top-k, top-p (Ch. 6).

Shape letters: B batch, V vocabulary size.

* temperature T: sample from softmax(logits / T); T -> 0 is greedy (arg-max),
  T = 1 the model's own distribution, T > 1 flatter;
* top-k (Fan et al., 2018): keep the k most probable tokens;
* top-p, nucleus sampling (Holtzman et al., 2020): keep the smallest set of most
  probable tokens whose probabilities add up to p or more.

The filters return logits with ``-inf`` where a token is dropped, so that they
compose (temperature, then top-k, then top-p) and softmax renormalises what is left.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["top_k_filter", "top_p_filter", "sample_next"]


def _check_logits(logits: Tensor) -> None:
    if not isinstance(logits, Tensor) or logits.dim() < 1:
        raise ValueError("logits must be a tensor of shape (..., V)")
    if not logits.is_floating_point():
        raise TypeError(f"logits must be floating point, got {logits.dtype}")


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the ``k`` largest logits of each row, set the others to -inf.

    Tokens tied with the k-th largest are kept too. ``k`` >= V keeps everything.

    Shapes: logits (..., V) -> (..., V)
    """
    _check_logits(logits)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"top_k must be a positive int, got {k!r}")
    k = min(k, logits.shape[-1])
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Keep the nucleus: the most probable tokens whose probabilities reach ``p``.

    Token i is kept when the tokens *more* probable than i hold less than p
    together. So the token that takes the running total to p or beyond is kept,
    and tokens tied with it are kept too: the result does not depend on the order
    a sort puts equal probabilities in. ``p = 1`` keeps every token.

    Shapes: logits (..., V) -> (..., V)
    """
    _check_logits(logits)
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must be a number in (0, 1], got {p!r}")
    if p == 1:
        return logits.clone()  # every token: no rounding may drop a rare one
    probs = logits.double().softmax(dim=-1)  # (..., V), float64: exact enough sums
    ascending, _ = probs.sort(dim=-1)  # (..., V)
    running = ascending.cumsum(dim=-1)  # running[j]: the j + 1 smallest together
    # How many tokens are at most as probable as token i (i itself included)
    n_at_most = torch.searchsorted(
        ascending.contiguous(), probs.contiguous(), right=True
    )
    mass_at_most = running.gather(-1, n_at_most - 1)  # (..., V)
    mass_above = running[..., -1:] - mass_at_most  # held by the more probable tokens
    return logits.masked_fill(mass_above >= p, float("-inf"))


def sample_next(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The next token of each row: arg-max if ``temperature`` is 0, else sampled.

    Shapes: logits (B, V) -> (B,) int64
    """
    _check_logits(logits)
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (B, V), got {tuple(logits.shape)}")
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise ValueError(f"temperature must be a number, got {temperature!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return logits.argmax(dim=-1)  # greedy: top-k and top-p change nothing
    logits = logits.float() / temperature
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = logits.softmax(dim=-1)  # (B, V), zero where filtered out
    return torch.multinomial(probs, 1, generator=generator)[:, 0]  # (B, 1) -> (B,)
