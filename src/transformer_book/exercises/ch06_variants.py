"""Checkers for Chapter 6 (encoder-only, decoder-only, encoder-decoder).

``check_top_p(fn)``: nucleus filtering of a batch of distributions.
``check_mask_tokens(fn)``: BERT's 15% choice and 80/10/10 corruption.

Both exercises ask the reader to write the function, not to call the package's
(``models.top_p_filter``, ``models.mask_tokens``): while a check runs, those raise.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..models import bert, sampling
from ..models.sampling import top_p_filter
from ._checking import call, checker, expect_shape
from ._checking import forbidden as _forbidden

__all__ = ["check_top_p", "check_mask_tokens"]


def _reject_package_function(fn: Callable, original: Callable, name: str) -> None:
    """A reader's function that holds a reference to the package's solution."""
    code = getattr(fn, "__code__", None)
    names = set(code.co_names) if code is not None else set()
    for used in names:
        if getattr(fn, "__globals__", {}).get(used) is original:
            raise AssertionError(
                f"the exercise asks you to write this yourself, without calling the "
                f"package's {name}"
            )


# -- Exercise: top-p (nucleus) filtering ------------------------------------------


def _nucleus(probs: Tensor, p: float) -> Tensor:
    """The reference, in float64: ``models.top_p_filter`` on the log-probabilities."""
    probs = probs.double()
    keep = torch.isfinite(top_p_filter(probs.log(), p))
    kept = torch.where(keep, probs, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


def _top_p_cases() -> list[tuple[str, Tensor, float]]:
    gen = torch.Generator().manual_seed(6)
    random_rows = (torch.randn(6, 40, generator=gen) * 2).softmax(dim=-1)
    exact = [[0.125, 0.5, 0.0625, 0.3125]]  # binary fractions: exact sums
    ties = [[0.375, 0.125, 0.25, 0.25], [0.3125, 0.3125, 0.25, 0.125]]
    return [
        ("a row whose total passes p", torch.tensor([[0.1, 0.4, 0.2, 0.3]]), 0.5),
        ("a total that reaches p exactly", torch.tensor(exact), 0.8125),
        ("rows with ties", torch.tensor(ties), 0.4),
        ("a batch of random rows", random_rows, 0.9),
        ("p = 1", random_rows[:2], 1.0),
        ("a small p", random_rows[2:4], 0.01),
    ]


def _diagnose_support(got: Tensor, expected: Tensor, probs: Tensor, where: str) -> None:
    """Name what is wrong with the set of kept tokens (got > 0) of each row."""
    kept, right = got > 0, expected > 0
    if torch.equal(kept, right):
        return
    if (~kept).all(dim=-1).any():
        raise AssertionError(
            f"for {where}, a row keeps no token: the nucleus always holds at least "
            "the most probable one"
        )
    if kept.all() and not right.all():
        raise AssertionError(f"for {where}, nothing was filtered out")
    lowest_kept = torch.where(kept, probs, 2.0).amin(dim=-1)  # (B,)
    highest_dropped = torch.where(kept, -1.0, probs).amax(dim=-1)  # (B,)
    if (lowest_kept < highest_dropped - 1e-9).any():
        least_in = kept.gather(1, probs.argmin(dim=-1, keepdim=True))  # (B, 1)
        most_out = ~kept.gather(1, probs.argmax(dim=-1, keepdim=True))  # (B, 1)
        if (least_in & most_out).any():
            raise AssertionError(
                f"for {where}, you keep the least probable tokens: accumulate from "
                "the most probable one down"
            )
        raise AssertionError(
            f"for {where}, a token is kept while a more probable one is dropped: "
            "sort the probabilities before the running total"
        )
    if ((lowest_kept - highest_dropped).abs() < 1e-9).any():
        raise AssertionError(
            f"for {where}, tokens of equal probability are split: tokens tied with "
            "the last one in must be kept too (the result may not depend on how a "
            "sort orders equal values)"
        )
    if kept.sum() < right.sum():
        raise AssertionError(
            f"for {where}, too few tokens are kept: the nucleus includes the token "
            "that takes the running total to p or beyond"
        )
    raise AssertionError(
        f"for {where}, too many tokens are kept: stop at the first token where the "
        "running total reaches p (reaching it exactly is enough)"
    )


def _check_one_top_p(fn: Callable, where: str, probs: Tensor, p: float) -> None:
    given = probs.clone()
    got = call(fn, given, p)
    if not torch.equal(given, probs):
        raise AssertionError(
            "your function modified probs in place; work on a copy (probs.clone())"
        )
    expect_shape(got, tuple(probs.shape), f"the result for {where}")
    got = got.double()
    if not torch.isfinite(got).all() or (got < 0).any():
        raise AssertionError(
            f"for {where} the result holds negative or infinite values: return "
            "probabilities (0 for dropped tokens), not logits"
        )
    expected = _nucleus(probs, p)
    if probs.shape[0] > 1 and not torch.equal(got > 0, expected > 0):
        rows = [call(fn, row[None].clone(), p)[0].double() for row in probs]
        if all(torch.equal(r > 0, e > 0) for r, e in zip(rows, expected, strict=True)):
            raise AssertionError(
                f"for {where}, each row alone is right but the batch is not: every "
                "row is its own distribution (sort and sum along dim=-1)"
            )
    _diagnose_support(got, expected, probs.double(), where)
    sums = got.sum(dim=-1)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        raise AssertionError(
            f"for {where} the rows sum to {sums.min().item():.3g}..."
            f"{sums.max().item():.3g}, not 1: divide the kept probabilities by "
            "their total"
        )
    if not torch.allclose(got, expected, atol=1e-5, rtol=1e-4):
        raise AssertionError(
            f"for {where} the kept tokens do not keep their relative sizes: scale "
            "them all by the same factor"
        )


@checker("top_p")
def check_top_p(fn: Callable) -> None:
    """``fn(probs, p)`` keeps each row's nucleus and renormalises it.

    probs (B, V): rows of probabilities. Returns (B, V): the most probable tokens
    whose probabilities reach p (tied tokens together), divided by their total,
    0 elsewhere. float32 or float64 answers are accepted.
    """
    _reject_package_function(fn, top_p_filter, "top_p_filter")
    with _forbidden(sampling, "top_p_filter"), _forbidden(sampling, "sample_next"):
        for where, probs, p in _top_p_cases():
            _check_one_top_p(fn, where, probs, p)
            _check_one_top_p(fn, f"{where} (float64)", probs.double(), p)


# -- Exercise: BERT's masking -----------------------------------------------------

SPECIAL = (0, 1, 2, 3, 4)  # [PAD], [UNK], [MASK], [CLS], [SEP]
MASK_ID, VOCAB = 2, 60


def _mask_sample() -> Tensor:
    """400 rows: [CLS] tokens [SEP] [PAD]...; the tokens use only ids 5..34."""
    gen = torch.Generator().manual_seed(11)
    ids = torch.randint(5, 35, (400, 160), generator=gen)
    lengths = torch.randint(60, 158, (400,), generator=gen)
    positions = torch.arange(160)
    ids[:, 0] = 3
    ids[torch.arange(400), lengths + 1] = 4
    return ids.masked_fill(positions[None, :] > lengths[:, None] + 1, 0)


def _share(part: Tensor, whole: Tensor) -> float:
    return part.sum().item() / max(whole.sum().item(), 1)


@checker("mask_tokens")
def check_mask_tokens(fn: Callable) -> None:
    """``fn(ids, vocab_size, mask_id, special_ids, generator)`` -> (inputs, labels).

    Each non-special token is chosen with probability 0.15; a chosen token becomes
    [MASK] (80%), a random token of the vocabulary (10%) or stays (10%). labels
    hold the original token where chosen, -100 elsewhere. Checked on 43,000 tokens.
    """
    _reject_package_function(fn, bert.mask_tokens, "mask_tokens")
    ids = _mask_sample()
    given = ids.clone()
    with _forbidden(bert, "mask_tokens"):
        result = call(
            fn, given, VOCAB, MASK_ID, SPECIAL, torch.Generator().manual_seed(0)
        )
        again = call(
            fn, ids.clone(), VOCAB, MASK_ID, SPECIAL, torch.Generator().manual_seed(0)
        )
    if not torch.equal(given, ids):
        raise AssertionError("your function modified ids in place; work on a copy")
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError("return a pair (inputs, labels)")
    inputs, labels = result
    expect_shape(inputs, tuple(ids.shape), "inputs")
    expect_shape(labels, tuple(ids.shape), "labels")
    if inputs.is_floating_point() or labels.is_floating_point():
        raise AssertionError("inputs and labels should hold integer token ids")
    if (inputs < 0).any():
        raise AssertionError(
            "inputs hold negative ids: return (inputs, labels), in order"
        )
    if not all(torch.equal(a, b) for a, b in zip(again, result, strict=False)):
        raise AssertionError(
            "two calls with generators of the same seed differ: draw every random "
            "number from the generator you are given (generator=generator)"
        )
    special = torch.isin(ids, torch.tensor(SPECIAL))
    chosen = labels != -100
    if chosen.float().mean() > 0.5:
        raise AssertionError(
            "labels must be -100 at the positions that were not chosen: only the "
            "chosen tokens are predicted"
        )
    if (chosen & special).any():
        raise AssertionError(
            "special tokens ([CLS], [SEP], [PAD]...) were chosen; they never are"
        )
    if not torch.equal(labels[chosen], ids[chosen]):
        if torch.equal(labels[chosen], inputs[chosen]):
            raise AssertionError(
                "labels hold the corrupted token; they must hold the original one"
            )
        raise AssertionError("labels at the chosen positions must be the original ids")
    if not torch.equal(inputs[~chosen], ids[~chosen]):
        raise AssertionError(
            "tokens that were not chosen were changed: the 80/10/10 split applies "
            "only to the chosen 15%"
        )
    share = _share(chosen, ~special)
    if abs(share - 0.15) > 0.008:
        raise AssertionError(
            f"{share:.1%} of the non-special tokens were chosen; expected 15%"
        )
    masked = chosen & (inputs == MASK_ID)
    kept = chosen & (inputs == ids)
    replaced = chosen & ~masked & ~kept
    for what, part, expected in (
        ("became [MASK]", masked, 0.8),
        ("were replaced by a random token", replaced, 0.1),
        ("were left unchanged", kept, 0.1),
    ):
        value = _share(part, chosen)
        if abs(value - expected) > 0.02:
            raise AssertionError(
                f"of the chosen tokens, {value:.1%} {what}; expected {expected:.0%}"
            )
    drawn = set(inputs[replaced].tolist())
    if len(drawn & set(range(35, VOCAB))) < 15:
        raise AssertionError(
            "the random tokens come only from the batch: draw them from the whole "
            "vocabulary (ids 0..vocab_size-1, or its non-special ids)"
        )
