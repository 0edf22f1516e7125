"""The helpers every checker shares: dtype-blind comparison, in-place detection,
and "do not use X" enforced by swapping X for a function that refuses to run."""

import collections
import functools
import math
import types

import pytest
import torch
from torch import nn

from transformer_book.exercises._checking import (
    expect_unchanged,
    expect_values,
    forbidden,
    matches,
    runs_original,
)


def disguises(original) -> list:
    """The package's function under other names, which "do not call X" must
    refuse: itself, a partial, a functools.wraps wrapper, a closure, a lambda
    with X as a default argument. The chapters' checker tests use it."""

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        return original(*args, **kwargs)

    return [
        original,
        functools.partial(original),
        wrapper,
        lambda *args, **kwargs: original(*args, **kwargs),
        lambda *args, f=original, **kwargs: f(*args, **kwargs),
    ]


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
    # The name is looked up at run time only, so the swap is what refuses it.
    reader = eval('lambda: globals()["alias"]()', reader_globals)  # noqa: S307
    with forbidden(owner, "solve", "the solver", reader=reader):
        with pytest.raises(AssertionError, match="without calling the solver"):
            owner.solve()
        with pytest.raises(AssertionError, match="without calling the solver"):
            reader()
    assert owner.solve is original and reader_globals["alias"] is original
    assert reader() == "solved"
    named = eval("lambda: alias()", reader_globals)  # noqa: S307
    with pytest.raises(AssertionError, match="without calling the solver"):
        with forbidden(owner, "solve", "the solver", reader=named):
            pass  # refused on entry: the reader names it
    assert owner.solve is original and reader_globals["alias"] is original


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


def test_expect_values_accepts_any_tuple_or_list_of_the_right_length():
    pair = (torch.zeros(2), torch.ones(2))
    assert expect_values(pair, 2, "(a, b)") == pair
    assert expect_values(list(pair), 2, "(a, b)") == pair
    point = collections.namedtuple("Point", "a b")(1.0, 2.0)  # a tuple too
    assert expect_values(point, 2, "(a, b)") == (1.0, 2.0)
    with pytest.raises(AssertionError, match=r"return \(a, b\), in order .*tuple of 3"):
        expect_values((1, 2, 3), 2, "(a, b)")
    with pytest.raises(AssertionError, match=r"^for case 1, return .* got a Tensor"):
        expect_values(torch.zeros(2), 2, "(a, b)", "case 1")
    with pytest.raises(AssertionError, match="got a dict"):
        expect_values({"a": 1, "b": 2}, 2, "(a, b)")


def _solution(x, y=1):
    return x + y


def _other(x, y=1):
    return x + y


@functools.wraps(_solution)
def _wrapper(*args, **kwargs):
    return _solution(*args, **kwargs)


_alias = _solution
_partial = functools.partial(_solution, y=2)


def _through_a_partial(x):
    return _partial(x)


def _make_closure(function):
    def inner(x):
        return function(x)

    return inner


def _mentions_the_name_as_an_attribute(x):
    return types.SimpleNamespace(_solution=len)._solution(x)


@pytest.mark.parametrize(
    "fn",
    [
        _solution,
        _alias,
        _wrapper,
        _partial,
        functools.partial(_partial),
        _through_a_partial,
        _make_closure(_solution),
        _make_closure(_wrapper),
        lambda x, f=_solution: f(x),
        lambda x, *, f=_solution: f(x),
        lambda x: _solution(x),
        lambda x: [_solution(v) for v in x],  # inside a comprehension
        types.FunctionType(_solution.__code__, {}),  # the same code, other globals
        types.MethodType(_solution, 1),
    ],
)
def test_runs_original_finds_the_function_under_another_name(fn):
    assert runs_original(fn, _solution)


@pytest.mark.parametrize(
    "fn",
    [
        _other,  # the same source is not the same function
        lambda x: x + 1,
        _mentions_the_name_as_an_attribute,
        _make_closure(_other),
        functools.partial(_other),
        len,
    ],
)
def test_runs_original_leaves_other_functions_alone(fn):
    assert not runs_original(fn, _solution)


def test_runs_original_is_false_for_a_library_function():
    # softmax refers to many functions of its module: none of them is the original
    assert not runs_original(torch.nn.functional.softmax, _solution)
    assert not runs_original(torch.nn.functional.softmax, _other)


def test_forbidden_refuses_an_alias_before_it_runs():
    owner = types.ModuleType("owner")
    calls = []

    def solve(x):
        calls.append(x)
        return x

    owner.solve = solve
    for reader in (solve, functools.partial(solve), _make_closure(solve)):
        with pytest.raises(AssertionError, match="without calling the solver"):
            with forbidden(owner, "solve", "the solver", reader=reader):
                reader(1)
        assert owner.solve is solve  # nothing was swapped, nothing to restore
    assert calls == []
    with forbidden(owner, "solve", "the solver", reader=lambda x: x):
        pass


# ---- issue 44: a forgotten `return`, numbers past float range, complex answers


def _function_checkers() -> dict:
    """Every checker that takes the reader's function alone."""
    import inspect

    from transformer_book import exercises

    found = {}
    for name in exercises.__all__:
        check = getattr(exercises, name)
        if len(inspect.signature(check).parameters) == 1:
            found[name] = check
    return found


FUNCTION_CHECKERS = _function_checkers()


@pytest.mark.parametrize("name", sorted(FUNCTION_CHECKERS))
def test_a_function_without_return_is_told_so(name):
    def forgot(*args, **kwargs):
        pass  # the work, but no `return`

    with pytest.raises(AssertionError, match=r"did you forget `return`\?"):
        FUNCTION_CHECKERS[name](forgot)


def test_call_reports_none_and_as_number_a_none_answer():
    from transformer_book.exercises._checking import NotAttempted, as_number, call

    with pytest.raises(AssertionError, match=r"returned nothing \(did you forget"):
        call(lambda: None)
    with pytest.raises(AssertionError, match=r"x is None.*forget `return`"):
        as_number(None, "x")
    with pytest.raises(NotAttempted):
        as_number(..., "x")


@pytest.mark.parametrize("big", [10**400, -(10**400)], ids=["huge", "-huge"])
def test_a_number_past_float_range_is_refused_by_name(big):
    from transformer_book.exercises._checking import as_number

    with pytest.raises(AssertionError, match="x .*finite"):
        as_number(big, "x")


def test_checkers_refuse_numbers_past_float_range():
    from transformer_book.exercises import (
        check_alibi_slopes,
        check_noam_lr,
        check_power_law_fit,
        check_spectral_radius,
    )

    big = 10**400
    cases = [
        (check_noam_lr, lambda step, d_model, warmup: big),
        (check_spectral_radius, lambda w: big),
        (check_power_law_fit, lambda x, y: (big, 0.5)),
        (check_power_law_fit, lambda x, y: (1.0, big)),
        (check_alibi_slopes, lambda n: [big] * n),
    ]
    for check, fn in cases:
        with pytest.raises(AssertionError, match="finite"):
            check(fn)


@pytest.mark.parametrize("bad", [math.nan, math.inf, 2.5, "2"])
def test_beam_search_names_ids_that_are_not_token_ids(bad):
    from transformer_book.exercises import check_beam_search

    with pytest.raises(AssertionError, match="token ids"):
        check_beam_search(lambda *args: [0, bad])


def test_expect_close_refuses_a_complex_answer():
    from transformer_book.exercises._checking import expect_close

    right = torch.randn(3, 4)
    expect_close(right.double(), right, "out")
    for wrong in (right + 5j, right.to(torch.complex64)):
        with pytest.raises(AssertionError, match="out .*complex"):
            expect_close(wrong, right, "out")


def test_a_wrong_number_is_shown_with_enough_digits_to_tell():
    from transformer_book.exercises._checking import expect_number

    with pytest.raises(AssertionError, match=r"\(1\.0026 times the right value\)"):
        expect_number(385, 384, "t")
    with pytest.raises(AssertionError, match=r"\(0\.5 times the right value\)"):
        expect_number(192, 384, "t")
