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

from ._validate import (
    check_attention,
    check_device,
    check_int,
    check_like_module,
    check_mask,
    check_probability,
    check_same_batch,
    check_tensor,
)

__all__ = [
    "scaled_dot_product_attention",
    "fused_scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "MultiHeadAttention",
]


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

    The scores and the softmax run in (at least) float32 whatever the input dtype:
    q and k are cast before their product, which in float16 would pass 65504 (and
    turn into inf) for inputs of size about 32 at d_k = 64. Blocked scores are
    filled with float32's minimum rather than ``-1e9`` (which is ``-inf`` in
    float16), so half-precision inputs keep their dtype and never overflow.
    A ``-inf`` in ``bias`` blocks its key as a False in ``mask`` does (PyTorch's
    float-mask convention). A query row with no allowed key gets zero weights and a
    zero output, never NaN (for finite q, k, v).
    ``dropout_p`` drops weights (as in training); the weights returned are the ones
    that were applied.
    """
    check_attention(q, k, v, mask, bias, dropout_p)
    d_k = q.shape[-1]
    acc = torch.promote_types(q.dtype, torch.float32)  # at least float32: no overflow
    q, k = q.to(acc), k.to(acc)  # before the product: float16's q·k overflows
    scores = (q @ k.transpose(-2, -1)).to(acc) / math.sqrt(d_k)  # (..., Tq, Tk)
    blocked = torch.finfo(acc).min  # not -1e9, which is -inf in float16
    if bias is not None:  # a -inf in the bias blocks its key, as the mask does
        bias = bias.to(acc).clamp(min=blocked)  # -inf would make NaN of a full row
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, blocked)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None or bias is not None:
        # A row whose keys are all blocked would otherwise spread its weight evenly.
        weights = weights.masked_fill(_no_key(mask, bias, blocked), 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    weights = weights.to(v.dtype)
    return weights @ v, weights  # (..., Tq, Tk) @ (..., Tk, Dv) -> (..., Tq, Dv)


def _no_key(mask: Tensor | None, bias: Tensor | None, blocked: float) -> Tensor:
    """(..., Tq, 1) True for the query rows where every key is blocked.

    Read from the mask and the bias, not from the (larger) scores.
    """
    allowed = mask if bias is None else bias > blocked
    if mask is not None and bias is not None:
        allowed = mask & allowed
    return ~allowed.any(dim=-1, keepdim=True)


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
    PyTorch's fused kernels take 4-D (B, H, T, D) inputs only (others fall back
    to the math path, which does build the scores), so inputs of any other rank
    are viewed as 4-D for the call and given back in their own shape.

    Shapes: as :func:`scaled_dot_product_attention`; returns (..., Tq, Dv).
    """
    check_attention(q, k, v, mask, None, dropout_p)
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q4, k4, v4 = (_as_4d(x, batch) for x in (q, k, v))  # (B', H', T, D)
    mask4 = None if mask is None else _as_4d(mask, batch)  # (B', H', Tq, Tk)
    out = F.scaled_dot_product_attention(
        q4, k4, v4, attn_mask=mask4, dropout_p=dropout_p
    )
    if mask is not None:
        has_key = mask4.any(dim=-1, keepdim=True)  # (B', H', Tq, 1)
        out = out.masked_fill(~has_key, 0.0)
    return out.reshape(*batch, q.shape[-2], v.shape[-1])  # (..., Tq, Dv)


def _as_4d(x: Tensor, batch: torch.Size) -> Tensor:
    """``x`` (..., R, C), broadcastable to ``batch`` + (R, C), as (B', H', R, C).

    Up to two batch axes are kept as they are (size-1 axes still broadcast), with
    unit axes added on the left; more are broadcast and flattened into one.
    """
    x = x.reshape((1,) * (len(batch) + 2 - x.dim()) + tuple(x.shape))  # pad left
    if len(batch) <= 2:
        return x.reshape((1,) * (2 - len(batch)) + tuple(x.shape))
    x = x.expand(*batch, *x.shape[-2:])
    return x.reshape(-1, 1, *x.shape[-2:])  # (prod(batch), 1, R, C)


def causal_mask(t: int, device: torch.device | str | None = None) -> Tensor:
    """(t, t) bool mask, True on and below the diagonal: position i sees 0..i."""
    t = check_int("t", t, minimum=1)
    check_device("device", device)
    return torch.ones(t, t, dtype=torch.bool, device=device).tril()


def padding_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """(B, 1, T) bool mask, True for the real (non-padding) key positions.

    ``lengths`` holds each sequence's true length. The middle axis broadcasts over
    the queries, so the mask fits scores of shape (B, Tq, T); for (B, H, Tq, T) use
    ``mask[:, None]`` (``MultiHeadAttention`` does this itself).
    """
    if lengths is None or isinstance(lengths, str):
        raise TypeError(f"lengths must be a tensor or a list of ints, got {lengths!r}")
    lengths = torch.as_tensor(lengths)
    check_tensor("lengths", lengths, "int")
    if lengths.is_meta:
        raise ValueError("lengths is on the meta device, which holds no values")
    if lengths.dim() != 1:
        raise ValueError(f"lengths must have shape (B,), got {tuple(lengths.shape)}")
    if max_len is None and lengths.numel() == 0:
        raise ValueError("lengths is empty: pass max_len to size the mask")
    t = int(lengths.max()) if max_len is None else check_int("max_len", max_len, 0)
    if (lengths < 0).any() or (lengths > t).any():
        bound = f" (max_len={t})" if max_len is not None else ""
        raise ValueError(f"lengths must lie in [0, {t}]{bound}, got {lengths.tolist()}")
    positions = torch.arange(t, device=lengths.device)  # (T,)
    return (positions[None, :] < lengths[:, None])[:, None, :]  # (B, 1, T)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)   (Vaswani et al., 2017, §3.2.2).

    The H heads are computed at once: one projection of width D is reshaped into
    H heads of width Dh = D / H. Without ``need_weights`` the heads run through
    PyTorch's fused kernel (``fused_scaled_dot_product_attention``: FlashAttention
    or memory-efficient attention on a GPU, no (T, S) matrix kept); with it, through
    the readable ``scaled_dot_product_attention``, which returns the weights. Both
    give the same output.

    ``n_kv_heads`` < H shares each key/value head between H / n_kv_heads query heads:
    grouped-query attention (Ainslie et al., 2023), multi-query attention
    (Shazeer, 2019) when it is 1. The key and value projections shrink to width
    n_kv_heads * Dh, and so does a KV cache (Chapter 7).

    Shapes:
        query: (B, T, D)   key, value: (B, S, D), default to query (self-attention)
        mask: bool, True = may attend, broadcastable to (B, H, T, S);
              a 3-D mask is read as (B, T, S) and shared by the heads
        returns (B, T, D), and the weights (B, H, T, S) if ``need_weights``
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        n_kv_heads: int | None = None,
    ):
        super().__init__()
        d_model, n_heads = (
            check_int("d_model", d_model, 1),
            check_int("n_heads", n_heads, 1),
        )
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        n_kv_heads = check_int("n_kv_heads", n_kv_heads, 1)
        if n_heads % n_kv_heads != 0:
            raise ValueError(
                f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}"
            )
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.n_kv_heads = n_kv_heads
        self.dropout = check_probability("dropout", dropout)
        d_kv = n_kv_heads * self.d_head  # D, or less with shared key/value heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_kv, bias=bias)
        self.v_proj = nn.Linear(d_model, d_kv, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: Tensor, n_heads: int | None = None) -> Tensor:
        """(B, T, n * Dh) -> (B, n, T, Dh), n = ``n_heads`` (default: H)."""
        n = self.n_heads if n_heads is None else check_int("n_heads", n_heads, 1)
        check_tensor("x", x, "float")
        if x.dim() != 3 or x.shape[-1] != n * self.d_head:
            raise ValueError(
                f"x must have shape (B, T, n_heads * d_head = {n * self.d_head}), "
                f"got {tuple(x.shape)}"
            )
        B, T, _ = x.shape
        return x.view(B, T, n, self.d_head).transpose(1, 2)  # (B, n, T, Dh)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """The heads' outputs from split queries, keys and values; weights or None.

        Shapes: q (B, H, T, Dh), k and v (B, n_kv_heads, S, Dh)
                -> (B, H, T, Dh), weights (B, H, T, S) if ``need_weights``
        """
        self._check_split(q, k, v)
        group = self.n_heads // self.n_kv_heads
        if group > 1:  # each key/value head serves `group` query heads
            k = k.repeat_interleave(group, dim=1)  # (B, Hkv, S, Dh) -> (B, H, S, Dh)
            v = v.repeat_interleave(group, dim=1)
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            return scaled_dot_product_attention(q, k, v, mask=mask, dropout_p=dropout_p)
        heads = fused_scaled_dot_product_attention(q, k, v, mask, dropout_p)
        return heads, None

    def _check_split(self, q: Tensor, k: Tensor, v: Tensor) -> None:
        """q (B, H, T, Dh), k and v (B, n_kv_heads, S, Dh): shapes only, cheap."""
        for name, x, heads in (("q", q, self.n_heads), ("k", k, self.n_kv_heads),
                               ("v", v, self.n_kv_heads)):  # fmt: skip
            check_tensor(name, x, "float")
            if x.dim() != 4 or x.shape[1] != heads or x.shape[3] != self.d_head:
                raise ValueError(
                    f"{name} must have shape (B, {heads}, T, d_head={self.d_head}), "
                    f"got {tuple(x.shape)}"
                )

    def merge_heads(self, x: Tensor) -> Tensor:
        """(B, H, T, Dh) -> (B, T, D): the heads side by side."""
        check_tensor("x", x, "float")
        if x.dim() != 4 or x.shape[1] != self.n_heads or x.shape[3] != self.d_head:
            raise ValueError(
                f"x must have shape (B, n_heads={self.n_heads}, T, "
                f"d_head={self.d_head}), got {tuple(x.shape)}"
            )
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
        self._check_inputs(query, key, value, mask)
        if mask is not None and mask.dim() == 3:
            mask = mask[:, None]  # (B, T, S) -> (B, 1, T, S), shared by the heads
        q = self.split_heads(self.q_proj(query))  # (B, H, T, Dh)
        k = self.split_heads(self.k_proj(key), self.n_kv_heads)  # (B, Hkv, S, Dh)
        v = self.split_heads(self.v_proj(value), self.n_kv_heads)  # (B, Hkv, S, Dh)
        heads, weights = self.attend(q, k, v, mask, need_weights)  # (B, H, T, Dh)
        out = self.out_proj(self.merge_heads(heads))  # (B, H, T, Dh) -> (B, T, D)
        return (out, weights) if need_weights else out

    def _check_inputs(self, query, key, value, mask, mask_name="mask") -> None:
        weight = self.q_proj.weight
        for name, x in (("query", query), ("key", key), ("value", value)):
            check_tensor(name, x, "float")
            if x.dim() != 3 or x.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} must have shape (B, T, d_model={self.d_model}), "
                    f"got {tuple(x.shape)}"
                )
            check_like_module(name, x, weight)
        check_same_batch(("query", "key"), query, key)
        check_same_batch(("key", "value"), key, value)
        if key.shape[1] != value.shape[1]:
            raise ValueError(
                f"key {tuple(key.shape)} and value {tuple(value.shape)} must have "
                "the same number of positions S"
            )
        self._check_mask(mask_name, mask, query.shape[0], query.shape[1], key.shape[1])

    def _check_mask(self, name: str, mask, batch: int, t_q: int, t_k: int) -> None:
        """``mask`` fits (B, T, S) if 3-D, else (B, H, T, S); named as the caller's."""
        if mask is None:
            return
        check_tensor(name, mask, "bool")
        weight = self.q_proj.weight
        if mask.device != weight.device and mask.dim() > 0:
            raise ValueError(
                f"{name} is on {mask.device} but the module's parameters are on "
                f"{weight.device}"
            )
        if mask.dim() == 3:
            check_mask(name, mask, (batch, t_q, t_k), "(B, T, S)")
        else:
            check_mask(name, mask, (batch, self.n_heads, t_q, t_k), "(B, H, T, S)")

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """A copy of ``nn.MultiheadAttention`` ``m`` with the same weights.

        Only the common configuration is supported: equal query/key/value widths,
        no ``add_bias_kv`` and no ``add_zero_attn``. Remember the mask convention:
        ``m(..., attn_mask=~mask)`` equals ``copy(..., mask=mask)``. The copy is
        batch-first whatever ``m.batch_first`` says, and in ``m``'s train/eval mode.
        """
        if not isinstance(m, nn.MultiheadAttention):
            raise TypeError(
                f"m must be an nn.MultiheadAttention, got {type(m).__name__}"
            )
        if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
            raise ValueError(
                "from_torch supports nn.MultiheadAttention with kdim = vdim = "
                "embed_dim, add_bias_kv=False and add_zero_attn=False"
            )
        has_bias = m.in_proj_bias is not None
        if (m.out_proj.bias is not None) != has_bias:
            raise ValueError(
                "from_torch cannot copy an nn.MultiheadAttention whose input and "
                "output projections differ in having a bias"
            )
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
        return new.train(m.training)
