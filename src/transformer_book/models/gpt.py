"""GPT: a decoder-only Transformer, trained to predict the next token (Chapter 6).

Radford et al. (2018, 2019). Drop the encoder and the cross-attention from Chapter
5's decoder and what is left of a decoder block is self-attention and a
feed-forward network: Chapter 5's ``EncoderBlock``, run with a causal mask so that
position t sees only positions 0..t. GPT-2's choices: pre-norm blocks with a final
LayerNorm, GELU, learned positions, the output layer tied to the token table, and
its initialisation (``gpt2_init_``).

One objective on all text: every position predicts the next token, so every token
of a batch gives a training signal. Generating reuses the past: the keys and values
of earlier positions do not change when a token is appended, so ``generate`` keeps
them in a **KV cache** and runs each new token alone through the model.

Shape letters: B batch, T positions, P cached (past) positions, D ``d_model``,
H heads, Dh = D / H, V ``vocab_size``, L ``n_layers``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._validate import check_instance, check_int
from ..attention import MultiHeadAttention, causal_mask
from ..blocks import encoder_stack
from ._validation import check_config, check_ids
from .sampling import sample_next

__all__ = ["GPTConfig", "GPT", "KVCache", "gpt2_init_"]

# One (keys, values) pair per layer, each (B, H, P, Dh): stacked, (L, 2, B, H, P, Dh)
KVCache = list[tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class GPTConfig:
    """A GPT at any size; the defaults are Chapter 6's tiny one."""

    vocab_size: int  # V: token ids 0..V-1
    max_len: int  # rows of the learned position table: the longest sequence
    d_model: int = 64  # D: width of the residual stream (GPT-2 small: 768)
    n_heads: int = 4  # H: attention heads per block (GPT-2 small: 12)
    n_layers: int = 2  # L: decoder blocks (GPT-2 small: 12)
    d_ff: int = 256  # hidden width of the feed-forward network, 4 * D
    dropout: float = 0.0  # on embeddings and sub-layers (GPT-2: 0.1)
    n_kv_heads: int | None = None  # key/value heads; None: H (grouped-query if fewer)

    def __post_init__(self):
        check_config(self)


class GPT(nn.Module):
    """Token + position embedding, L causal pre-norm blocks, LayerNorm, tied output.

    logits = LN(Blocks(E[idx] + P[0..T-1])) E^T

    Shapes: idx (B, T) token ids, T <= max_len -> logits (B, T, V)
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        check_instance("cfg", cfg, GPTConfig)
        build_block_stack_(self, cfg)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.output.weight = self.token.weight  # one (V, D) table, two uses
        gpt2_init_(self, cfg.n_layers)

    def embed(self, idx: Tensor, start: int = 0) -> Tensor:
        """Token plus position embedding; positions start at ``start`` (the cache).

        Shapes: idx (B, T) -> (B, T, D)
        """
        start = check_int("start", start, minimum=0)
        check_ids(
            "idx", idx, self.cfg.vocab_size, self.cfg.max_len - start, self.token.weight
        )
        positions = self.position.weight[start : start + idx.shape[1]]  # (T, D)
        return self.dropout(self.token(idx) + positions)  # (B, T, D) + (T, D)

    def forward(self, idx: Tensor) -> Tensor:
        check_ids("idx", idx, self.cfg.vocab_size, self.cfg.max_len)
        mask = causal_mask(idx.shape[1], device=idx.device)  # (T, T)
        x = self.embed(idx)  # (B, T) -> (B, T, D)
        for block in self.blocks:
            x = block(x, mask=mask)
        return self.output(self.norm(x))  # (B, T, D) -> (B, T, V)

    def forward_cached(
        self, idx: Tensor, cache: KVCache | None = None
    ) -> tuple[Tensor, KVCache]:
        """The logits of ``idx``, the positions that follow the ``cache``'s.

        The same computation as ``forward`` on the whole sequence, but the keys and
        values of the P earlier positions come from the cache instead of being
        computed again. Returns the logits of the new positions and the cache
        extended by them: a list of L pairs (keys, values), each (B, H, P + T, Dh).

        Shapes: idx (B, T), cache L x 2 x (B, H, P, Dh) -> logits (B, T, V)
        """
        past = 0 if cache is None else cache[0][0].shape[2]  # P
        check_ids("idx", idx, self.cfg.vocab_size, self.cfg.max_len)
        if past + idx.shape[1] > self.cfg.max_len:
            raise ValueError(
                f"idx has {idx.shape[1]} positions after {past} cached ones, more "
                f"than max_len={self.cfg.max_len}"
            )
        x = self.embed(idx, start=past)  # (B, T) -> (B, T, D)
        new_cache = []
        for i, block in enumerate(self.blocks):
            layer_past = None if cache is None else cache[i]
            attn, keys_values = _cached_self_attention(
                block.self_attn, block.norm1(x), layer_past
            )
            x = x + block.dropout1(attn)  # the pre-norm block of blocks.EncoderBlock
            x = x + block.dropout2(block.feed_forward(block.norm2(x)))
            new_cache.append(keys_values)
        return self.output(self.norm(x)), new_cache  # (B, T, V), L x 2 x (B,H,P+T,Dh)

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Append ``max_new_tokens`` tokens to ``idx``, one at a time.

        ``temperature=0`` is greedy decoding; otherwise each token is sampled from
        softmax(logits / temperature), restricted to the ``top_k`` most probable
        tokens and to the ``top_p`` nucleus if given (``sampling.sample_next``).
        With ``use_cache`` the prompt runs once and every later step feeds only the
        newest token, reading the earlier keys and values from the cache; without,
        every step runs the whole sequence again. Both give the same tokens. The
        model runs in eval mode (no dropout) and is put back as it was.

        Shapes: idx (B, T0) -> (B, T0 + max_new_tokens), T0 + max_new_tokens <= max_len
        """
        check_ids("idx", idx, self.cfg.vocab_size, self.cfg.max_len)
        if not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(
                f"max_new_tokens must be a non-negative int, got {max_new_tokens!r}"
            )
        if idx.shape[1] + max_new_tokens > self.cfg.max_len:
            raise ValueError(
                f"max_new_tokens={max_new_tokens} after a prompt of {idx.shape[1]} "
                f"tokens exceeds max_len={self.cfg.max_len}"
            )
        was_training = self.training
        self.eval()
        out, cache, logits = idx, None, None
        for _ in range(max_new_tokens):
            if not use_cache:
                logits = self(out)  # (B, t, V): every position, every step
            elif cache is None:
                logits, cache = self.forward_cached(out)  # the prompt, once
            else:
                logits, cache = self.forward_cached(out[:, -1:], cache)  # (B, 1, V)
            next_id = sample_next(logits[:, -1], temperature, top_k, top_p, generator)
            out = torch.cat([out, next_id[:, None]], dim=1)  # (B, t) -> (B, t + 1)
        self.train(was_training)
        return out


def build_block_stack_(model: nn.Module, cfg) -> None:
    """The trunk GPT and BERT share: embeddings, L GELU blocks, and their norms.

    Sets ``model.cfg``, ``token`` (V, D), ``position`` (max_len, D),
    ``embed_norm``, ``dropout``, ``blocks`` and ``norm``. The two models differ
    only in the mask they pass the blocks and in their output head.

    Pre-norm blocks (GPT, and the book's BERT) end with a final LayerNorm
    (``norm``) and leave the embeddings as they are. A config with
    ``norm_first=False`` (BERT's own layout, Chapter 8) has post-norm blocks,
    whose last LayerNorm already ends the stack, and a LayerNorm on the
    embeddings instead (``embed_norm``); the unused one is an ``nn.Identity``.
    """
    norm_first = getattr(cfg, "norm_first", True)  # GPTConfig has no such field
    eps = getattr(cfg, "layer_norm_eps", 1e-5)
    model.cfg = cfg
    model.token = nn.Embedding(cfg.vocab_size, cfg.d_model)
    model.position = nn.Embedding(cfg.max_len, cfg.d_model)
    model.embed_norm = nn.Identity() if norm_first else nn.LayerNorm(cfg.d_model, eps)
    model.dropout = nn.Dropout(cfg.dropout)
    model.blocks = encoder_stack(cfg, norm_first)
    model.norm = nn.LayerNorm(cfg.d_model, eps) if norm_first else nn.Identity()


def gpt2_init_(model: nn.Module, n_layers: int) -> None:
    """GPT-2's initialisation, in place: every weight N(0, 0.02), biases zero.

    The layers that write into the residual stream (attention's ``out_proj``, the
    feed-forward ``linear2``) get std 0.02 / sqrt(2 n_layers), so that the stream
    does not grow with depth. Tokens and block outputs then start at the same
    small scale; with PyTorch's default initialisation the blocks' outputs would
    drown the 0.02-sized embeddings, and every position would look alike.
    """
    check_instance("model", model, nn.Module)
    check_int("n_layers", n_layers, minimum=1)
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear | nn.Embedding):
            std = 0.02
            if name.endswith(("out_proj", "linear2")):
                std /= math.sqrt(2 * n_layers)
            nn.init.normal_(module.weight, std=std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)


def _cached_self_attention(
    attn: MultiHeadAttention, x: Tensor, past: tuple[Tensor, Tensor] | None
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """Causal self-attention of T new positions over P cached ones and themselves.

    The cache keeps the n_kv_heads key/value heads, before they are shared out
    among the query heads: grouped-query attention shrinks it by H / n_kv_heads.

    Shapes: x (B, T, D), past 2 x (B, Hkv, P, Dh) -> (B, T, D), 2 x (B, Hkv, P+T, Dh)
    """
    q = attn.split_heads(attn.q_proj(x))  # (B, T, D) -> (B, H, T, Dh)
    k = attn.split_heads(attn.k_proj(x), attn.n_kv_heads)  # (B, Hkv, T, Dh)
    v = attn.split_heads(attn.v_proj(x), attn.n_kv_heads)  # (B, Hkv, T, Dh)
    if past is not None:
        k = torch.cat([past[0], k], dim=2)  # (B, Hkv, P + T, Dh)
        v = torch.cat([past[1], v], dim=2)  # (B, Hkv, P + T, Dh)
    t, p = x.shape[1], k.shape[2] - x.shape[1]
    # New position i is absolute position p + i: it sees keys 0..p + i.
    mask = torch.ones(t, p + t, dtype=torch.bool, device=x.device).tril(p)  # (T, P+T)
    heads, _ = attn.attend(q, k, v, mask, need_weights=False)  # (B, H, T, Dh)
    return attn.out_proj(attn.merge_heads(heads)), (k, v)  # (B, T, D)
