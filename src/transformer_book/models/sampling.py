"""Choosing the next token from a model's logits: temperature, top-k, top-p (Ch. 6).

Shape letters: B batch, V vocabulary size.

* temperature T: sample from softmax(logits / T); T -> 0 is greedy (arg-max),
  T = 1 the model's own distribution, T > 1 flatter;
* top-k (Fan et al., 2018): keep the k most probable tokens;
* top-p, nucleus sampling (Holtzman et al., 2020): keep the smallest set of most
  probable tokens whose probabilities add up to p or more.

The filters return logits with ``-inf`` where a token is dropped, so that they
compose (temperature, then top-k, then top-p) and softmax renormalises what is left.
Decoding runs a model in eval mode and puts every submodule back in its own mode
afterwards (``evaluating``, ``in_eval_mode``): ``GPT.generate`` and
``EncoderDecoder.greedy_decode`` use them.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator

import torch
from torch import Tensor, nn

from .._validate import check_generator, check_has_values

__all__ = ["top_k_filter", "top_p_filter", "sample_next"]

# Below this temperature, logits / T could overflow float32: divide in float64
_FLOAT32_SAFE_TEMPERATURE = 1e-30


def _check_logits(logits: Tensor) -> None:
    if not isinstance(logits, Tensor) or logits.dim() < 1:
        raise ValueError("logits must be a tensor of shape (..., V)")
    if not logits.is_floating_point():
        raise TypeError(f"logits must be floating point, got {logits.dtype}")
    if logits.shape[-1] == 0:
        raise ValueError("logits must hold at least one token's score: V = 0")
    check_has_values("logits", logits)


def _check_top_k(k: object, name: str = "top_k") -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"{name} must be a positive int, got {k!r}")


def _check_top_p(p: object, name: str = "top_p") -> None:
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 < p <= 1.0:
        raise ValueError(f"{name} must be a number in (0, 1], got {p!r}")


def check_sampling(
    temperature: object, top_k: object, top_p: object, generator: object
) -> float:
    """``temperature`` as a float; ValueError/TypeError naming a bad argument.

    Every argument is checked, also those that greedy decoding (T = 0) ignores:
    a bad ``top_k`` is a mistake whatever the temperature.
    """
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise ValueError(f"temperature must be a number, got {temperature!r}")
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be finite and >= 0, got {temperature}")
    if top_k is not None:
        _check_top_k(top_k)
    if top_p is not None:
        _check_top_p(top_p)
    check_generator("generator", generator)
    return float(temperature)


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the ``k`` largest logits of each row, set the others to -inf.

    Tokens tied with the k-th largest are kept too. ``k`` >= V keeps everything.

    Shapes: logits (..., V) -> (..., V)
    """
    _check_logits(logits)
    _check_top_k(k, "k")
    return _top_k(logits, k)


def _top_k(logits: Tensor, k: int) -> Tensor:
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
    _check_top_p(p, "p")
    return _top_p(logits, p)


def _top_p(logits: Tensor, p: float) -> Tensor:
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

    A temperature so small that logits / T would overflow still gives the T -> 0
    limit: the logits are shifted so that each row's largest is 0 before dividing.

    Shapes: logits (B, V) -> (B,) int64
    """
    _check_logits(logits)
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (B, V), got {tuple(logits.shape)}")
    temperature = check_sampling(temperature, top_k, top_p, generator)
    _check_rows(logits)
    return choose_next(logits, temperature, top_k, top_p, generator)


def _check_rows(logits: Tensor) -> None:
    """Each row must give a distribution: no NaN, no +inf, not every token -inf.

    Reads one bool per row back, so it is left to ``sample_next``; ``generate``,
    which calls ``choose_next`` at every step, does not pay for it.
    """
    bad = torch.isnan(logits).any(-1) | torch.isposinf(logits).any(-1)
    bad |= torch.isneginf(logits).all(-1)
    if bad.any():
        i = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"logits[{i}] gives no distribution to sample from: a row must hold no "
            f"NaN or +inf and at least one finite score, got {logits[i].tolist()[:8]}"
        )


@contextlib.contextmanager
def evaluating(model: nn.Module) -> Iterator[None]:
    """``model`` in eval mode (no dropout) inside, and afterwards every submodule
    back in its own mode, also when something raises."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, mode in modes:
            module.training = mode


def in_eval_mode(method: Callable) -> Callable:
    """Decorate a model's decoding method: it runs ``evaluating`` its model."""

    @functools.wraps(method)
    def run(self: nn.Module, *args, **kwargs):
        with evaluating(self):
            return method(self, *args, **kwargs)

    return run


def choose_next(
    logits: Tensor,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    generator: torch.Generator | None,
) -> Tensor:
    """``sample_next`` without its checks, for a caller that made them once.

    Shapes: logits (B, V) -> (B,) int64
    """
    if temperature == 0:
        return logits.argmax(dim=-1)  # greedy: top-k and top-p change nothing
    work = (
        logits.float() if temperature >= _FLOAT32_SAFE_TEMPERATURE else logits.double()
    )
    # softmax is unchanged by the shift; the largest logit stays 0 whatever T is
    logits = (work - work.amax(dim=-1, keepdim=True)) / temperature  # (B, V)
    if top_k is not None:
        logits = _top_k(logits, top_k)
    if top_p is not None:
        logits = _top_p(logits, top_p)
    probs = logits.softmax(dim=-1)  # (B, V), zero where filtered out
    return torch.multinomial(probs, 1, generator=generator)[:, 0]  # (B, 1) -> (B,)
