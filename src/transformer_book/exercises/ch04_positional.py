"""Checkers for Chapter 4 (positional encodings)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..positional import alibi_slopes, apply_rope
from ._checking import as_numbers, call, checker, expect_shape, expect_unchanged

__all__ = ["check_sinusoidal_table", "check_rope", "check_alibi_slopes"]


def _as_float_tensor(x, what: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise AssertionError(f"{what} should be a tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise AssertionError(f"{what} should hold floats, got {x.dtype}")
    return x.float()


def _sinusoidal(positions: torch.Tensor, d_model: int, base: float) -> torch.Tensor:
    omega = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angle = positions.double()[:, None] * omega  # (T, D/2)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1).float()


@checker("sinusoidal_table")
def check_sinusoidal_table(fn: Callable) -> None:
    """``fn(positions, d_model, base=10000.0)`` returns the (T, d_model) table."""
    cases = [
        (torch.arange(6), 4, None),
        (torch.arange(100, 150), 16, None),
        (torch.tensor([0.5, 2.25, 7.0]), 8, None),
        (torch.arange(10), 8, 100.0),
    ]
    for positions, d_model, base in cases:
        what = f"the table for positions {_describe(positions)}, d_model={d_model}"
        kwargs = {}
        if base is not None:
            what += f", base={base:g}"
            kwargs["base"] = base
        given = positions.clone()
        pe = call(fn, given, d_model, **kwargs)
        expect_unchanged(given, positions, "positions")
        expect_shape(pe, (len(positions), d_model), what)
        pe = _as_float_tensor(pe, what)
        base = 10000.0 if base is None else base
        expected = _sinusoidal(positions, d_model, base)
        if torch.allclose(pe, expected, atol=1e-4):
            continue
        if torch.allclose(pe, _sinusoidal(torch.arange(len(positions)), d_model, base),
                          atol=1e-4):  # fmt: skip
            raise AssertionError(
                f"{what}: row r should encode positions[r], not r; use the values"
            )
        if positions.is_floating_point() and any(
            torch.allclose(pe, _sinusoidal(whole, d_model, base), atol=1e-4)
            for whole in (positions.trunc(), positions.round())
        ):
            raise AssertionError(
                f"{what}: the positions lost their fractional part (0.5 became a "
                "whole number); keep them as floats"
            )
        if base != 10000.0 and torch.allclose(
            pe, _sinusoidal(positions, d_model, 10000.0), atol=1e-4
        ):
            raise AssertionError(f"{what}: the base argument is ignored")
        if torch.allclose(pe[:, 0::2], expected[:, 1::2], atol=1e-4):
            raise AssertionError(
                f"{what}: sin and cos are swapped; sin goes in the even columns 2i"
            )
        halves = torch.cat([expected[:, 0::2], expected[:, 1::2]], dim=1)
        if torch.allclose(pe, halves, atol=1e-4):
            raise AssertionError(
                f"{what}: the sines and cosines should interleave (columns 2i and "
                "2i+1), not fill the two halves"
            )
        if not torch.allclose(
            pe[:, 0::2].pow(2) + pe[:, 1::2].pow(2), torch.ones(1), atol=1e-4
        ):
            raise AssertionError(
                f"{what}: columns 2i and 2i+1 should be the sin and cos of the same "
                "angle (sin² + cos² = 1)"
            )
        raise AssertionError(
            f"{what}: the frequencies are wrong; pair i turns at "
            "base^(-2i / d_model) radians per position (largest error "
            f"{(pe - expected).abs().max().item():.3g})"
        )


def _describe(positions: torch.Tensor) -> str:
    values = positions.tolist()
    if len(values) <= 4:
        return str(values)
    return f"[{values[0]:g}, {values[1]:g}, ..., {values[-1]:g}]"


@checker("rope")
def check_rope(fn: Callable) -> None:
    """``fn(x, positions)`` turns pairs (x[2i], x[2i+1]) by position · θ_i."""
    gen = torch.Generator().manual_seed(4)
    positions = torch.tensor([0, 1, 2, 7, 30])
    for shape in ((2, 5, 8), (2, 3, 5, 8)):  # (B, T, D), (B, H, T, D)
        _check_rope_once(fn, torch.randn(shape, generator=gen), positions)

    q, k = torch.randn(1, 8, generator=gen), torch.randn(1, 8, generator=gen)
    scores = []
    for m in (3, 10, 100):
        rq = _as_float_tensor(call(fn, q.clone(), torch.tensor([m])), "rope(q)")
        rk = _as_float_tensor(call(fn, k.clone(), torch.tensor([m - 2])), "rope(k)")
        scores.append((rq @ rk.T).item())
    if max(scores) - min(scores) > 1e-3:
        raise AssertionError(
            "q·k at positions (m, m-2) changes with m; it should depend only on "
            "the offset"
        )


def _check_rope_once(fn: Callable, x: torch.Tensor, positions: torch.Tensor) -> None:
    what = f"the rotated x of shape {tuple(x.shape)}"
    given, given_positions = x.clone(), positions.clone()
    try:
        out = call(fn, given, given_positions)
    except AssertionError as err:
        raise AssertionError(f"for x of shape {tuple(x.shape)}: {err}") from None
    expect_unchanged(given, x, "x")
    expect_unchanged(given_positions, positions, "positions")
    expect_shape(out, tuple(x.shape), what)
    out = _as_float_tensor(out, what)
    expected = apply_rope(x, positions)
    d = x.shape[-1]
    pairs = torch.stack([torch.arange(d // 2), torch.arange(d // 2, d)], -1).flatten()
    if torch.allclose(out, expected, atol=1e-4):
        return
    if torch.allclose(out[..., pairs], expected, atol=1e-4):
        raise AssertionError(
            f"{what}: the pairs are rotated right but written back as two halves "
            "(all first elements, then all second ones); put each pair back in "
            "place, at 2i and 2i+1"
        )
    if not torch.allclose(out.norm(dim=-1), x.norm(dim=-1), atol=1e-4):
        raise AssertionError(
            f"{what}: the length of each vector changed; a rotation keeps it"
        )
    if torch.allclose(out, apply_rope(x, -positions), atol=1e-4):
        raise AssertionError(
            f"{what}: the pairs turn the wrong way; (x0, x1) goes to "
            "(x0·cos - x1·sin, x0·sin + x1·cos)"
        )
    neox = torch.empty_like(x)  # pairs (i, i + D/2)
    neox[..., pairs] = apply_rope(x[..., pairs], positions)
    if torch.allclose(out, neox, atol=1e-4):
        raise AssertionError(
            f"{what}: you paired dimension i with i + D/2 (GPT-NeoX's layout); "
            "this exercise pairs neighbours 2i and 2i+1"
        )
    if not torch.allclose(out[..., 0, :], x[..., 0, :], atol=1e-5):
        raise AssertionError(f"{what}: position 0 must leave the vector unchanged")
    raise AssertionError(
        f"{what}: the angles are wrong; pair i turns by position · "
        f"10000^(-2i/D) (largest error {(out - expected).abs().max().item():.3g})"
    )


@checker("alibi_slopes")
def check_alibi_slopes(fn: Callable) -> None:
    """``fn(n_heads)`` returns the (n_heads,) ALiBi slopes, any n_heads.

    In the paper's order: for a power of two n, steepest first; otherwise the c
    slopes of the largest power of two c < n, then the n - c extra ones (so the
    list as a whole is not sorted).
    """
    for n in (8, 4, 16, 1, 6, 12, 20):
        what = f"the slopes for n_heads={n}"
        slopes = call(fn, n)
        if isinstance(slopes, (list, tuple)):
            slopes = torch.tensor(as_numbers(slopes, what), dtype=torch.float64)
        expect_shape(slopes, (n,), what)
        slopes = _as_float_tensor(slopes, what)
        expected = alibi_slopes(n)
        if torch.allclose(slopes, expected, rtol=1e-4, atol=1e-7):
            continue
        power_of_two = math.log2(n) % 1 == 0
        if torch.allclose(slopes, expected.flip(0), rtol=1e-4, atol=1e-7):
            first = (
                "the steepest slope"
                if power_of_two
                else "the slopes for the largest power of two below n"
            )
            raise AssertionError(f"{what} are in reverse order; start with {first}")
        if not power_of_two:
            c = 2 ** math.floor(math.log2(n))
            sorted_slopes = expected.sort(descending=True).values
            if torch.allclose(slopes, sorted_slopes, rtol=1e-4, atol=1e-7):
                raise AssertionError(
                    f"{what} are the right values sorted steepest first; keep the "
                    f"paper's order: the {c} slopes for {c} heads, then the "
                    f"{n - c} extra ones"
                )
            first_ones = alibi_slopes(2 * c)[: n - c]
            if torch.allclose(slopes[c:], first_ones, rtol=1e-4, atol=1e-7):
                raise AssertionError(
                    f"{what}: the {n - c} extra slopes should be every other slope "
                    f"(the 1st, 3rd, ...) of the {2 * c}-head list, not its first "
                    f"{n - c}"
                )
        naive = torch.tensor([2.0 ** (-8.0 * (i + 1) / n) for i in range(n)])
        if not power_of_two and torch.allclose(slopes, naive, rtol=1e-4):
            raise AssertionError(
                f"{what}: 2^(-8k/n) is right only when n is a power of two; "
                "otherwise follow the paper's rule for other head counts"
            )
        raise AssertionError(
            f"{what} are wrong (largest error "
            f"{(slopes - expected).abs().max().item():.3g})"
        )
