"""The helpers every checker shares: dtype-blind comparison, in-place detection,
and "do not use X" enforced by swapping X for a function that refuses to run."""

import types

import pytest
import torch
from torch import nn

from transformer_book.exercises._checking import expect_unchanged, forbidden, matches


def test_matches_compares_values_whatever_the_dtype():
    x = torch.randn(3, 4)
    assert matches(x.double(), x)
    assert matches(x, x.double())
    assert not matches(x + 1e-3, x)
    assert not matches(x[:2], x)
    assert not matches(x.tolist(), x)
    assert not matches(torch.full((3, 4), float("nan")), x)
    assert not matches(x.to(torch.complex64), x)


def test_expect_unchanged_names_the_modified_input():
    x = torch.randn(3)
    expect_unchanged(x.clone(), x, "x")
    with pytest.raises(AssertionError, match="modified x in place"):
        expect_unchanged(x + 1, x, "x")
    with pytest.raises(AssertionError, match="modified x in place"):
        expect_unchanged(x.double(), x, "x")
    layer = nn.Linear(2, 2)
    weights = {k: v.clone() for k, v in layer.state_dict().items()}
    expect_unchanged(layer, weights, "the layer")
    with pytest.raises(AssertionError, match="modified the layer in place"):
        expect_unchanged(layer.double(), weights, "the layer")


def test_forbidden_swaps_every_reference_and_restores_them():
    owner = types.ModuleType("owner")
    owner.solve = original = lambda: "solved"
    reader_globals = {"alias": original}
    reader = eval("lambda: alias()", reader_globals)  # noqa: S307
    with forbidden(owner, "solve", "the solver", reader=reader):
        with pytest.raises(AssertionError, match="without calling the solver"):
            owner.solve()
        with pytest.raises(AssertionError, match="without calling the solver"):
            reader()
    assert owner.solve is original and reader_globals["alias"] is original
    assert reader() == "solved"


def test_forbidden_restores_a_method_even_after_an_error():
    class Base:
        def forward(self):
            return "base"

    class Child(Base):
        pass

    with pytest.raises(RuntimeError), forbidden(Child, "forward"):
        with pytest.raises(AssertionError, match="package's forward"):
            Child().forward()
        assert Base().forward() == "base"
        raise RuntimeError
    assert "forward" not in vars(Child)  # the inherited method again
    assert Child().forward() == "base"


def test_checkers_leave_the_readers_random_state_alone():
    from transformer_book.exercises import (
        check_decoder_block_forward,
        check_gradient_ratio,
        check_rnn_step,
    )

    torch.manual_seed(0)
    expected = torch.rand(3)
    for check in (check_rnn_step, check_gradient_ratio, check_decoder_block_forward):
        torch.manual_seed(0)
        with pytest.raises(AssertionError):
            check(lambda *args: None)
        assert torch.equal(torch.rand(3), expected), check.__name__
