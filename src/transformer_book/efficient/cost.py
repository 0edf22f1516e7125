"""What attention costs: arithmetic (FLOPs) and memory traffic (Chapter 7).

Two different budgets. FLOPs count the multiply-adds; exact attention needs
O(T² D) of them however it is computed. Memory traffic counts the bytes moved
between a GPU's large, slow main memory (HBM) and its small, fast on-chip memory
(SRAM, M bytes); FlashAttention keeps the FLOPs and cuts the traffic by never
writing the (T, T) matrices to HBM (Dao et al. 2022, Theorem 2). On today's GPUs
attention at long T is bound by traffic, not by arithmetic.

A multiply-add counts as 2 FLOPs, as in ``torch.utils.flop_counter``. Shape
letters: T positions, D ``d_model``, d = Dh ``d_head``, Br and Bc the query and key
block lengths, M the on-chip memory in elements.
"""

from __future__ import annotations

import math

from torch import Tensor
from torch.overrides import TorchFunctionMode

from .._validate import check_int
from .tiled import blockwise_attention

__all__ = [
    "attention_flops",
    "flash_block_sizes",
    "attention_memory_traffic",
    "blockwise_attention_traffic",
]


def attention_flops(t: int, d_model: int, n_heads: int = 1) -> dict[str, int]:
    """FLOPs of one multi-head self-attention layer on one sequence of length t.

    - ``projections``: Q, K, V and the output, each (T, D) @ (D, D), i.e. T D²
      multiply-adds: 4 * 2 T D².
    - ``scores``: Q K^T, per head (T, Dh) @ (Dh, T), T² Dh multiply-adds; over the
      H heads T² D: 2 T² D.
    - ``weighted_sum``: weights @ V, the same: 2 T² D.
    - ``attention`` = scores + weighted_sum = 4 T² D; ``total`` adds the projections.

    The number of heads changes nothing (H heads of width D / H). The T² terms
    overtake the projections at T = 2D. Softmax, scaling and masking add O(H T²)
    element-wise operations, not counted here (nor by PyTorch's FLOP counter,
    which counts matrix products). Multiply by the batch size for a batch.
    """
    t = check_int("t", t, 1)
    d_model = check_int("d_model", d_model, 1)
    n_heads = check_int("n_heads", n_heads, 1)
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    projections = 4 * 2 * t * d_model**2
    scores = weighted_sum = 2 * t**2 * d_model
    return {
        "projections": projections,
        "scores": scores,
        "weighted_sum": weighted_sum,
        "attention": scores + weighted_sum,
        "total": projections + scores + weighted_sum,
    }


def flash_block_sizes(
    sram_bytes: int, d_head: int, dtype_bytes: int = 4
) -> tuple[int, int]:
    """(Br, Bc) for :func:`~transformer_book.efficient.blockwise_attention` from an
    on-chip memory of ``sram_bytes``: FlashAttention's choice, Algorithm 1 line 1.

    With M = sram_bytes // dtype_bytes elements, the paper takes blocks of
    ceil(M / 4d) rows for the loop that stays on chip (four (block, d) tiles fill
    M) and min(that, d) rows for the other. Algorithm 1 keeps a key block on chip
    and streams the queries; our loop (FlashAttention-2's order) keeps a query
    block and streams the keys, so the roles swap: Br = ceil(M / 4d), Bc = min(Br, d).
    """
    sram_bytes = check_int("sram_bytes", sram_bytes, 1)
    d_head = check_int("d_head", d_head, 1)
    dtype_bytes = check_int("dtype_bytes", dtype_bytes, 1)
    m = sram_bytes // dtype_bytes
    if m < 1:
        raise ValueError(
            f"sram_bytes={sram_bytes} holds no element of dtype_bytes={dtype_bytes}"
        )
    block_q = math.ceil(m / (4 * d_head))
    return block_q, min(block_q, d_head)


def attention_memory_traffic(
    t: int, d_head: int, sram_bytes: int, dtype_bytes: int = 4
) -> dict[str, int]:
    """Bytes read from and written to HBM by one head's attention forward pass.

    ``standard``, the algorithm that materialises S = Q K^T and P = softmax(S):
    read Q, K (2 T d); write S (T²); read S, write P (2 T²); read P, V (T² + T d);
    write O (T d). Total (4 T d + 4 T²) elements: quadratic in T.

    ``tiled``, :func:`~transformer_book.efficient.blockwise_attention` with the
    blocks of :func:`flash_block_sizes` (also returned, as ``block_q`` and
    ``block_k``): each query block Q_i is read once (T d in all) and its output
    O_i written once (T d); for each of the ceil(T / Br) query blocks, all of K and
    V stream past (2 T d). Total (2 T d + 2 ceil(T / Br) T d) elements. With
    Br = ceil(M / 4d) that is about 2 T d + 8 T² d² / M: Theorem 2's Θ(T² d² / M),
    which falls as the on-chip memory M grows. It beats the standard 4 T² only
    when M > about 2 d² (32 KB for d = 64 in float32): too small a memory moves
    more bytes than it saves. (The key block Bc sets the tile size, not
    the traffic.) The running max and sum stay on chip; the mask is not counted.

    Both algorithms do the same FLOPs (:func:`attention_flops`): only the traffic
    changes. Multiply by batch * heads for a layer.
    """
    t = check_int("t", t, 1)
    block_q, block_k = flash_block_sizes(sram_bytes, d_head, dtype_bytes)
    d = d_head
    standard = 2 * t * d + t**2 + 2 * t**2 + (t**2 + t * d) + t * d
    tiled = 2 * t * d + 2 * math.ceil(t / block_q) * t * d
    return {
        "standard": standard * dtype_bytes,
        "tiled": tiled * dtype_bytes,
        "block_q": block_q,
        "block_k": block_k,
    }


def blockwise_attention_traffic(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    block_size: int | tuple[int, int] = 128,
) -> dict[str, int]:
    """Bytes that :func:`blockwise_attention` loads from q, k, v and stores to its
    output, counted by watching it run (not by a formula).

    Every slice taken of q, k or v counts as a read of its bytes, every write into
    the output as a write: the "HBM" traffic of the loop, if q, k, v and the
    output lived in HBM and the tiles on chip. Mask tiles are not counted.

    Returns ``{"read": ..., "written": ..., "total": ...}`` in bytes.

    Shapes: as :func:`blockwise_attention`: q (..., Tq, Dk), k (..., Tk, Dk),
    v (..., Tk, Dv)
    """
    with _TileTraffic((q, k, v)) as traffic:
        blockwise_attention(q, k, v, mask=mask, block_size=block_size)
    return {
        "read": traffic.read,
        "written": traffic.written,
        "total": traffic.read + traffic.written,
    }


class _TileTraffic(TorchFunctionMode):
    """Sums the bytes of slices taken of ``sources`` and of every tensor assignment
    into a slice (``out[...] = tile``) while it is active."""

    def __init__(self, sources: tuple[Tensor, ...]):
        super().__init__()
        self.sources, self.read, self.written = sources, 0, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func is Tensor.__getitem__ and any(args[0] is s for s in self.sources):
            self.read += result.numel() * result.element_size()
        elif func is Tensor.__setitem__ and isinstance(args[2], Tensor):
            self.written += args[0][args[1]].numel() * args[0].element_size()
        return result
