"""FlashAttention's tiling and online softmax, in readable PyTorch (Chapter 7).

Exact attention without the (Tq, Tk) matrix: the queries are cut into blocks of
Br rows and the keys and values into blocks of Bc rows; for each query block the
key blocks stream past, and a running maximum m, a running sum l and an
unnormalised output accumulator are all that is kept (Milakov & Gimelshein 2018,
"Online normalizer calculation for softmax"; Dao et al. 2022, "FlashAttention",
Algorithm 1). The loop order (queries outside, keys inside) is FlashAttention-2's
(Dao 2023): each query block's m, l and accumulator stay in fast memory.

Shape letters: Tq query positions, Tk key positions, Br and Bc the query and key
block lengths, Dk query/key width, Dv value width; ``...`` any batch (and head) axes.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .._validate import autocast_enabled, check_attention, check_int, check_tensor

__all__ = ["online_softmax_update", "blockwise_attention"]


def online_softmax_update(
    row_max: Tensor, row_sum: Tensor, acc: Tensor, scores: Tensor, v_block: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """One step of the online softmax: fold a tile of scores into the running state.

    With S the new tile of (scaled, masked) scores, V_j its values, m = ``row_max``
    and l = ``row_sum`` (the paper's m and l)::

        m_new   = max(m, rowmax(S))
        P       = exp(S - m_new)                       (unnormalised weights)
        l_new   = exp(m - m_new) * l   + rowsum(P)
        acc_new = exp(m - m_new) * acc + P V_j

    ``exp(m - m_new)`` rescales what was summed under the old maximum when the
    maximum grows. After the last tile, ``acc / l`` is softmax(S_all) V_all. Start
    from m = -inf, l = 0, acc = 0. Blocked scores are ``-inf``; a row that has seen
    no allowed key yet keeps m = -inf, l = 0, acc = 0 (never NaN).

    Shapes:
        row_max, row_sum: (..., Br, 1)   acc: (..., Br, Dv)   scores: (..., Br, Bc)
        v_block: (..., Bc, Dv); returns (row_max, row_sum, acc), shaped as they were
    """
    _check_state(row_max, row_sum, acc, scores, v_block)
    return _update(row_max, row_sum, acc, scores, v_block)


def _update(m, row_sum, acc, scores, v_block):
    m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))  # (..., Br, 1)
    # A row with no allowed key so far has m_new = -inf; subtracting 0 instead
    # gives exp(-inf) = 0 where exp(-inf - (-inf)) would be NaN.
    m_ref = m_new.masked_fill(m_new == -math.inf, 0.0)
    p = torch.exp(scores - m_ref)  # (..., Br, Bc), unnormalised weights
    alpha = torch.exp(m - m_ref)  # (..., Br, 1): 1 if the max held, < 1 if it grew
    sum_new = alpha * row_sum + p.sum(dim=-1, keepdim=True)  # (..., Br, 1)
    acc_new = alpha * acc + p @ v_block  # (.., Br, Bc) @ (.., Bc, Dv) -> (.., Br, Dv)
    return m_new, sum_new, acc_new


def blockwise_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    block_size: int | tuple[int, int] = 128,
) -> Tensor:
    """softmax(Q K^T / sqrt(d_k)) V, one (Br, Bc) tile at a time.

    Equals :func:`transformer_book.attention.scaled_dot_product_attention`'s output
    (float rounding aside) but never builds the (Tq, Tk) scores: the largest
    intermediate is one (..., Br, Bc) tile. ``block_size`` is Br = Bc, or a pair
    (Br, Bc); blocks longer than the sequence are cut to it. The mask is sliced per
    tile like the scores. A query row with no allowed key gives a zero output.
    Computation runs in at least float32; the output has v's dtype.

    Shapes:
        q: (..., Tq, Dk)   k: (..., Tk, Dk)   v: (..., Tk, Dv)
        mask: bool, broadcastable to (..., Tq, Tk), True = may attend
        returns (..., Tq, Dv)
    """
    check_attention(q, k, v, mask, None, 0.0)
    block_q, block_k = _check_block_size(block_size)
    t_q, t_k, d_k, d_v = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    acc_dtype = torch.promote_types(q.dtype, torch.float32)
    batch_s = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])  # of the scores
    batch = torch.broadcast_shapes(batch_s, v.shape[:-2])  # of the output
    if mask is not None and mask.dim() < 2:
        mask = mask.view((1,) * (2 - mask.dim()) + tuple(mask.shape))  # (1|Tq, 1|Tk)
    out = torch.empty(*batch, t_q, d_v, dtype=v.dtype, device=q.device)
    state = {"dtype": acc_dtype, "device": q.device}  # of m, l and acc
    for i in range(0, t_q, block_q):
        rows = slice(i, min(i + block_q, t_q))
        q_i = q[..., rows, :].to(acc_dtype)  # load Q_i: (..., Br, Dk)
        n_rows = q_i.shape[-2]
        row_max = torch.full((*batch_s, n_rows, 1), -math.inf, **state)  # m
        row_sum = torch.zeros(*batch_s, n_rows, 1, **state)  # the paper's l
        acc = torch.zeros(*batch, n_rows, d_v, **state)  # unnormalised output
        for j in range(0, t_k, block_k):
            cols = slice(j, min(j + block_k, t_k))
            k_j = k[..., cols, :].to(acc_dtype)  # load K_j: (..., Bc, Dk)
            v_j = v[..., cols, :].to(acc_dtype)  # load V_j: (..., Bc, Dv)
            scores = q_i @ k_j.transpose(-2, -1) / math.sqrt(d_k)  # (..., Br, Bc)
            if mask is not None:
                scores = scores.masked_fill(~_tile(mask, rows, cols), -math.inf)
            row_max, row_sum, acc = _update(row_max, row_sum, acc, scores, v_j)
        row_sum = row_sum.masked_fill(row_sum == 0, 1.0)  # no allowed key: acc = 0
        out[..., rows, :] = (acc / row_sum).to(out.dtype)  # write O_i: (..., Br, Dv)
    return out


def _tile(mask: Tensor, rows: slice, cols: slice) -> Tensor:
    """The (..., Br, Bc) piece of a mask; an axis of length 1 broadcasts whole."""
    rows = rows if mask.shape[-2] > 1 else slice(None)
    cols = cols if mask.shape[-1] > 1 else slice(None)
    return mask[..., rows, cols]


def _check_block_size(block_size: object) -> tuple[int, int]:
    """``block_size`` as (Br, Bc): a positive int, or a pair of them."""
    if isinstance(block_size, (tuple, list)):
        if len(block_size) != 2:
            raise ValueError(
                f"block_size must be an int or a pair (Br, Bc), got {block_size!r}"
            )
        return (
            check_int("block_size[0]", block_size[0], 1),
            check_int("block_size[1]", block_size[1], 1),
        )
    size = check_int("block_size", block_size, 1)
    return size, size


def _check_state(row_max, row_sum, acc, scores, v_block) -> None:
    named = (
        ("row_max", row_max),
        ("row_sum", row_sum),
        ("acc", acc),
        ("scores", scores),
        ("v_block", v_block),
    )
    for name, x in named:
        check_tensor(name, x, "float")
        if x.dim() < 2:
            raise ValueError(f"{name} must have at least 2 dimensions, got {x.dim()}")
    t_r, t_c, d_v = scores.shape[-2], scores.shape[-1], v_block.shape[-1]
    if t_c == 0:
        raise ValueError(f"scores {tuple(scores.shape)} has no key column (Bc = 0)")
    expected = {
        "row_max": (row_max, (t_r, 1), "(..., Br, 1)"),
        "row_sum": (row_sum, (t_r, 1), "(..., Br, 1)"),
        "acc": (acc, (t_r, d_v), "(..., Br, Dv)"),
        "v_block": (v_block, (t_c, d_v), "(..., Bc, Dv)"),
    }
    for name, (x, last_two, letters) in expected.items():
        if tuple(x.shape[-2:]) != last_two:
            raise ValueError(
                f"{name} must have shape {letters} = (..., {last_two[0]}, "
                f"{last_two[1]}) to match scores {tuple(scores.shape)} and v_block "
                f"{tuple(v_block.shape)}, got {tuple(x.shape)}"
            )
    for name, x in named:
        if x.device != scores.device:
            raise ValueError(f"{name} is on {x.device} but scores on {scores.device}")
    dtypes = [x.dtype for _, x in named]
    if len(set(dtypes)) > 1 and not autocast_enabled(scores.device.type):
        odd = [(n, x.dtype) for n, x in named if dtypes.count(x.dtype) == 1]
        if len(odd) == 1:  # one input differs from the others: name it
            common = next(d for d in dtypes if d != odd[0][1])
            raise TypeError(
                f"{odd[0][0]} has dtype {odd[0][1]}, the other inputs {common}: "
                "convert it, e.g. .to(scores.dtype)"
            )
        raise TypeError(
            "row_max, row_sum, acc, scores and v_block must have one dtype, got "
            + ", ".join(f"{n} {x.dtype}" for n, x in named)
        )
    try:
        torch.broadcast_shapes(*(x.shape[:-2] for _, x in named))
    except RuntimeError:
        raise ValueError(
            "the batch dimensions of row_max, row_sum, acc, scores and v_block do "
            "not broadcast: " + ", ".join(f"{n} {tuple(x.shape)}" for n, x in named)
        ) from None
