"""Checkers for Chapter 8 (beyond text: decisions and scaling).

``check_returns_to_go(fn)``: the Decision Transformer's return-to-go.
``check_power_law_fit(fn)``: a power law fitted in log-log space.

Both exercises ask the reader to write the function, not to call the package's
(``decision.returns_to_go``, ``experiments.scaling.fit_power_law``): while a
check runs, those raise.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from .. import decision
from ..experiments import scaling
from ._checking import (
    as_real,
    call,
    checker,
    expect_shape,
    expect_unchanged,
    expect_values,
    forbidden,
    matches,
)

__all__ = ["check_returns_to_go", "check_power_law_fit"]


# -- Exercise: returns-to-go ------------------------------------------------------


def _rtg(rewards: Tensor, gamma: float, mistake: str | None = None) -> Tensor:
    """R_t in float64, written as a sum with explicit exponents; ``mistake``
    reproduces a common error."""
    r = rewards.double()
    t = torch.arange(r.shape[-1], dtype=torch.float64)
    later = t[None, :] - t[:, None]  # (T, T): t' - t
    exponent = later
    keep = later >= 0  # t' >= t
    if mistake == "forward":
        keep, exponent = later <= 0, -later  # the rewards up to t
    elif mistake == "exclusive":
        keep = later >= 1  # t' > t
    elif mistake == "from_start":
        exponent = t[None, :].expand_as(later)  # gamma^t', counted from step 0
    elif mistake == "discount_r_t":
        exponent = later + 1  # gamma^(t' - t + 1)
    elif mistake == "no_gamma":
        exponent = torch.zeros_like(later)
    weights = torch.where(keep, torch.tensor(gamma, dtype=torch.float64) ** exponent, 0)
    if mistake == "total":
        weights = torch.ones_like(weights)
    return r @ weights.T  # (..., T) @ (T, T)


RTG_CASES = [
    ("a batch of 0/1 rewards, gamma = 1", (4, 7), 1.0, "binary"),
    ("a batch of real rewards, gamma = 1", (3, 9), 1.0, "real"),
    ("gamma = 0.9", (3, 6), 0.9, "real"),
    ("gamma = 0.5", (2, 5), 0.5, "real"),
    ("gamma = 0 (only r_t counts)", (2, 4), 0.0, "real"),
    ("one step (T = 1)", (3, 1), 0.9, "real"),
    ("one trajectory (B = 1)", (1, 8), 1.0, "real"),
]

_RTG_CLUES = (
    (
        "forward",
        "the sum runs the wrong way: R_t adds the rewards from step t to the end of "
        "the episode, not those from the start up to t",
    ),
    (
        "exclusive",
        "off by one: R_t includes r_t itself, the reward of step t",
    ),
    (
        "total",
        "every step gets the whole episode's return: R_t leaves out the rewards "
        "already received before step t",
    ),
    (
        "from_start",
        "the discount counts from the start of the episode: at step t a reward k "
        "steps later is discounted by gamma^k",
    ),
    ("discount_r_t", "r_t itself is not discounted (gamma^0 = 1)"),
    ("no_gamma", "gamma is ignored: later rewards must be discounted"),
)


def _rewards(shape: tuple[int, int], kind: str) -> Tensor:
    gen = torch.Generator().manual_seed(sum(shape) + len(kind))
    if kind == "binary":
        return (torch.rand(shape, generator=gen) < 0.5).float()
    return torch.rand(shape, generator=gen) * 2 - 0.5  # some negative rewards


def _diagnose_rtg(got, rewards: Tensor, gamma: float, where: str) -> None:
    expected = _rtg(rewards, gamma)
    if matches(got, expected):
        return
    if isinstance(got, Tensor) and got.shape == rewards.shape:
        if rewards.shape[0] > 1 and matches(got, _rtg(rewards.T, gamma).T):
            raise AssertionError(
                f"for {where}, the sum runs over the batch axis: time is the last axis"
            )
        for mistake, message in _RTG_CLUES:
            if matches(got, _rtg(rewards, gamma, mistake)):
                raise AssertionError(f"for {where}, {message}")
    expect_shape(got, tuple(rewards.shape), f"the returns-to-go for {where}")
    raise AssertionError(
        f"for {where}, the returns-to-go are wrong: R_t = sum over t' >= t of "
        "gamma^(t' - t) r_t'"
    )


@checker("returns_to_go")
def check_returns_to_go(fn: Callable) -> None:
    """``fn(rewards, gamma=1.0)`` -> R of the shape of ``rewards`` (B, T).

    R_t = sum_{t' >= t} gamma^(t' - t) r_t', along the last axis. Checked on
    binary and real rewards, several gammas, T = 1 and B = 1, in float32 and
    float64, and on a batch whose rows must not mix; for gamma = 1 it is called
    without gamma, as the statement's default allows.
    """
    with forbidden(decision, "returns_to_go", reader=fn):
        for where, shape, gamma, kind in RTG_CASES:
            for dtype in (torch.float32, torch.float64):
                rewards = _rewards(shape, kind).to(dtype)
                given = rewards.clone()
                # As the statement calls it: gamma = 1 is the default.
                omit = gamma == 1.0 and dtype == torch.float32
                got = call(fn, given) if omit else call(fn, given, gamma=gamma)
                expect_unchanged(given, rewards, "rewards")
                if omit and not matches(got, _rtg(rewards, 1.0)):
                    explicit = call(fn, rewards.clone(), gamma=1.0)
                    if matches(explicit, _rtg(rewards, 1.0)):
                        raise AssertionError(
                            f"for {where}, called as rtg(rewards), without gamma, "
                            "your function does not compute the undiscounted "
                            "return: gamma defaults to 1.0, as in the statement"
                        )
                _diagnose_rtg(got, rewards, gamma, where)


# -- Exercise: fitting a power law ------------------------------------------------


def _fit(x: Tensor, y: Tensor) -> tuple[float, float]:
    """(a, b) of y = a x^-b by least squares in log-log space, in float64."""
    lx, ly = x.double().log(), y.double().log()
    dx = lx - lx.mean()
    slope = float(dx @ (ly - ly.mean()) / (dx @ dx))
    return math.exp(float(ly.mean() - slope * lx.mean())), -slope


def _power_law_cases() -> list[tuple[str, Tensor, Tensor]]:
    x = torch.tensor([1e3, 4e3, 1.6e4, 6.4e4, 2.56e5], dtype=torch.float64)
    gen = torch.Generator().manual_seed(8)
    noise = torch.exp(0.05 * torch.randn(5, generator=gen, dtype=torch.float64))
    uneven = torch.tensor([2.0, 3.0, 10.0, 50.0], dtype=torch.float64)
    return [
        ("an exact power law, y = 3 x^-0.5", x, 3.0 * x**-0.5),
        ("losses like a scaling experiment's", x, 12.0 * x**-0.08 * noise),
        ("a rising curve (b < 0)", uneven, 0.7 * uneven**0.3),
        ("noisy points", uneven, torch.tensor([5.0, 4.1, 3.3, 2.0]).double()),
    ]


def _as_pair(got, where: str) -> tuple[float, float]:
    a, b = expect_values(got, 2, "the two numbers (a, b)", where)
    return as_real(a, f"for {where}, a"), as_real(b, f"for {where}, b")


def _close(u: float, v: float) -> bool:
    return math.isclose(u, v, rel_tol=1e-4, abs_tol=1e-7)


def _diagnose_fit(got, x: Tensor, y: Tensor, where: str) -> None:
    a, b = _as_pair(got, where)
    a_exp, b_exp = _fit(x, y)
    if _close(a, a_exp) and _close(b, b_exp):
        return
    if _close(b, -b_exp) and b_exp != 0:
        raise AssertionError(
            f"for {where}, b has the wrong sign: the law is y = a x^-b, so a "
            "falling curve has b > 0"
        )
    if _close(a, b_exp) and _close(b, a_exp):
        raise AssertionError(f"for {where}, a and b are swapped: return (a, b)")
    if _close(b, b_exp):
        hint = (
            "it looks like log a: undo the logarithm"
            if _close(a, math.log(a_exp))
            else "it must undo the logarithm of the intercept, in the same base"
        )
        raise AssertionError(f"for {where}, b is right but a is wrong: {hint}")
    a_yx, b_yx = _fit(y, x)
    if (b_exp != 0 and _close(b, 1 / b_exp)) or _close(b, b_yx):
        raise AssertionError(
            f"for {where}, the regression is of log x on log y: the fitted line "
            "predicts log y from log x"
        )
    raise AssertionError(
        f"for {where}, (a, b) is not the least-squares line through "
        "(log x, log y): fit log y = log a - b log x"
    )


@checker("power_law_fit")
def check_power_law_fit(fn: Callable) -> None:
    """``fn(x, y)`` -> (a, b) of y = a x^-b, least squares in log-log space.

    ``x`` and ``y`` are 1-D float64 tensors of positive values. Checked on an
    exact power law, scaling-like losses with noise, a rising curve and noisy
    points.
    """
    with (
        forbidden(scaling, "fit_power_law", reader=fn),
        forbidden(scaling, "_log_fit", "the package's fit_power_law", fn),
    ):
        for where, x, y in _power_law_cases():
            given_x, given_y = x.clone(), y.clone()
            got = call(fn, given_x, given_y)
            expect_unchanged(given_x, x, "x")
            expect_unchanged(given_y, y, "y")
            _diagnose_fit(got, x, y, where)
