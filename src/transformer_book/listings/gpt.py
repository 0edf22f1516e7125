"""A GPT on one page: the decoder-only Transformer, in plain PyTorch (GPT-2's layout).

Shapes: B batch, T positions, D d_model, H n_heads, Dh = D / H (the paper's d_k),
F d_ff, V vocab_size."""

import math

import torch
from torch import nn
from torch.nn import functional as F


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d_k) + causal mask) V W_i^V."""

    def __init__(self, d_model, n_heads, dropout):
        super().__init__()
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model)  # W^Q of all heads, side by side
        self.k_proj = nn.Linear(d_model, d_model)  # W^K
        self.v_proj = nn.Linear(d_model, d_model)  # W^V
        self.out_proj = nn.Linear(d_model, d_model)  # W^O
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask):
        B, T, D = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        # (B, T, D) -> (B, T, H, Dh) -> (B, H, T, Dh): H heads of width d_k
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, H, T, T)
        scores = scores.masked_fill(~mask, float("-inf"))  # t sees 0..t only
        weights = self.dropout(torch.softmax(scores, dim=-1))  # rows sum to 1
        heads = weights @ v  # (B, H, T, T) @ (B, H, T, Dh) -> (B, H, T, Dh)
        return self.out_proj(
            heads.transpose(1, 2).reshape(B, T, D)
        )  # concat: (B, T, D)


class FeedForward(nn.Module):
    """FFN(x) = GELU(x W_1 + b_1) W_2 + b_2, on each position alone."""

    def __init__(self, d_model, d_ff, dropout):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        hidden = F.gelu(self.linear1(x))  # (B, T, D) -> (B, T, F)
        return self.linear2(self.dropout(hidden))  # (B, T, F) -> (B, T, D)


class Block(nn.Module):
    """A pre-norm block: x + SelfAttention(LN(x)), then x + FFN(LN(x))."""

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask):
        x = x + self.dropout(self.self_attn(self.norm1(x), mask))  # (B, T, D)
        return x + self.dropout(self.feed_forward(self.norm2(x)))  # (B, T, D)


class GPT(nn.Module):
    """logits = LN(Blocks(E[idx] + P[0..T-1])) E^T; idx (B, T) -> logits (B, T, V)."""

    def __init__(
        self, vocab_size, max_len, d_model, n_heads, n_layers, d_ff, dropout=0.0
    ):
        super().__init__()
        self.max_len = max_len
        self.token = nn.Embedding(vocab_size, d_model)  # E: (V, D)
        self.position = nn.Embedding(max_len, d_model)  # P: learned, (max_len, D)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.output = nn.Linear(d_model, vocab_size, bias=False)
        self.output.weight = self.token.weight  # tied: one (V, D) table, two uses
        for name, p in self.named_parameters():  # GPT-2's initialisation
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:  # residual writers shrink with depth
                deep = name.endswith(("out_proj.weight", "linear2.weight"))
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * n_layers if deep else 1))

    def forward(self, idx):
        T = idx.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()  # (T, T)
        x = self.dropout(self.token(idx) + self.position.weight[:T])  # (B, T, D)
        for block in self.blocks:
            x = block(x, mask)  # (B, T, D) -> (B, T, D)
        return self.output(self.norm(x))  # (B, T, D) -> (B, T, V)

    @torch.no_grad()
    def generate(self, idx, n):
        """Greedy decoding, the likeliest token each time: (B, T0) -> (B, T0 + n)."""
        for _ in range(n):
            logits = self(idx[:, -self.max_len :])  # (B, T, V): all positions again
            next_id = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, V) -> (B, 1)
            idx = torch.cat([idx, next_id], dim=1)  # (B, T) -> (B, T + 1)
        return idx
