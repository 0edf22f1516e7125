"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) on one page.

Shapes: B batch, S source positions, T target positions, D d_model, H n_heads,
Dh = D / H (the paper's d_k), F d_ff, V vocab_size."""

import math

import torch
from torch import nn


def sinusoidal_encoding(max_len, d_model):
    """PE[p, 2i] = sin(p / 10000^(2i / d_model)), PE[p, 2i+1] = cos(...)  (§3.5)."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # 2i: (D/2,)
    inv_freq = torch.exp(two_i * (-math.log(10000.0) / d_model))  # 10000^(-2i/D)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * inv_freq)  # (max_len, 1) * (D/2,)
    pe[:, 1::2] = torch.cos(position * inv_freq)  # -> (max_len, D/2)
    return pe


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)   (§3.2.2)."""

    def __init__(self, d_model, n_heads, dropout):
        super().__init__()
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model)  # W^Q of all heads, side by side
        self.k_proj = nn.Linear(d_model, d_model)  # W^K
        self.v_proj = nn.Linear(d_model, d_model)  # W^V
        self.out_proj = nn.Linear(d_model, d_model)  # W^O
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, mask):
        (B, T, D), S = x.shape, memory.shape[1]  # queries from x, keys from memory
        q = self.q_proj(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        k = self.k_proj(memory).view(B, S, self.n_heads, self.d_k).transpose(1, 2)
        v = self.v_proj(memory).view(B, S, self.n_heads, self.d_k).transpose(1, 2)
        # (B, T, D) -> (B, T, H, Dh) -> (B, H, T, Dh), and (B, H, S, Dh) for k, v
        # Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V   (§3.2.1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, H, T, S)
        scores = scores.masked_fill(~mask, float("-inf"))  # mask: True = may attend
        weights = self.dropout(torch.softmax(scores, dim=-1))  # rows sum to 1
        heads = weights @ v  # (B, H, T, S) @ (B, H, S, Dh) -> (B, H, T, Dh)
        return self.out_proj(heads.transpose(1, 2).reshape(B, T, D))  # concat heads


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, on each position alone (§3.3)."""

    def __init__(self, d_model, d_ff, dropout):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        hidden = torch.relu(self.linear1(x))  # (B, T, D) -> (B, T, F)
        return self.linear2(self.dropout(hidden))  # (B, T, F) -> (B, T, D)


class EncoderBlock(nn.Module):
    """x = LayerNorm(x + SelfAttention(x)), then x = LayerNorm(x + FFN(x))  (§3.1)."""

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, mask)))  # (B, S, D)
        return self.norm2(x + self.dropout(self.feed_forward(x)))  # (B, S, D)


class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention to the encoder, FFN; each Add & Norm."""

    def __init__(self, d_model, n_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, causal_mask, memory_mask):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, causal_mask)))
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory_mask)))
        return self.norm3(x + self.dropout(self.feed_forward(x)))  # (B, T, D)


class Transformer(nn.Module):
    """N encoder blocks read the source; N decoder blocks write the target (Fig. 1).

    memory = Encoder(Embed(src)); logits = Decoder(Embed(tgt), memory) E^T
    Shapes: src (B, S) padded with pad_id, tgt (B, T) -> logits (B, T, V)
    """

    def __init__(
        self, vocab_size, max_len, d_model, n_heads, n_layers, d_ff, dropout=0.0
    ):
        super().__init__()
        self.d_model, self.pad_id = d_model, 0  # token 0 is padding
        self.token = nn.Embedding(vocab_size, d_model)  # E: (V, D), shared (§3.4)
        nn.init.normal_(self.token.weight, std=d_model**-0.5)  # logits start ~1
        pe = sinusoidal_encoding(max_len, d_model)  # (max_len, D), not trained
        self.register_buffer("positions", pe, persistent=False)
        self.dropout = nn.Dropout(dropout)
        args = (d_model, n_heads, d_ff, dropout)
        self.encoder = nn.ModuleList(EncoderBlock(*args) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderBlock(*args) for _ in range(n_layers))
        self.output = nn.Linear(d_model, vocab_size, bias=False)
        self.output.weight = self.token.weight  # tied: the same (V, D) table

    def embed(self, idx):  # (B, T) -> (B, T, D): E[idx] * sqrt(d_model) + PE
        x = self.token(idx) * math.sqrt(self.d_model)
        return self.dropout(x + self.positions[: idx.shape[1]])  # (B, T, D)

    def encode(self, src):  # (B, S) -> memory (B, S, D)
        mask = (src != self.pad_id)[:, None, None, :]  # (B, 1, 1, S): no padding key
        x = self.embed(src)
        for block in self.encoder:
            x = block(x, mask)
        return x

    def decode(self, tgt, memory, src):  # (B, T), (B, S, D) -> logits (B, T, V)
        T = tgt.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt.device).tril()
        memory_mask = (src != self.pad_id)[:, None, None, :]  # (B, 1, 1, S)
        x = self.embed(tgt)
        for block in self.decoder:
            x = block(x, memory, causal, memory_mask)
        return self.output(x)  # (B, T, D) -> (B, T, V)

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src), src)

    @torch.no_grad()
    def greedy_decode(self, src, bos_id, eos_id, n):
        """BOS, then the likeliest token n times or until EOS: (B, S) -> (B, 1 + n)."""
        memory = self.encode(src)  # the encoder runs once
        out = torch.full((src.shape[0], 1), bos_id, device=src.device)  # (B, 1)
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in range(n):
            next_id = self.decode(out, memory, src)[:, -1].argmax(dim=-1)  # (B,)
            next_id = next_id.masked_fill(done, self.pad_id)  # finished: padding
            out = torch.cat([out, next_id[:, None]], dim=1)  # (B, t) -> (B, t + 1)
            done |= next_id == eos_id
            if done.all():
                break
        return out
