"""What every exercise checker shares.

A checker runs the reader's function on a few cases and reports in one of three
ways: "not attempted yet" when the stub still raises ``NotImplementedError``; an
``AssertionError`` naming what is wrong (shape, mask, scaling...) without giving
the solution away, when the function crashes or answers wrongly; one line of
success otherwise.

Checkers hold to four rules. A right answer in another floating dtype (float64)
passes: comparisons go through :func:`matches`. A function asked for several
values, "(inputs, labels)", may return them as any tuple or list (a named tuple
too) of that length: :func:`expect_values` unpacks it, and reports another type or
length. The reader's function gets copies of the inputs, and
:func:`expect_unchanged` reports a modification in place as such, so that it is
not mistaken for another error. "Do not use X" is enforced with :func:`forbidden`:
X refuses to run while the check does, and a function that is X under another
name (``fn = package.X``, a lambda, ``functools.partial`` or ``functools.wraps``
around it) is refused before it runs (:func:`runs_original`).

An answer that is a number goes through :func:`expect_number` (the right value
within a stated tolerance; each classic mistake named), a yes-or-no answer
through :func:`expect_bool`; their stub is ``...``. A ``None``, from the reader's
function or as an answer, is a forgotten ``return`` and is reported as one, not
as "not attempted" (:func:`call`, :func:`attempted`).
"""

from __future__ import annotations

import contextlib
import dis
import functools
import math
import numbers
import sys
from collections.abc import Callable, Iterator, Mapping

import torch
from torch import Tensor

__all__ = [
    "checker",
    "TODO_NUMBERS",
    "call",
    "expect_shape",
    "expect_close",
    "expect_unchanged",
    "expect_values",
    "as_number",
    "as_list",
    "as_numbers",
    "as_real",
    "attempted",
    "shown_keys",
    "expect_number",
    "expect_bool",
    "forbidden",
    "matches",
    "runs_original",
    "seeded",
    "NotAttempted",
]


class NotAttempted(Exception):
    """The reader's function still raises ``NotImplementedError``."""


FORGOT_RETURN = "did you forget `return`?"


def call(fn: Callable, *args, **kwargs):
    """Call the reader's function, turning its crash into a readable AssertionError.

    No exercise asks for a function that returns ``None``: a ``None`` is a
    forgotten ``return``, and is reported as such (not as "not attempted").
    """
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError:
        raise NotAttempted from None
    except AssertionError:
        raise
    except Exception as err:  # any crash of the reader's code is a failed check
        raise AssertionError(
            f"your function raised {type(err).__name__}: {err}"
        ) from err
    if result is None:
        raise AssertionError(f"your function returned nothing ({FORGOT_RETURN})")
    return result


def attempted(answer, what: str):
    """``answer`` itself; NotAttempted for the stub's ``...``, an AssertionError
    for ``None`` (what a function without ``return`` gives)."""
    if answer is ...:
        raise NotAttempted
    if answer is None:
        raise AssertionError(f"{what} is None: nothing was returned ({FORGOT_RETURN})")
    return answer


TODO_CODE = "Replace `raise NotImplementedError` with your code"
TODO_NUMBERS = "Replace each `...` with your number"


def checker(name: str, todo: str = TODO_CODE) -> Callable:
    """Decorate ``check(fn)`` or ``check(*answers)``: run it and print the verdict
    (it raises on failure); ``todo`` is what "not attempted yet" asks for."""

    def decorate(check: Callable[[Callable], None]) -> Callable[[Callable], None]:
        @functools.wraps(check)
        def run(*answers, **named) -> None:
            # Returns None, so that a notebook cell shows only the printed verdict.
            given = [*answers, *named.values()]
            fn = given[0] if given else None
            if todo == TODO_CODE and not callable(fn):  # a slip, not a wrong answer
                raise TypeError(
                    f"fn must be your function (callable), got {type(fn).__name__}"
                )
            try:
                check(*answers, **named)
            except NotAttempted:
                print(f"{name}: not attempted yet.\n{todo} and run the cell again.")
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
    if actual.is_complex():
        raise AssertionError(
            f"{what} should be real, got dtype {actual.dtype} (complex)"
        )
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


def expect_values(result, n: int, what: str, where: str = "") -> tuple:
    """``result`` as a tuple of ``n`` values: a tuple or a list of that length.

    ``what`` names the values, as the statement does: "(inputs, labels)";
    ``where``, if given, the case.
    """
    if isinstance(result, tuple | list) and len(result) == n:
        return tuple(result)
    got = (
        f"a {type(result).__name__} of {len(result)}"
        if isinstance(result, tuple | list)
        else f"a {type(result).__name__}"
    )
    prefix = f"for {where}, " if where else ""
    raise AssertionError(
        f"{prefix}return {what}, in order (a tuple or a list); got {got}"
    )


def as_real(value, what: str) -> float:
    """``value`` as a finite float: a Python or NumPy number, or a one-element
    tensor or array; an AssertionError naming ``what`` for anything else (a bool,
    a string, a complex number, NaN, or a number past the float range)."""
    if hasattr(value, "shape") and hasattr(value, "item"):  # a tensor or an array
        if math.prod(value.shape) != 1:
            raise AssertionError(
                f"{what} should be a number (one number), got a "
                f"{type(value).__name__} of shape {tuple(value.shape)}"
            )
        value = value.item()
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        raise AssertionError(
            f"{what} should be a real number, got the complex number {value}"
        )
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise AssertionError(f"{what} should be a number, got {type(value).__name__}")
    try:
        value = float(value)
    except OverflowError:  # an int past 1.8e308
        raise AssertionError(
            f"{what} should be a finite number, got one too large for a float"
        ) from None
    if not math.isfinite(value):
        raise AssertionError(f"{what} should be a finite number, got {value}")
    return value


def as_number(answer, what: str) -> float:
    """``answer`` as a finite float (:func:`as_real`); the stub's ``...`` means
    "not attempted yet", ``None`` a forgotten ``return``."""
    return as_real(attempted(answer, what), what)


def as_numbers(values, what: str, n: int | None = None) -> list[float]:
    """``values`` as a list of finite floats: a list, a tuple, or a 1-D tensor or
    NumPy array, of ``n`` numbers if given."""
    given = attempted(values, what)
    values = as_list(given)
    if values is None:
        shape = getattr(given, "shape", None)
        raise AssertionError(
            f"{what} should be a list of numbers, got a {type(given).__name__}"
            + (f" of shape {tuple(shape)}" if shape is not None else "")
        )
    if n is not None and len(values) != n:
        raise AssertionError(f"{what} should hold {n} numbers, got {len(values)}")
    return [as_real(v, f"{what}[{i}]") for i, v in enumerate(values)]


def as_list(values) -> list | None:
    """``values`` as a list if it is a list, a tuple, or a 1-D tensor or NumPy
    array (their elements as Python numbers); None otherwise."""
    if isinstance(values, list | tuple):
        return list(values)
    shape = getattr(values, "shape", None)
    if shape is not None and hasattr(values, "tolist") and len(shape) == 1:
        return values.tolist()
    return None


def shown_keys(table) -> str:
    """The keys of ``table`` for a message, whatever their types (or its type)."""
    if not isinstance(table, Mapping):
        return type(table).__name__
    return "[" + ", ".join(sorted(map(repr, table))) + "]"


def expect_number(
    answer, expected: float, what: str, rel: float = 0.0, wrong=(), also=()
) -> None:
    """A numerical answer: ``expected`` within the relative tolerance ``rel``.

    The stub's ``...`` means "not attempted yet". ``also`` lists
    other values accepted as right (a formula's rounded value beside the measured
    one). ``wrong`` lists ``(value, explanation)`` pairs, the classic mistakes: an
    answer within ``rel`` of one of them (and not of a right value) is told what
    went wrong. Any other wrong answer is told only that it is wrong, and by what
    factor.
    """
    answer = as_number(answer, what)

    def near(value: float) -> bool:
        return math.isclose(answer, value, rel_tol=rel, abs_tol=1e-12)

    if near(expected) or any(near(value) for value in also):
        return
    shown = f"{answer:,.0f}" if answer.is_integer() else f"{answer:.4g}"
    for value, why in wrong:
        if near(value):
            raise AssertionError(f"{what} is {shown}, not right: {why}")
    ratio = answer / expected if expected else math.inf
    factor = f"{ratio:.3g}"
    if float(factor) == 1.0 != ratio:  # 385 against 384: show 1.0026, not 1
        digits = 4
        while digits < 17 and float(f"{ratio:.{digits}g}") == 1.0:
            digits += 1
        factor = f"{ratio:.{digits + 1}g}"
    raise AssertionError(
        f"{what} is {shown}, not right ({factor} times the right value)"
    )


def expect_bool(answer, what: str) -> bool:
    """A yes-or-no answer: True or False (NumPy's and a one-element tensor's too);
    the stub's ``...`` means "not attempted yet", ``None`` a forgotten ``return``."""
    attempted(answer, what)
    if isinstance(answer, Tensor) and answer.numel() == 1:
        answer = answer.item()
    kind = type(answer)
    if kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"):
        answer = bool(answer)  # NumPy's bool, without importing NumPy
    if not isinstance(answer, bool):
        raise AssertionError(
            f"{what} should be True or False, got {type(answer).__name__}"
        )
    return answer


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


def _global_names(code) -> Iterator[str]:
    """The global names ``code`` loads, nested functions' and comprehensions' too
    (attribute names, ``x.name``, are not global names)."""
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            yield ins.argval
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            yield from _global_names(const)


def _held(obj, own_globals: dict) -> list:
    """What ``obj`` may run besides its own code: the function it wraps, a
    partial's function and arguments, a bound method's function, and, for a
    function of the reader's own module, its closure, defaults and globals."""
    attrs = getattr(obj, "__dict__", None)
    held = (
        [attrs["__wrapped__"]]
        if isinstance(attrs, dict) and "__wrapped__" in attrs
        else []
    )
    if isinstance(obj, functools.partial):
        held += [obj.func, *obj.args, *obj.keywords.values()]
    if hasattr(obj, "__func__"):  # a bound or static method
        held.append(obj.__func__)
    code = getattr(obj, "__code__", None)
    if code is None or getattr(obj, "__globals__", None) is not own_globals:
        return held  # library code is not followed: the swap covers its names
    for cell in obj.__closure__ or ():
        with contextlib.suppress(ValueError):  # an empty cell
            held.append(cell.cell_contents)
    held += [*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()]
    held += [own_globals[n] for n in _global_names(code) if n in own_globals]
    return held


def runs_original(fn: Callable, original: Callable) -> bool:
    """Whether ``fn`` is ``original`` or holds it where a swap cannot reach it.

    True for the same object or code under another name, and for a
    ``functools.wraps`` wrapper, a ``functools.partial``, a lambda or a function
    of the reader's own module that refers to it: by a global name, a closure
    cell or a default argument, directly or through such another function.
    """
    targets = [original]
    while "__wrapped__" in getattr(targets[-1], "__dict__", {}):
        targets.append(targets[-1].__dict__["__wrapped__"])
    codes = [c for c in (getattr(t, "__code__", None) for t in targets) if c]
    base = fn
    while isinstance(base, functools.partial):
        base = base.func
    own_globals = getattr(base, "__globals__", None)  # the reader's module
    todo, seen = [fn], set()
    while todo and len(seen) < 10_000:
        obj = todo.pop()
        if id(obj) in seen or not callable(obj):
            continue
        seen.add(id(obj))
        if any(obj is t for t in targets):
            return True
        code = getattr(obj, "__code__", None)
        if code is not None and any(code == c for c in codes):
            return True
        todo += _held(obj, own_globals)
    return False


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
    RNNCell as Cell`` included); and a ``reader`` that is X under another name, or
    holds it where no swap reaches (:func:`runs_original`), is refused at once.
    The checkers' own modules keep theirs, to compute the expected answers.
    """
    original = getattr(owner, name)
    what = what or f"the package's {name}"
    message = f"the exercise asks you to write this yourself, without calling {what}"
    if reader is not None and runs_original(reader, original):
        raise AssertionError(message)

    def refuse(*args, **kwargs):
        raise AssertionError(message)

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
