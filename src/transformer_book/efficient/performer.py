"""Performer: softmax attention approximated by positive random features (Chapter 7).

Choromanski et al. (2021), "Rethinking Attention with Performers" (FAVOR+). For w
drawn from N(0, I), E[exp(w·x - |x|²/2) exp(w·y - |y|²/2)] = exp(x·y), so with
m features w_1..w_m (the rows of W) and

    phi(x) = exp(W x - |x|²/2) / sqrt(m)        (m positive numbers)

phi(x)·phi(y) is an unbiased estimate of exp(x·y). Taking x = q / d^(1/4) and
y = k / d^(1/4) estimates softmax's exp(q·k / sqrt(d)), and attention becomes

    out = phi(Q) (phi(K)^T V) / (phi(Q) phi(K)^T 1)

computed right to left: (m, Dv) and (m,) summaries of the keys, never the (T, S)
matrix, so time and memory are O(T m d). Causal attention replaces the two sums
over keys by prefix sums (cumsum). Orthogonal rows of W (scaled to Gaussian
lengths) lower the variance.

Shape letters: B batch, H heads, T query and S key positions, D ``d_model``,
Dk = Dh the query/key width, Dv the value width, M the number of features m.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .._validate import (
    check_attention,
    check_device,
    check_generator,
    check_int,
    check_tensor,
)
from ._heads import ProjectedHeads

__all__ = [
    "orthogonal_random_features",
    "positive_random_features",
    "performer_attention",
    "PerformerAttention",
]


def orthogonal_random_features(
    n_features: int,
    d: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """(n_features, d) float32 matrix W whose rows are distributed as N(0, I_d) and
    orthogonal within each group of d rows (FAVOR+'s orthogonal random features).

    Each group is a random rotation (QR of a Gaussian matrix, signs fixed so that it
    is uniform); each row gets the length of a Gaussian vector (chi with d degrees
    of freedom). Drawn on the CPU from ``generator``, then moved to ``device``.

    Shapes: returns (M, d)
    """
    n_features = check_int("n_features", n_features, 1)
    d = check_int("d", d, 1)
    check_device("device", device)
    check_generator("generator", generator)
    n_groups = math.ceil(n_features / d)
    gaussian = torch.randn(n_groups, d, d, generator=generator, dtype=torch.float64)
    rotation, r = torch.linalg.qr(gaussian)  # (G, d, d), orthonormal columns
    signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))  # (G, d)
    rotation = rotation * signs.unsqueeze(-2)  # column j times sign(r_jj): uniform
    rows = rotation.transpose(-2, -1).reshape(n_groups * d, d)  # (G d, d)
    directions = rows[:n_features]  # (G d, d) -> (M, d), orthonormal in groups of d
    gaussian_rows = torch.randn(n_features, d, generator=generator, dtype=torch.float64)
    lengths = gaussian_rows.norm(dim=-1, keepdim=True)  # (M, d) -> (M, 1)
    return (directions * lengths).to(device=device, dtype=torch.float32)


def positive_random_features(x: Tensor, features: Tensor) -> Tensor:
    """phi(x) = exp(W x - |x|²/2) / sqrt(m), FAVOR+'s positive feature map.

    phi(x)·phi(y) estimates exp(x·y) without bias when the rows of W are N(0, I).
    This is the formula as written; :func:`performer_attention` also subtracts a
    maximum before ``exp``, which cancels in its ratio.

    Shapes: x: (..., T, d)   features: (M, d); returns (..., T, M)
    """
    check_tensor("x", x, "float")
    _check_features(features, x, "x")
    logits = _feature_logits(x, features.to(x.dtype))  # (..., T, M)
    return torch.exp(logits) / math.sqrt(features.shape[0])


def performer_attention(
    q: Tensor, k: Tensor, v: Tensor, features: Tensor, causal: bool = False
) -> Tensor:
    """FAVOR+ estimate of softmax(Q K^T / sqrt(d)) V, without the (T, S) matrix.

    Non-causal: out = phi(Q) (phi(K)^T V) / (phi(Q) phi(K)^T 1). Causal (T = S):
    the sums over keys become prefix sums, so query t uses keys 0..t only.

    For numerical stability each query's features are divided by their largest
    value and, without ``causal``, all keys' features by one shared largest value;
    both constants cancel in the ratio. With ``causal`` one shared constant is not
    enough: a key of large norm early in the sequence has features far below the
    later keys' largest, which would underflow to zero and leave the first queries
    with no key at all. There the prefix sums run in log space
    (``torch.logcumsumexp``), each position shifted by its own largest prefix
    value. Runs in at least float32; the output has v's dtype.

    Shapes:
        q: (..., T, Dk)   k: (..., S, Dk)   v: (..., S, Dv)   features: (M, Dk)
        returns (..., T, Dv)
    """
    check_attention(q, k, v, None, None, 0.0)
    _check_features(features, q)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"causal attention needs as many queries as keys: q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}"
        )
    acc, out_dtype = torch.promote_types(q.dtype, torch.float32), v.dtype
    scale = q.shape[-1] ** -0.25  # x = q / d^(1/4), y = k / d^(1/4)
    features = features.to(acc)
    phi_q = _stable_features(q.to(acc) * scale, features, (-1,))  # (..., T, M)
    v = v.to(acc)
    if causal:
        k_logits = _feature_logits(k.to(acc) * scale, features)  # (..., T, M)
        return _causal_in_log_space(phi_q, k_logits, v).to(out_dtype)
    phi_k = _stable_features(k.to(acc) * scale, features, (-2, -1))  # (..., S, M)
    kv = phi_k.transpose(-2, -1) @ v  # (..., M, S) @ (..., S, Dv) -> (..., M, Dv)
    numerator = phi_q @ kv  # (..., T, M) @ (..., M, Dv) -> (..., T, Dv)
    k_sum = phi_k.sum(dim=-2).unsqueeze(-1)  # (..., S, M) -> (..., M, 1)
    denominator = phi_q @ k_sum  # (..., T, M) @ (..., M, 1) -> (..., T, 1)
    tiny = torch.finfo(acc).tiny  # every feature of every key underflowed: output 0
    return (numerator / denominator.clamp(min=tiny)).to(out_dtype)


def _causal_in_log_space(phi_q: Tensor, k_logits: Tensor, v: Tensor) -> Tensor:
    """Causal FAVOR+: query t over keys 0..t, the key sums kept in log space.

    sum_{s<=t} exp(l_s) v_s is split by the sign of v so that each part is a
    log-cumsum-exp; every position t is shifted by its own largest log key sum,
    which cancels in the ratio, so no prefix underflows to zero.

    Shapes: phi_q (..., T, M), k_logits (..., T, M), v (..., T, Dv) -> (..., T, Dv)
    """
    minus_inf = torch.tensor(-math.inf, dtype=v.dtype, device=v.device)
    log_v = v.abs().clamp_min(torch.finfo(v.dtype).tiny).log()  # finite: safe grads
    log_pos = torch.where(v > 0, log_v, minus_inf)  # (..., T, Dv)
    log_neg = torch.where(v < 0, log_v, minus_inf)
    log_k = k_logits.logcumsumexp(dim=-2)  # (..., T, M): log sum_{s<=t} exp(l_s)
    shift = log_k.amax(dim=-1, keepdim=True).detach()  # (..., T, 1)
    pairs = k_logits.unsqueeze(-1)  # (..., T, M, 1)
    log_kv_pos = (pairs + log_pos.unsqueeze(-2)).logcumsumexp(dim=-3)  # (..., T, M, Dv)
    log_kv_neg = (pairs + log_neg.unsqueeze(-2)).logcumsumexp(dim=-3)
    shift_kv = shift.unsqueeze(-1)  # (..., T, 1, 1)
    kv = (log_kv_pos - shift_kv).exp() - (
        log_kv_neg - shift_kv
    ).exp()  # (..., T, M, Dv)
    numerator = (phi_q.unsqueeze(-2) @ kv).squeeze(-2)  # (..., T, Dv)
    denominator = (phi_q * (log_k - shift).exp()).sum(
        dim=-1, keepdim=True
    )  # (..., T, 1)
    tiny = torch.finfo(v.dtype).tiny
    return numerator / denominator.clamp(min=tiny)


def _feature_logits(x: Tensor, features: Tensor) -> Tensor:
    """W x - |x|²/2 for every row of x: (..., T, d) -> (..., T, M)."""
    return x @ features.T - x.pow(2).sum(dim=-1, keepdim=True) / 2


def _stable_features(x: Tensor, features: Tensor, over: tuple[int, ...]) -> Tensor:
    """phi(x) divided by its largest value over the axes ``over`` (a constant)."""
    logits = _feature_logits(x, features)  # (..., T, M)
    if logits.numel() > 0:
        logits = logits - logits.amax(dim=over, keepdim=True).detach()
    return torch.exp(logits) / math.sqrt(features.shape[0])


def _check_features(features: object, x: Tensor, x_name: str = "q") -> None:
    check_tensor("features", features, "float")
    if (
        features.dim() != 2
        or features.shape[0] == 0
        or features.shape[1] != x.shape[-1]
    ):
        raise ValueError(
            f"features must have shape (M, d={x.shape[-1]}) with M >= 1 to match "
            f"{x_name} {tuple(x.shape)}, got {tuple(features.shape)}"
        )
    if features.device != x.device:
        raise ValueError(f"features is on {features.device} but {x_name} on {x.device}")


class PerformerAttention(ProjectedHeads):
    """Multi-head self-attention through FAVOR+ random features (linear in T).

    ``q_proj, k_proj, v_proj, out_proj`` are named as in
    :class:`~transformer_book.attention.MultiHeadAttention`, and the features are
    a non-persistent buffer drawn from ``seed``, so a MultiHeadAttention's state
    dict loads as it is. The heads share one (n_features, d_head) feature matrix;
    :meth:`redraw` draws a new one (Performers redraw during training).

    Shapes:
        x: (B, T, D); returns (B, T, D)
        features: (M, Dh)
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_features: int,
        causal: bool = False,
        seed: int = 0,
        bias: bool = True,
    ):
        super().__init__(d_model, n_heads, bias=bias)
        self.n_features = check_int("n_features", n_features, 1)
        if not isinstance(causal, bool):
            raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
        self.causal = causal
        self.seed = check_int("seed", seed)
        generator = torch.Generator().manual_seed(self.seed)
        features = orthogonal_random_features(n_features, self.d_head, generator)
        self.register_buffer("features", features, persistent=False)

    def redraw(self, seed: int | None = None) -> None:
        """New random features from ``seed`` (default: the previous seed + 1)."""
        self.seed = self.seed + 1 if seed is None else check_int("seed", seed)
        generator = torch.Generator().manual_seed(self.seed)
        new = orthogonal_random_features(self.n_features, self.d_head, generator)
        self.features = new.to(self.features)  # keep the buffer's device and dtype

    def forward(self, x: Tensor) -> Tensor:
        self.check_input(x)
        q = self.split_heads(self.q_proj(x))  # (B, T, D) -> (B, H, T, Dh)
        k = self.split_heads(self.k_proj(x))  # (B, T, D) -> (B, H, T, Dh)
        v = self.split_heads(self.v_proj(x))  # (B, T, D) -> (B, H, T, Dh)
        heads = performer_attention(q, k, v, self.features, causal=self.causal)
        return self.out_proj(self.merge_heads(heads))  # (B, H, T, Dh) -> (B, T, D)
