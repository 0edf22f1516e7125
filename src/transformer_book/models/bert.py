"""BERT: an encoder-only Transformer, trained to fill in masked tokens (Chapter 6).

Devlin et al. (2019). Chapter 5's encoder blocks with no causal mask: every
position attends to every other, left and right, so a token's vector is built
from its whole context. A decoder cannot be trained that way (it would see the
answer), so BERT corrupts its input instead: ``mask_tokens`` chooses 15% of the
tokens, replaces 80% of those with [MASK], 10% with a random token and leaves 10%
unchanged, and the model predicts the original token at the chosen positions only.

The choices here: learned positions, pre-norm blocks with GELU and a final
LayerNorm (the original BERT is post-norm), GPT-2's initialisation (BERT's
N(0, 0.02)), and a masked-LM output layer tied to the token table, with a bias.
BERT puts a dense layer, GELU and a LayerNorm before that output; at the book's
size that extra head only slowed training (held-out loss after 250 steps 5.86
with it, 5.52 without; unigram 5.89), so it is left out. BERT's next-sentence
task and segment embeddings are left out too, as RoBERTa does.

``BERTConfig(norm_first=False, layer_norm_eps=1e-12)`` builds BERT's own layout
instead: post-norm blocks and a LayerNorm on the embeddings. Chapter 8 loads a
real pretrained checkpoint into it (``transformer_book.pretrained``).

Shape letters: B batch, T positions, D ``d_model``, H heads, V ``vocab_size``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._validate import (
    check_generator,
    check_has_values,
    check_instance,
    check_int,
    check_real,
    check_tensor,
)
from ._validation import check_config, check_ids, check_pad_id
from .gpt import build_block_stack_, gpt2_init_

__all__ = ["BERTConfig", "BERT", "IGNORE_INDEX", "mask_tokens"]

IGNORE_INDEX = -100  # label of the positions without a prediction (cross_entropy's)


@dataclass(frozen=True)
class BERTConfig:
    """A BERT at any size; the defaults are Chapter 6's tiny one."""

    vocab_size: int  # V: token ids 0..V-1
    max_len: int  # rows of the learned position table: the longest sequence
    d_model: int = 64  # D: width of every token vector (BERT-base: 768)
    n_heads: int = 4  # H: attention heads per block (BERT-base: 12)
    n_layers: int = 2  # encoder blocks (BERT-base: 12)
    d_ff: int = 256  # hidden width of the feed-forward network, 4 * D
    dropout: float = 0.0  # on embeddings and sub-layers (BERT: 0.1)
    pad_id: int = 0  # padding token: keys holding it are masked out
    norm_first: bool = True  # pre-norm; False: BERT's post-norm + embedding LayerNorm
    layer_norm_eps: float = 1e-5  # BERT's checkpoints use 1e-12

    def __post_init__(self):
        check_config(self)
        if not isinstance(self.norm_first, bool):
            raise ValueError(f"norm_first must be a bool, got {self.norm_first!r}")
        check_real("layer_norm_eps", self.layer_norm_eps, low=0.0, low_open=True)
        check_pad_id(self)


class BERT(nn.Module):
    """Token + position embedding, L bidirectional blocks, masked-LM head.

    Pre-norm blocks and a final LayerNorm by default; with ``cfg.norm_first`` False,
    BERT's own post-norm blocks after a LayerNorm on the embeddings.

    Shapes:
        idx: (B, T) token ids, T <= max_len
        mask: bool, True = may attend, broadcastable to (B, H, T, T); by default
              every query may see every key that is not [PAD], shape (B, 1, T)
        returns logits (B, T, V)
    """

    def __init__(self, cfg: BERTConfig):
        super().__init__()
        check_instance("cfg", cfg, BERTConfig)
        build_block_stack_(self, cfg)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size)  # the masked-LM head
        self.output.weight = self.token.weight  # tied; the bias is the head's own
        gpt2_init_(self, cfg.n_layers)  # BERT's N(0, 0.02), as GPT-2's

    def padding_mask(self, idx: Tensor) -> Tensor:
        """(B, 1, T) bool, True for the keys that are not [PAD]."""
        check_ids("idx", idx, self.cfg.vocab_size, self.cfg.max_len, self.token.weight)
        return (idx != self.cfg.pad_id)[:, None, :]

    def encode(
        self, idx: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Every token's vector in context, after the blocks and the final norm.

        With ``need_weights`` also returns each block's attention weights, a list
        of L tensors (B, H, T, T), for attention maps.

        Shapes: idx (B, T) -> (B, T, D)
        """
        check_ids("idx", idx, self.cfg.vocab_size, self.cfg.max_len)
        self._check_mask(idx, mask)
        mask = self.padding_mask(idx) if mask is None else mask
        positions = self.position.weight[: idx.shape[1]]  # (T, D)
        x = self.dropout(self.embed_norm(self.token(idx) + positions))  # (B, T, D)
        weights = []
        for block in self.blocks:
            if need_weights:  # the same attention again, to read its weights
                seen = block.norm1(x) if block.norm_first else x  # what attention reads
                _, w = block.self_attn(seen, mask=mask, need_weights=True)
                weights.append(w)  # (B, H, T, T)
            x = block(x, mask=mask)
        x = self.norm(x)
        return (x, weights) if need_weights else x

    def forward(self, idx: Tensor, mask: Tensor | None = None) -> Tensor:
        return self.output(self.encode(idx, mask))  # (B, T, D) -> (B, T, V)

    def _check_mask(self, idx: Tensor, mask: Tensor | None) -> None:
        """A given ``mask`` is a bool tensor that fits (B, H, T, T), named "mask"."""
        if mask is None:
            return
        check_ids("idx", idx, self.cfg.vocab_size, self.cfg.max_len, self.token.weight)
        check_tensor("mask", mask)
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be bool (True = may attend), got {mask.dtype}")
        B, T = idx.shape
        self.blocks[0].self_attn._check_mask("mask", mask, B, T, T)

    def pooled(self, idx: Tensor, how: str = "mean", mask: Tensor | None = None):
        """One vector per sequence, for classification.

        ``"cls"``: the vector of position 0 (BERT puts [CLS] there and trains it
        on a sentence-level task); ``"mean"``: the mean over the non-[PAD]
        positions (a model trained on masked-LM alone gives a better average).

        Shapes: idx (B, T) -> (B, D)
        """
        if how not in ("cls", "mean"):
            raise ValueError(f"how must be 'cls' or 'mean', got {how!r}")
        self._check_mask(idx, mask)
        h = self.encode(idx, mask)  # (B, T, D)
        if how == "cls":
            return h[:, 0]  # (B, T, D) -> (B, D)
        real = (idx != self.cfg.pad_id).to(h.dtype)[..., None]  # (B, T, 1)
        return (h * real).sum(dim=1) / real.sum(dim=1).clamp_min(1.0)  # (B, D)


def mask_tokens(
    ids: Tensor,
    vocab_size: int,
    mask_id: int,
    special_ids: Sequence[int],
    generator: torch.Generator | None = None,
    mask_prob: float = 0.15,
) -> tuple[Tensor, Tensor]:
    """BERT's corruption: returns (inputs, labels) for masked-LM training.

    Each token that is not special is chosen with probability ``mask_prob``
    (15%). A chosen token becomes [MASK] with probability 0.8, a random
    non-special token with probability 0.1, and stays itself with probability 0.1
    (so the model cannot learn that only [MASK] positions matter). ``labels`` holds
    the original token at the chosen positions and ``IGNORE_INDEX`` (-100)
    everywhere else. ``ids`` is not modified.

    Shapes: ids (B, T) or (T,) int -> inputs and labels of the same shape
    """
    if (
        not isinstance(ids, Tensor)
        or ids.is_floating_point()
        or ids.dtype == torch.bool
    ):
        raise ValueError("ids must be an integer tensor of token ids")
    check_has_values("ids", ids)
    if ids.dim() not in (1, 2):
        raise ValueError(f"ids must have shape (B, T) or (T,), got {tuple(ids.shape)}")
    vocab_size = check_int("vocab_size", vocab_size, minimum=1)
    mask_id = check_int("mask_id", mask_id, minimum=0)
    mask_prob = check_real("mask_prob", mask_prob, 0.0, 1.0)
    check_generator("generator", generator)
    if isinstance(special_ids, str | Tensor) or not isinstance(special_ids, Sequence):
        raise TypeError(
            f"special_ids must be a sequence of ints, got {type(special_ids).__name__}"
        )
    special_ids = [check_int(f"special_ids[{i}]", s) for i, s in enumerate(special_ids)]
    bad = [s for s in special_ids if not 0 <= s < vocab_size]
    if bad:  # -1 would silently make token V-1 special
        raise ValueError(
            f"special_ids holds {bad}, not token ids of vocab_size={vocab_size}"
        )
    special = torch.as_tensor(special_ids, dtype=torch.long, device=ids.device)
    if mask_id not in special_ids:
        raise ValueError(f"mask_id={mask_id} must be one of special_ids")
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(f"ids hold values outside [0, vocab_size={vocab_size})")
    normal = torch.ones(vocab_size, dtype=torch.bool, device=ids.device)
    normal[special] = False
    normal_ids = normal.nonzero()[:, 0]  # the tokens a random replacement draws from
    if len(normal_ids) == 0:
        raise ValueError("special_ids cover the whole vocabulary")

    def uniform() -> Tensor:
        return torch.rand(ids.shape, generator=generator).to(ids.device)

    chosen = (uniform() < mask_prob) & normal[ids]  # (B, T): 15% of normal tokens
    action = uniform()  # (B, T): which of the three fates
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    random_pick = torch.randint(len(normal_ids), ids.shape, generator=generator)
    inputs = ids.clone()
    inputs[to_mask] = mask_id
    inputs[to_random] = normal_ids[random_pick.to(ids.device)][to_random].to(ids.dtype)
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))
    return inputs, labels
