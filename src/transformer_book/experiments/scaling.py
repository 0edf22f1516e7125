"""Scaling: the same budget, GPTs of growing size (Chapter 8).

Kaplan et al. (2020) trained Transformers from 768 to 1.5 billion parameters and
found the test loss falling as a power law in the number N of non-embedding
parameters, L(N) = (N_c / N)^alpha_N with alpha_N ~ 0.076, over seven orders of
magnitude, when data and compute do not limit; and the training compute of a
model of N parameters on D tokens is C ~ 6 N D floating-point operations (2 N
per token forward, 4 N backward).

``run_scaling`` is the experiment in miniature: Chapter 6's GPT (its BPE
tokenizer, training stream and held-out topics) at four widths, d_model 16, 32,
64 and 96, two layers each, d_head = 16, trained on the *same* batches with the
same number of steps, batch size, context and learning-rate schedule, so every
model sees the same D = 100,800 tokens and its compute grows with N alone (N from
6.6 thousand to 224 thousand, C from 4e9 to 1.4e11 FLOPs). Each model's held-out
loss (nats per token, the log of ``variants_uses.heldout_perplexity``) is then
fitted by ``fit_power_law``. Measured for seeds 0-3: the loss falls from 5.57-5.69
to 4.66-4.76 nats (the unigram model: 5.92), and loss = a N^-b fits with
b = 0.046-0.054, R^2 = 0.97-1.00. About 7 s on a 2-core CPU, the four sizes side
by side on one thread each (13 s one after another on two threads).

One rate for every size must suit the largest: with Chapter 6's 3e-3 and 20
warm-up steps, d_model 64 and 96 ended *behind* d_model 32 after this short
budget (Kaplan et al. also found the best rate falling with size), hence LR and
WARMUP below. What this does **not** show: a budget of seconds trains every model
far from convergence, so the loss is limited by the data seen as much as by N,
and the fitted exponent is that of this budget, not Kaplan's alpha_N.

Shape letters: K sizes (points of a fit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .._parallel import map_runs
from .._validate import (
    check_compute_device,
    check_instance,
    check_int,
    check_real,
    check_seed,
)
from ..models import GPT, GPTConfig
from ..tokenizer import get_tokenizer
from .variants import BLOCK_LEN
from .variants_uses import heldout_perplexity, prose_windows, train_gpt_on_prose

__all__ = [
    "SIZES",
    "N_LAYERS",
    "STEPS",
    "BATCH_SIZE",
    "LR",
    "WARMUP",
    "LOSS_GAP",
    "SKIP_GAP",
    "EXPONENT_RANGE",
    "R2_BOUND",
    "non_embedding_parameters",
    "training_flops",
    "PowerLawFit",
    "fit_power_law",
    "OffsetPowerLawFit",
    "fit_power_law_offset",
    "ScalingRow",
    "ScalingRun",
    "run_scaling",
    "scaling_claims",
]

SIZES = ((16, 1), (32, 2), (64, 4), (96, 6))  # (d_model, n_heads): d_head 16
N_LAYERS = 2  # every size has two blocks; width alone changes
STEPS = 200  # training steps, the same for every size
BATCH_SIZE = 8  # windows of BLOCK_LEN tokens per step
LR = 2e-3  # AdamW's rate after the warm-up, then constant
WARMUP = 40  # steps of linear warm-up

# The bounds the chapter states, measured for seeds 0-3 (identical under 1 or 2
# threads and under make test's second numeric configuration):
LOSS_GAP = 0.6  # the smallest model's loss minus the largest's: 0.84-1.00 nats
SKIP_GAP = 0.3  # each model's loss below that of the model two sizes smaller: >= 0.49
EXPONENT_RANGE = (0.03, 0.08)  # the fitted b of loss = a N^-b: 0.046-0.054
R2_BOUND = 0.9  # R^2 of that fit in log-log space: 0.973-0.999
# Not claimed: that each size beats the next one up. It did for seeds 0-3, but
# by as little as 0.05 nats (seed 2, d_model 64 -> 96), within what another CPU's
# rounding could move. Nor the floor c of the offset fit: 0 for seeds 1 and 3
# (the plain power law), 3.6-4.0 nats with b = 0.18-0.25 for seeds 0 and 2.


def non_embedding_parameters(model: GPT) -> int:
    """Kaplan et al.'s N: the parameters outside the token and position tables.

    The output layer is the token table itself (tied), so it is left out too.
    What is left grows as 12 n_layers d_model^2 (attention 4 D^2, feed-forward
    8 D^2 with d_ff = 4 D), plus biases and LayerNorms.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a GPT, got {type(model).__name__}")
    tables = {id(model.token.weight), id(model.position.weight)}
    return sum(p.numel() for p in model.parameters() if id(p) not in tables)


def training_flops(n_params: int, tokens: int) -> float:
    """C ~ 6 N D: 2 FLOPs per parameter and token forward, 4 backward."""
    check_int("n_params", n_params, minimum=0)
    check_int("tokens", tokens, minimum=0)
    return 6.0 * n_params * tokens


def _positive(name: str, values) -> Tensor:
    """A 1-D float64 tensor of finite, positive values."""
    if isinstance(values, Tensor):
        if values.dim() != 1:
            raise ValueError(
                f"{name} must be one-dimensional, got shape {tuple(values.shape)}"
            )
        values = values.detach().cpu().tolist()
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise TypeError(
            f"{name} must be a sequence or 1-D tensor of numbers, got "
            f"{type(values).__name__}"
        )
    try:
        out = torch.tensor([float(v) for v in values], dtype=torch.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must hold numbers, got {values!r}") from None
    if out.dim() != 1:
        raise ValueError(
            f"{name} must be one-dimensional, got shape {tuple(out.shape)}"
        )
    if not torch.isfinite(out).all() or (out <= 0).any():
        raise ValueError(
            f"{name} must hold finite positive values (a power law is fitted to "
            f"their logarithms), got {out.tolist()}"
        )
    return out


def _pair(x, y) -> tuple[Tensor, Tensor]:
    x, y = _positive("x", x), _positive("y", y)
    if len(x) != len(y):
        raise ValueError(f"x and y must have one length, got {len(x)} and {len(y)}")
    if len(x) < 2 or bool((x == x[0]).all()):
        raise ValueError("x must hold at least two different values to fit a slope")
    return x, y


def _log_fit(x: Tensor, y: Tensor) -> tuple[float, float, float]:
    """Least squares of log y = log a - b log x: (a, b, R^2 in log space)."""
    lx, ly = x.log(), y.log()  # (K,), (K,)
    dx, dy = lx - lx.mean(), ly - ly.mean()
    slope = float((dx @ dy) / (dx @ dx))
    intercept = float(ly.mean() - slope * lx.mean())
    residual = ly - (intercept + slope * lx)
    return math.exp(intercept), -slope, _r_squared(residual, ly)


def _r_squared(residual: Tensor, y: Tensor) -> float:
    """1 - SSE / SST; 1 for a constant y, which a flat line fits exactly."""
    if bool((y == y[0]).all()):
        return 1.0
    return 1.0 - float(residual @ residual) / float(((y - y.mean()) ** 2).sum())


@dataclass(frozen=True)
class PowerLawFit:
    """y = a x^-b, fitted by least squares in log-log space."""

    a: float
    b: float  # the exponent: y falls by a factor 2^b when x doubles
    r_squared: float  # of the straight line through (log x, log y)

    def predict(self, x: float) -> float:
        check_real("x", x, 0.0, low_open=True)
        return self.a * x**-self.b


def fit_power_law(x, y) -> PowerLawFit:
    """Fit y = a x^-b: the straight line log y = log a - b log x, least squares.

    ``x`` and ``y`` are K >= 2 positive numbers each (a sequence or a 1-D tensor),
    ``x`` not all equal. R^2 measures the straight line in log-log space.
    """
    return PowerLawFit(*_log_fit(*_pair(x, y)))


@dataclass(frozen=True)
class OffsetPowerLawFit:
    """y = c + a x^-b: a power law above an irreducible floor c."""

    c: float
    a: float
    b: float
    r_squared: float  # 1 - SSE / SST, in y itself

    def predict(self, x: float) -> float:
        check_real("x", x, 0.0, low_open=True)
        return self.c + self.a * x**-self.b


def fit_power_law_offset(x, y, grid: int = 400) -> OffsetPowerLawFit:
    """Fit y = c + a x^-b with 0 <= c < min(y), by least squares in y.

    For a fixed floor c the rest is ``fit_power_law`` of y - c, so the fit is a
    one-dimensional search over c: a grid of ``grid`` floors, then a golden-section
    refinement around the best. Three parameters from a handful of points are
    poorly determined: a lower floor with a smaller exponent fits almost as well,
    so read c and b together, never b alone.
    """
    x, y = _pair(x, y)
    grid = check_int("grid", grid, minimum=3)
    top = float(y.min())

    def sse(c: float) -> float:
        a, b, _ = _log_fit(x, y - c)
        return float(((c + a * x**-b - y) ** 2).sum())

    floors = [top * i / grid for i in range(grid)]  # [0, min y)
    best = min(range(grid), key=lambda i: sse(floors[i]))
    low, high = floors[max(best - 1, 0)], top * min(best + 1, grid - 1e-6) / grid
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(60):  # golden section: the bracket shrinks by 0.618 each time
        c1, c2 = high - ratio * (high - low), low + ratio * (high - low)
        low, high = (low, c2) if sse(c1) <= sse(c2) else (c1, high)
    c = (low + high) / 2
    a, b, _ = _log_fit(x, y - c)
    residual = c + a * x**-b - y
    return OffsetPowerLawFit(c=c, a=a, b=b, r_squared=_r_squared(residual, y))


@dataclass(frozen=True)
class ScalingRow:
    """One model of ``run_scaling``."""

    d_model: int
    n_heads: int
    params: int  # N: non-embedding parameters (Kaplan et al.)
    total_params: int  # every parameter, the tied token table counted once
    tokens: int  # D: training tokens predicted
    flops: float  # C = 6 N D
    loss: float  # held-out loss, nats per token
    seconds: float  # training time on this machine


@dataclass(frozen=True)
class ScalingRun:
    """What ``run_scaling`` returns; rows from the smallest model to the largest."""

    rows: tuple[ScalingRow, ...]
    fit: PowerLawFit  # loss = a N^-b over the rows
    offset_fit: OffsetPowerLawFit  # loss = c + a N^-b
    unigram_loss: float  # the add-one unigram model's held-out loss, for scale


def run_scaling(
    seed: int = 0,
    steps: int = STEPS,
    sizes: tuple[tuple[int, int], ...] = SIZES,
    device: torch.device | str | None = None,
) -> ScalingRun:
    """Train one GPT per (d_model, n_heads) of ``sizes`` on the same batches.

    Every model: ``N_LAYERS`` blocks, d_ff = 4 d_model, max_len BLOCK_LEN, weights
    drawn after ``set_seed(seed)``; ``steps`` steps of BATCH_SIZE windows of the
    training stream (drawn once, with ``seed + 1``), AdamW at LR after WARMUP
    steps of warm-up. Then the held-out loss of each and the fits over N.
    """
    check_seed("seed", seed)
    check_int("steps", steps, minimum=1)
    if (
        not isinstance(sizes, tuple | list)
        or len({s[0] for s in sizes if isinstance(s, tuple) and s}) < 2
        or not all(
            isinstance(s, tuple) and len(s) == 2 and all(isinstance(v, int) for v in s)
            for s in sizes
        )
    ):
        raise ValueError(
            f"sizes must be at least two (d_model, n_heads) pairs with different "
            f"d_model, got {sizes!r}"
        )
    check_compute_device("device", device)
    return _run_scaling(seed, steps, sizes, device)


def _size_run(
    d_model: int, n_heads: int, windows: list[Tensor], tokens: int, seed: int, device
) -> tuple[ScalingRow, float]:
    """One size of ``run_scaling``: trained on ``windows`` (``tokens`` tokens in
    all), then its row and the unigram model's held-out loss."""
    tok = get_tokenizer()
    # model: Chapter 6's GPT, N_LAYERS blocks of width d_model
    cfg = GPTConfig(
        tok.vocab_size,
        BLOCK_LEN,
        d_model=d_model,
        n_heads=n_heads,
        n_layers=N_LAYERS,
        d_ff=4 * d_model,
    )
    # loop: one AdamW step per batch of windows, LR after WARMUP steps
    model, history = train_gpt_on_prose(cfg, windows, seed, LR, WARMUP, device)
    # measure: the held-out loss, N and the compute C = 6 N D
    ppl, unigram_ppl = heldout_perplexity(model, tok)
    n = non_embedding_parameters(model)
    row = ScalingRow(
        d_model=d_model,
        n_heads=n_heads,
        params=n,
        total_params=sum(p.numel() for p in model.parameters()),
        tokens=tokens,
        flops=training_flops(n, tokens),
        loss=math.log(ppl),
        seconds=history["seconds"],
    )
    return row, math.log(unigram_ppl)


def _run_scaling(seed: int, steps: int, sizes, device) -> ScalingRun:
    """``run_scaling`` after its checks: a GPT per size, the same batches, the fits."""
    # data: windows of Chapter 6's training stream, the same for every size
    windows = prose_windows(seed, steps, BATCH_SIZE)  # steps x (B, T)
    tokens = steps * BATCH_SIZE * (BLOCK_LEN - 1)
    # the sizes share nothing but the windows: on a CPU they train side by side, one
    # thread each, the largest first (the last to start is then the shortest)
    order = sorted(sizes, key=lambda size: -size[0])
    jobs = [(d, heads, windows, tokens, seed, device) for d, heads in order]
    results = map_runs(_size_run, jobs, device)
    rows = [row for row, _ in results]
    unigram = results[0][1]  # the same for every size
    # measure: the power laws fitted over the sizes
    rows.sort(key=lambda r: r.params)
    x, y = [r.params for r in rows], [r.loss for r in rows]
    return ScalingRun(
        rows=tuple(rows),
        fit=fit_power_law(x, y),
        offset_fit=fit_power_law_offset(x, y),
        unigram_loss=unigram,
    )


def scaling_claims(run: ScalingRun) -> dict[str, bool]:
    """The claims Chapter 8 states about ``run``, each checked (True = it holds)."""
    check_instance("run", run, ScalingRun)
    losses = [r.loss for r in run.rows]
    return {
        f"each model beats the one two sizes smaller by {SKIP_GAP} nats or more": all(
            a - b >= SKIP_GAP for a, b in zip(losses[:-2], losses[2:], strict=True)
        ),
        f"the largest beats the smallest by {LOSS_GAP} nats or more": losses[0]
        - losses[-1]
        >= LOSS_GAP,
        "the exponent b of loss = a N^-b is between "
        f"{EXPONENT_RANGE[0]} and {EXPONENT_RANGE[1]}": EXPONENT_RANGE[0]
        <= run.fit.b
        <= EXPONENT_RANGE[1],
        f"the power law fits the points (R^2 >= {R2_BOUND})": run.fit.r_squared
        >= R2_BOUND,
        "every size beats the unigram model": all(x < run.unigram_loss for x in losses),
    }
