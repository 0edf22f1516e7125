"""Checks at the edges of the models, shared by the Chapter 6 families."""

from __future__ import annotations

import torch
from torch import Tensor

from .._validate import check_has_values, check_int, check_on, check_real, check_tensor

SIZES = ("vocab_size", "max_len", "d_model", "n_heads", "n_layers", "d_ff")


def check_config(cfg) -> None:
    """ValueError naming the field when a config's
    sizes do not fit together."""
    for name in SIZES:  # ValueError for a wrong type too, as the tests have it
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
    check_real("dropout", cfg.dropout, 0.0, 1.0, high_open=True)


def check_ids(
    name: str, ids: Tensor, vocab_size: int, max_len: int, weight: Tensor | None = None
) -> None:
    """ValueError naming ``name`` unless ``ids`` is (B, T) token ids that fit (a
    TypeError if it is not an integer tensor), on ``weight``'s device if given."""
    check_tensor(name, ids)
    if ids.dim() != 2:
        raise ValueError(
            f"{name} must be a (B, T) tensor of token ids, got {tuple(ids.shape)}"
        )
    if ids.dtype not in (torch.long, torch.int):
        raise ValueError(f"{name} must hold integer token ids, got {ids.dtype}")
    check_has_values(name, ids)
    if weight is not None:
        check_on(name, ids, weight)
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


def check_pad_id(cfg) -> None:
    """``cfg.pad_id`` is an int token id of the vocabulary."""
    check_int("pad_id", cfg.pad_id)
    if not 0 <= cfg.pad_id < cfg.vocab_size:
        raise ValueError(
            f"pad_id={cfg.pad_id} is not a token id of vocab_size={cfg.vocab_size}"
        )


def check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
