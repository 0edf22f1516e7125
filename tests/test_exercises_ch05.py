"""The Chapter 5 checkers accept right answers and explain wrong ones."""

import math

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


def test_noam_checker_accepts_the_formula(capsys):
    assert check_noam_lr(noam) is None
    assert check_noam_lr(lambda s, d, w: torch.tensor(noam(s, d, w))) is None
    assert "all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda s, d, w: noam(s, d, w) * d**0.5, "d_model\\^-0.5 is missing"),
        (lambda s, d, w: noam(s, d, w) * d**-0.5, "1/d_model"),
        (lambda s, d, w: noam(s + 1, d, w), "count from 1"),
        (lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5), "min"),
        (lambda s, d, w: "fast", "return a number"),
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


def test_masks_checker_accepts_right_answers(capsys):
    assert check_decoder_masks(masks) is None

    def full_shapes(src, tgt, pad_id):
        self_mask, memory_mask = masks(src, tgt, pad_id)
        return self_mask, memory_mask.expand(-1, tgt.shape[1], -1)

    assert check_decoder_masks(full_shapes) is None
    assert "all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda s, t, p: (~masks(s, t, p)[0], masks(s, t, p)[1]), "self_mask is inv"),
        (
            lambda s, t, p: (
                causal_mask(t.shape[1]).T & (t != p)[:, None, :],
                masks(s, t, p)[1],
            ),
            "future",
        ),
        (
            lambda s, t, p: (
                causal_mask(t.shape[1]).expand(len(t), -1, -1),
                masks(s, t, p)[1],
            ),
            "padding of the target",
        ),
        (lambda s, t, p: ((t != p)[:, None, :], masks(s, t, p)[1]), "not causal"),
        (lambda s, t, p: (masks(s, t, p)[0], ~masks(s, t, p)[1]), "memory_mask is inv"),
        (
            lambda s, t, p: (
                masks(s, t, p)[0],
                torch.ones(len(s), 1, s.shape[1]).bool(),
            ),
            "padding of the source",
        ),
        (lambda s, t, p: (masks(s, t, p)[0], (s != p)[:, :, None]), "broadcast"),
        (lambda s, t, p: (masks(s, t, p)[0].float(), masks(s, t, p)[1]), "bool"),
        (lambda s, t, p: masks(s, t, p)[0], "pair"),
    ],
)
def test_masks_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_decoder_masks(wrong)


# -- Exercise 5.3: a decoder block by hand ----------------------------------------


def block_forward(block, x, memory, self_mask, memory_mask, mistake=None):
    def sa(h):
        return block.self_attn(h, mask=None if mistake == "no_self_mask" else self_mask)

    def ca(h):
        kv = h if mistake == "kv_from_x" else memory
        mask = None if mistake in ("no_memory_mask", "kv_from_x") else memory_mask
        return block.cross_attn(h, kv, kv, mask=mask)

    ff = block.feed_forward
    if block.norm_first != (mistake == "wrong_norm"):
        x = x + sa(block.norm1(x))
        x = x + ca(block.norm2(x))
        return x + ff(block.norm3(x))
    if mistake == "no_residual":
        x = block.norm1(sa(x))
        x = block.norm2(ca(x))
        return block.norm3(ff(x))
    x = block.norm1(x + sa(x))
    x = block.norm2(x + ca(x))
    return block.norm3(x + ff(x))


def test_block_checker_accepts_the_sublayers_in_order(capsys):
    assert check_decoder_block_forward(block_forward) is None
    assert "all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        ("kv_from_x", "instead of memory"),
        ("no_self_mask", "ignores self_mask"),
        ("no_memory_mask", "ignores memory_mask"),
        ("no_residual", "residual"),
        ("wrong_norm", "pre-norm"),
    ],
)
def test_block_checker_names_the_mistake(mistake, message):
    def wrong(*args):
        return block_forward(*args, mistake=mistake)

    with pytest.raises(AssertionError, match=message):
        check_decoder_block_forward(wrong)


def test_block_checker_catches_post_norm_in_a_pre_norm_block():
    def post_only(block, x, memory, self_mask, memory_mask):
        x = block.norm1(x + block.self_attn(x, mask=self_mask))
        x = block.norm2(x + block.cross_attn(x, memory, memory, mask=memory_mask))
        return block.norm3(x + block.feed_forward(x))

    with pytest.raises(AssertionError, match="norm_first is True"):
        check_decoder_block_forward(post_only)


# -- Exercise 5.4: beam search ----------------------------------------------------


def beam_search(next_log_probs, bos_id, eos_id, beam_size, max_len):
    beams, finished = [([bos_id], 0.0)], []
    for _ in range(max_len):
        prefixes = torch.tensor([seq for seq, _ in beams])
        log_probs = next_log_probs(prefixes)
        candidates = [
            (seq + [tok], score + log_probs[i, tok].item())
            for i, (seq, score) in enumerate(beams)
            for tok in range(log_probs.shape[1])
        ]
        candidates.sort(key=lambda c: -c[1])
        beams = []
        for seq, score in candidates[:beam_size]:
            (finished if seq[-1] == eos_id else beams).append((seq, score))
        if not beams:
            break
    return max(finished or beams, key=lambda c: c[1])[0]


def greedy(next_log_probs, bos_id, eos_id, beam_size, max_len):
    return beam_search(next_log_probs, bos_id, eos_id, 1, max_len)


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
    return max(finished, key=lambda c: c[1] / len(c[0]) ** 2)[0]


def test_beam_checker_accepts_a_beam_search(capsys):
    assert check_beam_search(beam_search) is None
    assert check_beam_search(lambda *a: torch.tensor(beam_search(*a))) is None
    assert "all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (greedy, "beam_size=2"),
        (lambda f, b, e, k, n: beam_search(f, b, e, k, n)[1:], "start with bos_id"),
        (lambda f, b, e, k, n: [b, 2, 1] if k == 1 else [b, 3, 1], "greedy decoding"),
        (length_normalised, "most probable sentence|greedy"),
        (lambda f, b, e, k, n: math.pi, "list of token ids"),
    ],
)
def test_beam_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_beam_search(wrong)
