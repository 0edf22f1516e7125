"""Positional encodings (Chapter 4).

Four ways to tell attention where a token sits:

* absolute, added to the input: :func:`sinusoidal_encoding` (fixed) and
  :class:`LearnedPositionalEmbedding` (a trained table, as in BERT and GPT);
* relative, added to the attention scores: :class:`RelativePositionBias` (T5's
  learned bias per bucket of distance, :func:`relative_position_bucket`) and
  :func:`alibi_bias` (ALiBi's fixed linear penalty, :func:`alibi_slopes`);
* relative, by rotating queries and keys: :func:`apply_rope` (RoPE).

Shape letters: B batch, H heads, T (Tq) query positions, S (Tk) key positions,
D width (``d_model``, or a head's ``d_head`` for RoPE).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ._validate import (
    check_device,
    check_has_values,
    check_int,
    check_like_module,
    check_real,
    check_tensor,
)

__all__ = [
    "sinusoidal_encoding",
    "LearnedPositionalEmbedding",
    "apply_rope",
    "relative_position_bucket",
    "RelativePositionBias",
    "alibi_slopes",
    "alibi_bias",
]


def sinusoidal_encoding(max_len: int, d_model: int, base: float = 10000.0) -> Tensor:
    """The fixed sinusoidal table of Vaswani et al. (2017), §3.5.

    PE[p, 2i]   = sin(p / base^(2i / d_model))
    PE[p, 2i+1] = cos(p / base^(2i / d_model))

    The paper's ``base`` is 10000; Chapter 4 compares a smaller one.

    Shapes: returns (max_len, d_model), float32.
    """
    max_len = check_int("max_len", max_len, minimum=1)
    d_model = check_int("d_model", d_model, minimum=1)
    if d_model % 2 != 0:
        raise ValueError(f"d_model={d_model} must be even for sinusoidal encodings")
    check_real("base", base, low=0.0, low_open=True)
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (T, 1)
    inv_freq = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(base) / d_model)
    )  # (D/2,) = base^(-2i/d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * inv_freq)  # (T, 1) * (D/2,) -> (T, D/2)
    pe[:, 1::2] = torch.cos(position * inv_freq)
    return pe


class LearnedPositionalEmbedding(nn.Module):
    """A trained vector per position, added to the token embeddings (BERT, GPT).

    The table has ``max_len`` rows: a longer sequence has no row to look up.

    Shapes: x (B, T, D) with T <= max_len -> (B, T, D).
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = check_int("max_len", max_len, minimum=1)
        self.d_model = check_int("d_model", d_model, minimum=1)
        self.table = nn.Embedding(max_len, d_model)

    def forward(self, x: Tensor) -> Tensor:
        check_tensor("x", x, "float")
        if x.dim() < 2 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (..., T, d_model={self.d_model}), got "
                f"{tuple(x.shape)}"
            )
        t = x.shape[-2]
        if t > self.max_len:
            missing = f"{self.max_len}" + (f"..{t - 1}" if t - 1 > self.max_len else "")
            raise ValueError(
                f"sequence length {t} exceeds max_len={self.max_len}: the table has "
                f"no row for position {missing}"
            )
        check_like_module("x", x, self.table.weight)  # no silent promotion
        return x + self.table.weight[:t]  # (B, T, D) + (T, D)


def apply_rope(
    x: Tensor, positions: Tensor | None = None, base: float = 10000.0
) -> Tensor:
    """Rotary position embedding (RoPE) of Su et al. (2021).

    Each pair (x[2i], x[2i+1]) is turned by the angle ``position * θ_i`` with
    ``θ_i = base^(-2i/D)``; in complex numbers, ``z_i -> z_i · e^{i·position·θ_i}``.
    Then ``rope(q, m) · rope(k, n)`` depends on the positions only through ``m - n``.
    (GPT-NeoX pairs dimension i with i + D/2 instead: the same rotation, with
    the dimensions permuted.)

    Shapes: x (..., T, D), D even; positions (T,) or broadcastable to x's (..., T)
    without enlarging it, default ``arange(T)``; returns (..., T, D) in x's dtype.
    The rotation runs in float32, or in float64 for float64 inputs.
    """
    positions = _rope_positions(x, positions, base)  # (..., T), checked
    d = x.shape[-1]
    acc = torch.promote_types(x.dtype, torch.float32)  # float64 stays float64
    inv_freq = base ** (
        -torch.arange(0, d, 2, device=x.device, dtype=acc) / d
    )  # (D/2,) = θ_i
    angle = positions.to(acc)[..., None] * inv_freq  # (..., T, 1) * (D/2,)
    cos, sin = angle.cos(), angle.sin()  # (..., T, D/2)
    x1, x2 = x.to(acc)[..., 0::2], x.to(acc)[..., 1::2]  # (..., T, D) -> (..., T, D/2)
    rotated = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return rotated.flatten(-2).to(x.dtype)  # (..., T, D/2, 2) -> (..., T, D)


def _rope_positions(x: Tensor, positions: Tensor | None, base: float) -> Tensor:
    """The checked arguments of :func:`apply_rope`: its positions, as a tensor."""
    check_tensor("x", x, "float")
    if x.dim() < 2:
        raise ValueError(f"x must have shape (..., T, D), got {tuple(x.shape)}")
    t, d = x.shape[-2], x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"the last dimension D={d} must be even to form pairs")
    check_real("base", base, low=0.0, low_open=True)
    if positions is None:
        return torch.arange(t, device=x.device)
    if isinstance(positions, Tensor) and positions.is_meta and not x.is_meta:
        check_has_values("positions", positions)  # x has values: positions must too
    positions = torch.as_tensor(positions, device=x.device)
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(
            f"positions must be an integer or float tensor, got dtype {positions.dtype}"
        )
    if positions.dim() == 0 or positions.shape[-1] != t:
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} do not match T={t} of x "
            f"{tuple(x.shape)}"
        )
    try:
        fits = torch.broadcast_shapes(positions.shape, x.shape[:-1]) == x.shape[:-1]
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} do not broadcast to x's "
            f"(..., T) = {tuple(x.shape[:-1])}"
        )
    return positions


def relative_position_bucket(
    relative_position: Tensor,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> Tensor:
    """T5's bucket of a relative position ``key - query`` (Raffel et al., 2020).

    Half of the buckets hold one exact distance each (0, 1, 2, ...); the other
    half cover distances up to ``max_distance`` on a log scale, and every farther
    distance shares the last bucket. ``bidirectional`` splits the buckets between
    keys before and after the query; otherwise keys after the query (never seen
    by a causal decoder) share bucket 0. The arithmetic is T5's own, in float32.

    Shapes: relative_position (...) integer -> buckets (...) int64 in
    [0, num_buckets).
    """
    num_buckets = check_int("num_buckets", num_buckets)
    max_distance = check_int("max_distance", max_distance)
    if num_buckets < 2 or (bidirectional and num_buckets < 4):
        raise ValueError(
            f"num_buckets={num_buckets} is too small: at least "
            f"{4 if bidirectional else 2} for bidirectional={bool(bidirectional)}"
        )
    if relative_position is None or isinstance(relative_position, str):
        raise TypeError(
            f"relative_position must be a tensor of ints, got {relative_position!r}"
        )
    relative_position = torch.as_tensor(relative_position)
    check_tensor("relative_position", relative_position, "int")
    buckets = torch.zeros_like(relative_position, dtype=torch.long)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).long() * num_buckets  # keys after the query
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)
    max_exact = num_buckets // 2
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance={max_distance} must exceed the {max_exact} exact buckets"
        )
    is_small = distance < max_exact
    # log(0) = -inf for distance 0; torch.where below never picks those entries.
    if_large = max_exact + (
        torch.log(distance.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    if_large = if_large.clamp(max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, if_large)


class RelativePositionBias(nn.Module):
    """T5's relative attention bias: a learned scalar per (head, distance bucket).

    scores[h, i, j] += b[h, bucket(j - i)], one table shared by the layers.

    Shapes: forward(t_q, t_k) -> (H, Tq, Tk), to add to scores (B, H, Tq, Tk).
    Queries sit at positions ``query_offset + 0 .. t_q - 1``, keys at ``0 .. t_k - 1``.
    """

    def __init__(
        self,
        n_heads: int,
        bidirectional: bool = True,
        num_buckets: int = 32,
        max_distance: int = 128,
    ):
        super().__init__()
        n_heads = check_int("n_heads", n_heads, minimum=1)
        self.bidirectional = bidirectional
        self.num_buckets, self.max_distance = num_buckets, max_distance
        relative_position_bucket(torch.zeros(1, dtype=torch.long), **self._kw())
        self.bias = nn.Embedding(num_buckets, n_heads)
        nn.init.zeros_(self.bias.weight)  # start with no preference

    def _kw(self) -> dict:
        return dict(
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )

    def forward(
        self, t_q: int, t_k: int | None = None, query_offset: int = 0
    ) -> Tensor:
        # Cached decoding runs only the last queries: query_offset = t_k - t_q.
        t_q, t_k, query_offset = _bias_sizes(t_q, t_k, query_offset)
        device = self.bias.weight.device
        query = torch.arange(t_q, device=device)[:, None] + query_offset  # (Tq, 1)
        key = torch.arange(t_k, device=device)[None, :]  # (1, Tk)
        buckets = relative_position_bucket(key - query, **self._kw())  # (Tq, Tk)
        return self.bias(buckets).permute(2, 0, 1)  # (Tq, Tk, H) -> (H, Tq, Tk)


def alibi_slopes(n_heads: int) -> Tensor:
    """ALiBi's head-specific slopes (Press et al., 2022).

    For n heads, a power of two, the geometric sequence 2^(-8/n), 2^(-16/n), ...,
    2^(-8) (8 heads: 1/2, 1/4, ..., 1/256). Otherwise, as in the paper's code:
    the slopes of the largest power of two below n, then every other slope of
    the next power of two, until there are n.

    Shapes: returns (n_heads,) float32.
    """
    n_heads = check_int("n_heads", n_heads, minimum=1)

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_two(closest)
    slopes += power_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(
    n_heads: int,
    t_q: int,
    t_k: int | None = None,
    device: torch.device | None = None,
    query_offset: int = 0,
) -> Tensor:
    """ALiBi's fixed bias -m_h·|i - j|: farther keys are penalised linearly.

    With a causal mask only keys j <= i are used, where this is the paper's
    -m_h·(i - j). No parameters: the slopes come from :func:`alibi_slopes`.
    Queries sit at positions ``query_offset + 0 .. t_q - 1``, keys at
    ``0 .. t_k - 1``: cached decoding, which runs only the last t_q queries,
    passes ``query_offset = t_k - t_q`` and gets the full matrix's last rows.

    Shapes: returns (H, Tq, Tk), to add to scores (B, H, Tq, Tk).
    """
    t_q, t_k, query_offset = _bias_sizes(t_q, t_k, query_offset)
    check_device("device", device)
    query = torch.arange(t_q, device=device)[:, None] + query_offset  # (Tq, 1)
    key = torch.arange(t_k, device=device)[None, :]  # (1, Tk)
    distance = (query - key).abs().float()  # (Tq, Tk)
    slopes = alibi_slopes(n_heads).to(device)  # (H,)
    return -slopes[:, None, None] * distance  # (H, 1, 1) * (Tq, Tk) -> (H, Tq, Tk)


def _bias_sizes(t_q: int, t_k: int | None, query_offset: int) -> tuple[int, int, int]:
    """The checked sizes of a relative bias; t_k defaults to t_q."""
    t_q = check_int("t_q", t_q, minimum=0)
    t_k = t_q if t_k is None else check_int("t_k", t_k, minimum=0)
    return t_q, t_k, check_int("query_offset", query_offset, minimum=0)
