"""Checks at the edges of the models, shared by the Chapter 6 families."""

from __future__ import annotations

import torch
from torch import Tensor

SIZES = ("vocab_size", "max_len", "d_model", "n_heads", "n_layers", "d_ff")


def check_config(cfg) -> None:
    """ValueError naming the field when a config's sizes do not fit together."""
    for name in SIZES:
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if cfg.d_model % cfg.n_heads != 0:
        raise ValueError(
            f"d_model={cfg.d_model} is not divisible by n_heads={cfg.n_heads}"
        )
    n_kv_heads = getattr(cfg, "n_kv_heads", None)
    if n_kv_heads is not None and (
        not isinstance(n_kv_heads, int)
        or isinstance(n_kv_heads, bool)
        or n_kv_heads < 1
        or cfg.n_heads % n_kv_heads
    ):
        raise ValueError(
            f"n_kv_heads must be None or a positive int dividing n_heads="
            f"{cfg.n_heads}, got {n_kv_heads!r}"
        )
    if not 0.0 <= cfg.dropout < 1.0:
        raise ValueError(f"dropout must lie in [0, 1), got {cfg.dropout}")


def check_ids(name: str, ids: Tensor, vocab_size: int, max_len: int) -> None:
    """ValueError naming ``name`` unless ``ids`` is (B, T) token ids that fit."""
    if not isinstance(ids, Tensor) or ids.dim() != 2:
        shape = tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__
        raise ValueError(f"{name} must be a (B, T) tensor of token ids, got {shape}")
    if ids.dtype not in (torch.long, torch.int):
        raise ValueError(f"{name} must hold integer token ids, got {ids.dtype}")
    if ids.shape[1] < 1:
        raise ValueError(f"{name} has no positions (shape {tuple(ids.shape)})")
    if ids.shape[1] > max_len:
        raise ValueError(
            f"{name} has {ids.shape[1]} positions, more than max_len={max_len}"
        )
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(
            f"{name} holds ids outside [0, vocab_size={vocab_size}): min "
            f"{int(ids.min())}, max {int(ids.max())}"
        )
