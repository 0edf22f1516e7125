"""A tiny causal language model whose position scheme is a switch (Chapter 4).

The same decoder-only model runs with no positions, sinusoidal or learned
positions added to the input, T5's bias or ALiBi added to the attention scores,
or RoPE applied to the queries and keys, so that the schemes can be compared at
equal size and training: Chapter 4's extrapolation experiment.

Shape letters: B batch, T positions, D ``d_model``, H heads, Dh ``d_head``,
V ``vocab_size``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ._validate import (
    check_broadcasts,
    check_device,
    check_int,
    check_like_module,
    check_tensor,
    check_token_ids,
)
from .attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
from .positional import (
    LearnedPositionalEmbedding,
    RelativePositionBias,
    alibi_bias,
    apply_rope,
    sinusoidal_encoding,
)

__all__ = ["SCHEMES", "PositionLMConfig", "PositionalSelfAttention", "PositionLM"]

SCHEMES = ("none", "sinusoidal", "learned", "t5", "rope", "alibi")


@dataclass(frozen=True)
class PositionLMConfig:
    vocab_size: int  # number of token ids
    position: str = "rope"  # one of SCHEMES
    d_model: int = 64  # width of the residual stream
    n_heads: int = 4  # attention heads per layer
    n_layers: int = 2  # decoder blocks
    d_ff: int = 128  # hidden width of the feed-forward network
    max_len: int = 512  # rows of the learned table (only "learned" uses it)
    num_buckets: int = 32  # T5 buckets (only "t5")
    max_distance: int = 128  # T5: farther keys share the last bucket (only "t5")

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("num_buckets", self.num_buckets, minimum=1)
        check_int("max_distance", self.max_distance, minimum=1)
        if self.position not in SCHEMES:
            raise ValueError(f"position={self.position!r} is not one of {SCHEMES}")
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
            )
        if self.position == "rope" and (self.d_model // self.n_heads) % 2 != 0:
            raise ValueError(
                f"position='rope' turns pairs of a head's dimensions: d_head = "
                f"d_model / n_heads = {self.d_model // self.n_heads} must be even"
            )


class PositionalSelfAttention(MultiHeadAttention):
    """Causal multi-head self-attention, with RoPE on q and k or a bias on scores.

    Shapes: x (B, T, D); bias broadcastable to (B, H, T, T); returns (B, T, D).
    """

    def forward(self, x: Tensor, bias: Tensor | None = None, rope: bool = False):
        self._check_x_and_bias(x, bias)
        q = self.split_heads(self.q_proj(x))  # (B, T, D) -> (B, H, T, Dh)
        k = self.split_heads(self.k_proj(x))  # (B, T, D) -> (B, H, T, Dh)
        v = self.split_heads(self.v_proj(x))  # (B, T, D) -> (B, H, T, Dh)
        if rope:  # position enters by rotating q and k, never v
            q, k = apply_rope(q), apply_rope(k)
        mask = causal_mask(x.shape[1], device=x.device)  # (T, T)
        dropout_p = self.dropout if self.training else 0.0
        heads, _ = scaled_dot_product_attention(
            q, k, v, mask=mask, bias=bias, dropout_p=dropout_p
        )
        return self.out_proj(self.merge_heads(heads))  # (B, H, T, Dh) -> (B, T, D)

    def _check_x_and_bias(self, x: Tensor, bias: Tensor | None) -> None:
        check_tensor("x", x, "float")
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (B, T, d_model={self.d_model}), got "
                f"{tuple(x.shape)}"
            )
        check_like_module("x", x, self.q_proj.weight)
        if bias is not None:
            check_tensor("bias", bias, "float")
            B, T = x.shape[:2]
            check_broadcasts("bias", bias, (B, self.n_heads, T, T), "(B, H, T, T)")


class _Block(nn.Module):
    """Pre-norm decoder block: x + attention(norm(x)), then x + FFN(norm(x))."""

    def __init__(self, cfg: PositionLMConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.attn = PositionalSelfAttention(cfg.d_model, cfg.n_heads)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        self.ffn = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff),
            nn.GELU(),
            nn.Linear(cfg.d_ff, cfg.d_model),
        )

    def forward(self, x: Tensor, bias: Tensor | None, rope: bool) -> Tensor:
        x = x + self.attn(self.norm1(x), bias=bias, rope=rope)
        return x + self.ffn(self.norm2(x))


class PositionLM(nn.Module):
    """Decoder-only model whose only difference between runs is ``cfg.position``.

    Shapes: idx (B, T) token ids -> logits (B, T, V).
    """

    def __init__(self, cfg: PositionLMConfig):
        super().__init__()
        if not isinstance(cfg, PositionLMConfig):
            raise TypeError(f"cfg must be a PositionLMConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size)
        # Created last, so that after the same seed every scheme starts from the
        # same weights in the parts the schemes share.
        if cfg.position == "learned":
            self.learned = LearnedPositionalEmbedding(cfg.max_len, cfg.d_model)
        if cfg.position == "t5":  # one bias table shared by all layers, as in T5
            self.t5_bias = RelativePositionBias(
                cfg.n_heads, False, cfg.num_buckets, cfg.max_distance
            )

    def position_bias(self, t: int, device: torch.device) -> Tensor | None:
        """The (H, T, T) bias on the scores, for "t5" and "alibi"; else None."""
        check_int("t", t, minimum=0)
        check_device("device", device)
        if self.cfg.position == "t5":
            return self.t5_bias(t)
        if self.cfg.position == "alibi":
            return alibi_bias(self.cfg.n_heads, t, device=device)
        return None

    def forward(self, idx: Tensor) -> Tensor:
        check_token_ids("idx", idx, self.cfg.vocab_size)
        t = idx.shape[1]
        if t < 1:
            raise ValueError(f"idx has no positions: shape {tuple(idx.shape)}")
        x = self.embed(idx)  # (B, T) -> (B, T, D)
        if self.cfg.position == "sinusoidal":
            x = x + sinusoidal_encoding(t, self.cfg.d_model).to(x.device)
        elif self.cfg.position == "learned":
            x = self.learned(x)
        bias = self.position_bias(t, idx.device)  # (H, T, T) or None
        for block in self.blocks:
            x = block(x, bias=bias, rope=self.cfg.position == "rope")
        return self.head(self.norm(x))  # (B, T, D) -> (B, T, V)
