"""Chapter 4's concept checks: the answers marked right are what the code gives."""

import re

import pytest
import torch

from transformer_book.attention import MultiHeadAttention, causal_mask
from transformer_book.concepts.ch04 import CHECKS
from transformer_book.positional import (
    alibi_bias,
    alibi_slopes,
    apply_rope,
    sinusoidal_encoding,
)


def right(key, index=0):
    q = CHECKS[key][index]
    return q, q.options[q.answer]


def test_keys():
    assert set(CHECKS) == {"4.1", "4.2", "4.5", "4.7"}
    assert 4 <= sum(len(qs) for qs in CHECKS.values()) <= 5


@torch.no_grad()
def test_permuted_sentence_gives_permuted_rows():
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(3, 16)
    attention = MultiHeadAttention(16, n_heads=2).eval()
    out_a = attention(embedding(torch.tensor([[0, 1, 2]])))[0]  # 我愛你
    out_b = attention(embedding(torch.tensor([[2, 1, 0]])))[0]  # 你愛我
    matches = [j for j in range(3) if torch.allclose(out_a[j], out_b[0], atol=1e-6)]
    assert len(matches) == 1  # not "none", not "every row"
    _, option = right("4.1")
    assert option.startswith(f"`out_a[{matches[0]}]`")


def test_sinusoidal_row_norm():
    norms = sinusoidal_encoding(100, 512).norm(dim=1)
    assert (norms - norms[0]).abs().max() < 1e-4  # does not grow with p
    _, option = right("4.2")
    assert option == f"{norms[0].item():.3f}"


def rope_score(q, k, m, n):
    rq = apply_rope(q[None], positions=torch.tensor([m]))[0]
    rk = apply_rope(k[None], positions=torch.tensor([n]))[0]
    return (rq @ rk).item()


def test_rope_score_depends_on_offset_only():
    q, k = torch.tensor([1.0, 0.3]), torch.tensor([0.6, 0.8])
    reference = rope_score(q, k, 2, 1)
    question, _ = right("4.5")
    assert f"{reference:.4f}" in question.prompt
    scores = []
    for option in question.options:
        m, n = map(int, re.fullmatch(r"query at (\d+), key at (\d+)", option).groups())
        scores.append(rope_score(q, k, m, n))
    same = [i for i, s in enumerate(scores) if abs(s - reference) < 1e-5]
    assert same == [question.answer]
    assert min(abs(s - reference) for s in scores if s != scores[same[0]]) > 0.1
    # the numbers quoted in the explanations
    for i, score in enumerate(scores):
        if i != question.answer:
            quoted = f"{score:.3f}".rstrip("0").replace("-", "−")
            assert quoted in question.why[i], (quoted, question.why[i])


def test_rope_cache_needs_positions():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 2, 41, 16, generator=gen)  # (B, H, T, Dh): tokens 0..40
    full = apply_rope(x)
    x_new = x[:, :, 40:]  # (B, H, 1, Dh): token 40 alone
    torch.testing.assert_close(apply_rope(x_new), x_new)  # rotated as position 0
    assert not torch.allclose(apply_rope(x_new), full[:, :, 40:], atol=1e-3)
    fixed = apply_rope(x_new, positions=torch.tensor([40]))
    torch.testing.assert_close(fixed, full[:, :, 40:])
    _, option = right("4.5", 1)
    assert "position 0" in option


@pytest.mark.parametrize("t", [16, 64])
def test_alibi_weight_on_previous_token(t):
    assert alibi_slopes(8)[0].item() == 0.5
    bias = alibi_bias(8, t).masked_fill(~causal_mask(t), float("-inf"))
    weights = torch.softmax(bias, dim=-1)[0, -1]  # steepest head, last query
    question, option = right("4.7")
    previous = f"{weights[-2].item():.3f}"
    if t == 16:
        assert f"puts {previous} on the previous token" in question.prompt
    else:
        assert option == previous
        assert weights[: t - 16].sum() < 1e-3  # keys 16 or more back: under 0.1%
