"""Top-k and top-p (nucleus) filtering, against references computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_book.models.sampling import sample_next, top_k_filter, top_p_filter

INF = float("inf")


def logits_of(probs) -> torch.Tensor:
    return torch.tensor(probs, dtype=torch.float64).log()


def kept(filtered: torch.Tensor) -> list[bool]:
    return torch.isfinite(filtered).tolist()


def test_top_k_keeps_the_k_largest_and_their_ties():
    x = torch.tensor([[1.0, 3.0, 2.0, 0.5], [0.0, 2.0, 2.0, 1.0]])
    assert kept(top_k_filter(x, 2)) == [
        [False, True, True, False],
        [False, True, True, False],
    ]
    assert kept(top_k_filter(x, 1))[1] == [False, True, True, False]  # a tie at 1st
    torch.testing.assert_close(top_k_filter(x, 10), x)
    out = top_k_filter(x, 2)
    assert torch.equal(out[torch.isfinite(out)], x[torch.isfinite(out)])


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.3, [True, False, False, False]),  # 0.5 alone reaches 0.3
        (0.5, [True, False, False, False]),  # ... and exactly 0.5
        (0.6, [True, True, False, False]),  # 0.5 < 0.6: the 0.25 crosses it
        (0.75, [True, True, False, False]),  # 0.5 + 0.25 reaches 0.75 exactly
        (0.8, [True, True, True, True]),  # the crossing token has a twin: both
        (1.0, [True, True, True, True]),
    ],
)
def test_top_p_by_hand(p, expected):
    probs = [0.5, 0.25, 0.125, 0.125]  # exact in binary: no rounding at the edges
    assert kept(top_p_filter(logits_of(probs), p)) == expected
    order = [2, 0, 3, 1]  # the same in any order
    shuffled = top_p_filter(logits_of([probs[i] for i in order]), p)
    assert kept(shuffled) == [expected[i] for i in order]


def brute_force_nucleus(probs: list[float], p: float) -> list[bool]:
    order = sorted(range(len(probs)), key=lambda i: -probs[i])
    keep, total = [False] * len(probs), 0.0
    for i in order:
        keep[i] = True
        total += probs[i]
        if total >= p:
            break
    return keep


@pytest.mark.parametrize("seed", range(5))
def test_top_p_matches_the_definition_on_random_rows(seed):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(6, 50, generator=gen) * 2
    for p in (0.1, 0.5, 0.9, 0.99):
        out = top_p_filter(logits, p)
        probs = logits.double().softmax(-1)
        for row, row_probs in zip(out, probs, strict=True):
            assert kept(row) == brute_force_nucleus(row_probs.tolist(), p)
        assert out.dtype == logits.dtype and out.shape == logits.shape
        finite = torch.isfinite(out)
        assert torch.equal(out[finite], logits[finite])  # kept logits unchanged


def test_filters_compose_and_leave_the_input_alone():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -2.0]])
    before = logits.clone()
    both = top_p_filter(top_k_filter(logits, 3), 0.95)
    assert kept(both)[0] == [True, True, True, False, False]  # top-3 is the limit
    assert torch.equal(logits, before)
    probs = top_p_filter(logits, 0.5).softmax(-1)
    assert math.isclose(probs.sum().item(), 1.0, rel_tol=1e-6)


def test_sampling_follows_the_filtered_distribution():
    logits = logits_of([0.5, 0.25, 0.125, 0.125]).float().expand(20000, 4)
    gen = torch.Generator().manual_seed(0)
    draws = sample_next(logits, generator=gen)
    freq = torch.bincount(draws, minlength=4) / len(draws)
    torch.testing.assert_close(
        freq, torch.tensor([0.5, 0.25, 0.125, 0.125]), atol=0.015, rtol=0
    )
    nucleus = sample_next(logits, top_p=0.6, generator=gen)
    freq = torch.bincount(nucleus, minlength=4) / len(nucleus)
    assert freq[2:].sum() == 0 and abs(freq[0] - 2 / 3) < 0.015
    hot = sample_next(logits, temperature=100.0, generator=gen)
    assert (torch.bincount(hot, minlength=4) / len(hot) - 0.25).abs().max() < 0.015
    assert sample_next(logits[:3], temperature=0).tolist() == [0, 0, 0]
    assert sample_next(logits[:3], top_k=1, generator=gen).tolist() == [0, 0, 0]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda x: top_k_filter(x, 0), ValueError, "^k must"),
        (lambda x: top_k_filter(x, 1.5), ValueError, "^k must"),
        (lambda x: top_p_filter(x, 0.0), ValueError, "^p must"),
        (lambda x: top_p_filter(x, 1.01), ValueError, "^p must"),
        (lambda x: top_p_filter(x, True), ValueError, "^p must"),
        (lambda x: top_p_filter(x.long(), 0.5), TypeError, "floating"),
        (lambda x: sample_next(x, temperature=-0.1), ValueError, "temperature"),
        (lambda x: sample_next(x[0]), ValueError, r"\(B, V\)"),
    ],
)
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call(torch.zeros(2, 5))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"temperature": math.nan}, ValueError, "temperature"),
        ({"temperature": math.inf}, ValueError, "temperature"),
        ({"temperature": True}, ValueError, "temperature"),
        ({"temperature": 0, "top_k": 0}, ValueError, "top_k"),
        ({"temperature": 0, "top_k": 2.5}, ValueError, "top_k"),
        ({"temperature": 0, "top_p": 1.5}, ValueError, "top_p"),
        ({"temperature": 0, "top_p": 0.0}, ValueError, "top_p"),
        ({"generator": "seed"}, TypeError, "generator"),
    ],
)
def test_sample_next_refuses_bad_arguments_whatever_the_temperature(
    kwargs, error, match
):
    with pytest.raises(error, match=match):
        sample_next(torch.zeros(2, 5), **kwargs)


@pytest.mark.parametrize("temperature", [1e-40, 1e-300, 5e-324])
def test_a_tiny_temperature_gives_the_arg_max(temperature):
    logits = torch.randn(50, 100, generator=torch.Generator().manual_seed(0)) * 5
    for dtype in (torch.float32, torch.float16, torch.float64):
        draws = sample_next(
            logits.to(dtype), temperature, top_k=20, top_p=0.9,
            generator=torch.Generator().manual_seed(1),
        )  # fmt: skip
        assert torch.equal(draws, logits.to(dtype).argmax(dim=-1))


def test_filtered_out_tokens_are_never_drawn_at_a_small_temperature():
    logits = torch.tensor([[-math.inf, 1.0, 1.0 - 1e-6, -2.0]]).expand(200, 4)
    draws = sample_next(logits, 1e-3, generator=torch.Generator().manual_seed(0))
    assert set(draws.tolist()) <= {1, 2}


@pytest.mark.parametrize("temperature", [0, 0.7])
@pytest.mark.parametrize(
    "row", [[0.0, math.nan, 1.0], [-INF, -INF, -INF], [0.0, INF, 1.0]]
)
def test_sample_next_refuses_a_row_with_no_distribution(row, temperature):
    """NaN, +inf or nothing allowed: no token can be drawn (issue 44)."""
    logits = torch.tensor([[0.0, 1.0, 2.0], row])
    with pytest.raises(ValueError, match=r"logits\[1\]"):
        sample_next(logits, temperature, generator=torch.Generator().manual_seed(0))


def test_sample_next_still_takes_rows_with_some_minus_infinities():
    logits = torch.tensor([[-INF, 0.0, -INF], [1.0, -INF, 3.0]])
    assert sample_next(logits, 0).tolist() == [1, 2]
    drawn = sample_next(logits, 1.0, generator=torch.Generator().manual_seed(0))
    assert drawn[0] == 1 and drawn[1] in (0, 2)
