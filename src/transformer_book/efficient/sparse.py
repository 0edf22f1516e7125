"""Sparse attention patterns as boolean masks (Chapter 7).

Two ways to make attention's cost grow linearly in the sequence length T: let each
query see only a window of recent keys (Longformer, Beltagy et al. 2020; Mistral 7B,
Jiang et al. 2023), or a few blocks of keys plus some global blocks that everyone
sees (BigBird, Zaheer et al. 2020; Longformer's global tokens). As masks they plug
into every attention function of the package and show the pattern; the saving
needs a kernel that skips the tiles where the mask is all False (as FlexAttention's
block masks do), which then works in proportion to the number of True entries. The
dense functions of the package still do T**2 work with these masks.

Masks are boolean, True = may attend; i indexes queries, j keys.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._validate import check_device, check_int

__all__ = ["sliding_window_mask", "block_sparse_mask"]


def sliding_window_mask(
    t: int, window: int, device: torch.device | str | None = None
) -> Tensor:
    """(t, t) bool mask, True where 0 <= i - j < window: causal local attention.

    Query i sees itself and the ``window - 1`` keys before it, so each row has at
    most ``window`` True entries and the mask has about ``t * window`` of them,
    linear in t. ``window >= t`` gives the causal mask. Stacked layers widen the
    view: after n layers, information can travel n * (window - 1) positions.

    Shapes: returns (t, t)
    """
    t = check_int("t", t, minimum=1)
    window = check_int("window", window, minimum=1)
    check_device("device", device)
    positions = torch.arange(t, device=device)  # (T,)
    offset = positions[:, None] - positions[None, :]  # (T, 1) - (1, T) -> (T, T): i - j
    return (offset >= 0) & (offset < window)


def block_sparse_mask(
    t: int,
    block: int,
    n_global: int = 1,
    causal: bool = False,
    device: torch.device | str | None = None,
) -> Tensor:
    """(t, t) bool mask of a BigBird/Longformer-like block-sparse pattern.

    Positions are cut into blocks of ``block`` (the last one may be shorter). Query
    block a may attend key block b when

    - b is local: b in {a - 1, a, a + 1} (``causal=False``) or b in {a - 1, a}
      (``causal=True``);
    - or either block is global: a < n_global or b < n_global (the first
      ``n_global`` blocks see, and are seen by, every block).

    With ``causal=True`` the result is also cut to j <= i, so no query sees the
    future (a global block then sees only what precedes it).

    Allowed entries, for t = n * block (n blocks, g = min(n_global, n) global):

    - not causal, n > g: ``block**2 * ((2g + 3) n - g**2 - 3g - 2)`` (all n**2
      blocks when n = g);
    - causal: ``n * block * (block + 1) / 2 + block**2 * (g (n - 1) - g (g - 1) / 2
      + max(n - 1 - g, 0))``.

    Both are linear in t for a fixed block and n_global, where the dense mask has
    t**2 entries.

    Shapes: returns (t, t)
    """
    t = check_int("t", t, minimum=1)
    block = check_int("block", block, minimum=1)
    n_global = check_int("n_global", n_global, minimum=0)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    check_device("device", device)
    block_of = torch.arange(t, device=device) // block  # (T,): each position's block
    a, b = block_of[:, None], block_of[None, :]  # (T, 1) query blocks, (1, T) keys
    if causal:
        local = (a - b >= 0) & (a - b <= 1)  # (T, T)
    else:
        local = (a - b).abs() <= 1  # (T, T)
    allowed = local | (a < n_global) | (b < n_global)  # (T, T)
    if causal:
        allowed &= torch.ones(t, t, dtype=torch.bool, device=device).tril()
    return allowed
