"""The computable answers of Chapter 6's concept checks, computed with the package."""

from __future__ import annotations

import torch

from transformer_book.concepts.ch06 import CHECKS
from transformer_book.models import GPT, GPTConfig, mask_tokens, span_corrupt
from transformer_book.models.sampling import top_p_filter


def marked(key: str, index: int) -> str:
    question = CHECKS[key][index]
    return question.options[question.answer]


def test_share_of_mask_tokens():
    question = CHECKS["6.3"][0]
    mask_id, special = 0, (0, 1, 2)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 1000, (200_000,), generator=generator)
    inputs, _ = mask_tokens(ids, 1000, mask_id, special, generator)
    share = (inputs == mask_id).double().mean().item()
    values = [float(option.rstrip("%")) / 100 for option in question.options]
    nearest = min(range(len(values)), key=lambda i: abs(values[i] - share))
    assert nearest == question.answer, (share, question.options)
    assert abs(values[question.answer] - share) < 0.003


def test_span_corrupt_lengths():
    ids = torch.arange(100)
    src, tgt = span_corrupt(
        ids, list(range(1000, 1100)), generator=torch.Generator().manual_seed(0)
    )
    assert marked("6.3", 1) == f"input {len(src)}, target {len(tgt)}"


def test_gpt_blank_and_next_see_the_same_input():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, max_len=16)).eval()
    ids = torch.randint(50, (1, 12))
    t = 6  # the hidden position: GPT reads the logits at t - 1
    with torch.no_grad():
        blank = model(ids)[0, t - 1]  # both sides present
        cut = model(ids[:, :t])[0, t - 1]  # the right side removed
    torch.testing.assert_close(blank, cut)
    assert "causal mask" in marked("6.4", 0)


def test_kv_cache_shape():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, max_len=32)).eval()
    assert (model.cfg.n_layers, model.cfg.n_heads, model.cfg.d_model) == (2, 4, 64)
    with torch.no_grad():
        _, cache = model.forward_cached(torch.randint(50, (1, 10)))
        for _ in range(3):
            _, cache = model.forward_cached(torch.randint(50, (1, 1)), cache)
    assert marked("6.5", 0) == str(tuple(cache[0][0].shape))


def test_top_p_count():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    kept = top_p_filter(probs.log(), 0.75)
    assert marked("6.5", 1) == str(int(kept.isfinite().sum()))
    renormalised = kept.softmax(-1)
    torch.testing.assert_close(renormalised[:2], torch.tensor([0.625, 0.375]))
