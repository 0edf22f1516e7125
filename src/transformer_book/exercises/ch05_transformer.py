"""Checkers for Chapter 5 (the full Transformer: encoder and decoder blocks)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..attention import causal_mask
from ..blocks import DecoderBlock
from ._checking import call, checker, expect_close, expect_shape

__all__ = [
    "check_noam_lr",
    "check_decoder_masks",
    "check_decoder_block_forward",
    "check_beam_search",
]


def _noam(step: int, d_model: int, warmup: int) -> float:
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@checker("noam_lr")
def check_noam_lr(fn: Callable) -> None:
    """``fn(step, d_model, warmup)`` is the paper's learning rate at ``step`` >= 1."""
    for d_model, warmup in ((512, 4000), (64, 10)):
        for step in (1, 2, warmup // 2, warmup, warmup + 1, 3 * warmup, 50 * warmup):
            got = call(fn, step, d_model, warmup)
            try:
                got = float(got)
            except (TypeError, ValueError):
                raise AssertionError(
                    f"return a number, got {type(got).__name__}"
                ) from None
            expected = _noam(step, d_model, warmup)
            if math.isclose(got, expected, rel_tol=1e-6):
                continue
            where = f"step={step}, d_model={d_model}, warmup={warmup}"
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
    ids = torch.randint(3, 9, shape, generator=gen)
    positions = torch.arange(shape[1])
    return ids.masked_fill(positions[None, :] >= lengths[:, None], pad_id)


def _as_mask(x, shape: tuple[int, ...], what: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise AssertionError(f"{what} should be a tensor, got {type(x).__name__}")
    if x.dtype != torch.bool:
        raise AssertionError(
            f"{what} should be bool (True = may attend), got {x.dtype}"
        )
    try:
        return x.expand(shape)
    except RuntimeError:
        raise AssertionError(
            f"{what} has shape {tuple(x.shape)}, which does not broadcast to {shape}"
        ) from None


@checker("decoder_masks")
def check_decoder_masks(fn: Callable) -> None:
    """``fn(src, tgt, pad_id)`` -> (self_mask, memory_mask), True = may attend."""
    gen = torch.Generator().manual_seed(5)
    B, S, T, pad_id = 3, 6, 5, 0
    src = _random_tokens(gen, (B, S), torch.tensor([6, 3, 4]), pad_id)
    tgt = _random_tokens(gen, (B, T), torch.tensor([5, 2, 4]), pad_id)
    result = call(fn, src, tgt, pad_id)
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError("return a pair (self_mask, memory_mask)")
    self_mask = _as_mask(result[0], (B, T, T), "self_mask")
    memory_mask = _as_mask(result[1], (B, T, S), "memory_mask")

    causal = causal_mask(T)
    tgt_real = (tgt != pad_id)[:, None, :]  # (B, 1, T)
    expected_self = causal & tgt_real  # (B, T, T)
    if torch.equal(self_mask, ~expected_self):
        raise AssertionError("self_mask is inverted: True means 'may attend'")
    if torch.equal(self_mask, causal.T.expand(B, T, T) & tgt_real):
        raise AssertionError("self_mask lets each query see the future, not the past")
    if torch.equal(self_mask, causal.expand(B, T, T)):
        raise AssertionError("self_mask ignores the padding of the target keys")
    if torch.equal(self_mask, tgt_real.expand(B, T, T)):
        raise AssertionError(
            "self_mask is not causal: position i must not see positions after i"
        )
    if not torch.equal(self_mask, expected_self):
        raise AssertionError("self_mask is wrong for a batch with padded targets")

    expected_memory = (src != pad_id)[:, None, :].expand(B, T, S)
    if torch.equal(memory_mask, ~expected_memory):
        raise AssertionError("memory_mask is inverted: True means 'may attend'")
    if memory_mask.all():
        raise AssertionError("memory_mask ignores the padding of the source")
    if not torch.equal(memory_mask, expected_memory):
        raise AssertionError(
            "memory_mask is wrong: every target query may see exactly the real "
            "(non-padding) source positions"
        )


def _wrong_decoder_outputs(block: DecoderBlock, x, memory, self_mask, memory_mask):
    """What common mistakes return, to name the mistake."""
    ln1, ln2, ln3 = block.norm1, block.norm2, block.norm3

    def sa(h, mask=self_mask):
        return block.self_attn(h, mask=mask)

    def ca(h, kv=memory, mask=memory_mask):
        return block.cross_attn(h, kv, kv, mask=mask)

    ff = block.feed_forward
    mistakes = {}
    h = ln1(x + sa(x))
    mistakes["cross-attention takes its keys and values from x instead of memory"] = (
        ln3(ln2(h + ca(h, kv=h, mask=None)) + ff(ln2(h + ca(h, kv=h, mask=None))))
    )
    h = ln1(x + sa(x, mask=None))
    h = ln2(h + ca(h))
    mistakes["the self-attention ignores self_mask (it sees the future)"] = ln3(
        h + ff(h)
    )
    h = ln1(x + sa(x))
    h = ln2(h + ca(h, mask=None))
    mistakes["the cross-attention ignores memory_mask (it sees padding)"] = ln3(
        h + ff(h)
    )
    h = ln1(sa(x))
    h = ln2(ca(h))
    mistakes["the residual connections are missing (x + sub-layer)"] = ln3(ff(h))
    h = x + sa(ln1(x))
    h = h + ca(ln2(h))
    mistakes["this is pre-norm; block.norm_first is False: use post-norm"] = h + ff(
        ln3(h)
    )
    return mistakes


@checker("decoder_block_forward")
def check_decoder_block_forward(fn: Callable) -> None:
    """``fn(block, x, memory, self_mask, memory_mask)`` equals ``block(...)``."""
    gen = torch.Generator().manual_seed(7)
    B, T, S, D = 2, 5, 6, 16
    x = torch.randn(B, T, D, generator=gen)
    memory = torch.randn(B, S, D, generator=gen)
    self_mask = causal_mask(T)
    memory_mask = torch.tensor([[True] * S, [True] * 3 + [False] * 3])[:, None, :]
    for norm_first in (False, True):
        torch.manual_seed(11)
        block = DecoderBlock(D, 4, 32, norm_first=norm_first).eval()
        with torch.no_grad():
            for p in block.parameters():  # non-trivial LayerNorm weights, too
                p.add_(0.1 * torch.randn(p.shape, generator=gen))
            expected = block(x, memory, self_mask, memory_mask)
            out = call(fn, block, x, memory, self_mask, memory_mask)
            kind = "pre-norm" if norm_first else "post-norm"
            expect_shape(out, (B, T, D), f"the {kind} output")
            if torch.allclose(out, expected, atol=1e-5, rtol=1e-4):
                continue
            if norm_first:
                post = _post(block, x, memory, self_mask, memory_mask)
                if torch.allclose(out, post, atol=1e-5, rtol=1e-4):
                    raise AssertionError(
                        "block.norm_first is True: normalise before each sub-layer "
                        "(pre-norm), not after"
                    )
            else:
                wrong = _wrong_decoder_outputs(block, x, memory, self_mask, memory_mask)
                for message, value in wrong.items():
                    if torch.allclose(out, value, atol=1e-5, rtol=1e-4):
                        raise AssertionError(message)
            expect_close(out, expected, f"the {kind} output")


def _post(block, x, memory, self_mask, memory_mask):
    h = block.norm1(x + block.self_attn(x, mask=self_mask))
    h = block.norm2(h + block.cross_attn(h, memory, memory, mask=memory_mask))
    return block.norm3(h + block.feed_forward(h))


class _ToyModel:
    """Next-token log-probabilities that depend on the prefix, from a fixed table."""

    def __init__(self, n_tokens: int, seed: int, eos_id: int, final_len: int):
        self.n_tokens, self.seed = n_tokens, seed
        self.eos_id, self.final_len = eos_id, final_len
        self.calls = 0

    def __call__(self, prefixes: Tensor) -> Tensor:
        self.calls += 1
        if not isinstance(prefixes, Tensor) or prefixes.dim() != 2:
            raise AssertionError(
                "call next_log_probs with a (K, t) tensor of K prefixes, got "
                f"{getattr(prefixes, 'shape', type(prefixes).__name__)}"
            )
        rows = [self.row(tuple(p.tolist())) for p in prefixes]
        return torch.stack(rows).log()

    def row(self, prefix: tuple[int, ...]) -> Tensor:
        gen = torch.Generator().manual_seed(hash((self.seed, prefix)) % 2**31)
        probs = torch.rand(self.n_tokens, generator=gen) ** 3 + 1e-3
        probs[0] = 0.0  # BOS never comes again
        if len(prefix) >= self.final_len:  # every sentence ends by then
            probs = torch.zeros(self.n_tokens)
            probs[self.eos_id] = 1.0
        return probs / probs.sum()

    def best(self, prefix=(0,), logp=0.0) -> tuple[float, tuple[int, ...]]:
        """Exhaustive search: the finished sequence with the highest log-probability."""
        if prefix[-1] == self.eos_id:
            return logp, prefix
        row = self.row(prefix)
        options = [
            self.best(prefix + (tok,), logp + math.log(row[tok]))
            for tok in range(self.n_tokens)
            if row[tok] > 0
        ]
        return max(options)

    def greedy(self) -> tuple[int, ...]:
        prefix = (0,)
        while prefix[-1] != self.eos_id:
            prefix += (int(self.row(prefix).argmax()),)
        return prefix


def _trap(prefixes: Tensor) -> Tensor:
    """Greedy takes A (0.55) but then ends at 0.35; B (0.45) ends at 0.9."""
    bos, eos, a, b = 0, 1, 2, 3
    rows = []
    for p in prefixes.tolist():
        row = torch.full((4,), 1e-6)
        if p[-1] == bos:
            row[a], row[b] = 0.55, 0.45
        elif p[-1] == a:
            row[eos], row[a], row[b] = 0.35, 0.33, 0.32
        else:
            row[eos] = 0.9
            row[a] = 0.1
        rows.append(row / row.sum())
    return torch.stack(rows).log()


def _as_list(result, what: str) -> list[int]:
    if isinstance(result, Tensor):
        result = result.flatten().tolist()
    if not isinstance(result, list | tuple):
        raise AssertionError(f"{what}: return a list of token ids, got {result!r}")
    return [int(t) for t in result]


@checker("beam_search")
def check_beam_search(fn: Callable) -> None:
    """``fn(next_log_probs, bos_id, eos_id, beam_size, max_len)`` -> list of ids."""
    bos, eos = 0, 1
    got = _as_list(call(fn, _trap, bos, eos, 1, 5), "beam_size=1")
    if got[:1] != [bos]:
        raise AssertionError(f"the sequence should start with bos_id={bos}, got {got}")
    if got[:3] != [bos, 2, 1]:
        raise AssertionError(
            f"with beam_size=1 beam search is greedy decoding; got {got}"
        )
    got = _as_list(call(fn, _trap, bos, eos, 2, 5), "beam_size=2")
    if got != [bos, 3, 1]:
        raise AssertionError(
            "with beam_size=2 the search should keep the second-best first token "
            f"and find the more probable sentence; got {got}"
        )
    for seed in range(4):
        model = _ToyModel(n_tokens=4, seed=seed, eos_id=eos, final_len=4)
        got = _as_list(call(fn, model, bos, eos, 1, 6), "beam_size=1")
        if tuple(got) != model.greedy():
            raise AssertionError(
                f"with beam_size=1 beam search is greedy decoding: expected "
                f"{list(model.greedy())}, got {got}"
            )
        best_logp, best = model.best()
        got = _as_list(call(fn, model, bos, eos, 64, 6), "beam_size=64")
        if got[-1:] != [eos]:
            raise AssertionError(f"a finished sentence ends with eos_id; got {got}")
        if tuple(got) != best:
            raise AssertionError(
                f"with a beam as wide as every possible prefix (64) the search is "
                f"exhaustive and must return the most probable sentence "
                f"(log-prob {best_logp:.3f}); got {got}"
            )
