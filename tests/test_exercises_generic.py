"""One generic test for every checker, by construction: each (solution, stub,
check call) that a chapter publishes (``test_notebooks.exercise_pairs``) is run
here through the same five verdicts, so a new exercise inherits them:

- the untouched stub cell says "not attempted";
- a function that returns None (a forgotten ``return``) says so;
- a function that raises gets a message naming the exception;
- the published solution passes, and so do its answers as float64 NumPy numbers,
  NumPy arrays and lists;
- NaN, inf, complex and out-of-range numbers in place of an answer are refused
  with a message (an AssertionError), never a raw crash.
"""

from __future__ import annotations

import ast
import math

import numpy as np
import pytest
from test_notebooks import ALL_PAIRS, PAIR_IDS

import transformer_book.exercises as exercises
from transformer_book.exercises._checking import FORGOT_RETURN

PARAMS = ("path", "solution", "stub", "check_name", "check_call")


def _run(code: str, namespace: dict, name: str) -> None:
    exec(compile(code, f"<{name}>", "exec"), namespace)


def _fresh(check_name: str) -> dict:
    return {check_name: getattr(exercises, check_name)}


def _arguments(check_call: str) -> list[str]:
    """The source of each argument of the check call, ``check_x(a, b)`` -> [a, b]."""
    node = ast.parse(check_call).body[0].value
    assert isinstance(node, ast.Call) and not node.keywords, check_call
    return [ast.unparse(arg) for arg in node.args]


def _solved(solution: str, check_name: str, check_call: str) -> tuple[dict, list]:
    """The namespace of the pasted solution and the values of the call's arguments."""
    namespace = _fresh(check_name)
    _run(solution, namespace, f"solution {check_name}")
    return namespace, [eval(a, namespace) for a in _arguments(check_call)]


def _is_function_checker(args: list) -> bool:
    return bool(args) and callable(args[0])


@pytest.mark.parametrize(PARAMS, ALL_PAIRS, ids=PAIR_IDS)
def test_the_untouched_stub_is_not_attempted(
    path, solution, stub, check_name, check_call, capsys
):
    _run(stub, _fresh(check_name), f"stub {check_name}")
    out = capsys.readouterr().out
    assert "not attempted yet" in out and "all checks passed" not in out


@pytest.mark.parametrize(PARAMS, ALL_PAIRS, ids=PAIR_IDS)
def test_a_forgotten_return_is_named(path, solution, stub, check_name, check_call):
    namespace, args = _solved(solution, check_name, check_call)
    check = namespace[check_name]
    if _is_function_checker(args):
        args[0] = lambda *a, **k: None  # the body ran, the result was not returned
    else:
        args[0] = None  # an answer read from such a function
    with pytest.raises(AssertionError, match=f"None|nothing.*{FORGOT_RETURN}"):
        check(*args)


@pytest.mark.parametrize(PARAMS, ALL_PAIRS, ids=PAIR_IDS)
def test_a_crash_is_named(path, solution, stub, check_name, check_call):
    namespace, args = _solved(solution, check_name, check_call)
    if not _is_function_checker(args):
        pytest.skip("an answer checker: no function of the reader's is called")

    def crashes(*a, **k):
        raise ZeroDivisionError("boom")

    with pytest.raises(AssertionError, match="raised ZeroDivisionError: boom"):
        namespace[check_name](crashes, *args[1:])


def _as_float64(value):
    if isinstance(value, bool) or not isinstance(value, int | float | list | tuple):
        return value
    if isinstance(value, list | tuple):
        return [_as_float64(v) for v in value]
    return np.float64(value)


def _as_array(value):
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    ):
        return np.asarray(value, dtype=np.float64)
    return value


def _as_list(value):
    if isinstance(value, tuple):
        return [_as_list(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


FORMS = {"float64": _as_float64, "numpy array": _as_array, "list": _as_list}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(PARAMS, ALL_PAIRS, ids=PAIR_IDS)
def test_the_solution_passes_in_every_form(
    path, solution, stub, check_name, check_call, form, capsys
):
    namespace, args = _solved(solution, check_name, check_call)
    if not _is_function_checker(args):
        args = [FORMS[form](a) for a in args]
    namespace[check_name](*args)
    assert "all checks passed" in capsys.readouterr().out


BAD_NUMBERS = {
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "complex": 1 + 2j,
    "past float range": 10**400,
    "huge": 1e300,
    "negative": -1.0,
}


def _numeric_positions(args: list) -> list[int]:
    return [
        i
        for i, a in enumerate(args)
        if isinstance(a, int | float) and not isinstance(a, bool)
    ]


@pytest.mark.parametrize("bad", BAD_NUMBERS)
@pytest.mark.parametrize(PARAMS, ALL_PAIRS, ids=PAIR_IDS)
def test_a_bad_number_is_refused_with_a_message(
    path, solution, stub, check_name, check_call, bad
):
    namespace, args = _solved(solution, check_name, check_call)
    check = namespace[check_name]
    if _is_function_checker(args):
        # the reader's function returns the bad number in place of its result
        args[0] = lambda *a, **k: BAD_NUMBERS[bad]
        with pytest.raises(AssertionError):
            check(*args)
        return
    positions = _numeric_positions(args)
    if not positions:
        pytest.skip("no answer is a number")
    for i in positions:
        changed = list(args)
        changed[i] = BAD_NUMBERS[bad]
        with pytest.raises(AssertionError):
            check(*changed)
