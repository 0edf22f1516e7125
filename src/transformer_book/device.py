"""Device choice and seeding, used by every chapter (introduced in Chapter 2)."""

from __future__ import annotations

import random

import numpy as np
import torch

from ._validate import check_device, check_int

__all__ = ["get_device", "set_seed", "autocast"]


def get_device() -> torch.device:
    """The best available device: CUDA, else Apple's MPS, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's and PyTorch's random generators (all devices)."""
    seed = check_int("seed", seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def autocast(device: torch.device | str):
    """Mixed precision where it pays: bfloat16 autocast on CUDA, a no-op elsewhere.

    The CPU runs the book in float32 (bfloat16 matmuls are slower than float32 on
    most CPUs); on a GPU the same cells run in bfloat16 without changes.

    >>> with autocast(get_device()):
    ...     pass
    """
    if device is None:
        raise TypeError("device must be a torch.device or a string such as 'cpu'")
    check_device("device", device)
    device = torch.device(device)
    return torch.autocast(
        device_type=device.type,
        dtype=torch.bfloat16,
        enabled=device.type == "cuda",
    )
