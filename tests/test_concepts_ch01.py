"""Chapter 1's concept checks: each computable answer, computed with the package."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_book.attention import (
    MultiHeadAttention,
    fused_scaled_dot_product_attention,
)
from transformer_book.concepts import Question
from transformer_book.concepts.ch01 import CHECKS
from transformer_book.data import recall_task
from transformer_book.device import set_seed
from transformer_book.experiments.recall import make_model
from transformer_book.recurrent import (
    jacobian_norms,
    rescale_spectral_radius,
    saved_tensor_bytes,
    spectral_radius,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def right(section: str, index: int = 0) -> str:
    q = CHECKS[section][index]
    return q.options[q.answer]


def test_checks_are_questions_after_the_chapters_sections():
    assert set(CHECKS) == {"1.2", "1.3", "1.4", "1.5"}
    questions = [q for qs in CHECKS.values() for q in qs]
    assert 4 <= len(questions) <= 5
    assert all(isinstance(q, Question) for q in questions)
    assert all(1 <= len(qs) <= 2 for qs in CHECKS.values())


def test_arithmetic_grows_linearly_for_the_rnn_and_quadratically_for_attention():
    # the operation counts of §1.2 (torch's FlopCounterMode gives exactly these for
    # nn.RNN and the readable MultiHeadAttention), D = H = 64, T 2048 -> 4096
    d = h = 64

    def rnn_ops(t):
        return 2 * t * (d * h + h * h)

    def attention_ops(t):
        return 4 * t**2 * d + 8 * t * d**2

    rnn_ratio = rnn_ops(4096) / rnn_ops(2048)
    attention_ratio = attention_ops(4096) / attention_ops(2048)
    assert rnn_ratio == 2 and 3.8 < attention_ratio < 4
    expected = f"`nn.RNN` ×{rnn_ratio:.0f}, self-attention ≈×{attention_ratio:.0f}"
    assert right("1.2") == expected


def test_spectral_radius_sets_the_long_run_of_a_linear_rnn():
    w = torch.tensor([[0.5, 0.0], [0.0, -1.2]], dtype=torch.float64)
    rho = spectral_radius(w)
    norms = [torch.linalg.matrix_power(w, k).norm().item() for k in (59, 60)]
    assert abs(norms[1] / norms[0] - rho) < 1e-9  # grows like rho^k
    assert norms[1] > 1e4  # explodes
    assert f"like {rho:.1f}ᵏ" in right("1.3", 0)
    assert "explodes" in right("1.3", 0)
    assert f"{norms[1]:.1e}" == "5.6e+04"  # the number the explanation quotes


def test_tanh_rnn_at_spectral_radius_one_still_vanishes():
    # the chapter's §1.3 setup: seed 0, width 32, 8 sequences of 100 steps, float64
    set_seed(0)
    d, t, b = 32, 100, 8
    x = torch.randn(b, t, d, dtype=torch.float64)
    rnn = nn.RNN(d, d, batch_first=True).double()
    w_default = rnn.weight_hh_l0.detach().clone()
    assert f"{spectral_radius(w_default):.2f}" == "0.65"
    with torch.no_grad():
        rnn.weight_hh_l0.copy_(rescale_spectral_radius(w_default, 1.0))
    norms = jacobian_norms(lambda x: rnn(x)[1][0], x).flip(0)  # index = distance
    per_step = ((norms[80] / norms[20]) ** (1 / 60)).item()
    assert norms[t - 1] < 1e-10 * norms[1] and per_step < 1
    assert f"by about ×{per_step:.1f} per step" in right("1.3", 1)
    assert f"{norms[t - 1].item():.1e}" == "4.6e-16"


def test_attention_without_positions_ignores_where_the_symbol_is():
    tokens = recall_task(
        4, distance=10, generator=torch.Generator().manual_seed(1)
    ).tokens
    swapped = tokens.clone()
    swapped[:, [0, -2]] = tokens[:, [-2, 0]]  # the symbol next to the query `?`
    assert not torch.equal(swapped, tokens)
    logits = {}
    for kind in ("attention", "LSTM"):
        set_seed(0)
        model = make_model(kind)
        with torch.no_grad():
            logits[kind] = model(tokens), model(swapped)
    assert not torch.allclose(*logits["LSTM"], atol=1e-3)  # the swap is visible
    same = torch.allclose(*logits["attention"], atol=1e-6)
    assert same
    assert right("1.4") == "They do not change (up to rounding)"


def test_memory_kept_for_backward_readable_quadratic_fused_linear():
    set_seed(0)
    mha = MultiHeadAttention(64, n_heads=4)

    def readable(x):
        return mha(x, need_weights=True)[0]  # asking for the weights: readable path

    def fused(x):
        q, k, v = (
            mha.split_heads(proj(x)) for proj in (mha.q_proj, mha.k_proj, mha.v_proj)
        )
        return mha.out_proj(
            mha.merge_heads(fused_scaled_dot_product_attention(q, k, v))
        )

    params = list(mha.parameters())
    kept = {"readable": [], "fused": []}
    for t in (1024, 2048):
        x = torch.randn(1, t, 64, requires_grad=True)
        kept["readable"].append(saved_tensor_bytes(readable, x, exclude=[x, *params]))
        kept["fused"].append(saved_tensor_bytes(fused, x, exclude=[x, *params]))
    readable = kept["readable"][1] / kept["readable"][0]
    fused_ratio = kept["fused"][1] / kept["fused"][0]
    assert 3.5 < readable < 4 and 1.9 < fused_ratio < 2.1
    assert right("1.5") == f"readable ×{readable:.0f}, fused ×{fused_ratio:.0f}"
    # the numbers the explanation quotes: §1.5 prints 17.00 MiB kept at T = 1024,
    # 1,040 bytes per token for the fused kernel; the weights are 4 x T^2 float32
    why = CHECKS["1.5"][0].why[1]
    assert f"{kept['readable'][0] / 2**20:.2f} MiB it keeps at T = 1024" in why
    weights_mib = [4 * t**2 * 4 // 2**20 for t in (1024, 2048)]
    assert f"{weights_mib[0]} MiB of the" in why and f"{weights_mib[1]} MiB at" in why
    per_token = kept["fused"][0] / 1024
    assert per_token == 1040 and f"{per_token:,.0f} bytes per token" in why
    fused_mib = [round(s / 2**20) for s in kept["fused"]]
    assert f"about {fused_mib[0]} MiB at T = 1024 and {fused_mib[1]} MiB" in why
