"""Linformer: attention over a projected, shorter sequence (Chapter 7).

Wang et al. (2020), "Linformer: Self-Attention with Linear Complexity": the (T, T)
attention matrix is close to low rank, so keys and values are first projected along
the sequence axis from T rows to k rows by learned (k, seq_len) matrices E and F::

    head_i = softmax(Q_i (E K_i)^T / sqrt(d_head)) (F V_i)

The scores are (T, k) instead of (T, T): time and memory O(T k). E and F are shared
by the heads (the paper's "headwise sharing"). Since every projected key mixes all
positions, there is no causal or padding mask: the model is an encoder.

Shape letters: B batch, H heads, T positions (T <= seq_len), K the projected
length k, D ``d_model``, Dh ``d_head``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .._validate import check_int
from ..attention import scaled_dot_product_attention
from ._heads import ProjectedHeads

__all__ = ["LinformerAttention"]


class LinformerAttention(ProjectedHeads):
    """Multi-head self-attention whose keys and values are projected to k positions.

    ``q_proj, k_proj, v_proj, out_proj`` are named as in
    :class:`~transformer_book.attention.MultiHeadAttention`; ``e_proj`` and
    ``f_proj`` are the paper's E and F, drawn from N(0, 1/k) as a random
    (Johnson-Lindenstrauss) projection would be. Inputs shorter than ``seq_len``
    use the first T columns of E and F. With k = T and E = F = identity this is
    exactly multi-head attention.

    Shapes:
        x: (B, T, D), T <= seq_len; returns (B, T, D)
        e_proj, f_proj: (k, seq_len)
    """

    def __init__(
        self, d_model: int, n_heads: int, seq_len: int, k: int, bias: bool = True
    ):
        super().__init__(d_model, n_heads, bias=bias)
        self.seq_len = check_int("seq_len", seq_len, 1)
        self.k = check_int("k", k, 1)
        self.e_proj = nn.Parameter(torch.randn(self.k, self.seq_len) / math.sqrt(k))
        self.f_proj = nn.Parameter(torch.randn(self.k, self.seq_len) / math.sqrt(k))

    def forward(self, x: Tensor) -> Tensor:
        self.check_input(x, max_len=self.seq_len)
        T = x.shape[1]
        e, f = self.e_proj[:, :T], self.f_proj[:, :T]  # (K, T): the first T columns
        q = self.split_heads(self.q_proj(x))  # (B, T, D) -> (B, H, T, Dh)
        k = self.split_heads(e @ self.k_proj(x))  # (K, T) @ (B, T, D) -> (B, H, K, Dh)
        v = self.split_heads(f @ self.v_proj(x))  # (K, T) @ (B, T, D) -> (B, H, K, Dh)
        heads, _ = scaled_dot_product_attention(q, k, v)  # weights (B, H, T, K)
        return self.out_proj(self.merge_heads(heads))  # (B, H, T, Dh) -> (B, T, D)
