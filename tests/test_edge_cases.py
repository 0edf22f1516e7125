"""Right results at the edges: empty batches, zero-length sequences, rows of -inf,
float16/bfloat16 extremes, train/eval mode of copies, cached decoding's offsets.

Each test here was a silent wrong result, a hang or an unreadable error before the
package was hardened (issue 15); ``test_bad_input.py`` covers the clear errors.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from transformer_book.attention import (
    MultiHeadAttention,
    causal_mask,
    fused_scaled_dot_product_attention,
    padding_mask,
    scaled_dot_product_attention,
)
from transformer_book.blocks import DecoderBlock, EncoderBlock
from transformer_book.data import ToyTranslation
from transformer_book.position_lm import PositionalSelfAttention
from transformer_book.positional import (
    RelativePositionBias,
    alibi_bias,
    apply_rope,
)
from transformer_book.recurrent import LSTM, VanillaRNN


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# ---------------------------------------------------------------- low precision
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_scores_never_overflow(dtype):
    # d_k = 64 and inputs of size 32: q·k reaches 64 * 32 * 32 = 65536 > 65504,
    # float16's largest value, before the scaling by 1/sqrt(d_k).
    q = torch.full((1, 3, 64), 32.0)
    q[0, 1] = -32.0
    k, v = q.clone(), randn(1, 3, 8)
    out, weights = scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype))
    expected, _ = scaled_dot_product_attention(q, k, v.to(dtype).float())
    assert out.dtype == weights.dtype == dtype
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert_close(out.float(), expected, atol=2e-2, rtol=2e-2)
    fused = fused_scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype))
    assert_close(fused.float(), expected, atol=2e-2, rtol=2e-2)


def test_float16_extremes_with_masks_stay_finite():
    big = torch.finfo(torch.float16).max / 2
    q = torch.tensor([[[big, -big], [1.0, 1.0]]], dtype=torch.float16)
    mask = torch.tensor([[True, False], [False, False]])
    out, weights = scaled_dot_product_attention(q, q, q, mask=mask)
    assert torch.isfinite(out).all()
    assert weights[0, 0].tolist() == [1.0, 0.0] and weights[0, 1].tolist() == [0, 0]


# ---------------------------------------------------------------- rows of -inf
def test_a_bias_row_of_minus_inf_gives_zeros_and_finite_gradients():
    q, k, v = (randn(2, 4, 6, seed=s).requires_grad_() for s in range(3))
    bias = torch.zeros(4, 4)
    bias[1] = -math.inf  # query 1 may see no key (PyTorch's float-mask convention)
    bias[2, :3] = -math.inf  # query 2 may see only key 3
    bias = bias.requires_grad_()
    out, weights = scaled_dot_product_attention(q, k, v, bias=bias)
    assert torch.equal(weights[:, 1], torch.zeros(2, 4))
    assert torch.equal(out[:, 1], torch.zeros(2, 6))
    assert_close(weights[:, 2], torch.tensor([0.0, 0.0, 0.0, 1.0]).expand(2, 4))
    rows = [0, 2, 3]
    finite = bias.detach().clone()
    finite[1] = 0.0
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=finite)
    assert_close(out[:, rows], expected[:, rows])
    (out.sum() + weights.sum()).backward()
    for t in (q, k, v, bias):
        assert torch.isfinite(t.grad).all()


def test_minus_inf_bias_on_every_allowed_key_does_not_leak_to_masked_keys():
    q, k, v = randn(1, 2, 4), randn(1, 3, 4, seed=1), randn(1, 3, 4, seed=2)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    bias = torch.tensor([[-math.inf, -math.inf, 0.0], [0.0, 0.0, 0.0]])
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias)
    assert torch.equal(weights[0, 0], torch.zeros(3))  # no key left: zeros
    assert torch.equal(out[0, 0], torch.zeros(4))
    assert_close(weights[0, 1].sum(), torch.tensor(1.0))


def test_finfo_min_bias_rows_count_as_blocked():
    # Hugging Face's additive masks use finfo.min for "blocked".
    q, k, v = randn(1, 2, 4), randn(1, 3, 4, seed=1), randn(1, 3, 4, seed=2)
    bias = torch.zeros(2, 3)
    bias[0] = torch.finfo(torch.float32).min
    out, weights = scaled_dot_product_attention(q, k, v, bias=bias)
    assert torch.equal(out[0, 0], torch.zeros(4))
    assert_close(weights[0, 1].sum(), torch.tensor(1.0))


# ---------------------------------------------------------------- empty sizes
def test_empty_batch_and_zero_length_attention():
    q, k, v = randn(0, 3, 4), randn(0, 5, 4), randn(0, 5, 2)
    out, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(5)[:3])
    assert out.shape == (0, 3, 2) and weights.shape == (0, 3, 5)
    assert fused_scaled_dot_product_attention(q, k, v).shape == (0, 3, 2)
    # no key at all: every query has no allowed key, so zero weights and output
    q, k, v = randn(2, 3, 4), randn(2, 0, 4), randn(2, 0, 2)
    for mask in (None, torch.ones(3, 0, dtype=torch.bool)):
        out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        assert torch.equal(out, torch.zeros(2, 3, 2)) and weights.shape == (2, 3, 0)
    out, weights = scaled_dot_product_attention(
        randn(2, 0, 4), randn(2, 5, 4), randn(2, 5, 2)
    )
    assert out.shape == (2, 0, 2) and weights.shape == (2, 0, 5)


def test_empty_batches_through_modules():
    x, memory = randn(0, 5, 16), randn(0, 7, 16)
    mha = MultiHeadAttention(16, 4)
    assert mha(x, memory, mask=torch.ones(0, 5, 7, dtype=torch.bool)).shape == x.shape
    assert EncoderBlock(16, 4, 32)(x, mask=causal_mask(5)).shape == x.shape
    assert DecoderBlock(16, 4, 32)(x, memory).shape == x.shape
    assert padding_mask(torch.tensor([], dtype=torch.long), max_len=3).shape == (
        0,
        1,
        3,
    )


@pytest.mark.parametrize("cls", [VanillaRNN, LSTM])
def test_recurrent_nets_on_zero_steps_return_no_outputs_and_the_initial_state(cls):
    rnn = cls(3, 4)
    outputs, state = rnn(randn(2, 0, 3))
    assert outputs.shape == (2, 0, 4)
    h = state if cls is VanillaRNN else state[0]
    assert torch.equal(h, torch.zeros(2, 4))
    h0 = randn(2, 4)
    given = h0 if cls is VanillaRNN else (h0, h0)
    _, state = rnn(randn(2, 0, 3), given)
    assert (state if cls is VanillaRNN else state[0]) is h0


# ---------------------------------------------------------------- from_torch modes
def torch_modules():
    torch.manual_seed(0)
    kw = {"dropout": 0.5, "batch_first": True}
    return [
        (nn.MultiheadAttention(16, 4, **kw), MultiHeadAttention),
        (nn.TransformerEncoderLayer(16, 4, 32, **kw), EncoderBlock),
        (nn.TransformerDecoderLayer(16, 4, 32, **kw), DecoderBlock),
        (nn.RNN(3, 4, batch_first=True), VanillaRNN),
        (nn.LSTM(3, 4, batch_first=True), LSTM),
    ]


@pytest.mark.parametrize("training", [False, True])
def test_from_torch_keeps_the_train_or_eval_mode(training):
    for module, cls in torch_modules():
        copy = cls.from_torch(module.train(training))
        assert all(m.training == training for m in copy.modules()), cls.__name__


def test_copies_of_eval_modules_match_them_with_dropout_on_paper():
    x, memory = randn(2, 5, 16), randn(2, 7, 16, seed=1)
    modules = torch_modules()
    with torch.no_grad():
        (mha, _), (enc, _), (dec, _) = ((m.eval(), c) for m, c in modules[:3])
        assert_close(MultiHeadAttention.from_torch(mha)(x), mha(x, x, x)[0])
        assert_close(EncoderBlock.from_torch(enc)(x), enc(x))
        assert_close(DecoderBlock.from_torch(dec)(x, memory), dec(x, memory))


# ---------------------------------------------------------------- dropout
def test_positional_self_attention_honours_its_dropout():
    torch.manual_seed(0)
    attn, x = PositionalSelfAttention(16, 2, dropout=0.5), randn(2, 6, 16)
    assert not torch.equal(attn(x), attn(x))  # training: weights dropped at random
    attn.eval()
    plain = PositionalSelfAttention(16, 2)
    plain.load_state_dict(attn.state_dict())
    assert torch.equal(attn(x), plain(x))


def test_dropout_of_one_drops_every_weight():
    out, weights = scaled_dot_product_attention(
        randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 2), dropout_p=1.0
    )
    assert torch.equal(out, torch.zeros(2, 3, 2)) and not weights.any()


# ---------------------------------------------------------------- RoPE
def rope_reference(x, positions, base=10000.0):
    """RoPE in float64 complex numbers: z_i -> z_i * exp(i * position * theta_i)."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    z = torch.view_as_complex(x.double().unflatten(-1, (d // 2, 2)).contiguous())
    angle = positions.double()[..., None] * theta
    turned = z * torch.polar(torch.ones_like(angle), angle)
    return torch.view_as_real(turned).flatten(-2)


def test_rope_runs_in_float64_for_float64_inputs():
    x = randn(4096, 16, dtype=torch.float64)
    positions = torch.arange(4096)
    out = apply_rope(x, positions)
    assert out.dtype == torch.float64
    assert (out - rope_reference(x, positions)).abs().max() < 1e-10
    x = randn(2, 3, 4, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: apply_rope(t, base=100.0), (x,))


def test_rope_positions_broadcast_without_enlarging():
    x = randn(2, 3, 5, 8)
    per_row = torch.arange(10).reshape(2, 1, 5)  # broadcast over the 3 heads
    out = apply_rope(x, per_row)
    assert out.shape == x.shape
    assert_close(out[1], apply_rope(x[1], torch.arange(5, 10)))


# ---------------------------------------------------------------- cached decoding
@pytest.mark.parametrize("t_q", [1, 3, 7])
def test_alibi_query_offset_gives_the_last_rows_of_the_full_matrix(t_q):
    full = alibi_bias(4, 7)
    assert torch.equal(alibi_bias(4, t_q, 7, query_offset=7 - t_q), full[:, -t_q:])
    assert torch.equal(alibi_bias(4, t_q, 7), full[:, :t_q])  # default: from 0


@pytest.mark.parametrize("bidirectional", [False, True])
def test_relative_bias_query_offset_gives_the_last_rows(bidirectional):
    torch.manual_seed(0)
    rpb = RelativePositionBias(3, bidirectional, num_buckets=8, max_distance=16)
    nn.init.normal_(rpb.bias.weight)
    full = rpb(20)
    for t_q in (1, 5):
        assert torch.equal(rpb(t_q, 20, query_offset=20 - t_q), full[:, -t_q:])
    assert rpb(0, 4).shape == (3, 0, 4)


# ---------------------------------------------------------------- data
def test_a_tiny_language_samples_its_only_split_and_refuses_the_empty_one():
    tiny = ToyTranslation(n_words=1, min_len=1, max_len=5)  # 5 sentences in all
    batch = tiny.sample(4, split="test", generator=torch.Generator().manual_seed(0))
    assert batch.src.shape == (4, 6)
    with pytest.raises(ValueError, match="'test' split"):
        ToyTranslation(n_words=2, min_len=1, max_len=2).sample(1, split="test")
