"""Toy tasks, generated on the fly: no downloads, any size, any seed.

Shape letters: B batch, T sequence length, N number of items.

Each generator takes a ``torch.Generator`` (or ``None`` for the global one), so a
chapter can draw the same data again, and a ``device`` to create tensors on.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["LookupBatch", "lookup_task"]


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
    if n_pairs > n_keys:
        raise ValueError(
            f"n_pairs={n_pairs} needs at least as many keys, got n_keys={n_keys}"
        )
    if min(batch_size, n_pairs, n_values) < 1:
        raise ValueError("batch_size, n_pairs and n_values must be positive")
    scores = torch.rand(batch_size, n_keys, generator=generator)
    keys = scores.argsort(dim=1)[:, :n_pairs]  # (B, N), distinct within a row
    values = torch.randint(n_values, (batch_size, n_pairs), generator=generator)
    position = torch.randint(n_pairs, (batch_size,), generator=generator)
    rows = torch.arange(batch_size)
    query, target = keys[rows, position], values[rows, position]
    return LookupBatch(*(t.to(device) for t in (keys, values, query, target, position)))
