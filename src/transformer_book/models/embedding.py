"""The token embedding every model of the book shares (Chapter 5, §5.5).

Shape letters: B batch, T positions, D model width (``d_model``), V vocabulary size.
"""

from __future__ import annotations

import math

from torch import Tensor, nn

from .._validate import check_int, check_on, check_probability, check_token_ids
from ..positional import sinusoidal_encoding

__all__ = ["TokenEmbedding"]


class TokenEmbedding(nn.Module):
    """Token embedding times sqrt(d_model), plus the sinusoidal positions (§3.4-3.5).

    The scale matters with weight tying: the table is initialised with standard
    deviation 1/sqrt(d_model), so that the tied output layer starts with logits of
    order 1, and the factor sqrt(d_model) brings the embeddings back to the size of
    the positional encodings (about 1 per coordinate).

    Shapes: idx (B, T) int -> (B, T, D)
    """

    def __init__(self, vocab_size: int, d_model: int, max_len: int, dropout: float):
        super().__init__()
        check_int("vocab_size", vocab_size, minimum=1)
        check_probability("dropout", dropout)
        self.d_model = check_int("d_model", d_model, minimum=1)
        self.max_len = check_int("max_len", max_len, minimum=1)
        self.token = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.token.weight, std=d_model**-0.5)
        pe = sinusoidal_encoding(max_len, d_model)  # (max_len, D)
        self.register_buffer("positions", pe, persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, idx: Tensor) -> Tensor:
        self._check_idx(idx)
        T = idx.shape[1]
        x = self.token(idx) * math.sqrt(self.d_model)  # (B, T) -> (B, T, D)
        return self.dropout(x + self.positions[:T])  # (B, T, D) + (T, D)

    def _check_idx(self, idx: Tensor) -> None:
        check_token_ids("idx", idx, self.token.num_embeddings)
        check_on("idx", idx, self.token.weight)
        if idx.shape[1] > self.max_len:
            raise ValueError(
                f"idx has {idx.shape[1]} positions, more than max_len={self.max_len}"
            )
