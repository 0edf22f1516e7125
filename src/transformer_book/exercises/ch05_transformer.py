"""Checkers for Chapter 5 (the full Transformer: encoder and decoder blocks).

The beam search exercise has its own module, ``ch05_beam_search``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..attention import causal_mask
from ..blocks import DecoderBlock
from ._checking import (
    as_real,
    call,
    checker,
    expect_close,
    expect_shape,
    expect_unchanged,
    forbidden,
    matches,
    seeded,
)

__all__ = [
    "check_noam_lr",
    "check_decoder_masks",
    "check_decoder_block_forward",
]


def _noam(step: int, d_model: int, warmup: int) -> float:
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@checker("noam_lr")
def check_noam_lr(fn: Callable) -> None:
    """``fn(step, d_model, warmup)`` is the paper's learning rate at ``step`` >= 1."""
    for d_model, warmup in ((512, 4000), (64, 10)):
        for step in (1, 2, warmup // 2, warmup, warmup + 1, 3 * warmup, 50 * warmup):
            where = f"step={step}, d_model={d_model}, warmup={warmup}"
            got = as_real(call(fn, step, d_model, warmup), f"the rate at {where}")
            expected = _noam(step, d_model, warmup)
            if math.isclose(got, expected, rel_tol=1e-6):
                continue
            if math.isclose(got, _noam(step + 1, d_model, warmup)):
                raise AssertionError(
                    f"at {where} you return the rate of step {step + 1}: the paper's "
                    "steps count from 1"
                )
            ratio = got / expected if expected else float("inf")
            if math.isclose(ratio, d_model**0.5, rel_tol=1e-6):
                raise AssertionError(f"at {where} the factor d_model^-0.5 is missing")
            if math.isclose(ratio, d_model**-0.5, rel_tol=1e-6):
                raise AssertionError(
                    f"at {where} the rate is scaled by 1/d_model; use d_model^-0.5"
                )
            phase = "warm-up (a linear rise)" if step < warmup else "decay (1/sqrt)"
            raise AssertionError(
                f"at {where}, during the {phase}, you return {got:.3g}; check the "
                "two branches of the min"
            )


def _random_tokens(gen: torch.Generator, shape, lengths, pad_id: int) -> Tensor:
    """Right-padded ids; the real tokens include 0 unless 0 is the padding."""
    ids = torch.randint(0, 9, shape, generator=gen)
    ids = torch.where(ids == pad_id, 9, ids)  # no real token is pad_id
    if pad_id != 0:
        ids[:, 1] = 0  # a real token 0 in every row (the rows hold 2 or more)
    positions = torch.arange(shape[1])
    return ids.masked_fill(positions[None, :] >= lengths[:, None], pad_id)


def _as_mask(x, shape: tuple[int, ...], what: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise AssertionError(f"{what} should be a tensor, got {type(x).__name__}")
    if x.dtype != torch.bool:
        raise AssertionError(
            f"{what} should be bool (True = may attend), got {x.dtype}"
        )
    if x.dim() > len(shape):
        raise AssertionError(
            f"{what} has shape {tuple(x.shape)}, which does not broadcast to {shape}"
        )
    try:
        return x.expand(shape)
    except RuntimeError:
        raise AssertionError(
            f"{what} has shape {tuple(x.shape)}, which does not broadcast to {shape}"
        ) from None


def _self_mask_mistakes(tgt_real: Tensor, causal: Tensor, zero_real: Tensor):
    """(wrong self_mask, message) for the common mistakes; masks (B, T, T)."""
    keys, queries = tgt_real[:, None, :], tgt_real[:, :, None]  # (B, 1, T), (B, T, 1)
    return [
        (~(causal & keys), "self_mask is inverted: True means 'may attend'"),
        (causal.T & keys, "self_mask lets each query see the future, not the past"),
        (
            causal.tril(-1) & keys,
            "self_mask hides the diagonal: a query must also see its own position",
        ),
        (causal.expand_as(causal & keys), "self_mask ignores the padding of the "
         "target keys"),
        (keys.expand_as(causal & keys), "self_mask is not causal: position i must "
         "not see positions after i"),
        (causal & queries, "self_mask masks the padded queries (rows): only the "
         "padded keys (columns) need masking; a query at a padding position may "
         "still see the real keys before it (the loss ignores its output)"),
        (causal & zero_real[:, None, :], "self_mask treats id 0 as the padding; "
         "use the pad_id argument"),
    ]  # fmt: skip


def _check_masks_once(fn: Callable, B: int, S: int, T: int, pad_id: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    src_lengths = torch.randint(2, S + 1, (B,), generator=gen)
    src_lengths[0] = S
    tgt_lengths = torch.randint(2, T, (B,), generator=gen)
    tgt_lengths[0] = T
    src = _random_tokens(gen, (B, S), src_lengths, pad_id)
    tgt = _random_tokens(gen, (B, T), tgt_lengths, pad_id)
    given_src, given_tgt = src.clone(), tgt.clone()
    result = call(fn, given_src, given_tgt, pad_id)
    expect_unchanged(given_src, src, "src")
    expect_unchanged(given_tgt, tgt, "tgt")
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError("return a pair (self_mask, memory_mask)")
    where = f" (pad_id={pad_id})"
    self_mask = _as_mask(result[0], (B, T, T), "self_mask")
    memory_mask = _as_mask(result[1], (B, T, S), "memory_mask")

    causal = causal_mask(T)
    tgt_real = tgt != pad_id  # (B, T)
    expected_self = causal & tgt_real[:, None, :]  # (B, T, T)
    if not torch.equal(self_mask, expected_self):
        for wrong, message in _self_mask_mistakes(tgt_real, causal, tgt != 0):
            if torch.equal(self_mask, wrong):
                raise AssertionError(message + where)
        raise AssertionError(
            "self_mask is wrong" + where + ": query i may see key j when j <= i "
            "and tgt[j] is not padding"
        )

    src_real = (src != pad_id)[:, None, :].expand(B, T, S)
    queries = tgt_real[:, :, None]  # (B, T, 1)
    mistakes = [
        (~src_real, "memory_mask is inverted: True means 'may attend'"),
        (torch.ones_like(src_real), "memory_mask ignores the padding of the source"),
        (src_real & queries, "memory_mask also masks the padded target queries "
         "(rows): only the source's padding (columns) needs masking"),
        ((src != 0)[:, None, :].expand(B, T, S), "memory_mask treats id 0 as the "
         "padding; use the pad_id argument"),
    ]  # fmt: skip
    if not torch.equal(memory_mask, src_real):
        for wrong, message in mistakes:
            if torch.equal(memory_mask, wrong):
                raise AssertionError(message + where)
        raise AssertionError(
            "memory_mask is wrong" + where + ": every target query may see exactly "
            "the real (non-padding) source positions"
        )


@checker("decoder_masks")
def check_decoder_masks(fn: Callable) -> None:
    """``fn(src, tgt, pad_id)`` -> (self_mask, memory_mask), True = may attend.

    Tried with pad_id 0 and with another pad_id (where id 0 is a real token).
    """
    _check_masks_once(fn, B=3, S=6, T=5, pad_id=0, seed=5)
    _check_masks_once(fn, B=4, S=7, T=6, pad_id=2, seed=6)


def _decoder(block: DecoderBlock, x, memory, self_mask, memory_mask, mistake=None):
    """The block's output from its parts; ``mistake`` reproduces a common error."""
    norms = [block.norm1, block.norm2, block.norm3]
    if mistake == "one norm":
        norms = [block.norm1] * 3

    def self_attention(h):
        mask = None if mistake == "no self_mask" else self_mask
        return block.self_attn(h, h, h, mask=mask)

    def cross_attention(h):
        kv = h if mistake == "kv from x" else memory
        mask = None if mistake in ("no memory_mask", "kv from x") else memory_mask
        return block.cross_attn(h, kv, kv, mask=mask)

    sublayers = [self_attention, cross_attention, block.feed_forward]
    if mistake == "cross first":
        sublayers[:2] = sublayers[1::-1]
    pre_norm = block.norm_first != (mistake == "other norm")
    for norm, sublayer in zip(norms, sublayers, strict=True):
        if mistake == "no residual":
            x = sublayer(norm(x)) if pre_norm else norm(sublayer(x))
        elif pre_norm:
            x = x + sublayer(norm(x))
        else:
            x = norm(x + sublayer(x))
    return x


_BLOCK_MISTAKES = {
    "kv from x": "cross-attention takes its keys and values from x instead of memory",
    "no self_mask": "the self-attention ignores self_mask (it sees the future)",
    "no memory_mask": "the cross-attention ignores memory_mask (it sees padding)",
    "no residual": "the residual connections are missing (x + sub-layer)",
    "cross first": "the sub-layers are in the wrong order: self-attention, then "
    "cross-attention, then the feed-forward network",
    "one norm": "each sub-layer has its own LayerNorm: norm1, norm2, norm3 in order",
}


_OTHER_NORM = {
    False: "this is pre-norm; block.norm_first is False: use post-norm",
    True: "block.norm_first is True: normalise before each sub-layer (pre-norm), "
    "not after",
}


@checker("decoder_block_forward")
def check_decoder_block_forward(fn: Callable) -> None:
    """``fn(block, x, memory, self_mask, memory_mask)`` equals ``block(...)``.

    From the block's parts: while it runs, calling the block itself raises.
    """
    gen = torch.Generator().manual_seed(7)
    B, T, S, D = 2, 5, 6, 16
    x = torch.randn(B, T, D, generator=gen)
    memory = torch.randn(B, S, D, generator=gen)
    self_mask = causal_mask(T)
    memory_mask = torch.tensor([[True] * S, [True] * 3 + [False] * 3])[:, None, :]
    inputs = {"x": x, "memory": memory, "self_mask": self_mask}
    inputs["memory_mask"] = memory_mask
    for norm_first in (False, True):
        kind = "pre-norm" if norm_first else "post-norm"
        with seeded(11):
            block = DecoderBlock(D, 4, 32, norm_first=norm_first).eval()
        with torch.no_grad():
            for p in block.parameters():  # non-trivial LayerNorm weights, too
                p.add_(0.1 * torch.randn(p.shape, generator=gen))
            expected = block(x, memory, self_mask, memory_mask)
            other_norm = _decoder(block, *inputs.values(), mistake="other norm")
            wrong = [(other_norm, _OTHER_NORM[norm_first])] + [
                (_decoder(block, *inputs.values(), mistake=mistake), message)
                for mistake, message in _BLOCK_MISTAKES.items()
            ]
        weights = {k: v.clone() for k, v in block.state_dict().items()}
        given = {name: t.clone() for name, t in inputs.items()}
        refuse_block = forbidden(
            DecoderBlock, "forward", "the block itself (block(...) or block.forward)"
        )
        with torch.no_grad(), refuse_block:
            out = call(fn, block, *given.values())
        for name, t in inputs.items():
            expect_unchanged(given[name], t, name)
        expect_unchanged(block, weights, "the block (its weights or their dtype)")
        expect_shape(out, (B, T, D), f"the {kind} output")
        if matches(out, expected):
            continue
        for value, message in wrong:
            if matches(out, value):
                raise AssertionError(f"{kind} block: {message}")
        expect_close(out, expected, f"the {kind} output")
