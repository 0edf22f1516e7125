"""Checkers for the coding exercises, one submodule per chapter.

Every checker takes the reader's function, prints "not attempted yet" while it
still raises ``NotImplementedError``, raises ``AssertionError`` naming what is
wrong, and prints one line on success (returning True).
"""

from .ch02_attention import (
    check_causal_mask,
    check_masked_softmax,
    check_scaled_dot_product_attention,
)

__all__ = [
    "check_causal_mask",
    "check_masked_softmax",
    "check_scaled_dot_product_attention",
]
