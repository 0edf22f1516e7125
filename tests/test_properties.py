"""Property tests (Hypothesis) of the attention functions and positional encodings:
random shapes, masks and dtypes against ``F.scaled_dot_product_attention`` or the
paper's formula.

Examples are few per test (``max_examples`` below) and derandomised, so the suite
stays fast and every run checks the same cases; no example database is written.
"""

import math

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from transformer_book.attention import (
    fused_scaled_dot_product_attention,
    scaled_dot_product_attention,
)
from transformer_book.positional import (
    RelativePositionBias,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    relative_position_bucket,
    sinusoidal_encoding,
)

FEW = settings(max_examples=25, deadline=None, derandomize=True, database=None)
TOLERANCE = {
    torch.float64: {"atol": 1e-10, "rtol": 1e-10},
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 2e-2, "rtol": 2e-2},
    torch.bfloat16: {"atol": 5e-2, "rtol": 5e-2},
}


@st.composite
def attention_inputs(draw, dtypes=(torch.float32, torch.float64)):
    """q, k, v with broadcastable batch dimensions, a bool mask that broadcasts to
    the scores, and a seed-determined scale (including large ones)."""
    batch = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    t_q, t_k = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    d_k, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 5))
    dtype = draw(st.sampled_from(dtypes))
    scale = draw(st.sampled_from([0.1, 1.0, 4.0]))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))

    def tensor(*shape):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(
            dtype
        )

    q, k, v = (
        tensor(*batch, t_q, d_k),
        tensor(*batch, t_k, d_k),
        tensor(*batch, t_k, d_v),
    )
    mask_shape = draw(
        st.sampled_from([(t_q, t_k), (1, t_k), (t_q, 1), (*batch, t_q, t_k)])
    )
    mask = torch.rand(*mask_shape, generator=gen) < draw(
        st.sampled_from([0.3, 0.7, 1.0])
    )
    return q, k, v, mask


def rows_with_a_key(mask, shape):
    return mask.expand(shape).any(dim=-1)  # (..., Tq)


@FEW
@given(attention_inputs())
def test_readable_attention_equals_pytorchs(inputs):
    q, k, v, mask = inputs
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    scores_shape = weights.shape
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    live = rows_with_a_key(mask, scores_shape)  # (..., Tq)
    assert_close(out[live], expected[live], **TOLERANCE[q.dtype])
    # rows with no allowed key: zero weights and zero output, never NaN
    assert not out[~live].any() and not weights[~live].any()
    sums = weights.sum(dim=-1)
    assert_close(sums[live], torch.ones_like(sums[live]), **TOLERANCE[q.dtype])
    assert not weights.masked_select(~mask.expand(scores_shape)).any()


@FEW
@given(attention_inputs())
def test_fused_attention_equals_the_readable_one(inputs):
    q, k, v, mask = inputs
    expected, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    out = fused_scaled_dot_product_attention(q, k, v, mask=mask)
    assert_close(out, expected, **TOLERANCE[q.dtype])


@FEW
@given(attention_inputs(), st.sampled_from([0.0, 0.3, 1.0]))
def test_a_float_bias_with_minus_inf_equals_pytorchs_float_mask(inputs, p_block):
    q, k, v, mask = inputs
    bias = torch.randn(mask.shape, generator=torch.Generator().manual_seed(1))
    bias = bias.to(q.dtype).masked_fill(~mask, -math.inf)  # -inf blocks the key
    bias = bias.masked_fill(torch.rand(mask.shape) < p_block, -math.inf)
    out, weights = scaled_dot_product_attention(q, k, v, bias=bias)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    live = rows_with_a_key(torch.isfinite(bias), weights.shape)
    assert_close(out[live], expected[live], **TOLERANCE[q.dtype])
    assert not out[~live].any() and not torch.isnan(weights).any()


@FEW
@given(attention_inputs(dtypes=(torch.float16, torch.bfloat16)))
def test_half_precision_keeps_its_dtype_and_follows_float32(inputs):
    q, k, v, mask = inputs
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert out.dtype == weights.dtype == q.dtype
    expected, _ = scaled_dot_product_attention(q.float(), k.float(), v.float(), mask)
    assert torch.isfinite(out).all()
    assert_close(out.float(), expected, **TOLERANCE[q.dtype])


@FEW
@given(st.integers(1, 40), st.integers(1, 16).map(lambda n: 2 * n))
def test_sinusoidal_encoding_is_the_papers_formula(max_len, d_model):
    pe = sinusoidal_encoding(max_len, d_model)
    p = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = p / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    assert_close(pe[:, 0::2].double(), angle.sin(), atol=2e-5, rtol=0)
    assert_close(pe[:, 1::2].double(), angle.cos(), atol=2e-5, rtol=0)


@st.composite
def rope_inputs(draw):
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    t, d = draw(st.integers(1, 12)), 2 * draw(st.integers(1, 6))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    x = torch.randn(*batch, t, d, generator=gen, dtype=torch.float64)
    if draw(st.booleans()):
        positions = torch.randint(0, 1000, (t,), generator=gen)
    else:  # fractional positions, as in position interpolation
        positions = torch.rand(t, generator=gen, dtype=torch.float64) * 50
    base = draw(st.sampled_from([2.0, 100.0, 10000.0, 500000.0]))
    return x, positions, base


@FEW
@given(rope_inputs())
def test_rope_turns_each_pair_by_position_times_theta(inputs):
    x, positions, base = inputs
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.double()[..., None] * theta  # (T, D/2)
    z = torch.view_as_complex(x.unflatten(-1, (d // 2, 2)).contiguous())
    expected = torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle))
    out = apply_rope(x, positions, base=base)
    assert out.dtype == torch.float64
    assert_close(out, expected.flatten(-2), atol=1e-9, rtol=1e-9)
    assert_close(out.norm(dim=-1), x.norm(dim=-1))  # a rotation keeps lengths
    low = apply_rope(x.float(), positions, base=base)  # float32: same, less precise
    assert_close(low.double(), out, atol=1e-3, rtol=1e-3)


@FEW
@given(rope_inputs(), st.integers(-50, 50))
def test_rope_scores_depend_only_on_the_offset(inputs, shift):
    x, positions, base = inputs
    q, k = x[..., :1, :], x[..., -1:, :]
    p = positions[:1].long()
    scores = apply_rope(q, p, base) @ apply_rope(k, p + 7, base).transpose(-2, -1)
    shifted = apply_rope(q, p + shift + 100, base) @ apply_rope(
        k, p + shift + 107, base
    ).transpose(-2, -1)
    assert_close(scores, shifted, atol=1e-8, rtol=1e-8)


@FEW
@given(st.integers(1, 12), st.integers(0, 9), st.integers(1, 9), st.integers(0, 5))
def test_alibi_bias_is_minus_slope_times_distance_at_any_offset(n_heads, t_q, t_k, off):
    bias = alibi_bias(n_heads, t_q, t_k, query_offset=off)
    i = torch.arange(t_q, dtype=torch.float64)[:, None] + off
    j = torch.arange(t_k, dtype=torch.float64)[None, :]
    expected = -alibi_slopes(n_heads).double()[:, None, None] * (i - j).abs()
    assert bias.shape == (n_heads, t_q, t_k)
    assert_close(bias.double(), expected, atol=1e-5, rtol=1e-6)
    full = alibi_bias(n_heads, t_q + off, t_k)
    assert torch.equal(bias, full[:, off:])


def t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """T5's original bucketing (mesh-tensorflow / Hugging Face), one int at a time."""
    n, ret = -relative_position, 0
    if bidirectional:
        num_buckets //= 2
        ret += (n < 0) * num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    val = max_exact + int(
        math.log(n / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    )
    return ret + min(val, num_buckets - 1)


@FEW
@given(
    st.booleans(),
    st.sampled_from([4, 8, 16, 32]),
    st.integers(1, 4),
    st.lists(st.integers(-300, 300), min_size=1, max_size=20),
)
def test_buckets_match_t5s_own_code(bidirectional, num_buckets, factor, rel):
    max_distance = (num_buckets // (4 if bidirectional else 2)) * 2 * factor + 1
    got = relative_position_bucket(
        torch.tensor(rel), bidirectional, num_buckets, max_distance
    )
    expected = [t5_bucket(r, bidirectional, num_buckets, max_distance) for r in rel]
    assert got.tolist() == expected
    assert got.min() >= 0 and got.max() < num_buckets


@FEW
@given(st.booleans(), st.integers(1, 8), st.integers(1, 8), st.integers(0, 6))
def test_relative_bias_rows_at_an_offset_are_rows_of_the_full_matrix(
    bidirectional, t_q, t_k, off
):
    torch.manual_seed(0)
    rpb = RelativePositionBias(2, bidirectional, num_buckets=8, max_distance=20)
    torch.nn.init.normal_(rpb.bias.weight)
    assert torch.equal(rpb(t_q, t_k, query_offset=off), rpb(t_q + off, t_k)[:, off:])
