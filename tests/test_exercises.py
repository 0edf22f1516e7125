"""What every exercise checker shares: the three verdicts.

Each chapter's test file checks that its checkers accept right answers and name
the mistake in wrong ones; this file checks, for every checker the package
exports, the verdicts that do not depend on the exercise.
"""

import pytest
import torch

import transformer_book.exercises as exercises
from transformer_book.exercises._checking import call, expect_close, expect_shape

CHECKERS = [getattr(exercises, name) for name in exercises.__all__]


def not_attempted(*args, **kwargs):
    raise NotImplementedError


def crashes(*args, **kwargs):
    raise RuntimeError("boom")


def test_every_exported_checker_is_a_check_function():
    assert len(CHECKERS) >= 10
    for name in exercises.__all__:
        assert name.startswith("check_"), name
        assert getattr(exercises, name).__doc__, f"{name} has no docstring"


@pytest.mark.parametrize("check", CHECKERS, ids=exercises.__all__)
def test_a_stub_is_not_attempted_yet(check, capsys):
    assert check(not_attempted) is None
    out = capsys.readouterr().out
    assert "not attempted yet" in out and "all checks passed" not in out


@pytest.mark.parametrize("check", CHECKERS, ids=exercises.__all__)
def test_a_crash_becomes_an_assertion_naming_the_error(check):
    with pytest.raises(AssertionError, match="your function raised RuntimeError: boom"):
        check(crashes)


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
