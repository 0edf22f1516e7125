"""What every exercise checker shares: the three verdicts.

Each chapter's test file checks that its checkers accept right answers and name
the mistake in wrong ones; this file checks, for every checker the package
exports, the verdicts that do not depend on the exercise.
"""

import inspect

import pytest
import torch

import transformer_book.exercises as exercises
from transformer_book.exercises._checking import call, expect_close, expect_shape

CHECKERS = [getattr(exercises, name) for name in exercises.__all__]


def parameters(check) -> list[str]:
    return list(inspect.signature(check).parameters)


# A checker of a function takes it first, as `fn` (4.4's also takes an answer);
# the others take answers, numbers or a table, whose stub is `...`.
FUNCTIONS = [
    n for n in exercises.__all__ if parameters(getattr(exercises, n))[0] == "fn"
]
ANSWERS = [n for n in exercises.__all__ if n not in FUNCTIONS]


def not_attempted(*args, **kwargs):
    raise NotImplementedError


def crashes(*args, **kwargs):
    raise RuntimeError("boom")


def test_every_exported_checker_is_a_check_function():
    assert len(CHECKERS) >= 10
    for name in exercises.__all__:
        assert name.startswith("check_"), name
        assert getattr(exercises, name).__doc__, f"{name} has no docstring"


def test_every_checker_is_of_one_kind():
    assert len(FUNCTIONS) >= 20 and len(ANSWERS) >= 10
    for name in ANSWERS:
        assert "fn" not in parameters(getattr(exercises, name)), name


@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_stub_is_not_attempted_yet(name, capsys):
    check = getattr(exercises, name)
    others = [...] * (len(parameters(check)) - 1)
    assert check(not_attempted, *others) is None
    out = capsys.readouterr().out
    assert "not attempted yet" in out and "all checks passed" not in out


@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_crash_becomes_an_assertion_naming_the_error(name):
    check = getattr(exercises, name)
    others = [False] * (len(parameters(check)) - 1)
    with pytest.raises(AssertionError, match="your function raised RuntimeError: boom"):
        check(crashes, *others)


@pytest.mark.parametrize("name", ANSWERS)
def test_answers_left_as_dots_are_not_attempted_yet(name, capsys):
    check = getattr(exercises, name)
    assert check(*[...] * len(parameters(check))) is None
    out = capsys.readouterr().out
    assert "not attempted yet" in out and "Replace each `...`" in out


def test_expectations_name_what_is_wrong():
    with pytest.raises(AssertionError, match=r"the output has shape \(2,\), expected"):
        expect_shape(torch.zeros(2), (3,), "the output")
    with pytest.raises(AssertionError, match="should be a tensor, got list"):
        expect_shape([1, 2], (2,), "the output")
    with pytest.raises(AssertionError, match="contains NaN"):
        expect_close(torch.tensor([float("nan")]), torch.zeros(1), "the output")
    with pytest.raises(AssertionError, match="largest error 0.5"):
        expect_close(torch.tensor([1.5]), torch.ones(1), "the output")
    expect_close(torch.ones(3), torch.ones(3), "the output")
    assert call(lambda x: x + 1, 1) == 2
