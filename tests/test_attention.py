"""Scaled dot-product attention and masks, against PyTorch and the paper's formula.

Multi-head attention has its own file, test_multi_head.py.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from transformer_book.attention import (
    causal_mask,
    fused_scaled_dot_product_attention,
    padding_mask,
    scaled_dot_product_attention,
)


def qkv(*batch, tq=5, tk=7, d=8, dv=6, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, tq, d, generator=gen).to(dtype)
    k = torch.randn(*batch, tk, d, generator=gen).to(dtype)
    v = torch.randn(*batch, tk, dv, generator=gen).to(dtype)
    return q, k, v


def random_mask(tq, tk, seed=1, p=0.5):
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(tq, tk, generator=gen) > p
    mask[:, 0] = True
    return mask


def test_matches_the_formula_written_out():
    q, k, v = qkv(2)
    out, weights = scaled_dot_product_attention(q, k, v)
    by_hand = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    assert_close(weights, by_hand)
    assert_close(out, by_hand @ v)


@pytest.mark.parametrize("batch", [(), (3,), (2, 4)])
def test_matches_pytorch_without_mask(batch):
    q, k, v = qkv(*batch)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (*batch, 5, 6) and weights.shape == (*batch, 5, 7)
    assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_matches_pytorch_with_bool_mask_and_bias():
    q, k, v = qkv(2, 3)
    mask = random_mask(5, 7)
    bias = torch.randn(3, 5, 7, generator=torch.Generator().manual_seed(5))
    out, _ = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias)
    float_mask = bias.masked_fill(~mask, -math.inf)  # PyTorch adds a float mask
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask))
    out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_causal_matches_pytorch_is_causal():
    q, k, v = qkv(2, tq=6, tk=6)
    out, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(6))
    assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert torch.all(weights.triu(1) == 0)


def test_weights_are_a_distribution_and_masked_keys_get_zero():
    q, k, v = qkv(4)
    mask = random_mask(5, 7)
    _, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert_close(weights.sum(-1), torch.ones(4, 5))
    assert torch.all(weights >= 0)
    assert torch.all(weights[:, ~mask] == 0)


def test_fully_masked_row_gives_zeros_not_nan_and_finite_gradients():
    q, k, v = qkv(2)
    q.requires_grad_(True)
    mask = random_mask(5, 7)
    mask[3] = False
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert not torch.isnan(out).any()
    assert torch.all(out[:, 3] == 0) and torch.all(weights[:, 3] == 0)
    out.sum().backward()
    assert torch.isfinite(q.grad).all()
    assert torch.all(q.grad[:, 3] == 0)


def test_fused_path_equals_readable_path_including_empty_rows():
    q, k, v = qkv(2, 3)
    mask = random_mask(5, 7)
    mask[1] = False
    readable, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    fused = fused_scaled_dot_product_attention(q, k, v, mask=mask)
    assert_close(fused, readable)
    assert_close(
        fused_scaled_dot_product_attention(q, k, v),
        scaled_dot_product_attention(q, k, v)[0],
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_keeps_dtype_and_never_overflows(dtype):
    q, k, v = qkv(2, dtype=dtype)
    q = q * 30  # large scores: exp() would overflow in half precision
    mask = random_mask(5, 7)
    mask[2] = False
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert out.dtype == dtype and weights.dtype == dtype
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    ref, _ = scaled_dot_product_attention(q.float(), k.float(), v.float(), mask=mask)
    assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


def test_the_minus_1e9_literal_is_what_breaks_half_precision():
    # The reason the package never writes -1e9: in float16 it is -inf.
    assert torch.tensor(-1e9, dtype=torch.float16).isinf()


def test_permuting_keys_and_values_together_changes_nothing():
    q, k, v = qkv(2)
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(3))
    out, weights = scaled_dot_product_attention(q, k, v)
    out_p, weights_p = scaled_dot_product_attention(q, k[:, perm], v[:, perm])
    assert_close(out_p, out)
    assert_close(weights_p, weights[..., perm])


def test_self_attention_is_permutation_equivariant():
    x = qkv(2, tq=6, tk=6, d=8, dv=8)[0]
    perm = torch.randperm(6, generator=torch.Generator().manual_seed(4))
    out, _ = scaled_dot_product_attention(x, x, x)
    out_p, _ = scaled_dot_product_attention(x[:, perm], x[:, perm], x[:, perm])
    assert_close(out_p, out[:, perm])


def test_dropout_applies_in_expectation_and_zero_dropout_is_deterministic():
    q, k, v = qkv(200)
    torch.manual_seed(0)
    _, dropped = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    _, kept = scaled_dot_product_attention(q, k, v)
    assert (dropped == 0).float().mean() == pytest.approx(0.5, abs=0.05)
    assert_close(dropped.mean(), kept.mean(), atol=0.01, rtol=0.05)


def test_gradients_match_pytorch():
    q, k, v = (t.double().requires_grad_(True) for t in qkv(2))
    mask = random_mask(5, 7)
    assert torch.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=mask)[0], (q, k, v)
    )


@pytest.mark.parametrize(
    ("shapes", "words"),
    [
        (((2, 5, 8), (2, 7, 4), (2, 7, 6)), "(2, 5, 8)"),  # d_k differs
        (((2, 5, 8), (2, 7, 8), (2, 6, 6)), "(2, 6, 6)"),  # Tk differs
        (((2, 5, 8), (3, 7, 8), (3, 7, 6)), "(3, 7, 8)"),  # batch does not broadcast
        (((8,), (7, 8), (7, 6)), "(8,)"),  # q is not (..., T, D)
    ],
)
def test_mismatched_shapes_raise_value_error_naming_them(shapes, words):
    q, k, v = (torch.zeros(s) for s in shapes)
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        scaled_dot_product_attention(q, k, v)


def test_bad_masks_and_biases_are_rejected():
    q, k, v = qkv(2)
    with pytest.raises(TypeError, match="bool"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(5, 7))
    with pytest.raises(ValueError, match=r"\(5, 6\)"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(5, 6, dtype=torch.bool))
    # A (B, 1, 1, Tk) mask would silently enlarge 3-D scores to 4-D: refused.
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(
            q, k, v, mask=torch.ones(2, 1, 1, 7, dtype=torch.bool)
        )
    with pytest.raises(ValueError, match="bias"):
        scaled_dot_product_attention(q, k, v, bias=torch.zeros(4, 5, 7))
    with pytest.raises(TypeError, match="bool"):
        fused_scaled_dot_product_attention(q, k, v, mask=torch.ones(5, 7))


def test_causal_mask_is_lower_triangular_on_the_right_device():
    mask = causal_mask(4, device="cpu")
    expected = torch.tensor(
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool
    )
    assert torch.equal(mask, expected)
    with pytest.raises(ValueError):
        causal_mask(0)


def test_padding_mask_marks_real_tokens_and_broadcasts_over_queries():
    mask = padding_mask(torch.tensor([3, 1]), max_len=4)
    assert mask.shape == (2, 1, 4) and mask.dtype == torch.bool
    assert mask[:, 0].tolist() == [
        [True, True, True, False],
        [True, False, False, False],
    ]
    assert padding_mask(torch.tensor([2, 5])).shape == (2, 1, 5)
    q, k, v = qkv(2, tk=4)
    _, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert torch.all(weights[1, :, 1:] == 0)
    with pytest.raises(ValueError):
        padding_mask(torch.tensor([5]), max_len=4)
    with pytest.raises(ValueError):
        padding_mask(torch.tensor([[1]]))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bfloat16_on_cuda_matches_float32_and_fused_path():
    q, k, v = (t.cuda() for t in qkv(2, 4, tq=64, tk=64, d=32, dv=32))
    mask = causal_mask(64, device="cuda")
    ref, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    out, _ = scaled_dot_product_attention(
        q.bfloat16(), k.bfloat16(), v.bfloat16(), mask
    )
    fused = fused_scaled_dot_product_attention(
        q.bfloat16(), k.bfloat16(), v.bfloat16(), mask
    )
    assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)
    assert_close(fused.float(), ref, atol=3e-2, rtol=3e-2)
