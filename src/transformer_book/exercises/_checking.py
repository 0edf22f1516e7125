"""What every exercise checker shares.

A checker runs the reader's function on a few cases and reports in one of three
ways: "not attempted yet" when the stub still raises ``NotImplementedError``; an
``AssertionError`` naming what is wrong (shape, mask, scaling...) without giving
the solution away, when the function crashes or answers wrongly; one line of
success otherwise.

Checkers hold to three rules. A right answer in another floating dtype (float64)
passes: comparisons go through :func:`matches`. The reader's function gets copies
of the inputs, and :func:`expect_unchanged` reports a modification in place as
such, so that it is not mistaken for another error. "Do not use X" is enforced
with :func:`forbidden`.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator

import torch
from torch import Tensor

__all__ = [
    "checker",
    "call",
    "expect_shape",
    "expect_close",
    "expect_unchanged",
    "forbidden",
    "matches",
    "seeded",
    "NotAttempted",
]


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


def matches(actual, expected: Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Whether ``actual`` is a tensor of ``expected``'s shape and values, any dtype.

    Both are compared in float64, so a float64 answer is judged by its values (and
    ``torch.allclose`` does not fail on mixed dtypes); NaN matches nothing.
    """
    if not isinstance(actual, Tensor) or actual.shape != expected.shape:
        return False
    if actual.is_complex():
        return False
    a, b = actual.detach().double(), expected.detach().double()
    return torch.allclose(a, b, atol=atol, rtol=rtol)


def expect_unchanged(given, original, what: str) -> None:
    """The reader's function received ``given``, a copy of ``original``."""
    if isinstance(original, Tensor):
        same = given.dtype == original.dtype and torch.equal(given, original)
    else:  # an nn.Module: its parameters and buffers
        before, after = original, given.state_dict()
        same = before.keys() == after.keys() and all(
            after[k].dtype == v.dtype and torch.equal(after[k], v)
            for k, v in before.items()
        )
    if not same:
        raise AssertionError(f"your function modified {what} in place; work on a copy")


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed the global generator for a checker's own draws (a module's initial
    weights), and give the reader's generator its state back afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _is_checker(module) -> bool:
    return getattr(module, "__name__", "").startswith(__package__ + ".")


@contextlib.contextmanager
def forbidden(
    owner, name: str, what: str | None = None, reader: Callable | None = None
) -> Iterator[None]:
    """While checking, ``owner.name`` refuses to run, wherever it was imported.

    For the exercises that say "do not use X": X is swapped, in ``owner`` (a
    module or a class) and in every loaded module that holds the same object (the
    reader's notebook among them), for a function that raises an AssertionError
    naming ``what`` (default: the package's ``name``). So is every name bound to
    it in the globals of ``reader``, the reader's function (``from torch.nn import
    RNNCell as Cell`` included). The checkers' own modules keep theirs, to compute
    the expected answers.
    """
    original = getattr(owner, name)
    what = what or f"the package's {name}"

    def refuse(*args, **kwargs):
        raise AssertionError(
            f"the exercise asks you to write this yourself, without calling {what}"
        )

    own = name in vars(owner)
    holders = [
        (vars(m), name)
        for m in list(sys.modules.values())
        if m is not owner
        and not _is_checker(m)
        and getattr(m, "__dict__", {}).get(name) is original
    ]
    namespace = getattr(reader, "__globals__", {})
    holders += [(namespace, k) for k, v in namespace.items() if v is original]
    setattr(owner, name, refuse)
    for namespace, key in holders:
        namespace[key] = refuse
    try:
        yield
    finally:
        for namespace, key in holders:
            namespace[key] = original
        if own:
            setattr(owner, name, original)
        else:  # it was inherited: remove the stand-in
            delattr(owner, name)
