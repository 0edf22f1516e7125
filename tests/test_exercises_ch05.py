"""The Chapter 5 checkers accept right answers and explain wrong ones.

Per checker: right answers written in several ways (float64 among them) pass, and
each wrong answer is rejected with a message that names its mistake.
"""

import copy
import math

import numpy as np
import pytest
import torch

from transformer_book.attention import causal_mask
from transformer_book.exercises import (
    check_beam_search,
    check_decoder_block_forward,
    check_decoder_masks,
    check_noam_lr,
)

# -- Exercise 5.1: the warm-up schedule ------------------------------------------


def noam(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


RIGHT_NOAM = {
    "book": noam,
    "tensor": lambda s, d, w: torch.tensor(noam(s, d, w)),
    "numpy": lambda s, d, w: np.float32(noam(s, d, w)),
    "branches": lambda s, d, w: (s / w**1.5 if s < w else s**-0.5) / math.sqrt(d),
}


@pytest.mark.parametrize("right", RIGHT_NOAM.values(), ids=RIGHT_NOAM.keys())
def test_noam_checker_accepts_right_answers(right, capsys):
    assert check_noam_lr(right) is None
    assert "all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda s, d, w: noam(s, d, w) * d**0.5, "d_model\\^-0.5 is missing"),
        (lambda s, d, w: noam(s, d, w) * d**-0.5, "1/d_model"),
        (lambda s, d, w: noam(s + 1, d, w), "count from 1"),
        (lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5), "min"),
        (lambda s, d, w: "fast", "should be a number"),
    ],
)
def test_noam_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_noam_lr(wrong)


# -- Exercise 5.2: the decoder's masks --------------------------------------------


def masks(src, tgt, pad_id):
    T = tgt.shape[1]
    self_mask = causal_mask(T) & (tgt != pad_id)[:, None, :]  # (B, T, T)
    return self_mask, (src != pad_id)[:, None, :]  # (B, 1, S)


def book_masks(src, tgt, pad_id):
    T = tgt.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=tgt.device).tril()
    return causal & (tgt != pad_id)[:, None, :], (src != pad_id)[:, None, :]


def full_shapes(src, tgt, pad_id):
    self_mask, memory_mask = masks(src, tgt, pad_id)
    return self_mask, memory_mask.expand(-1, tgt.shape[1], -1)


def by_comparison(src, tgt, pad_id):
    positions = torch.arange(tgt.shape[1])
    causal = positions[:, None] >= positions[None, :]
    return causal & tgt.ne(pad_id).unsqueeze(1), src.ne(pad_id).unsqueeze(1)


RIGHT_MASKS = {
    "by hand": masks,
    "book": book_masks,
    "full shapes": full_shapes,
    "comparison": by_comparison,
}


@pytest.mark.parametrize("right", RIGHT_MASKS.values(), ids=RIGHT_MASKS.keys())
def test_masks_checker_accepts_right_answers(right, capsys):
    assert check_decoder_masks(right) is None
    assert "all checks passed" in capsys.readouterr().out


def with_self_mask(make):
    return lambda s, t, p: (make(s, t, p), masks(s, t, p)[1])


def with_memory_mask(make):
    return lambda s, t, p: (masks(s, t, p)[0], make(s, t, p))


def causal(t, diagonal=0):
    T = t.shape[1]
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal)


def zero_is_padding(src, tgt, pad_id):
    return masks(src, tgt, 0)


def pads_the_source_in_place(src, tgt, pad_id):
    result = masks(src, tgt, pad_id)
    src[src == pad_id] = 0
    return result


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda s, t, p: (~masks(s, t, p)[0], masks(s, t, p)[1]), "self_mask is inv"),
        (with_self_mask(lambda s, t, p: causal(t).T & (t != p)[:, None, :]), "future"),
        (with_self_mask(lambda s, t, p: causal(t, -1) & (t != p)[:, None]), "diagonal"),
        (
            with_self_mask(lambda s, t, p: causal(t).expand(len(t), -1, -1)),
            "padding of the target",
        ),
        (with_self_mask(lambda s, t, p: (t != p)[:, None, :]), "not causal"),
        (
            with_self_mask(lambda s, t, p: causal(t) & (t != p)[:, :, None]),
            r"self_mask masks the padded queries",
        ),
        (
            with_self_mask(lambda s, t, p: masks(s, t, p)[0] & (t != p)[:, :, None]),
            r"self_mask masks the padded queries",
        ),
        (zero_is_padding, "treats id 0 as the padding; use the pad_id"),
        (with_memory_mask(lambda s, t, p: ~masks(s, t, p)[1]), "memory_mask is inv"),
        (
            with_memory_mask(lambda s, t, p: torch.ones(len(s), 1, s.shape[1]).bool()),
            "padding of the source",
        ),
        (
            with_memory_mask(
                lambda s, t, p: (s != p)[:, None, :] & (t != p)[:, :, None]
            ),
            "memory_mask also masks the padded target queries",
        ),
        (
            lambda s, t, p: (masks(s, t, p)[0], masks(s, t, 0)[1]),
            "memory_mask treats id 0 as the padding",
        ),
        (with_memory_mask(lambda s, t, p: (s != p)[:, :, None]), "broadcast"),
        (with_memory_mask(lambda s, t, p: s != p), "broadcast"),
        (lambda s, t, p: (masks(s, t, p)[0].float(), masks(s, t, p)[1]), "bool"),
        (lambda s, t, p: masks(s, t, p)[0], "pair"),
        (pads_the_source_in_place, "modified src in place"),
    ],
)
def test_masks_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_decoder_masks(wrong)


# -- Exercise 5.3: a decoder block by hand ----------------------------------------


def block_forward(block, x, memory, self_mask, memory_mask, mistake=None):
    """Right by default; ``mistake`` makes one mistake."""

    def sa(h):
        return block.self_attn(h, mask=None if mistake == "no_self_mask" else self_mask)

    def ca(h):
        kv = h if mistake == "kv_from_x" else memory
        mask = None if mistake in ("no_memory_mask", "kv_from_x") else memory_mask
        return block.cross_attn(h, kv, kv, mask=mask)

    ff = block.feed_forward
    n1, n2, n3 = [block.norm1] * 3 if mistake == "one_norm" else (
        block.norm1, block.norm2, block.norm3
    )  # fmt: skip
    if mistake == "cross_first":
        sa, ca = ca, sa
    if block.norm_first != (mistake == "wrong_norm"):
        if mistake == "pre_no_residual":
            return ff(n3(ca(n2(sa(n1(x))))))
        if mistake == "adds_in_place":
            x += sa(n1(x))
        else:
            x = x + sa(n1(x))
        x = x + ca(n2(x))
        return x + ff(n3(x))
    if mistake == "no_residual":
        x = n1(sa(x))
        x = n2(ca(x))
        return n3(ff(x))
    x = n1(x + sa(x))
    x = n2(x + ca(x))
    return n3(x + ff(x))


def book_block(block, x, memory, self_mask, memory_mask):
    def self_attention(h):
        return block.self_attn(h, h, h, mask=self_mask)

    def cross_attention(h):
        return block.cross_attn(h, memory, memory, mask=memory_mask)

    if block.norm_first:
        x = x + self_attention(block.norm1(x))
        x = x + cross_attention(block.norm2(x))
        return x + block.feed_forward(block.norm3(x))
    x = block.norm1(x + self_attention(x))
    x = block.norm2(x + cross_attention(x))
    return block.norm3(x + block.feed_forward(x))


def in_float64(block, x, memory, self_mask, memory_mask):
    wide = copy.deepcopy(block).double()
    return book_block(wide, x.double(), memory.double(), self_mask, memory_mask)


RIGHT_BLOCKS = {"by hand": block_forward, "book": book_block, "float64": in_float64}


@pytest.mark.parametrize("right", RIGHT_BLOCKS.values(), ids=RIGHT_BLOCKS.keys())
def test_block_checker_accepts_right_answers(right, capsys):
    assert check_decoder_block_forward(right) is None
    assert "all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        ("kv_from_x", "post-norm block: cross-attention .* instead of memory"),
        ("no_self_mask", "ignores self_mask"),
        ("no_memory_mask", "ignores memory_mask"),
        ("no_residual", "residual"),
        ("wrong_norm", "this is pre-norm"),
        ("cross_first", "wrong order"),
        ("one_norm", "its own LayerNorm"),
        ("pre_no_residual", "pre-norm block: the residual connections are missing"),
        ("adds_in_place", "modified x in place"),
    ],
)
def test_block_checker_names_the_mistake(mistake, message):
    def wrong(*args):
        return block_forward(*args, mistake=mistake)

    with pytest.raises(AssertionError, match=message):
        check_decoder_block_forward(wrong)


def post_only(block, x, memory, self_mask, memory_mask):
    x = block.norm1(x + block.self_attn(x, mask=self_mask))
    x = block.norm2(x + block.cross_attn(x, memory, memory, mask=memory_mask))
    return block.norm3(x + block.feed_forward(x))


def widens_the_block(block, *args):
    return book_block(block.double(), *(a.double() for a in args[:2]), *args[2:])


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (post_only, "norm_first is True"),
        (lambda block, *args: block(*args), "without calling the block itself"),
        (lambda block, *args: block.forward(*args), "without calling the block"),
        (widens_the_block, "modified the block"),
    ],
)
def test_block_checker_catches_shortcuts_and_a_pre_norm_block(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_decoder_block_forward(wrong)


def test_the_block_works_again_after_a_check():
    from transformer_book.blocks import DecoderBlock

    with pytest.raises(AssertionError):
        check_decoder_block_forward(lambda block, *args: block(*args))
    block = DecoderBlock(8, 2, 16).eval()
    x = torch.randn(1, 3, 8)
    assert block(x, x).shape == (1, 3, 8)
    assert "forward" in vars(DecoderBlock)


# -- Exercise 5.4: beam search ----------------------------------------------------


def beam_search(
    next_log_probs, bos_id, eos_id, beam_size, max_len, *, full_beams=False, **mistake
):
    """The book's search; ``full_beams`` is the other accepted reading (the beam
    keeps ``beam_size`` live prefixes); each keyword of ``mistake`` makes one."""
    beams, finished = [([bos_id], 0.0)], []
    steps = max_len - 1 if mistake.get("early") else max_len
    step = 0
    while beams and (step < steps or mistake.get("no_max_len")):
        step += 1
        log_probs = next_log_probs(torch.tensor([seq for seq, _ in beams]))
        per_beam = 1 if mistake.get("top1") and step > 1 else log_probs.shape[1]
        candidates = [
            (seq + [tok], score + log_probs[i, tok].item())
            for i, (seq, score) in enumerate(beams)
            for tok in log_probs[i].topk(per_beam).indices.tolist()
        ]
        candidates.sort(key=lambda c: -c[1])
        ranked = candidates[:beam_size]
        if mistake.get("no_eos"):
            beams = ranked
            continue
        finished += [c for c in ranked if c[0][-1] == eos_id]
        if finished and mistake.get("first_finished"):
            return finished[0][0]
        live = [c for c in (candidates if full_beams else ranked) if c[0][-1] != eos_id]
        beams = live[:beam_size]
    if mistake.get("none"):
        return max(finished, key=lambda c: c[1])[0] if finished else None
    pool = finished + beams if mistake.get("best_of_all") else finished or beams
    return max(pool, key=lambda c: c[1])[0]


def book_beam_search(next_log_probs, bos_id, eos_id, beam_size, max_len):
    beams = [([bos_id], 0.0)]
    finished = []
    with torch.no_grad():
        for _ in range(max_len):
            log_probs = next_log_probs(torch.tensor([tokens for tokens, _ in beams]))
            candidates = [
                (tokens + [token], score + log_probs[k, token].item())
                for k, (tokens, score) in enumerate(beams)
                for token in range(log_probs.shape[1])
            ]
            candidates.sort(key=lambda c: c[1], reverse=True)
            beams = []
            for tokens, score in candidates[:beam_size]:
                (finished if tokens[-1] == eos_id else beams).append((tokens, score))
            if not beams:
                break
    return max(finished or beams, key=lambda c: c[1])[0]


def batched(next_log_probs, bos_id, eos_id, beam_size, max_len):
    """Tensors throughout; stops once the best finished sentence beats every
    live prefix (log-probabilities only fall, so nothing can overtake it)."""
    seqs = torch.tensor([[bos_id]])
    scores = torch.zeros(1, dtype=torch.float64)
    best, best_score = None, -math.inf
    for _ in range(max_len):
        total = scores[:, None] + next_log_probs(seqs)  # (K, V)
        top = total.flatten().topk(min(beam_size, total.numel()))
        rows, tokens = top.indices // total.shape[1], top.indices % total.shape[1]
        seqs = torch.cat([seqs[rows], tokens[:, None]], dim=1)
        done = tokens == eos_id
        if done.any() and top.values[done].max() > best_score:
            best_score = top.values[done].max().item()
            best = seqs[done][top.values[done].argmax()].tolist()
        seqs, scores = seqs[~done], top.values[~done]
        if len(seqs) == 0 or scores.max() < best_score:
            break
    if best is None:
        return seqs[scores.argmax()].tolist()
    return best


def length_normalised(next_log_probs, bos_id, eos_id, beam_size, max_len):
    beams, finished = [([bos_id], 0.0)], []
    for _ in range(max_len):
        log_probs = next_log_probs(torch.tensor([s for s, _ in beams]))
        candidates = sorted(
            (
                (seq + [tok], score + log_probs[i, tok].item())
                for i, (seq, score) in enumerate(beams)
                for tok in range(log_probs.shape[1])
            ),
            key=lambda c: -c[1],
        )[:beam_size]
        beams = [c for c in candidates if c[0][-1] != eos_id]
        finished += [c for c in candidates if c[0][-1] == eos_id]
        if not beams:
            break
    return max(finished or beams, key=lambda c: c[1] / len(c[0]))[0]


def first_tokens_then_greedy(next_log_probs, bos_id, eos_id, beam_size, max_len):
    first = next_log_probs(torch.tensor([[bos_id]]))[0]
    results = []
    for token in first.topk(beam_size).indices.tolist():
        seq, score = [bos_id, token], first[token].item()
        while seq[-1] != eos_id and len(seq) <= max_len:
            row = next_log_probs(torch.tensor([seq]))[0]
            seq, score = seq + [row.argmax().item()], score + row.max().item()
        results.append((seq, score))
    return max(results, key=lambda c: c[1])[0]


def without_pruning(next_log_probs, bos_id, eos_id, beam_size, max_len):
    """Keeps the beam_size best continuations of every prefix: the beam grows."""
    beams, finished = [([bos_id], 0.0)], []
    for _ in range(max_len):
        log_probs = next_log_probs(torch.tensor([s for s, _ in beams]))
        grown = []
        for i, (seq, score) in enumerate(beams):
            for tok in log_probs[i].topk(beam_size).indices.tolist():
                new = (seq + [tok], score + log_probs[i, tok].item())
                (finished if tok == eos_id else grown).append(new)
        beams = grown
        if not beams:
            break
    return max(finished or beams, key=lambda c: c[1])[0]


def mistake(**kwargs):
    return lambda *args: beam_search(*args, **kwargs)


RIGHT_BEAMS = {
    "by hand": beam_search,
    "book": book_beam_search,
    "tensor": lambda *args: torch.tensor(beam_search(*args)),
    "full beams": mistake(full_beams=True),
    "batched": batched,
}


@pytest.mark.parametrize("right", RIGHT_BEAMS.values(), ids=RIGHT_BEAMS.keys())
def test_beam_checker_accepts_right_answers(right, capsys):
    assert check_beam_search(right) is None
    assert "all checks passed" in capsys.readouterr().out


def greedy(next_log_probs, bos_id, eos_id, beam_size, max_len):
    return beam_search(next_log_probs, bos_id, eos_id, 1, max_len)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (greedy, "keep the second-best first token"),
        (lambda f, b, e, k, n: beam_search(f, b, e, k, n)[1:], "start with bos_id"),
        (lambda f, b, e, k, n: [b, 2, 1] if k == 1 else [b, 3, 1], "branches off"),
        (length_normalised, "no length normalisation"),
        (first_tokens_then_greedy, "not a greedy continuation"),
        (mistake(top1=True), "not the best one per prefix"),
        (without_pruning, "keeps only the 2 best candidates"),
        (mistake(no_max_len=True), "no prefix it extends is longer than max_len"),
        (mistake(early=True), "uses all max_len=3 new tokens"),
        (mistake(first_finished=True), "than the first finished sentence"),
        (mistake(none=True), "returned nothing"),
        (mistake(no_eos=True), "goes on after eos_id"),
        (mistake(best_of_all=True), "return the best finished sentence"),
        (lambda f, b, e, k, n: math.pi, "list of token ids"),
    ],
)
def test_beam_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_beam_search(wrong)
