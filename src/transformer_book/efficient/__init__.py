"""Complexity and efficient attention (Chapter 7), one file per idea.

Exact attention costs O(T²) time and memory in the sequence length T. This
subpackage holds the ways around it that the chapter builds and measures:

================  ======================================================
module            what it holds
================  ======================================================
``tiled``         FlashAttention's tiling and online softmax: exact, no
                  (T, T) matrix (``blockwise_attention``,
                  ``online_softmax_update``)
``sparse``        sparse patterns as masks (``sliding_window_mask``,
                  ``block_sparse_mask``)
``linformer``     keys and values projected to k positions
                  (``LinformerAttention``)
``performer``     FAVOR+ positive random features (``PerformerAttention``,
                  ``performer_attention``)
``cost``          FLOPs and HBM traffic, by formula and by counting
================  ======================================================

Everything is importable from here: ``from transformer_book.efficient import
blockwise_attention``.
"""

from .cost import (
    attention_flops,
    attention_memory_traffic,
    blockwise_attention_traffic,
    flash_block_sizes,
)
from .linformer import LinformerAttention
from .performer import (
    PerformerAttention,
    orthogonal_random_features,
    performer_attention,
    positive_random_features,
)
from .sparse import block_sparse_mask, sliding_window_mask
from .tiled import blockwise_attention, online_softmax_update

__all__ = [
    "online_softmax_update",
    "blockwise_attention",
    "sliding_window_mask",
    "block_sparse_mask",
    "LinformerAttention",
    "orthogonal_random_features",
    "positive_random_features",
    "performer_attention",
    "PerformerAttention",
    "attention_flops",
    "flash_block_sizes",
    "attention_memory_traffic",
    "blockwise_attention_traffic",
]
