"""What every exercise checker shares.

A checker runs the reader's function on a few cases and reports in one of three
ways: "not attempted yet" when the stub still raises ``NotImplementedError``; an
``AssertionError`` naming what is wrong (shape, mask, scaling...) without giving
the solution away, when the function crashes or answers wrongly; one line of
success otherwise.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["checker", "call", "expect_shape", "expect_close", "NotAttempted"]


class NotAttempted(Exception):
    """The reader's function still raises ``NotImplementedError``."""


def call(fn: Callable, *args, **kwargs):
    """Call the reader's function, turning its crash into a readable AssertionError."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise NotAttempted from None
    except AssertionError:
        raise
    except Exception as err:  # any crash of the reader's code is a failed check
        raise AssertionError(
            f"your function raised {type(err).__name__}: {err}"
        ) from err


def checker(name: str) -> Callable:
    """Decorate ``check(fn)``: run it and print the verdict (it raises on failure)."""

    def decorate(check: Callable[[Callable], None]) -> Callable[[Callable], None]:
        @functools.wraps(check)
        def run(fn: Callable) -> None:
            # Returns None, so that a notebook cell shows only the printed verdict.
            try:
                check(fn)
            except NotAttempted:
                print(
                    f"{name}: not attempted yet. Replace `raise NotImplementedError` "
                    "with your code and run the cell again."
                )
                return
            print(f"{name}: all checks passed.")

        return run

    return decorate


def expect_shape(x, shape: tuple[int, ...], what: str) -> None:
    if not isinstance(x, Tensor):
        raise AssertionError(f"{what} should be a tensor, got {type(x).__name__}")
    if tuple(x.shape) != tuple(shape):
        raise AssertionError(
            f"{what} has shape {tuple(x.shape)}, expected {tuple(shape)}"
        )


def expect_close(
    actual: Tensor, expected: Tensor, what: str, atol: float = 1e-5, rtol: float = 1e-4
) -> None:
    expect_shape(actual, tuple(expected.shape), what)
    if torch.isnan(actual.float()).any() and not torch.isnan(expected.float()).any():
        raise AssertionError(f"{what} contains NaN")
    if not torch.allclose(actual.float(), expected.float(), atol=atol, rtol=rtol):
        err = (actual.float() - expected.float()).abs().max().item()
        raise AssertionError(f"{what} is wrong (largest error {err:.3g})")
