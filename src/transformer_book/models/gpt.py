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
them in a **KV cache** (``kv_cache.KVCache``, preallocated) and runs each new token
alone through the model.

Shape letters: B batch, T positions, P cached (past) positions, D ``d_model``,
H heads, Dh = D / H, V ``vocab_size``, L ``n_layers``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._validate import check_instance, check_int
from ..attention import causal_mask
from ..blocks import encoder_stack
from ._validation import check_config, check_ids
from .kv_cache import Decoder, KVCache, prepare_cache
from .sampling import check_sampling, choose_next, evaluating

__all__ = ["GPTConfig", "GPT", "KVCache", "gpt2_init_"]


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
        return self._logits(idx)

    def _logits(self, idx: Tensor) -> Tensor:
        mask = causal_mask(idx.shape[1], device=idx.device)  # (T, T)
        x = self.embed(idx)  # (B, T) -> (B, T, D)
        for block in self.blocks:
            x = block(x, mask=mask)
        return self.output(self.norm(x))  # (B, T, D) -> (B, T, V)

    @torch.no_grad()
    def forward_cached(
        self, idx: Tensor, cache: KVCache | list | None = None
    ) -> tuple[Tensor, KVCache]:
        """The logits of ``idx``, the positions that follow the ``cache``'s.

        The same computation as ``forward`` on the whole sequence, but the keys and
        values of the P earlier positions come from the cache instead of being
        computed again. Returns the logits of the new positions and the cache
        holding P + T positions.

        The cache (``kv_cache.KVCache``) is preallocated and written in place:
        ``cache[i]`` is layer i's (keys, values), each (B, Hkv, P, Dh), and
        ``len(cache)`` is L. Given ``None``, a new cache is made for the T
        positions of ``idx``; given a ``KVCache``, the new keys and values are
        written into it, and the same object is returned (to branch, keep a
        ``copy.deepcopy``); given a list of L (keys, values) pairs (the form that
        Chapter 6 describes), it is copied into a new ``KVCache`` and left as it is.
        It is for inference: it runs without autograd, since the cache is
        overwritten in place (``forward`` is the one to train).

        Shapes: idx (B, T), cache L x 2 x (B, Hkv, P, Dh) -> logits (B, T, V),
                cache L x 2 x (B, Hkv, P + T, Dh)
        """
        check_ids("idx", idx, self.cfg.vocab_size, self.cfg.max_len)
        cache = prepare_cache(self, idx, cache)
        past = cache.length  # P
        if past + idx.shape[1] > self.cfg.max_len:
            raise ValueError(
                f"idx has {idx.shape[1]} positions after {past} cached ones, more "
                f"than max_len={self.cfg.max_len}"
            )
        cache.reserve(past + idx.shape[1])
        logits = Decoder(self).step(idx, cache)  # (B, T, V); the cache holds P + T
        return logits, cache

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
        newest token, reading the earlier keys and values from a ``KVCache``
        allocated once for the whole generation; without, every step runs the whole
        sequence again. Both give the same tokens. The arguments are checked once;
        the model runs in eval mode (no dropout) and is put back as it was, also
        when something raises.

        Shapes: idx (B, T0) -> (B, T0 + max_new_tokens) int64,
                T0 + max_new_tokens <= max_len
        """
        check_ids("idx", idx, self.cfg.vocab_size, self.cfg.max_len)
        max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=0)
        if idx.shape[1] + max_new_tokens > self.cfg.max_len:
            raise ValueError(
                f"max_new_tokens={max_new_tokens} after a prompt of {idx.shape[1]} "
                f"tokens exceeds max_len={self.cfg.max_len}"
            )
        temperature = check_sampling(temperature, top_k, top_p, generator)
        if not isinstance(use_cache, bool):
            raise TypeError(f"use_cache must be a bool, got {use_cache!r}")
        with evaluating(self):
            sample = (temperature, top_k, top_p, generator)
            return self._generate(idx, max_new_tokens, sample, use_cache)

    def _generate(self, idx: Tensor, n: int, sample: tuple, use_cache: bool):
        """``generate``'s loop, its arguments checked: n tokens after ``idx``."""
        B, T0 = idx.shape
        out = torch.empty(B, T0 + n, dtype=torch.long, device=idx.device)
        out[:, :T0] = idx  # written in place, one column per step
        if n == 0:
            return out
        if use_cache:  # room for every position that will be fed: T0 + n - 1
            cache = prepare_cache(self, idx, None, capacity=T0 + n - 1)
            decoder = Decoder(self)
            logits = decoder.step(idx, cache)  # the prompt, once: (B, T0, V)
        for t in range(T0, T0 + n):
            if not use_cache:
                logits = self._logits(out[:, :t])  # (B, t, V): every position again
            out[:, t] = choose_next(logits[:, -1], *sample)  # (B, V) -> (B,)
            if use_cache and t + 1 < T0 + n:
                logits = decoder.step(out[:, t : t + 1], cache)  # (B, 1, V)
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
