"""Checkers for Chapter 6 (encoder-only, decoder-only, encoder-decoder).

``check_top_p(fn)``: nucleus filtering of a batch of distributions.
``check_mask_tokens(fn)``: BERT's 15% choice and 80/10/10 corruption.
(Exercises 6.3-6.6, answered with numbers and conclusions: ``ch06_answers``.)

Both exercises ask the reader to write the function, not to call the package's
(``models.top_p_filter``, ``models.mask_tokens``): while a check runs, those raise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ..models import bert, sampling
from ..models.sampling import top_p_filter
from ._checking import call, checker, expect_shape, expect_values, forbidden

__all__ = ["check_top_p", "check_mask_tokens"]


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
    with (
        forbidden(sampling, "top_p_filter", reader=fn),
        forbidden(sampling, "sample_next", reader=fn),
    ):
        for where, probs, p in _top_p_cases():
            _check_one_top_p(fn, where, probs, p)
            _check_one_top_p(fn, f"{where} (float64)", probs.double(), p)


# -- Exercise: BERT's masking -----------------------------------------------------


@dataclass(frozen=True)
class _MaskCase:
    """A batch of rows "[CLS] tokens [SEP] [PAD]...", with ``extra``, one more
    special id, sprinkled through the text; the tokens use ids low..high-1."""

    where: str
    vocab_size: int
    special_ids: tuple[int, ...] | list[int]
    mask_id: int
    pad: int
    cls: int
    sep: int
    extra: int
    low: int
    high: int
    shape: tuple[int, int]
    seed: int  # of the batch; the generator handed to the reader gets seed + 1
    every_id: bool = False  # few ids: every ordinary id must be drawn as a token

    def ids(self) -> Tensor:
        gen = torch.Generator().manual_seed(self.seed)
        rows, length = self.shape
        ids = torch.randint(self.low, self.high, self.shape, generator=gen)
        ids[torch.rand(self.shape, generator=gen) < 0.02] = self.extra
        ends = torch.randint(length // 3, length - 1, (rows,), generator=gen)  # [SEP]
        ids[:, 0] = self.cls
        ids[torch.arange(rows), ends] = self.sep
        return ids.masked_fill(torch.arange(length)[None, :] > ends[:, None], self.pad)


# Seeds, special ids, mask_id and vocabulary sizes differ from case to case, so
# that no constant of the statement's example passes.
_MASK_CASES = (
    _MaskCase(
        "the example's ids (vocab_size=60, special_ids 0..4, mask_id=2)",
        60, (0, 1, 2, 3, 4), 2, pad=0, cls=3, sep=4, extra=1, low=5, high=35,
        shape=(400, 160), seed=11,
    ),
    _MaskCase(
        "special ids at the top of the vocabulary (vocab_size=97, mask_id=96)",
        97, [0, 94, 95, 96], 96, pad=0, cls=94, sep=95, extra=95, low=30, high=91,
        shape=(400, 160), seed=23,
    ),
    _MaskCase(
        "a vocabulary of 24 (special_ids 3, 0, 1, 2, mask_id=3)",
        24, (3, 0, 1, 2), 3, pad=0, cls=1, sep=2, extra=3, low=4, high=24,
        shape=(300, 200), seed=5, every_id=True,
    ),
)  # fmt: skip


def _mask_call(fn: Callable, case: _MaskCase, ids: Tensor, generator) -> tuple:
    """Run the reader's function once; check what any answer must satisfy."""
    given = ids.clone()
    global_state = torch.random.get_rng_state()
    special_ids = type(case.special_ids)(case.special_ids)  # the reader's own copy
    result = call(fn, given, case.vocab_size, case.mask_id, special_ids, generator)
    if not torch.equal(torch.random.get_rng_state(), global_state):
        torch.random.set_rng_state(global_state)  # the reader's own draws resume
        raise AssertionError(
            "your function used torch's global random generator (a torch.rand or "
            "torch.randint without generator=, or torch.manual_seed): draw every "
            "random number from the generator you are given, and leave the global "
            "one alone"
        )
    if not torch.equal(given, ids):
        raise AssertionError("your function modified ids in place; work on a copy")
    inputs, labels = expect_values(result, 2, "(inputs, labels)")
    expect_shape(inputs, tuple(ids.shape), f"inputs for {case.where}")
    expect_shape(labels, tuple(ids.shape), f"labels for {case.where}")
    if inputs.is_floating_point() or labels.is_floating_point():
        raise AssertionError("inputs and labels should hold integer token ids")
    if (inputs < 0).any():
        raise AssertionError(
            "inputs hold negative ids: return (inputs, labels), in order"
        )
    return inputs, labels


def _share(part: Tensor, whole: Tensor) -> float:
    return part.sum().item() / max(whole.sum().item(), 1)


def _near(value: float, low: float, high: float, p: float, n: int) -> bool:
    """Whether a share measured on n draws may come from a true share in
    [low, high]: 4.5 standard deviations of slack."""
    slack = 4.5 * math.sqrt(p * (1 - p) / max(n, 1))
    return low - slack <= value <= high + slack


def _shared_draws(flags: Tensor, within: Tensor, dim: int, least: int) -> bool:
    """Whether ``flags`` look drawn once per column (dim=0) or per row (dim=1).

    Independent draws of share q give each column (or row) about q (1 - q) of
    variance; a draw shared by a whole column gives 0. Slices with fewer than
    ``least`` elements of ``within`` are left out.
    """
    q_all = _share(flags & within, within)
    n = within.sum(dim)
    q = (flags & within).sum(dim) / n.clamp(min=1)
    used = n >= least
    if not used.any():
        return False
    return (q * (1 - q))[used].mean().item() < 0.3 * q_all * (1 - q_all)


def _check_choice(case: _MaskCase, ids, inputs, labels, special) -> Tensor:
    """Which tokens were chosen, after checking the labels and the 15%."""
    where = case.where
    chosen = labels != -100
    if chosen.float().mean() > 0.5:
        raise AssertionError(
            f"for {where}, labels must be -100 at the positions that were not "
            "chosen: only the chosen tokens are predicted"
        )
    if (chosen & special).any():
        raise AssertionError(
            f"for {where}, special tokens (the ids in special_ids: [CLS], [SEP], "
            "[PAD]...) were chosen; they never are"
        )
    if not torch.equal(labels[chosen], ids[chosen]):
        if torch.equal(labels[chosen], inputs[chosen]):
            raise AssertionError(
                f"for {where}, labels hold the corrupted token; they must hold the "
                "original one"
            )
        raise AssertionError(
            f"for {where}, labels at the chosen positions must be the original ids"
        )
    if not torch.equal(inputs[~chosen], ids[~chosen]):
        raise AssertionError(
            f"for {where}, tokens that were not chosen were changed: the 80/10/10 "
            "split applies only to the chosen 15%"
        )
    normal = ~special
    for token in ids[normal].unique().tolist():
        here = ids == token
        if here.sum() >= 300 and _share(chosen & here, here) < 0.05:
            raise AssertionError(
                f"for {where}, tokens of id {token} are never chosen, though "
                f"special_ids={case.special_ids} does not hold it: the special "
                "tokens are exactly those in special_ids"
            )
    for dim, what in (
        (0, "every row masks the same columns"),
        (1, "a row's tokens are chosen all together or not at all"),
    ):
        if _shared_draws(chosen, normal, dim, least=50):
            raise AssertionError(
                f"for {where}, {what}: draw one random number per token, of the "
                "shape of ids"
            )
    share = _share(chosen, normal)
    if not _near(share, 0.15, 0.15, 0.15, int(normal.sum())):
        raise AssertionError(
            f"for {where}, {share:.1%} of the non-special tokens were chosen; "
            "expected 15%"
        )
    return chosen


def _check_fates(case: _MaskCase, ids, inputs, chosen) -> None:
    """The 80/10/10 split of the chosen tokens, and where the random ones come from."""
    where, vocab_size = case.where, case.vocab_size
    changed = chosen & (inputs != ids) & (inputs != case.mask_id)
    if changed.any():
        value, _ = inputs[changed].mode()
        if _share(inputs[changed] == value, chosen) > 0.5:
            raise AssertionError(
                f"for {where}, most chosen tokens became id {value.item()}, not "
                f"mask_id={case.mask_id}: use the mask_id you are given"
            )
    n_normal = vocab_size - len(set(case.special_ids))
    masked = chosen & (inputs == case.mask_id)
    kept = chosen & (inputs == ids)
    replaced = chosen & ~masked & ~kept
    n = int(chosen.sum())
    if _shared_draws(masked, chosen, 0, least=20):
        raise AssertionError(
            f"for {where}, the chosen tokens of a column all share one fate: draw "
            "one random number per token, of the shape of ids"
        )
    # A random token may be [MASK] (1 / vocab_size) or the original token (at most
    # 1 / n_normal): the shares that allows.
    for what, part, p, low, high in (
        ("became [MASK]", masked, 0.8, 0.8, 0.8 + 0.1 / vocab_size),
        ("were replaced by a random token", replaced, 0.1, 0.1 - 0.2 / n_normal, 0.1),
        ("were left unchanged", kept, 0.1, 0.1, 0.1 + 0.1 / n_normal),
    ):
        value = _share(part, chosen)
        if not _near(value, low, high, p, n):
            raise AssertionError(
                f"for {where}, of the chosen tokens, {value:.1%} {what}; expected "
                f"{p:.0%}"
            )
    _check_random_tokens(case, ids, inputs[replaced])


def _check_random_tokens(case: _MaskCase, ids: Tensor, drawn: Tensor) -> None:
    where, vocab_size = case.where, case.vocab_size
    if ((drawn < 0) | (drawn >= vocab_size)).any():
        raise AssertionError(
            f"for {where}, a random token lies outside the vocabulary: draw ids "
            f"0..vocab_size-1 (vocab_size={vocab_size})"
        )
    ordinary = sorted(set(range(vocab_size)) - set(case.special_ids))
    unseen = sorted(set(ordinary) - set(ids.unique().tolist()))
    values = set(drawn.tolist())
    if len(unseen) >= 10 and len(values & set(unseen)) < len(unseen) // 2:
        raise AssertionError(
            f"for {where}, the random tokens come only from the batch: draw them "
            "from the whole vocabulary (ids 0..vocab_size-1, or its non-special ids)"
        )
    top = ordinary[-len(ordinary) // 4 :]  # the top quarter of the ordinary ids
    expected = len(drawn) * len(top) / vocab_size
    if (torch.isin(drawn, torch.tensor(top)).sum() < 0.5 * expected).item():
        raise AssertionError(
            f"for {where}, the random tokens rarely reach the top of the vocabulary "
            f"(ids {top[0]}..{top[-1]}, vocab_size={vocab_size}): draw them "
            "uniformly from all of it"
        )
    missing = [i for i in ordinary if i not in values]
    if case.every_id and missing:
        last = " (the last id)" if missing[-1] == vocab_size - 1 else ""
        raise AssertionError(
            f"for {where}, no random token is ever id {missing[-1]}{last}, although "
            "hundreds are drawn: draw them from the whole vocabulary, ids "
            f"0..vocab_size-1 (vocab_size={vocab_size}), or its non-special ids"
        )


def _check_generator(fn: Callable, case: _MaskCase) -> None:
    """The caller's generator is used, and not seeded again."""
    ids = case.ids()[:50]  # enough to tell draws apart
    generator = torch.Generator().manual_seed(case.seed + 1)
    state = generator.get_state()
    first = _mask_call(fn, case, ids, generator)
    if torch.equal(generator.get_state(), state):
        raise AssertionError(
            "your function does not draw from the generator it is given: draw every "
            "random number from it (torch.rand(..., generator=generator))"
        )
    second = _mask_call(fn, case, ids, generator)
    if all(torch.equal(a, b) for a, b in zip(first, second, strict=True)):
        raise AssertionError(
            "two successive calls with the same generator gave the same result: your "
            "function seeds the generator (or one of its own); draw from the "
            "generator as it is handed to you, without seeding it"
        )
    for seed, differ in (
        (case.seed + 1, "generators of the same seed gave different results"),
        (case.seed + 2, "generators of different seeds gave the same result"),
    ):
        again = _mask_call(fn, case, ids, torch.Generator().manual_seed(seed))
        equal = all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
        if equal != (seed == case.seed + 1):
            raise AssertionError(
                f"two calls with {differ}: draw every random number from the "
                "generator you are given (generator=generator)"
            )


@checker("mask_tokens")
def check_mask_tokens(fn: Callable) -> None:
    """``fn(ids, vocab_size, mask_id, special_ids, generator)`` -> (inputs, labels).

    Each non-special token is chosen with probability 0.15; a chosen token becomes
    [MASK] (80%), a random token of the vocabulary (10%) or stays (10%). labels
    hold the original token where chosen, -100 elsewhere. Checked on three batches
    of some 40,000 tokens, with different vocabularies, special ids, mask ids and
    generators; the generator must be used, not seeded, and the global one left
    alone.
    """
    with forbidden(bert, "mask_tokens", reader=fn):
        for case in _MASK_CASES:
            ids = case.ids()
            generator = torch.Generator().manual_seed(case.seed + 1)
            inputs, labels = _mask_call(fn, case, ids, generator)
            special = torch.isin(ids, torch.tensor(list(case.special_ids)))
            chosen = _check_choice(case, ids, inputs, labels, special)
            _check_fates(case, ids, inputs, chosen)
        _check_generator(fn, _MASK_CASES[0])
