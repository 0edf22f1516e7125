"""The checker of Chapter 5's beam search exercise.

The hidden "model" is a table of next-token probabilities. Hand-made tables set one
trap each (a later branch, a short sentence that beats a long one, a sentence that
needs every one of ``max_len`` tokens, ...), so that each wrong search fails with
its own message; random tables, where the most probable sentence is not the greedy
one, check the rest.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from ._checking import call, checker

__all__ = ["check_beam_search"]

BOS, EOS, A, B, C, D = range(6)  # the token ids of the hand-made tables


class _Model:
    """``next_log_probs``: checks how it is called, then reads ``row(prefix)``."""

    def __init__(self, n_tokens: int):
        self.n_tokens = n_tokens
        self.beam_size, self.max_len = 1, 1

    def __call__(self, prefixes: Tensor) -> Tensor:
        if not isinstance(prefixes, Tensor) or prefixes.dim() != 2:
            raise AssertionError(
                "call next_log_probs with a (K, t) tensor of K prefixes, got "
                f"{getattr(prefixes, 'shape', type(prefixes).__name__)}"
            )
        K, t = prefixes.shape
        if K > self.beam_size:
            raise AssertionError(
                f"next_log_probs was called with {K} prefixes, but a beam of "
                f"{self.beam_size} keeps only the {self.beam_size} best candidates "
                "at each step"
            )
        if t > self.max_len:
            raise AssertionError(
                f"next_log_probs was called with prefixes of {t} tokens: with "
                f"max_len={self.max_len} the search stops after {self.max_len} new "
                "tokens, so no prefix it extends is longer than max_len"
            )
        rows = [self.row(tuple(int(i) for i in p.tolist())) for p in prefixes]
        return torch.tensor(rows, dtype=torch.float64).log()

    def row(self, prefix: tuple[int, ...]) -> list[float]:
        raise NotImplementedError


class _Table(_Model):
    """Probabilities from ``table[prefix]``; other prefixes get ``default``."""

    def __init__(self, table: dict, default: dict | None = None):
        super().__init__(n_tokens=6)
        self.table, self.default = table, default or {EOS: 0.9, A: 0.1}

    def row(self, prefix: tuple[int, ...]) -> list[float]:
        probs = [1e-6] * self.n_tokens  # every token is possible, barely
        for token, p in self.table.get(prefix, self.default).items():
            probs[token] = p
        total = sum(probs)
        return [p / total for p in probs]


class _Random(_Model):
    """Random rows that depend on the whole prefix; every sentence ends by
    ``final_len`` tokens."""

    def __init__(self, seed: int, n_tokens: int = 4, final_len: int = 4):
        super().__init__(n_tokens)
        self.seed, self.final_len = seed, final_len

    def row(self, prefix: tuple[int, ...]) -> list[float]:
        if len(prefix) >= self.final_len:
            return [1.0 if token == EOS else 0.0 for token in range(self.n_tokens)]
        key = sum(token * self.n_tokens**i for i, token in enumerate(prefix))
        gen = torch.Generator().manual_seed(self.seed * 100_003 + key)
        probs = torch.rand(self.n_tokens, generator=gen) ** 3 + 1e-3
        probs[BOS] = 0.0  # BOS never comes again
        return (probs / probs.sum()).tolist()


def _log_prob(model: _Model, tokens: list[int]) -> float:
    rows = (model.row(tuple(tokens[:i])) for i in range(1, len(tokens)))
    return sum(
        math.log(row[token]) for row, token in zip(rows, tokens[1:], strict=True)
    )


def _beam_search(model, beam_size, max_len, full_beams=False) -> list[int]:
    """The reference. ``full_beams``: set the finished candidates among the
    ``beam_size`` best aside, and keep the ``beam_size`` best live ones (the
    other reading of the exercise; both are accepted)."""
    beams, finished = [([BOS], 0.0)], []
    for _ in range(max_len):
        candidates = sorted(
            (
                (tokens + [token], score + math.log(p))
                for tokens, score in beams
                for token, p in enumerate(model.row(tuple(tokens)))
                if p > 0
            ),
            key=lambda c: -c[1],
        )
        finished += [c for c in candidates[:beam_size] if c[0][-1] == EOS]
        live = [c for c in candidates if c[0][-1] != EOS]
        beams = live[:beam_size] if full_beams else [
            c for c in candidates[:beam_size] if c[0][-1] != EOS
        ]  # fmt: skip
        if not beams:
            break
    return max(finished or beams, key=lambda c: c[1])[0]


def _greedy(model: _Model) -> list[int]:
    tokens = [BOS]
    while tokens[-1] != EOS:
        row = model.row(tuple(tokens))
        tokens.append(max(range(len(row)), key=row.__getitem__))
    return tokens


def _exhaustive(model: _Model, prefix=(BOS,), logp=0.0) -> tuple[float, list[int]]:
    """The finished sequence with the highest log-probability."""
    if prefix[-1] == EOS:
        return logp, list(prefix)
    row = model.row(prefix)
    return max(
        _exhaustive(model, prefix + (token,), logp + math.log(p))
        for token, p in enumerate(row)
        if p > 0
    )


class _Trap(NamedTuple):
    """A hand-made table that one wrong search falls into."""

    what: str  # the trap, for the message
    table: dict  # prefix -> {token: probability}
    beam_size: int
    max_len: int
    message: str  # what to fix, for a search that falls in
    default: dict | None = None  # the row of every other prefix


_TRAPS = [
    _Trap(
        "greedy takes A (0.55), whose sentences end at 0.35 at best",
        {(BOS,): {A: 0.55, B: 0.45}, (BOS, A): {EOS: 0.35, A: 0.33, B: 0.32}},
        2,
        5,
        "with beam_size=2 the search should keep the second-best first token and "
        "find the more probable sentence",
    ),
    _Trap(
        "the best sentence branches off at the second new token",
        {
            (BOS,): {A: 0.9, B: 0.1},
            (BOS, A): {C: 0.5, D: 0.4, EOS: 0.1},
            (BOS, A, C): {EOS: 0.4, C: 0.35, D: 0.25},
            (BOS, B): {EOS: 0.8, A: 0.2},
        },
        2,
        5,
        "extend every live prefix by every token and keep the beam_size best of "
        "all those candidates (not the best one per prefix, and not a greedy "
        "continuation of the first step)",
    ),
    _Trap(
        "a short sentence (0.4) beats a long one of higher per-token probability",
        {
            (BOS,): {A: 0.6, EOS: 0.4},
            (BOS, A): {B: 0.8, EOS: 0.12, C: 0.08},
            (BOS, A, B): {C: 0.8, EOS: 0.14, A: 0.06},
            (BOS, A, B, C): {EOS: 0.8, D: 0.2},
        },
        2,
        5,
        "rank the sentences by their total log-probability, with no length "
        "normalisation: a shorter sentence with a higher total wins",
    ),
    _Trap(
        "the first sentence to finish (0.3) is not the best (0.63)",
        {(BOS,): {A: 0.7, EOS: 0.3}, (BOS, A): {EOS: 0.9, B: 0.1}},
        2,
        4,
        "a live prefix can still finish with a higher log-probability than the "
        "first finished sentence: go on until no prefix is alive or max_len",
    ),
    _Trap(
        "the best sentence needs all max_len=3 new tokens",
        {
            (BOS,): {A: 0.9, EOS: 0.1},
            (BOS, A): {B: 0.9, EOS: 0.1},
            (BOS, A, B): {EOS: 0.9, C: 0.1},
        },
        2,
        3,
        "the most probable sentence uses all max_len=3 new tokens: run max_len "
        "steps, not fewer",
    ),
    _Trap(
        "no sentence finishes within max_len=2",
        {
            (BOS,): {A: 0.5, B: 0.4, EOS: 0.1},
            (BOS, A): {C: 0.6, D: 0.3, EOS: 0.1},
            (BOS, B): {C: 0.5, D: 0.45, EOS: 0.05},
        },
        2,
        2,
        "when no sentence finished within max_len, return the best live prefix",
    ),
    _Trap(
        "a sentence finishes (0.3) while a live prefix is more probable (0.54)",
        {(BOS,): {A: 0.6, EOS: 0.3}, (BOS, A): {B: 0.9, EOS: 0.05}},
        2,
        2,
        "return the best finished sentence; an unfinished prefix counts only when "
        "no sentence finished",
    ),
    _Trap(
        "the most probable sentence starts with a token that a beam of 2 drops",
        {
            (BOS,): {A: 0.5, B: 0.4},
            (BOS, A): {C: 0.5, D: 0.45},
            (BOS, B): {D: 0.55, C: 0.4},
            (BOS, B, D): {EOS: 1.0},
        },
        2,
        3,
        "keep only the beam_size best candidates at each step, over all prefixes",
        default={EOS: 0.55, A: 0.45},
    ),
]

_RANDOM_SEEDS = (5, 12, 23, 29)  # the most probable sentence is not the greedy one


def _as_list(result, what: str) -> list[int]:
    if isinstance(result, Tensor):
        result = result.flatten().tolist()
    if not isinstance(result, list | tuple):
        raise AssertionError(f"{what}: return a list of token ids, got {result!r}")
    for t in result:  # ints, or floats that are whole numbers (a tensor's .tolist())
        whole = isinstance(t, numbers.Real) and not isinstance(t, bool)
        if not whole or not math.isfinite(t) or t != int(t):
            raise AssertionError(
                f"{what}: return a list of token ids (ints), got {result!r}"
            )
    return [int(t) for t in result]


def _search(fn: Callable, model: _Model, beam_size: int, max_len: int) -> list[int]:
    """Run the reader's search; check what every answer must satisfy."""
    model.beam_size, model.max_len = beam_size, max_len
    what = f"beam_size={beam_size}, max_len={max_len}"
    result = call(fn, model, BOS, EOS, beam_size, max_len)  # None: no `return`
    got = _as_list(result, what)
    if got[:1] != [BOS]:
        raise AssertionError(f"the sequence should start with bos_id={BOS}, got {got}")
    if EOS in got[:-1]:
        raise AssertionError(
            f"{what}: the sequence {got} goes on after eos_id={EOS}; a candidate "
            "that ends in eos_id is finished: set it aside"
        )
    if len(got) - 1 > max_len:
        raise AssertionError(
            f"{what}: the sequence {got} has {len(got) - 1} new tokens, more than "
            "max_len"
        )
    return got


@checker("beam_search")
def check_beam_search(fn: Callable) -> None:
    """``fn(next_log_probs, bos_id, eos_id, beam_size, max_len)`` -> list of ids."""
    trap = _Table(_TRAPS[0].table)
    got = _search(fn, trap, 1, 5)
    if got != _greedy(trap):
        raise AssertionError(
            f"with beam_size=1 beam search is greedy decoding; got {got}"
        )
    for trap in _TRAPS:
        model = _Table(trap.table, trap.default)
        expected = _beam_search(model, trap.beam_size, trap.max_len)
        got = _search(fn, model, trap.beam_size, trap.max_len)
        if got != expected:
            raise AssertionError(
                f"when {trap.what} (beam_size={trap.beam_size}, max_len="
                f"{trap.max_len}), your search returned {got}, log-probability "
                f"{_log_prob(model, got):.3f}: {trap.message}"
            )
    for seed in _RANDOM_SEEDS:
        model = _Random(seed)
        got = _search(fn, model, 1, 6)
        if got != _greedy(model):
            raise AssertionError(
                f"with beam_size=1 beam search is greedy decoding: expected "
                f"{_greedy(model)}, got {got}"
            )
        for beam_size in (2, 3):
            got = _search(fn, model, beam_size, 6)
            accepted = [_beam_search(model, beam_size, 6, f) for f in (False, True)]
            if got not in accepted:
                raise AssertionError(
                    f"with beam_size={beam_size} on a random model the search "
                    f"returned {got} (log-probability {_log_prob(model, got):.3f}); "
                    f"a beam of {beam_size} finds a sentence of log-probability "
                    f"{_log_prob(model, accepted[0]):.3f}"
                )
        best_logp, best = _exhaustive(model)
        got = _search(fn, model, 64, 6)
        if got != best:
            raise AssertionError(
                f"with a beam as wide as every possible prefix (64) the search is "
                f"exhaustive and must return the most probable sentence "
                f"(log-prob {best_logp:.3f}); got {got}"
            )
