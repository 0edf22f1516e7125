"""MultiHeadAttention against nn.MultiheadAttention and the paper's formula.

PyTorch's boolean masks mean True = blocked; the package's mean True = may attend,
so every comparison passes PyTorch ``~mask``.
"""

import math

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from transformer_book.attention import MultiHeadAttention, causal_mask, padding_mask

D, H = 16, 4


def reference(seed=0, bias=True, dropout=0.0, dtype=torch.float32, **kwargs):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(
        D, H, dropout=dropout, bias=bias, batch_first=True, **kwargs
    )
    return ref.to(dtype)


def inputs(b=3, t=5, s=None, seed=1, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, D, generator=gen).to(dtype)
    if s is None:
        return x
    kv = torch.randn(b, s, D, generator=gen).to(dtype)
    return x, kv


def test_rejects_d_model_not_divisible_by_n_heads():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by n_heads=4"):
        MultiHeadAttention(10, 4)


def test_has_the_same_parameters_as_pytorch_whatever_the_number_of_heads():
    counts = {
        h: sum(p.numel() for p in MultiHeadAttention(D, h).parameters())
        for h in (1, 2, 4, 8, 16)
    }
    assert set(counts.values()) == {4 * D * D + 4 * D}
    torch_count = sum(p.numel() for p in nn.MultiheadAttention(D, H).parameters())
    assert counts[H] == torch_count


@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_matches_pytorch(bias):
    ref = reference(bias=bias)
    mha = MultiHeadAttention.from_torch(ref)
    x = inputs()
    expected, _ = ref(x, x, x, need_weights=False)
    assert_close(mha(x), expected)


def test_matches_pytorch_sequence_first_layout():
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(D, H)  # batch_first=False: (T, B, D)
    mha = MultiHeadAttention.from_torch(ref)
    x = inputs()
    expected, _ = ref(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))
    assert_close(mha(x), expected.transpose(0, 1))


def test_causal_mask_matches_pytorch_with_the_convention_flipped():
    ref = reference()
    mha = MultiHeadAttention.from_torch(ref)
    x = inputs(t=6)
    mask = causal_mask(6)  # True = may attend
    expected, _ = ref(x, x, x, attn_mask=~mask)  # PyTorch: True = blocked
    out = mha(x, mask=mask)
    assert_close(out, expected)
    # Reading the mask the wrong way round gives a different answer.
    assert not torch.allclose(mha(x, mask=~mask | torch.eye(6, dtype=torch.bool)), out)


def test_causal_outputs_ignore_the_future():
    mha = MultiHeadAttention.from_torch(reference())
    x = inputs(t=6)
    changed = x.clone()
    changed[:, 4:] = torch.randn(3, 2, D)
    mask = causal_mask(6)
    assert_close(mha(x, mask=mask)[:, :4], mha(changed, mask=mask)[:, :4])
    assert not torch.allclose(mha(x)[:, :4], mha(changed)[:, :4])


def test_padding_mask_matches_key_padding_mask():
    ref = reference()
    mha = MultiHeadAttention.from_torch(ref)
    x = inputs(b=3, t=6)
    lengths = torch.tensor([6, 4, 1])
    mask = padding_mask(lengths)  # (B, 1, S), True = real token
    expected, _ = ref(x, x, x, key_padding_mask=~mask[:, 0])  # (B, S), True = pad
    assert_close(mha(x, mask=mask), expected)


def test_per_head_mask_matches_pytorch_3d_attn_mask():
    ref = reference()
    mha = MultiHeadAttention.from_torch(ref)
    x = inputs(b=2, t=5)
    gen = torch.Generator().manual_seed(3)
    mask = torch.rand(2, H, 5, 5, generator=gen) > 0.5  # (B, H, T, S)
    mask[..., 0] = True  # no empty rows: PyTorch would give NaN there
    expected, _ = ref(x, x, x, attn_mask=~mask.flatten(0, 1))  # (B*H, T, S)
    assert_close(mha(x, mask=mask), expected)


def test_cross_attention_matches_pytorch():
    ref = reference()
    mha = MultiHeadAttention.from_torch(ref)
    x, memory = inputs(t=4, s=7)
    expected, _ = ref(x, memory, memory)
    out = mha(x, memory)  # value defaults to key
    assert out.shape == (3, 4, D)
    assert_close(out, expected)
    value = memory.flip(1)  # key and value may differ
    expected, _ = ref(x, memory, value)
    assert_close(mha(x, memory, value), expected)


def test_cross_attention_with_memory_padding():
    ref = reference()
    mha = MultiHeadAttention.from_torch(ref)
    x, memory = inputs(t=4, s=7)
    mask = padding_mask(torch.tensor([7, 3, 5]))  # (B, 1, S)
    expected, _ = ref(x, memory, memory, key_padding_mask=~mask[:, 0])
    assert_close(mha(x, memory, mask=mask), expected)


def test_need_weights_returns_every_head_and_pytorch_averages_them():
    ref = reference()
    mha = MultiHeadAttention.from_torch(ref)
    x, memory = inputs(t=4, s=6)
    out, weights = mha(x, memory, need_weights=True)
    assert weights.shape == (3, H, 4, 6)
    assert_close(weights.sum(-1), torch.ones(3, H, 4))
    _, per_head = ref(x, memory, memory, average_attn_weights=False)
    assert_close(weights, per_head)
    _, averaged = ref(x, memory, memory)  # PyTorch's default: mean over heads
    assert averaged.shape == (3, 4, 6)
    assert_close(weights.mean(dim=1), averaged)
    assert_close(out, mha(x, memory))  # need_weights changes only what is returned


def test_masked_keys_get_zero_weight_and_empty_rows_give_zeros_not_nan():
    mha = MultiHeadAttention(D, H)
    x = inputs(t=4)
    mask = causal_mask(4).clone()
    mask[2] = False  # query 2 may attend to nothing
    out, weights = mha(x, mask=mask, need_weights=True)
    assert (weights[..., ~mask] == 0).all()
    assert not torch.isnan(out).any()
    # An empty row's heads are zero, so its output is W^O's bias alone.
    assert_close(out[:, 2], mha.out_proj.bias.expand(3, D))


def test_equals_the_paper_formula_with_one_matrix_per_head():
    """MultiHead = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, ...)."""
    mha = MultiHeadAttention(D, H, bias=False)
    x, memory = inputs(t=4, s=6)
    dh = D // H
    heads = []
    for i in range(H):
        rows = slice(i * dh, (i + 1) * dh)  # head i's rows of each projection
        q = x @ mha.q_proj.weight[rows].T  # (B, T, Dh)
        k = memory @ mha.k_proj.weight[rows].T  # (B, S, Dh)
        v = memory @ mha.v_proj.weight[rows].T  # (B, S, Dh)
        w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(dh), dim=-1)
        heads.append(w @ v)
    expected = torch.cat(heads, dim=-1) @ mha.out_proj.weight.T
    assert_close(mha(x, memory), expected)


def test_split_and_merge_heads_are_inverse_and_keep_each_heads_features():
    mha = MultiHeadAttention(D, H)
    x = inputs()
    split = mha.split_heads(x)
    assert split.shape == (3, H, 5, D // H)
    assert_close(split[:, 1], x[..., D // H : 2 * D // H])
    assert_close(mha.merge_heads(split), x)


def test_gradients_pass_gradcheck_in_float64():
    mha = MultiHeadAttention(8, 2).double()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 8, generator=gen, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(2, 4, 8, generator=gen, dtype=torch.float64)
    memory.requires_grad_()
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1]], dtype=torch.bool)
    assert torch.autograd.gradcheck(lambda q, kv: mha(q, kv, mask=mask), (x, memory))
    assert torch.autograd.gradcheck(lambda q: mha(q, mask=causal_mask(3)), (x,))


def test_parameter_gradients_match_pytorch():
    ref = reference(dtype=torch.float64)
    mha = MultiHeadAttention.from_torch(ref)
    x = inputs(t=6, dtype=torch.float64)
    mask = causal_mask(6)
    ref(x, x, x, attn_mask=~mask)[0].pow(2).sum().backward()
    mha(x, mask=mask).pow(2).sum().backward()
    w_q, w_k, w_v = ref.in_proj_weight.grad.chunk(3)
    assert_close(mha.q_proj.weight.grad, w_q)
    assert_close(mha.k_proj.weight.grad, w_k)
    assert_close(mha.v_proj.weight.grad, w_v)
    assert_close(mha.v_proj.bias.grad, ref.in_proj_bias.grad.chunk(3)[2])
    assert_close(mha.out_proj.weight.grad, ref.out_proj.weight.grad)


def test_from_torch_copies_weights_dtype_and_dropout_and_is_independent():
    ref = reference(dropout=0.1, dtype=torch.float64)
    mha = MultiHeadAttention.from_torch(ref)
    assert mha.q_proj.weight.dtype == torch.float64
    assert mha.dropout == 0.1 and mha.n_heads == H and mha.d_head == D // H
    with torch.no_grad():
        mha.q_proj.weight.zero_()
    assert ref.in_proj_weight.abs().sum() > 0  # a copy, not shared storage
    assert MultiHeadAttention.from_torch(reference(bias=False)).q_proj.bias is None


@pytest.mark.parametrize(
    "kwargs",
    [{"kdim": 8}, {"vdim": 8}, {"add_bias_kv": True}, {"add_zero_attn": True}],
)
def test_from_torch_rejects_unsupported_configurations(kwargs):
    with pytest.raises(ValueError, match="from_torch supports"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(D, H, **kwargs))


def test_dropout_acts_only_in_training():
    mha = MultiHeadAttention(D, H, dropout=0.5)
    x = inputs()
    mha.eval()
    assert_close(mha(x), mha(x))
    mha.train()
    torch.manual_seed(0)
    assert not torch.allclose(mha(x), mha(x))


@pytest.mark.parametrize(
    "shape", [(5, D), (2, 5, D + 1), (2, 3, 5, D)], ids=["2d", "width", "4d"]
)
def test_bad_query_shapes_raise_value_error(shape):
    with pytest.raises(ValueError, match=r"query must have shape \(B, T, d_model=16\)"):
        MultiHeadAttention(D, H)(torch.randn(*shape))


def test_bad_mask_raises_value_error_naming_its_shape():
    mha = MultiHeadAttention(D, H)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\)"):
        mha(inputs(t=5), mask=causal_mask(4))


def test_bfloat16_keeps_its_dtype_and_stays_close_to_float32():
    mha = MultiHeadAttention(D, H)
    x = inputs()
    out = mha.to(torch.bfloat16)(x.to(torch.bfloat16), mask=causal_mask(5))
    assert out.dtype == torch.bfloat16
    expected = mha.float()(x, mask=causal_mask(5))
    assert_close(out.float(), expected, atol=5e-2, rtol=5e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_matches_pytorch_on_cuda():
    ref = reference().cuda()
    mha = MultiHeadAttention.from_torch(ref)
    assert mha.q_proj.weight.device.type == "cuda"
    x = inputs().cuda()
    mask = causal_mask(5, device="cuda")
    expected, _ = ref(x, x, x, attn_mask=~mask)
    assert_close(mha(x, mask=mask), expected)


@pytest.mark.parametrize("name", ["key", "value"])
def test_bad_key_or_value_width_raises_value_error_naming_it(name):
    x, memory = inputs(t=4, s=6)
    bad = {name: torch.randn(3, 6, D + 2)}
    if name == "value":
        bad["key"] = memory
    with pytest.raises(ValueError, match=rf"{name} must have shape .* \(3, 6, 18\)"):
        MultiHeadAttention(D, H)(x, **bad)
