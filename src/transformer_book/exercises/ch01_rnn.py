"""Checkers for Chapter 1 (why Transformers: the limits of RNNs)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from .. import recurrent
from ._checking import (
    as_real,
    call,
    checker,
    expect_close,
    expect_shape,
    expect_unchanged,
    forbidden,
    matches,
    seeded,
)

__all__ = ["check_rnn_step", "check_gradient_ratio", "check_spectral_radius"]


def _close(a: float, b: float, rel: float = 1e-4) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


@checker("rnn_step")
def check_rnn_step(fn: Callable) -> None:
    """``fn(x_t, h_prev, W_ih, W_hh, b)`` = tanh(x_t W_ih^T + h_prev W_hh^T + b).

    Without ``nn.RNNCell`` or the package's ``rnn_step``: while it runs, they raise.
    """
    gen = torch.Generator().manual_seed(11)
    for B, D, H in ((2, 3, 3), (3, 4, 5), (1, 6, 2)):  # D = H: W_ih^T fits too
        x = torch.randn(B, D, generator=gen)
        h = torch.randn(B, H, generator=gen)
        w_ih = torch.randn(H, D, generator=gen) / math.sqrt(D)
        w_hh = torch.randn(H, H, generator=gen) / math.sqrt(H)
        b = torch.randn(H, generator=gen)
        with seeded(0):
            cell = nn.RNNCell(D, H)
        with torch.no_grad():
            cell.weight_ih.copy_(w_ih)
            cell.weight_hh.copy_(w_hh)
            cell.bias_ih.copy_(b)
            cell.bias_hh.zero_()
            expected = cell(x, h)
        z = x @ w_ih.T + h @ w_hh.T + b  # (B, H)
        mistakes = (
            (z, "h_t is not squashed: apply tanh to the sum"),
            (
                torch.tanh(x @ w_ih.T + b),
                "h_t does not depend on h_prev: the previous state must enter "
                "through W_hh",
            ),
            (
                torch.tanh(x @ w_ih.T + h @ w_hh + b),
                "W_hh is applied transposed: like nn.RNNCell, W_hh[i, j] maps unit "
                "j of h_prev to unit i of h_t",
            ),
            (
                torch.tanh(x @ w_ih + h @ w_hh.T + b) if D == H else None,
                "W_ih is applied transposed: like nn.RNNCell, W_ih[i, j] maps "
                "feature j of x_t to unit i of h_t",
            ),
            (torch.tanh(x @ w_ih.T + h @ w_hh.T), "the bias b is missing"),
        )
        inputs = {"x_t": x, "h_prev": h, "W_ih": w_ih, "W_hh": w_hh, "b": b}
        given = {name: t.clone() for name, t in inputs.items()}
        with (
            forbidden(nn, "RNNCell", "nn.RNNCell", reader=fn),
            forbidden(recurrent, "rnn_step", reader=fn),
        ):
            out = call(fn, *given.values())
        for name, t in inputs.items():
            expect_unchanged(given[name], t, name)
        shapes = f"x_t {(B, D)}, h_prev {(B, H)}, W_ih {(H, D)}, W_hh {(H, H)}"
        expect_shape(out, (B, H), f"h_t for {shapes}")
        for wrong, message in mistakes:
            if wrong is not None and matches(out, wrong):
                raise AssertionError(message)
        expect_close(out, expected, f"h_t for {shapes}")


def _reference_ratio(rnn: nn.RNN, x: Tensor) -> float:
    x = x.clone().requires_grad_(True)
    _, h_last = rnn(x)
    (grad,) = torch.autograd.grad(h_last.sum(), x)  # (B, T, D)
    return (grad[:, 0].norm() / grad[:, -1].norm()).item()


def _all_outputs_ratio(rnn: nn.RNN, x: Tensor) -> float:
    x = x.clone().requires_grad_(True)
    outputs, _ = rnn(x)
    (grad,) = torch.autograd.grad(outputs.sum(), x)
    return (grad[:, 0].norm() / grad[:, -1].norm()).item()


@checker("gradient_ratio")
def check_gradient_ratio(fn: Callable) -> None:
    """``fn(rnn, x)`` returns ||dL/dx_0|| / ||dL/dx_{T-1}||, L = sum of h_T."""
    for seed, radius in ((12, 0.5), (13, 3.0)):
        with seeded(seed):
            rnn = nn.RNN(3, 6, batch_first=True).double()
            x = torch.randn(4, 12, 3, dtype=torch.float64)
        with torch.no_grad():
            w = rnn.weight_hh_l0
            w.mul_(radius / torch.linalg.eigvals(w).abs().max())
        expected = _reference_ratio(rnn, x)
        all_outputs = _all_outputs_ratio(rnn, x)
        weights = {k: v.clone() for k, v in rnn.state_dict().items()}
        given = x.clone()
        got = call(fn, rnn, given)
        expect_unchanged(given, x, "x")
        expect_unchanged(rnn, weights, "the rnn (its weights or their dtype)")
        got = as_real(got, f"the ratio for radius {radius}")
        if _close(got, 1.0 / expected):
            raise AssertionError(
                "the ratio is upside down: divide the gradient norm at the farthest "
                "step x_0 by the one at the nearest step x_{T-1}"
            )
        if _close(got, all_outputs):
            raise AssertionError(
                "the loss sums every step's output; use only the last hidden state h_T"
            )
        if _close(got, expected**2):
            raise AssertionError(
                "the norms are squared: use the norms themselves (torch.linalg.norm)"
            )
        if not _close(got, expected):
            raise AssertionError(
                f"the ratio for an RNN with spectral radius {radius} is wrong "
                f"(got {got:.4g}): both norms are over the whole (B, D) slice of "
                "dL/dx at one time step"
            )


@checker("spectral_radius")
def check_spectral_radius(fn: Callable) -> None:
    """``fn(W)`` returns max |eigenvalue| of the square matrix W as a number."""
    cases = (
        (torch.diag(torch.tensor([0.5, -2.0])), 2.0, "a negative eigenvalue"),
        (
            torch.tensor([[0.0, -0.9], [0.9, 0.0]]),
            0.9,
            "complex eigenvalues +-0.9i (a rotation)",
        ),
        (torch.tensor([[0.5, 10.0], [0.0, 0.5]]), 0.5, "a shear, with norm about 10"),
    )
    for w, expected, what in cases:
        got = as_real(_call_on_copy(fn, w), f"the spectral radius for {what}")
        if _close(got, torch.linalg.matrix_norm(w, 2).item(), 1e-3) and not _close(
            got, expected, 1e-3
        ):
            raise AssertionError(
                "that is the largest singular value (the norm ||W||_2), not the "
                "largest |eigenvalue|; they differ when W is not symmetric"
            )
        if not _close(got, expected, 1e-4):
            hint = (
                "take the modulus |lambda|: eigenvalues may be negative or complex"
                if expected in (2.0, 0.9)
                else "compute the eigenvalues of W"
            )
            raise AssertionError(
                f"the spectral radius for {what} should be {expected}, got "
                f"{got:.4g}: {hint}"
            )
    w = torch.randn(8, 8, generator=torch.Generator().manual_seed(14))
    expected = torch.linalg.eigvals(w).abs().max().item()
    got = as_real(_call_on_copy(fn, w), "the spectral radius of a random 8 x 8 matrix")
    if any(
        _close(got, torch.linalg.eigvalsh(w, UPLO=t).abs().max().item(), 1e-4)
        for t in ("L", "U")
    ):
        raise AssertionError(
            "that is the spectral radius of a symmetric matrix made from one "
            "triangle of W: eigvalsh assumes W is symmetric, and it is not"
        )
    if not _close(got, expected, 1e-4):
        raise AssertionError(
            f"the spectral radius of a random 8 x 8 matrix is wrong (got {got:.4g})"
        )


def _call_on_copy(fn: Callable, w: Tensor):
    given = w.clone()
    result = call(fn, given)
    expect_unchanged(given, w, "W")
    return result
