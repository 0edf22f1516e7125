"""Looking inside attention heads: a tiny attention-only model and head ablation
(Chapter 3).

Shape letters: B batch, T positions, D model width (``d_model``), H heads,
Dh width of one head, L layers, O predictions per position, C classes.

The model has no feed-forward layers, so everything it computes flows through
its heads; each layer is ``x = x + MultiHeadAttention(LayerNorm(x))``. The
helpers work on any :class:`~transformer_book.attention.MultiHeadAttention`:
``record_heads`` keeps what each head outputs, ``ablate_heads`` silences chosen
heads (zero ablation, or mean ablation: replace a head's output by its average),
in the spirit of Michel et al. (2019).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ._validate import (
    check_broadcasts,
    check_has_values,
    check_int,
    check_on,
    check_tensor,
    check_token_ids,
)
from .attention import MultiHeadAttention

__all__ = [
    "ProbeConfig",
    "AttentionOnlyClassifier",
    "record_heads",
    "ablate_heads",
    "attention_on",
]


@dataclass(frozen=True)
class ProbeConfig:
    """The size of an :class:`AttentionOnlyClassifier`."""

    vocab_sizes: tuple[int, ...]  # one embedding table per input stream (summed)
    max_len: int  # learned positions 0 .. max_len - 1
    n_classes: int  # classes of each prediction
    n_outputs: int = 1  # independent predictions per position
    d_model: int = 32  # width of the residual stream
    n_heads: int = 2  # heads per layer; d_model must be divisible by it
    n_layers: int = 1  # attention layers, no feed-forward layers

    def __post_init__(self):
        if isinstance(self.vocab_sizes, (str, bytes)) or not hasattr(
            self.vocab_sizes, "__len__"
        ):
            raise TypeError(
                f"vocab_sizes must be a tuple of ints, got {self.vocab_sizes!r}"
            )
        if len(self.vocab_sizes) == 0:
            raise ValueError("vocab_sizes must name at least one vocabulary, got ()")
        for i, size in enumerate(self.vocab_sizes):
            check_int(f"vocab_sizes[{i}]", size, minimum=1)
        for name in ("max_len", "n_classes", "n_outputs", "d_model", "n_heads"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("n_layers", self.n_layers, minimum=1)
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
            )


class AttentionOnlyClassifier(nn.Module):
    """Embeddings + learned positions, ``n_layers`` residual attention layers, and a
    linear read-out giving ``n_outputs`` predictions at every position.

    Shapes:
        tokens: one (B, T) tensor of ids per entry of ``cfg.vocab_sizes``, T <= max_len
        returns logits (B, T, O, C)
    """

    def __init__(self, cfg: ProbeConfig):
        super().__init__()
        if not isinstance(cfg, ProbeConfig):
            raise TypeError(f"cfg must be a ProbeConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.embeddings = nn.ModuleList(
            nn.Embedding(v, cfg.d_model) for v in cfg.vocab_sizes
        )
        # Unit-scale positions, like the token embeddings: a position-based head
        # (e.g. "look at the previous token") is then as easy to learn as a
        # content-based one.
        self.positions = nn.Parameter(torch.randn(cfg.max_len, cfg.d_model))
        self.norms = nn.ModuleList(
            nn.LayerNorm(cfg.d_model) for _ in range(cfg.n_layers)
        )
        self.layers = nn.ModuleList(
            MultiHeadAttention(cfg.d_model, cfg.n_heads) for _ in range(cfg.n_layers)
        )
        self.final_norm = nn.LayerNorm(cfg.d_model)
        self.readout = nn.Linear(cfg.d_model, cfg.n_outputs * cfg.n_classes)

    def embed(self, *tokens: Tensor) -> Tensor:
        if len(tokens) != len(self.embeddings):
            raise ValueError(
                f"expected {len(self.embeddings)} token tensors (one per vocabulary), "
                f"got {len(tokens)}"
            )
        for i, (ids, size) in enumerate(zip(tokens, self.cfg.vocab_sizes, strict=True)):
            check_token_ids(f"tokens[{i}]", ids, size)
            if ids.shape != tokens[0].shape:
                raise ValueError(
                    f"tokens[{i}] has shape {tuple(ids.shape)}, tokens[0] has "
                    f"{tuple(tokens[0].shape)}: every stream needs the same (B, T)"
                )
        T = tokens[0].shape[-1]
        if T > self.cfg.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len={self.cfg.max_len}")
        if T < 1:
            raise ValueError(
                f"tokens have no positions: shape {tuple(tokens[0].shape)}"
            )
        x = self.positions[:T]  # (T, D)
        for table, ids in zip(self.embeddings, tokens, strict=True):
            x = x + table(ids)  # (B, T) -> (B, T, D)
        return x

    def forward(self, *tokens: Tensor) -> Tensor:
        x = self.embed(*tokens)  # (B, T, D)
        for norm, attn in zip(self.norms, self.layers, strict=True):
            x = x + attn(norm(x))
        logits = self.readout(self.final_norm(x))  # (B, T, D) -> (B, T, O * C)
        return logits.unflatten(-1, (self.cfg.n_outputs, self.cfg.n_classes))

    @torch.no_grad()
    def attention_weights(self, *tokens: Tensor) -> Tensor:
        """Every head's attention weights on these inputs: (L, B, H, T, T)."""
        x = self.embed(*tokens)
        maps = []
        for norm, attn in zip(self.norms, self.layers, strict=True):
            out, weights = attn(norm(x), need_weights=True)  # weights (B, H, T, T)
            x = x + out
            maps.append(weights)
        return torch.stack(maps)  # (L, B, H, T, T)


def _check_mha(mha: object) -> None:
    if not isinstance(mha, MultiHeadAttention):
        raise TypeError(f"mha must be a MultiHeadAttention, got {type(mha).__name__}")


def _check_heads(mha: MultiHeadAttention, heads: Iterable[int]) -> list[int]:
    _check_mha(mha)
    if isinstance(heads, Tensor):
        heads = heads.tolist()
    if not isinstance(heads, Iterable) or isinstance(heads, (str, bytes)):
        raise TypeError(f"heads must be an iterable of ints, got {heads!r}")
    heads = sorted(set(check_int("heads", h) for h in heads))
    bad = [h for h in heads if not 0 <= h < mha.n_heads]
    if bad:
        raise ValueError(
            f"head indices {bad} out of range for n_heads={mha.n_heads} (0..H-1)"
        )
    return heads


@contextmanager
def record_heads(mha: MultiHeadAttention) -> Iterator[list[Tensor]]:
    """Inside the ``with`` block, every call of ``mha`` appends its heads' outputs,
    taken just before W^O, to the yielded list.

    Shapes: each entry is (B, H, T, Dh), detached.
    """
    _check_mha(mha)
    recorded: list[Tensor] = []

    def hook(module: nn.Module, args: tuple[Tensor, ...]) -> None:
        recorded.append(mha.split_heads(args[0]).detach())  # (B,T,D) -> (B,H,T,Dh)

    handle = mha.out_proj.register_forward_pre_hook(hook)
    try:
        yield recorded
    finally:
        handle.remove()


@contextmanager
def ablate_heads(
    mha: MultiHeadAttention, heads: Iterable[int], mean: Tensor | None = None
) -> Iterator[None]:
    """Inside the ``with`` block, the chosen heads of ``mha`` are silenced.

    Zero ablation (``mean=None``) sets their outputs to zero before W^O. Mean
    ablation replaces them by ``mean``, typically the heads' average output over a
    batch (from :func:`record_heads`), which removes the information a head carries
    without pushing the next layer off its usual input range.

    Shapes: mean broadcastable to (B, H, T, Dh), e.g. (H, T, Dh) or (H, 1, Dh).
    """
    heads = _check_heads(mha, heads)
    _check_mean(mha, mean)

    def hook(module: nn.Module, args: tuple[Tensor, ...]) -> tuple[Tensor]:
        split = mha.split_heads(args[0]).clone()  # (B, T, D) -> (B, H, T, Dh)
        if mean is None:
            split[:, heads] = 0.0
        else:
            fill = _broadcast_mean(mean, split.shape).to(split.dtype)
            split[:, heads] = fill[:, heads]
        return (mha.merge_heads(split),)  # (B, H, T, Dh) -> (B, T, D)

    handle = mha.out_proj.register_forward_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def _check_mean(mha: MultiHeadAttention, mean: Tensor | None) -> None:
    if mean is None:
        return
    check_tensor("mean", mean, "float")
    check_on("mean", mean, next(mha.parameters()))
    fits = mean.dim() <= 4 and mean.shape[-1:] in ((1,), (mha.d_head,))
    if fits and mean.dim() >= 3:
        fits = mean.shape[-3] in (1, mha.n_heads)
    if not fits:
        raise ValueError(
            f"mean of shape {tuple(mean.shape)} does not broadcast to (B, "
            f"H={mha.n_heads}, T, Dh={mha.d_head}); e.g. (H, T, Dh) or (H, 1, Dh)"
        )


def _broadcast_mean(mean: Tensor, shape: torch.Size) -> Tensor:
    check_broadcasts("mean", mean, tuple(shape), "the heads' outputs (B, H, T, Dh)")
    return torch.broadcast_to(mean, shape)


def attention_on(weights: Tensor, key_index: Tensor) -> Tensor:
    """How much weight each head puts, on average, on one chosen key per query.

    ``key_index[b, t]`` is the key that query t of example b "should" look at
    (e.g. ``t - 1`` for a previous-token head); queries with a negative index are
    left out. Returns one number per head, between 0 and 1.

    Shapes: weights (B, H, T, S), key_index (B, T) or (T,); returns (H,).
    """
    check_tensor("weights", weights, "float")
    check_has_values("weights", weights)
    if key_index is None or getattr(key_index, "is_meta", False):
        raise TypeError("key_index must be token positions (B, T) or (T,) with values")
    if weights.dim() != 4:
        raise ValueError(f"weights must be (B, H, T, S), got {tuple(weights.shape)}")
    B, H, T, S = weights.shape
    key_index = torch.as_tensor(key_index, device=weights.device)
    check_tensor("key_index", key_index, "int")
    check_broadcasts("key_index", key_index, (B, T), "(B, T)")
    key_index = key_index.expand(B, T)
    keep = key_index >= 0  # (B, T)
    if not keep.any():
        raise ValueError("key_index leaves out every query (all negative or empty)")
    if (key_index >= S).any():
        raise ValueError(
            f"key_index holds {int(key_index.max())}, but weights has only S={S} keys"
        )
    index = key_index.clamp(min=0)[:, None, :, None].expand(B, H, T, 1)
    picked = weights.gather(-1, index)[..., 0]  # (B, H, T, S) -> (B, H, T)
    keep = keep[:, None, :].expand(B, H, T)
    total = picked.masked_fill(~keep, 0.0).sum(dim=(0, 2))  # (H,)
    return total / keep.sum(dim=(0, 2)).clamp(min=1)
