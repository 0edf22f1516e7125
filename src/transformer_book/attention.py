"""Scaled dot-product attention and multi-head attention (Chapters 2 and 3).

Shape letters: B batch, H heads, T (Tq) query positions, S (Tk) key positions,
D model width (``d_model``), Dh width of one head (``d_head``), Dv value width.

Masks are boolean with **True = may attend**, as in
``torch.nn.functional.scaled_dot_product_attention``. PyTorch's
``nn.MultiheadAttention`` and ``nn.Transformer*`` use the opposite convention
(True = blocked): pass them ``~mask``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "scaled_dot_product_attention",
    "fused_scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "MultiHeadAttention",
]


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dim() < 2:
            raise ValueError(
                f"{name} must have shape (..., T, D), got {tuple(x.shape)}"
            )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension d_k: q has shape "
            f"{tuple(q.shape)}, k has shape {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions: k has shape "
            f"{tuple(k.shape)}, v has shape {tuple(v.shape)}"
        )
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the batch dimensions of q {tuple(q.shape)}, k {tuple(k.shape)} and "
            f"v {tuple(v.shape)} do not broadcast"
        ) from None


def _check_extra(name: str, x: Tensor, scores_shape: torch.Size) -> None:
    """A mask or bias must broadcast to the scores without enlarging them."""
    try:
        fits = torch.broadcast_shapes(x.shape, scores_shape) == scores_shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"{name} of shape {tuple(x.shape)} does not broadcast to the attention "
            f"scores of shape {tuple(scores_shape)} (..., Tq, Tk)"
        )


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    bias: Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + bias) V, the readable version.

    Shapes:
        q: (..., Tq, Dk)   k: (..., Tk, Dk)   v: (..., Tk, Dv)
        mask: bool, broadcastable to (..., Tq, Tk), True = may attend
        bias: float, broadcastable to (..., Tq, Tk), added to the scaled scores
        returns output (..., Tq, Dv) and weights (..., Tq, Tk)

    The softmax runs in (at least) float32 whatever the input dtype, and masked
    scores are filled with that type's minimum rather than ``-1e9`` (which is
    ``-inf`` in float16): half-precision inputs keep their dtype and never
    overflow. A query row with no allowed key gets zero weights and a zero output,
    never NaN.
    ``dropout_p`` drops weights (as in training); the weights returned are the ones
    that were applied.
    """
    _check_qkv(q, k, v)
    scores_shape = torch.Size(
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2])
    )
    if mask is not None:
        if mask.dtype != torch.bool:
            raise TypeError(
                f"mask must be a bool tensor (True = may attend), got {mask.dtype}"
            )
        _check_extra("mask", mask, scores_shape)
    if bias is not None:
        _check_extra("bias", bias, scores_shape)

    d_k = q.shape[-1]
    acc = torch.promote_types(q.dtype, torch.float32)  # at least float32: no overflow
    scores = (q @ k.transpose(-2, -1)).to(acc) / math.sqrt(d_k)  # (..., Tq, Tk)
    if bias is not None:
        scores = scores + bias.to(acc)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(acc).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # A row whose keys are all masked would otherwise spread its weight evenly.
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    weights = weights.to(v.dtype)
    return weights @ v, weights  # (..., Tq, Tk) @ (..., Tk, Dv) -> (..., Tq, Dv)


def fused_scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """The same output through PyTorch's fused kernel (FlashAttention on a GPU).

    Returns only the output: fused kernels never build the (Tq, Tk) weight matrix.
    Fully masked rows give zeros, as in :func:`scaled_dot_product_attention`.

    Shapes: as :func:`scaled_dot_product_attention`; returns (..., Tq, Dv).
    """
    _check_qkv(q, k, v)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor (True = may attend), got {mask.dtype}"
        )
    scores_shape = torch.Size(
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2])
    )
    _check_extra("mask", mask, scores_shape)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    has_key = mask.any(dim=-1, keepdim=True)  # (..., Tq, 1)
    return out.masked_fill(~has_key, 0.0)


def causal_mask(t: int, device: torch.device | str | None = None) -> Tensor:
    """(t, t) bool mask, True on and below the diagonal: position i sees 0..i."""
    if t < 1:
        raise ValueError(f"t must be positive, got {t}")
    return torch.ones(t, t, dtype=torch.bool, device=device).tril()


def padding_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """(B, 1, T) bool mask, True for the real (non-padding) key positions.

    ``lengths`` holds each sequence's true length. The middle axis broadcasts over
    the queries, so the mask fits scores of shape (B, Tq, T); for (B, H, Tq, T) use
    ``mask[:, None]`` (``MultiHeadAttention`` does this itself).
    """
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1:
        raise ValueError(f"lengths must have shape (B,), got {tuple(lengths.shape)}")
    t = int(lengths.max()) if max_len is None else max_len
    if (lengths < 0).any() or (lengths > t).any():
        raise ValueError(f"lengths must lie in [0, {t}], got {lengths.tolist()}")
    positions = torch.arange(t, device=lengths.device)  # (T,)
    return (positions[None, :] < lengths[:, None])[:, None, :]  # (B, 1, T)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)   (Vaswani et al., 2017, §3.2.2).

    The H heads are computed at once: one projection of width D is reshaped into
    H heads of width Dh = D / H.

    Shapes:
        query: (B, T, D)   key, value: (B, S, D), default to query (self-attention)
        mask: bool, True = may attend, broadcastable to (B, H, T, S);
              a 3-D mask is read as (B, T, S) and shared by the heads
        returns (B, T, D), and the weights (B, H, T, S) if ``need_weights``
    """

    def __init__(
        self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True
    ):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_head).transpose(
            1, 2
        )  # (B,T,D) -> (B,H,T,Dh)

    def merge_heads(self, x: Tensor) -> Tensor:
        B, _, T, _ = x.shape
        return x.transpose(1, 2).reshape(B, T, self.d_model)  # (B,H,T,Dh) -> (B,T,D)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        key = query if key is None else key
        value = key if value is None else value
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.dim() != 3 or x.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} must have shape (B, T, d_model={self.d_model}), "
                    f"got {tuple(x.shape)}"
                )
        if mask is not None and mask.dim() == 3:
            mask = mask[:, None]  # (B, T, S) -> (B, 1, T, S), shared by the heads
        q = self.split_heads(self.q_proj(query))  # (B, H, T, Dh)
        k = self.split_heads(self.k_proj(key))  # (B, H, S, Dh)
        v = self.split_heads(self.v_proj(value))  # (B, H, S, Dh)
        dropout_p = self.dropout if self.training else 0.0
        heads, weights = scaled_dot_product_attention(
            q, k, v, mask=mask, dropout_p=dropout_p
        )
        out = self.out_proj(self.merge_heads(heads))  # (B, H, T, Dh) -> (B, T, D)
        return (out, weights) if need_weights else out

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """A copy of ``nn.MultiheadAttention`` ``m`` with the same weights.

        Only the common configuration is supported: equal query/key/value widths,
        no ``add_bias_kv`` and no ``add_zero_attn``. Remember the mask convention:
        ``m(..., attn_mask=~mask)`` equals ``copy(..., mask=mask)``.
        """
        if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
            raise ValueError(
                "from_torch supports nn.MultiheadAttention with kdim = vdim = "
                "embed_dim, add_bias_kv=False and add_zero_attn=False"
            )
        has_bias = m.in_proj_bias is not None
        new = cls(m.embed_dim, m.num_heads, dropout=m.dropout, bias=has_bias)
        new = new.to(device=m.in_proj_weight.device, dtype=m.in_proj_weight.dtype)
        w_q, w_k, w_v = m.in_proj_weight.detach().chunk(3, dim=0)
        with torch.no_grad():
            for proj, w in ((new.q_proj, w_q), (new.k_proj, w_k), (new.v_proj, w_v)):
                proj.weight.copy_(w)
            new.out_proj.weight.copy_(m.out_proj.weight)
            if has_bias:
                b_q, b_k, b_v = m.in_proj_bias.detach().chunk(3, dim=0)
                for proj, b in (
                    (new.q_proj, b_q),
                    (new.k_proj, b_k),
                    (new.v_proj, b_v),
                ):
                    proj.bias.copy_(b)
                new.out_proj.bias.copy_(m.out_proj.bias)
        return new
