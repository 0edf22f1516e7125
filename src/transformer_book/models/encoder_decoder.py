"""The encoder-decoder Transformer of Vaswani et al. (2017) (Chapter 5).

Shape letters: B batch, S source positions, T target positions, D model width
(``d_model``), V vocabulary size, H heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._validate import check_int, check_real, check_tensor, check_token_ids
from ..attention import causal_mask
from ..blocks import DecoderBlock, EncoderBlock
from ._validation import check_flag
from .embedding import TokenEmbedding
from .sampling import in_eval_mode

__all__ = ["EncoderDecoderConfig", "EncoderDecoder"]


@dataclass(frozen=True)
class EncoderDecoderConfig:
    """The encoder-decoder Transformer of Vaswani et al. (2017), at any size."""

    vocab_size: int  # V: one vocabulary shared by source and target (as the paper)
    max_len: int  # longest source or target sequence, in tokens
    d_model: int = 64  # D: width of every token vector (the paper: 512)
    n_heads: int = 4  # H: attention heads per attention layer (the paper: 8)
    n_layers: int = 2  # N: encoder blocks, and as many decoder blocks (the paper: 6)
    d_ff: int = 256  # F: hidden width of the feed-forward network, 4 * D
    dropout: float = 0.0  # dropout on embeddings and sub-layers (the paper: 0.1)
    norm_first: bool = False  # False: post-norm (the paper); True: pre-norm
    pad_id: int = 0  # padding token: source keys holding it are masked out
    tie_weights: bool = True  # output layer reuses the embedding table (§3.4)

    def __post_init__(self):
        for name in ("vocab_size", "max_len", "d_model", "n_heads", "n_layers", "d_ff"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("pad_id", self.pad_id)
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
            )
        check_real("dropout", self.dropout, 0.0, 1.0, high_open=True)
        for name in ("norm_first", "tie_weights"):
            check_flag(name, getattr(self, name))
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(
                f"pad_id={self.pad_id} is not a token id of vocab_size="
                f"{self.vocab_size}"
            )


class EncoderDecoder(nn.Module):
    """The Transformer of "Attention Is All You Need": N encoder and N decoder blocks.

    encode:  memory = Encoder(Embed(src))                  (B, S) -> (B, S, D)
    decode:  logits = Decoder(Embed(tgt), memory) W_E^T   (B, T) -> (B, T, V)

    Training uses teacher forcing: the decoder reads the true target shifted right
    (BOS, y_1, ..., y_{T-1}) and predicts (y_1, ..., y_T) at every position at once;
    the causal mask keeps each position from seeing the token it must predict.

    Shapes:
        src: (B, S) token ids, padded with ``cfg.pad_id``
        tgt: (B, T) token ids (the decoder's input)
        returns logits (B, T, V)
    """

    def __init__(self, cfg: EncoderDecoderConfig):
        super().__init__()
        if not isinstance(cfg, EncoderDecoderConfig):
            raise TypeError(
                f"cfg must be an EncoderDecoderConfig, got {type(cfg).__name__}"
            )
        self.cfg = cfg
        self.embed = TokenEmbedding(
            cfg.vocab_size, cfg.d_model, cfg.max_len, cfg.dropout
        )
        block_args = (cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.dropout, cfg.norm_first)
        self.encoder = nn.ModuleList(
            EncoderBlock(*block_args) for _ in range(cfg.n_layers)
        )
        self.decoder = nn.ModuleList(
            DecoderBlock(*block_args) for _ in range(cfg.n_layers)
        )
        # Pre-norm leaves the residual stream un-normalised: normalise it at the end.
        make_norm = nn.LayerNorm if cfg.norm_first else (lambda d: nn.Identity())
        self.encoder_norm = make_norm(cfg.d_model)
        self.decoder_norm = make_norm(cfg.d_model)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.output.weight = self.embed.token.weight  # one (V, D) table, two uses

    def _check_ids(self, name: str, ids: Tensor) -> None:
        check_tensor(name, ids)
        if ids.dtype not in (torch.long, torch.int):
            raise TypeError(
                f"{name} must be (B, {name[0].upper()}) integer token ids (int64 or "
                f"int32), got dtype {ids.dtype}"
            )
        check_token_ids(name, ids, self.cfg.vocab_size, f"(B, {name[0].upper()})")
        if not 1 <= ids.shape[1] <= self.cfg.max_len:
            raise ValueError(
                f"{name} has {ids.shape[1]} positions, outside [1, max_len="
                f"{self.cfg.max_len}]"
            )

    def _check_memory(self, memory: Tensor, src: Tensor, tgt: Tensor) -> None:
        """``memory`` is the encoding of ``src``, for a batch of ``tgt``'s size."""
        self._check_ids("src", src)
        check_tensor("memory", memory, "float")
        expected = (*src.shape, self.cfg.d_model)
        if tuple(memory.shape) != expected:
            raise ValueError(
                f"memory must have shape (B, S, d_model) = {expected} for src "
                f"{tuple(src.shape)}, got {tuple(memory.shape)}"
            )
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"src {tuple(src.shape)} and tgt {tuple(tgt.shape)} have different "
                "batch sizes"
            )

    def source_mask(self, src: Tensor) -> Tensor:
        """(B, 1, S) bool, True for real source tokens: queries may not see padding."""
        self._check_ids("src", src)
        return (src != self.cfg.pad_id)[:, None, :]

    def encode(self, src: Tensor) -> Tensor:
        """The encoder's output, the "memory" every decoder block attends to.

        Shapes: src (B, S) -> memory (B, S, D)
        """
        mask = self.source_mask(src)  # (B, 1, S); checks src
        x = self.embed(src)  # (B, S) -> (B, S, D)
        for block in self.encoder:
            x = block(x, mask=mask)
        return self.encoder_norm(x)

    def decode(
        self, tgt: Tensor, memory: Tensor, src: Tensor, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Next-token logits for every target position, given the encoded source.

        ``src`` is only used for its padding mask. With ``need_weights`` also
        returns each decoder block's cross-attention weights.

        Shapes: tgt (B, T), memory (B, S, D), src (B, S) -> logits (B, T, V),
        and a list of n_layers weights (B, H, T, S)
        """
        self._check_ids("tgt", tgt)
        self._check_memory(memory, src, tgt)
        self_mask = causal_mask(tgt.shape[1], device=tgt.device)  # (T, T)
        memory_mask = self.source_mask(src)  # (B, 1, S)
        x = self.embed(tgt)  # (B, T) -> (B, T, D)
        cross_weights = []
        for block in self.decoder:
            x, weights = block(x, memory, self_mask, memory_mask, need_weights=True)
            cross_weights.append(weights)
        logits = self.output(self.decoder_norm(x))  # (B, T, D) -> (B, T, V)
        return (logits, cross_weights) if need_weights else logits

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        self._check_ids("src", src)
        self._check_ids("tgt", tgt)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"src {tuple(src.shape)} and tgt {tuple(tgt.shape)} have different "
                "batch sizes"
            )
        return self.decode(tgt, self.encode(src), src)

    @torch.no_grad()
    @in_eval_mode
    def greedy_decode(
        self, src: Tensor, bos_id: int, eos_id: int, max_new_tokens: int | None = None
    ) -> Tensor:
        """Translate by taking the most likely next token, one step at a time.

        The encoder runs once. Each step runs the decoder on the whole prefix again
        and keeps only the last position's logits: simple, but every step recomputes
        the keys and values of all earlier positions (the KV cache that Chapter 6
        gives GPT, ``GPT.forward_cached``, avoids that). Once a sequence has
        produced ``eos_id`` it is padded. It runs in eval mode (no dropout).

        Shapes: src (B, S) -> (B, 1 + n) starting with ``bos_id``, n <= max_new_tokens
        """
        for name, token in (("bos_id", bos_id), ("eos_id", eos_id)):
            if not 0 <= check_int(name, token) < self.cfg.vocab_size:
                raise ValueError(
                    f"{name}={token} is not a token id of vocab_size="
                    f"{self.cfg.vocab_size}"
                )
        steps = self.cfg.max_len - 1 if max_new_tokens is None else max_new_tokens
        if not 1 <= check_int("max_new_tokens", steps) < self.cfg.max_len:
            raise ValueError(
                f"max_new_tokens={max_new_tokens} must lie in [1, max_len - 1="
                f"{self.cfg.max_len - 1}]"
            )
        memory = self.encode(src)  # (B, S, D), computed once
        out = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in range(steps):
            logits = self.decode(out, memory, src)  # (B, t, V): the whole prefix again
            next_id = logits[:, -1].argmax(dim=-1)  # (B,)
            next_id = next_id.masked_fill(done, self.cfg.pad_id)
            out = torch.cat([out, next_id[:, None]], dim=1)  # (B, t) -> (B, t + 1)
            done |= next_id == eos_id
            if done.all():
                break
        return out
