"""The small generated tasks of Chapters 1-4: a dictionary look-up (2), two
relations at once (3), long-range recall (1) and lag copy (4).

Shape letters: B batch, T sequence length, N number of items.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .._validate import check_device, check_generator, check_int

__all__ = [
    "LookupBatch",
    "lookup_task",
    "TwoRelationBatch",
    "two_relation_task",
    "IGNORE_INDEX",
    "RecallBatch",
    "recall_task",
    "LagCopyBatch",
    "lag_copy_task",
]


@dataclass(frozen=True)
class LookupBatch:
    """A batch of dictionary look-ups (Chapter 2).

    keys: (B, N) distinct key ids per row; values: (B, N) value ids;
    query: (B,) one of the row's keys; target: (B,) the value stored under it;
    position: (B,) where in the row the queried key sits.
    """

    keys: Tensor
    values: Tensor
    query: Tensor
    target: Tensor
    position: Tensor


def lookup_task(
    batch_size: int,
    n_pairs: int,
    n_keys: int,
    n_values: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> LookupBatch:
    """Rows of ``n_pairs`` (key, value) pairs and a query key: find its value.

    The right answer sits at a different place in every row, so no fixed
    weighting of the positions can find it: the model has to compare the query
    with every key, which is exactly what attention's Q·K does.
    """
    _check_pairs(batch_size, n_pairs, n_keys, n_values, generator, device)
    scores = torch.rand(batch_size, n_keys, generator=generator)
    keys = scores.argsort(dim=1)[:, :n_pairs]  # (B, N), distinct within a row
    values = torch.randint(n_values, (batch_size, n_pairs), generator=generator)
    position = torch.randint(n_pairs, (batch_size,), generator=generator)
    rows = torch.arange(batch_size)
    query, target = keys[rows, position], values[rows, position]
    return LookupBatch(*(t.to(device) for t in (keys, values, query, target, position)))


@dataclass(frozen=True)
class TwoRelationBatch:
    """A batch of the two-relation task (Chapter 3).

    keys: (B, T) key id per position, each key held by exactly two positions;
    values: (B, T) value id per position;
    partner: (B, T) the other position holding the same key;
    previous: (B, T) the previous position, ``t - 1`` (-1 at position 0);
    target: (B, T, 2) what to predict at each position: ``[..., 0]`` the value one
    position back (``IGNORE_INDEX`` at position 0, which has none), ``[..., 1]`` the
    value at the partner position.
    """

    keys: Tensor
    values: Tensor
    partner: Tensor
    previous: Tensor
    target: Tensor


IGNORE_INDEX = -100  # the default ignore_index of F.cross_entropy


def two_relation_task(
    batch_size: int,
    n_pairs: int,
    n_keys: int,
    n_values: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> TwoRelationBatch:
    """Sequences of T = 2 * n_pairs (key, value) tokens where every key occurs
    twice; at every position predict two values found by two different relations:

    - by position: the value of the token just before (a fixed offset, t - 1);
    - by content: the value of the other token that holds the same key.

    Each value is random and unknown to the asking position, so one attention
    pattern cannot fetch both; the keys of a row are distinct pairs placed at
    random positions, so no fixed positional pattern finds the partner.
    """
    _check_pairs(batch_size, n_pairs, n_keys, n_values, generator, device)
    T = 2 * n_pairs
    pair_keys = torch.rand(batch_size, n_keys, generator=generator).argsort(dim=1)
    pair_keys = pair_keys[:, :n_pairs]  # (B, N), distinct within a row
    order = torch.rand(batch_size, T, generator=generator).argsort(dim=1)  # (B, T)
    pair_of = order % n_pairs  # (B, T): the pair each position belongs to
    keys = pair_keys.gather(1, pair_of)  # (B, N) -> (B, T)
    values = torch.randint(n_values, (batch_size, T), generator=generator)
    by_pair = pair_of.argsort(dim=1, stable=True)  # (B, T): pair 0's two positions...
    first, second = by_pair[:, 0::2], by_pair[:, 1::2]  # (B, N) each
    partner = torch.empty_like(by_pair)
    partner.scatter_(1, first, second)
    partner.scatter_(1, second, first)
    previous = (torch.arange(T) - 1).expand(batch_size, T)  # (B, T), -1 at t = 0
    prev_value = values.gather(1, previous.clamp(min=0))
    prev_value = prev_value.masked_fill(previous < 0, IGNORE_INDEX)
    target = torch.stack([prev_value, values.gather(1, partner)], dim=-1)  # (B,T,2)
    return TwoRelationBatch(
        *(t.to(device) for t in (keys, values, partner, previous.clone(), target))
    )


@dataclass(frozen=True)
class RecallBatch:
    """A batch of the long-range recall task (Chapter 1).

    tokens: (B, distance + 1) the symbol, distance - 1 fillers, then the query token;
    target: (B,) the symbol, which the model must name when it reads the query.
    """

    tokens: Tensor
    target: Tensor


def recall_task(
    batch_size: int,
    distance: int,
    n_symbols: int = 8,
    n_fillers: int = 8,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> RecallBatch:
    """Remember a symbol across ``distance`` steps: ``[s, f, f, ..., f, ?] -> s``.

    Token ids: symbols ``0 .. n_symbols - 1``, fillers ``n_symbols .. n_symbols +
    n_fillers - 1``, and the query ``n_symbols + n_fillers``, so the vocabulary has
    ``n_symbols + n_fillers + 1`` tokens and chance accuracy is ``1 / n_symbols``.
    The symbol sits ``distance`` positions before the query. Fillers never use a
    symbol's id: the difficulty is the distance, not telling the symbol apart.
    """
    for name, value in (
        ("batch_size", batch_size),
        ("distance", distance),
        ("n_symbols", n_symbols),
        ("n_fillers", n_fillers),
    ):
        check_int(name, value, minimum=1)
    _check_source(generator, device)
    symbol = torch.randint(n_symbols, (batch_size, 1), generator=generator)  # (B, 1)
    shape = (batch_size, distance - 1)
    fillers = torch.randint(
        n_symbols, n_symbols + n_fillers, shape, generator=generator
    )  # (B, distance - 1)
    query = torch.full((batch_size, 1), n_symbols + n_fillers)  # (B, 1)
    tokens = torch.cat([symbol, fillers, query], dim=1)  # (B, distance + 1)
    return RecallBatch(tokens.to(device), symbol[:, 0].to(device))


@dataclass(frozen=True)
class LagCopyBatch:
    """A batch of the lag-copy task (Chapter 4).

    tokens: (B, T) random token ids; target: (B, T) the token ``lag`` positions
    back, ``IGNORE_INDEX`` at the first ``lag`` positions, which have none.
    """

    tokens: Tensor
    target: Tensor


def lag_copy_task(
    batch_size: int,
    length: int,
    vocab_size: int,
    lag: int = 1,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> LagCopyBatch:
    """At every position, name the token ``lag`` positions back: ``target[t] =
    tokens[t - lag]``.

    The tokens are independent and uniform, so content alone says nothing: only
    where a token sits does. The rule is the same at every position and every
    length, so a model that learned it at one length should apply it at any
    length, which makes the task a clean test of length extrapolation (chance
    accuracy is ``1 / vocab_size``).
    """
    for name, value in (
        ("batch_size", batch_size),
        ("length", length),
        ("vocab_size", vocab_size),
        ("lag", lag),
    ):
        check_int(name, value, minimum=1)
    _check_source(generator, device)
    tokens = torch.randint(vocab_size, (batch_size, length), generator=generator)
    target = torch.full_like(tokens, IGNORE_INDEX)  # (B, T)
    target[:, lag:] = tokens[:, :-lag]  # (B, T - lag), empty when lag >= T
    return LagCopyBatch(tokens.to(device), target.to(device))


def _check_source(generator: torch.Generator | None, device) -> None:
    check_generator("generator", generator)
    check_device("device", device)


def _check_pairs(batch_size, n_pairs, n_keys, n_values, generator, device) -> None:
    """The sizes of the look-up and two-relation tasks."""
    for name, value in (
        ("batch_size", batch_size),
        ("n_pairs", n_pairs),
        ("n_keys", n_keys),
        ("n_values", n_values),
    ):
        check_int(name, value, minimum=1)
    if n_pairs > n_keys:
        raise ValueError(
            f"n_pairs={n_pairs} needs at least as many keys, got n_keys={n_keys}"
        )
    _check_source(generator, device)
