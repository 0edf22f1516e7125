"""The Transformer's encoder and decoder blocks (Chapter 5).

Shape letters: B batch, T target (decoder) positions, S source (encoder) positions,
D model width (``d_model``), F feed-forward width (``d_ff``), H heads.

Each block is a few sub-layers, each wrapped in a residual connection and a layer
normalisation ("Add & Norm", Vaswani et al., 2017, §3.1). ``norm_first=False`` is
the paper's post-norm, ``LayerNorm(x + Sublayer(x))``; ``norm_first=True`` is the
pre-norm used by most models since, ``x + Sublayer(LayerNorm(x))``. The layout and
the dropout placement follow ``nn.TransformerEncoderLayer`` and
``nn.TransformerDecoderLayer`` exactly, so ``from_torch`` copies give equal outputs.

Masks are boolean with **True = may attend**; PyTorch's layers use True = blocked,
so ``torch_layer(x, src_mask=~mask)`` equals ``block(x, mask=mask)``.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from ._validate import (
    check_int,
    check_like_module,
    check_probability,
    check_real,
    check_same_batch,
    check_tensor,
)
from .attention import MultiHeadAttention

__all__ = ["FeedForward", "EncoderBlock", "DecoderBlock", "encoder_stack"]

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation_name(activation) -> str:
    """'relu' or 'gelu' for the activation of a PyTorch Transformer layer.

    Only the exact functions are copied: ``nn.GELU(approximate="tanh")`` or any
    other callable computes something else, and is refused.
    """
    if activation is F.relu or type(activation) is nn.ReLU:
        return "relu"
    if activation is F.gelu or (
        type(activation) is nn.GELU and activation.approximate == "none"
    ):
        return "gelu"
    raise ValueError(
        "from_torch supports relu and gelu (the exact one) only; cannot copy "
        f"m.activation={activation!r}"
    )


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to every position alone (§3.3).

    The same two-layer network runs on each position independently: positions never
    mix here (attention does that). ``activation="gelu"`` is the GPT/BERT choice.

    Shapes: x (B, T, D) -> (B, T, D), through a hidden width F = ``d_ff``.
    """

    def __init__(
        self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"
    ):
        super().__init__()
        self.d_model = check_int("d_model", d_model, minimum=1)
        check_int("d_ff", d_ff, minimum=1)
        check_probability("dropout", dropout)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be 'relu' or 'gelu', got {activation!r}")
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        _check_sequence("x", x, self.d_model, self.linear1.weight, any_rank=True)
        hidden = _ACTIVATIONS[self.activation](self.linear1(x))  # (B,T,D) -> (B,T,F)
        return self.linear2(self.dropout(hidden))  # (B, T, F) -> (B, T, D)


def _check_sequence(
    name: str, x: Tensor, d_model: int, weight: Tensor, any_rank: bool = False
) -> None:
    """``x`` is (B, T, D), or (..., D) if ``any_rank``, and fits the module's weight."""
    check_tensor(name, x, "float")
    if (x.dim() < 1 if any_rank else x.dim() != 3) or x.shape[-1] != d_model:
        axes = "..." if any_rank else "B, T"
        raise ValueError(
            f"{name} must have shape ({axes}, d_model={d_model}), got {tuple(x.shape)}"
        )
    check_like_module(name, x, weight)


def _check_layer_arguments(dropout: float, layer_norm_eps: float) -> None:
    check_probability("dropout", dropout)
    check_real("layer_norm_eps", layer_norm_eps, low=0.0)


class EncoderBlock(nn.Module):
    """One encoder layer: self-attention, then feed-forward, each with Add & Norm.

    post-norm (the paper):  x = LN(x + SelfAttn(x));   x = LN(x + FFN(x))
    pre-norm:               x = x + SelfAttn(LN(x));   x = x + FFN(LN(x))

    Shapes:
        x: (B, T, D)
        mask: bool, True = may attend, broadcastable to (B, H, T, T); a padding
              mask from ``attention.padding_mask`` has shape (B, 1, T)
        returns (B, T, D)
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
        n_kv_heads: int | None = None,
    ):
        super().__init__()
        _check_layer_arguments(dropout, layer_norm_eps)
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiHeadAttention(
            d_model, n_heads, dropout=dropout, n_kv_heads=n_kv_heads
        )
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _self_attention(self, x: Tensor, mask: Tensor | None) -> Tensor:
        return self.dropout1(self.self_attn(x, mask=mask))

    def _feed_forward(self, x: Tensor) -> Tensor:
        return self.dropout2(self.feed_forward(x))

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        _check_sequence("x", x, self.d_model, self.norm1.weight)
        if self.norm_first:
            x = x + self._self_attention(self.norm1(x), mask)
            x = x + self._feed_forward(self.norm2(x))
        else:
            x = self.norm1(x + self._self_attention(x, mask))
            x = self.norm2(x + self._feed_forward(x))
        return x

    @classmethod
    def from_torch(cls, m: nn.TransformerEncoderLayer) -> EncoderBlock:
        """A copy of ``nn.TransformerEncoderLayer`` ``m`` with the same weights.

        ``m`` must use ``bias=True`` and a relu or gelu activation. The copy is
        batch-first whatever ``m.self_attn.batch_first`` says, and in ``m``'s
        train/eval mode.
        """
        new = cls(**_torch_layer_arguments(m, nn.TransformerEncoderLayer))
        new = new.to(device=m.linear1.weight.device, dtype=m.linear1.weight.dtype)
        new.self_attn = MultiHeadAttention.from_torch(m.self_attn)
        _copy_feed_forward_and_norms(new, m, n_norms=2)
        return new.train(m.training)


def encoder_stack(cfg, norm_first: bool = True) -> nn.ModuleList:
    """``cfg.n_layers`` GELU encoder blocks of the sizes in ``cfg``: the trunk of
    GPT, BERT (Chapter 6), the ViT and the Decision Transformer (Chapter 8).

    ``cfg`` needs ``d_model``, ``n_heads``, ``d_ff``, ``dropout`` and ``n_layers``;
    ``layer_norm_eps`` and ``n_kv_heads`` are read when it has them. Pre-norm unless
    ``norm_first`` is False (BERT's own layout).
    """
    missing = [
        name
        for name in ("d_model", "n_heads", "d_ff", "dropout", "n_layers")
        if not hasattr(cfg, name)
    ]
    if missing:
        raise TypeError(
            f"cfg must be a model config with {', '.join(missing)}, got "
            f"{type(cfg).__name__}"
        )
    check_int("n_layers", cfg.n_layers, minimum=1)
    return nn.ModuleList(
        EncoderBlock(
            cfg.d_model,
            cfg.n_heads,
            cfg.d_ff,
            cfg.dropout,
            norm_first=norm_first,
            activation="gelu",
            layer_norm_eps=getattr(cfg, "layer_norm_eps", 1e-5),
            n_kv_heads=getattr(cfg, "n_kv_heads", None),  # GPT's; others use all H
        )
        for _ in range(cfg.n_layers)
    )


class DecoderBlock(nn.Module):
    """One decoder layer: masked self-attention, cross-attention, feed-forward.

    post-norm (the paper):  x = LN(x + SelfAttn(x, causal));
                            x = LN(x + CrossAttn(x, memory));  x = LN(x + FFN(x))
    Cross-attention takes its queries from the decoder (x) and its keys and values
    from the encoder's output (``memory``): it is what connects the two halves.

    Shapes:
        x: (B, T, D)   memory: (B, S, D)
        self_mask: bool, broadcastable to (B, H, T, T), usually
                   ``attention.causal_mask(T)``
        memory_mask: bool, broadcastable to (B, H, T, S), e.g. the source padding
                     mask (B, 1, S)
        returns (B, T, D), and the cross-attention weights (B, H, T, S) if
        ``need_weights``
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
    ):
        super().__init__()
        _check_layer_arguments(dropout, layer_norm_eps)
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def _cross_attention(self, x, memory, mask) -> tuple[Tensor, Tensor]:
        out, weights = self.cross_attn(x, memory, memory, mask=mask, need_weights=True)
        return self.dropout2(out), weights  # (B, T, D), (B, H, T, S)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        self._check_inputs(x, memory, self_mask, memory_mask)
        if self.norm_first:
            x = x + self.dropout1(self.self_attn(self.norm1(x), mask=self_mask))
            cross, weights = self._cross_attention(self.norm2(x), memory, memory_mask)
            x = x + cross
            x = x + self.dropout3(self.feed_forward(self.norm3(x)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, mask=self_mask)))
            cross, weights = self._cross_attention(x, memory, memory_mask)
            x = self.norm2(x + cross)
            x = self.norm3(x + self.dropout3(self.feed_forward(x)))
        return (x, weights) if need_weights else x

    def _check_inputs(self, x, memory, self_mask, memory_mask) -> None:
        _check_sequence("x", x, self.d_model, self.norm1.weight)
        _check_sequence("memory", memory, self.d_model, self.norm1.weight)
        check_same_batch(("x", "memory"), x, memory)
        B, T, S = x.shape[0], x.shape[1], memory.shape[1]
        self.self_attn._check_mask("self_mask", self_mask, B, T, T)
        self.cross_attn._check_mask("memory_mask", memory_mask, B, T, S)

    @classmethod
    def from_torch(cls, m: nn.TransformerDecoderLayer) -> DecoderBlock:
        """A copy of ``nn.TransformerDecoderLayer`` ``m`` with the same weights.

        ``m`` must use ``bias=True`` and a relu or gelu activation. The copy is
        batch-first, and in ``m``'s train/eval mode. Masks: ``m(x, memory,
        tgt_mask=~self_mask, memory_mask=~memory_mask)`` equals ``copy(x, memory,
        self_mask, memory_mask)``.
        """
        new = cls(**_torch_layer_arguments(m, nn.TransformerDecoderLayer))
        new = new.to(device=m.linear1.weight.device, dtype=m.linear1.weight.dtype)
        new.self_attn = MultiHeadAttention.from_torch(m.self_attn)
        new.cross_attn = MultiHeadAttention.from_torch(m.multihead_attn)
        _copy_feed_forward_and_norms(new, m, n_norms=3)
        return new.train(m.training)


def _torch_layer_arguments(m: nn.Module, kind: type) -> dict:
    """The constructor arguments of a PyTorch encoder or decoder layer ``m``.

    The copy must compute exactly what ``m`` computes, so anything the book's
    block cannot express is refused with what it cannot copy: a missing bias,
    norms that are not plain LayerNorms with weight and bias over d_model or that
    differ in epsilon, dropout rates that differ between sub-layers.
    """
    if not isinstance(m, kind):
        raise TypeError(f"m must be an nn.{kind.__name__}, got {type(m).__name__}")
    if m.linear1.bias is None or m.linear2.bias is None:
        raise ValueError("from_torch supports layers built with bias=True")
    d_model = m.self_attn.embed_dim
    norms = [m.norm1, m.norm2] + ([m.norm3] if hasattr(m, "norm3") else [])
    for i, norm in enumerate(norms, start=1):
        if (
            type(norm) is not nn.LayerNorm
            or tuple(norm.normalized_shape) != (d_model,)
            or norm.weight is None
            or norm.bias is None
        ):
            raise ValueError(
                f"from_torch cannot copy m.norm{i}={norm!r}: it needs an "
                f"nn.LayerNorm({d_model}) with weight and bias"
            )
    if len({norm.eps for norm in norms}) > 1:
        raise ValueError(
            "from_torch cannot copy norms with different eps: "
            + ", ".join(f"norm{i}.eps={n.eps}" for i, n in enumerate(norms, 1))
        )
    dropouts = {"dropout": m.dropout.p, "self_attn.dropout": m.self_attn.dropout}
    for name in ("dropout1", "dropout2", "dropout3"):
        if hasattr(m, name):
            dropouts[name] = getattr(m, name).p
    if hasattr(m, "multihead_attn"):
        dropouts["multihead_attn.dropout"] = m.multihead_attn.dropout
    if len(set(dropouts.values())) > 1:
        raise ValueError(
            "from_torch cannot copy sub-layers with different dropout rates: "
            + ", ".join(f"{k}={v}" for k, v in dropouts.items())
        )
    return dict(
        d_model=m.self_attn.embed_dim,
        n_heads=m.self_attn.num_heads,
        d_ff=m.linear1.out_features,
        dropout=m.dropout.p,
        norm_first=m.norm_first,
        activation=_activation_name(m.activation),
        layer_norm_eps=m.norm1.eps,
    )


def _copy_feed_forward_and_norms(new: nn.Module, m: nn.Module, n_norms: int) -> None:
    """Copy the feed-forward and LayerNorm weights of PyTorch layer ``m``."""
    pairs = [
        (new.feed_forward.linear1, m.linear1),
        (new.feed_forward.linear2, m.linear2),
    ]
    pairs += [
        (getattr(new, f"norm{i}"), getattr(m, f"norm{i}"))
        for i in range(1, n_norms + 1)
    ]
    for ours, theirs in pairs:
        ours.load_state_dict(theirs.state_dict())
