"""Positional encodings (Chapter 4).

Shape letters: T positions, D model width (``d_model``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["sinusoidal_encoding"]


def sinusoidal_encoding(max_len: int, d_model: int) -> Tensor:
    """The fixed sinusoidal table of Vaswani et al. (2017), §3.5.

    PE[p, 2i]   = sin(p / 10000^(2i / d_model))
    PE[p, 2i+1] = cos(p / 10000^(2i / d_model))

    Shapes: returns (max_len, d_model), float32.
    """
    if d_model % 2 != 0:
        raise ValueError(f"d_model={d_model} must be even for sinusoidal encodings")
    if max_len < 1:
        raise ValueError(f"max_len must be positive, got {max_len}")
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (T, 1)
    inv_freq = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32)
        * (-math.log(10000.0) / d_model)
    )  # (D/2,) = 10000^(-2i/d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * inv_freq)  # (T, 1) * (D/2,) -> (T, D/2)
    pe[:, 1::2] = torch.cos(position * inv_freq)
    return pe
