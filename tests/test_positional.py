"""Tests of transformer_book.positional against the papers' formulas."""

import math

import pytest
import torch
from torch import nn

from transformer_book.positional import (
    LearnedPositionalEmbedding,
    RelativePositionBias,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    relative_position_bucket,
    sinusoidal_encoding,
)

# ---------------------------------------------------------------- sinusoidal


def test_sinusoidal_matches_the_formula_entry_by_entry():
    pe = sinusoidal_encoding(50, 16)
    assert pe.shape == (50, 16) and pe.dtype == torch.float32
    for p in (0, 1, 7, 49):
        for i in range(8):
            angle = p / 10000 ** (2 * i / 16)
            assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_sinusoidal_matches_the_seed_000_positional_encoding():
    """Seed 000, §3: the PositionalEncoding module's buffer, transcribed."""
    max_len, d_model = 100, 32
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(
        torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model)
    )
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    torch.testing.assert_close(sinusoidal_encoding(max_len, d_model), pe)


def test_sinusoidal_first_row_and_range():
    pe = sinusoidal_encoding(200, 8)
    torch.testing.assert_close(pe[0], torch.tensor([0.0, 1.0] * 4))
    assert pe.abs().max() <= 1.0


def test_sinusoidal_base_sets_the_wavelengths():
    """base^(2i/d) in place of 10000^(2i/d); the default is the paper's table."""
    pe = sinusoidal_encoding(50, 16, base=100.0)
    for p in (0, 3, 49):
        for i in range(8):
            angle = p / 100 ** (2 * i / 16)
            assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)
    assert torch.equal(
        sinusoidal_encoding(50, 16, base=10000), sinusoidal_encoding(50, 16)
    )
    for bad in (0.0, -10.0, math.nan):
        with pytest.raises(ValueError, match="base"):
            sinusoidal_encoding(4, 8, base=bad)


@pytest.mark.parametrize("max_len, d_model", [(10, 7), (10, 1), (0, 8)])
def test_sinusoidal_rejects_bad_sizes(max_len, d_model):
    with pytest.raises(ValueError, match="d_model|max_len"):
        sinusoidal_encoding(max_len, d_model)


# ------------------------------------------------------------------- learned


def test_learned_adds_the_first_t_rows_and_trains_only_those():
    emb = LearnedPositionalEmbedding(max_len=10, d_model=4)
    x = torch.randn(3, 6, 4)
    torch.testing.assert_close(emb(x), x + emb.table.weight[:6])
    emb(x).sum().backward()
    grad = emb.table.weight.grad
    assert grad[:6].abs().min() > 0
    assert torch.equal(grad[6:], torch.zeros(4, 4))  # rows 6..9 never learn


def test_learned_rejects_sequences_longer_than_max_len():
    emb = LearnedPositionalEmbedding(max_len=8, d_model=4)
    emb(torch.zeros(1, 8, 4))
    with pytest.raises(ValueError, match="exceeds max_len=8"):
        emb(torch.zeros(1, 9, 4))
    with pytest.raises(ValueError):
        LearnedPositionalEmbedding(0, 4)


# ---------------------------------------------------------------------- RoPE


def _rope_complex(x, positions, base=10000.0):
    """RoPE as LLaMA writes it: pairs as complex numbers times e^{i p θ}."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2))
    rot = torch.polar(torch.ones_like(theta), positions.double()[:, None] * theta)
    return torch.view_as_real(z * rot).flatten(-2).float()


def test_rope_matches_the_complex_number_formulation():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 12, 16, generator=gen)  # (B, H, T, D)
    positions = torch.arange(12)
    torch.testing.assert_close(apply_rope(x), _rope_complex(x, positions))
    torch.testing.assert_close(
        apply_rope(x, base=100.0), _rope_complex(x, positions, base=100.0)
    )


def test_rope_turns_a_pair_by_position_times_theta():
    x = torch.tensor([[1.0, 0.0]]).expand(5, 2)  # D = 2: θ_0 = 1 rad per position
    out = apply_rope(x)
    angles = torch.arange(5.0)
    torch.testing.assert_close(out, torch.stack([angles.cos(), angles.sin()], -1))


def test_rope_uses_the_sinusoidal_frequencies():
    """Rotating (0, 1) in every pair by p·θ_i gives (-sin, cos): the PE table."""
    x = torch.tensor([0.0, 1.0] * 8).expand(30, 16)
    pe = sinusoidal_encoding(30, 16)
    out = apply_rope(x)
    torch.testing.assert_close(out[:, 0::2], -pe[:, 0::2], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[:, 1::2], pe[:, 1::2], atol=1e-5, rtol=1e-5)


def test_rope_preserves_norms_and_is_the_identity_at_position_zero():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 20, 8, generator=gen)
    out = apply_rope(x)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
    pair_norms = lambda t: t.reshape(4, 20, 4, 2).norm(dim=-1)  # noqa: E731
    torch.testing.assert_close(pair_norms(out), pair_norms(x))  # each pair alone
    torch.testing.assert_close(out[:, 0], x[:, 0])
    torch.testing.assert_close(apply_rope(x, positions=torch.zeros(20)), x)
    assert not torch.allclose(out[:, 1:], x[:, 1:])


def test_rope_scores_depend_only_on_the_offset():
    gen = torch.Generator().manual_seed(2)
    q, k = torch.randn(16, generator=gen), torch.randn(16, generator=gen)

    def score(m, n):
        rq = apply_rope(q[None], positions=torch.tensor([m]))
        rk = apply_rope(k[None], positions=torch.tensor([n]))
        return (rq @ rk.T).item()

    for offset in (0, 1, 5, -3, 40):
        scores = [score(n + offset, n) for n in (0, 7, 100, 1000)]
        assert max(scores) - min(scores) < 1e-3, (offset, scores)
    assert abs(score(5, 0) - score(0, 0)) > 1e-2  # but the offset itself matters


def test_rope_positions_offset_equals_slicing_a_longer_sequence():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 30, 8, generator=gen)
    full = apply_rope(x)
    tail = apply_rope(x[:, 10:], positions=torch.arange(10, 30))
    torch.testing.assert_close(tail, full[:, 10:])
    per_row = torch.stack([torch.arange(10, 30), torch.arange(20)])  # (B, T)
    out = apply_rope(x[:, 10:], positions=per_row)
    torch.testing.assert_close(out[0], full[0, 10:])
    torch.testing.assert_close(out[1], apply_rope(x[1, 10:]))


def test_rope_equals_the_gpt_neox_half_split_up_to_a_permutation():
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(10, 8, generator=gen)
    d = 8
    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # pairs -> halves
    xh = x[:, perm]  # (T, D): [x0, x2, x4, x6, x1, x3, x5, x7]
    theta = 10000.0 ** (-torch.arange(0, d, 2).float() / d)
    angle = torch.arange(10.0)[:, None] * theta  # (T, D/2)
    cos, sin = angle.cos().repeat(1, 2), angle.sin().repeat(1, 2)
    rotate_half = torch.cat([-xh[:, d // 2 :], xh[:, : d // 2]], dim=-1)
    neox = xh * cos + rotate_half * sin
    torch.testing.assert_close(apply_rope(x)[:, perm], neox)


def test_rope_keeps_low_precision_dtypes():
    x = torch.randn(2, 6, 8, dtype=torch.bfloat16)
    out = apply_rope(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), apply_rope(x.float()), atol=2e-2, rtol=0)


def test_rope_rejects_bad_input():
    with pytest.raises(ValueError, match="D=7 must be even"):
        apply_rope(torch.zeros(3, 7))
    with pytest.raises(ValueError, match="do not match T=3"):
        apply_rope(torch.zeros(3, 8), positions=torch.arange(4))
    with pytest.raises(ValueError, match="shape"):
        apply_rope(torch.zeros(8))


# --------------------------------------------------------------------- ALiBi


def _reference_slopes(n):
    """get_slopes, from the ALiBi code (ofirpress/attention_with_linear_biases)."""

    def get_slopes_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (
        get_slopes_power_of_2(closest_power_of_2)
        + _reference_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]
    )


def test_alibi_slopes_for_8_heads_are_the_papers():
    expected = torch.tensor([1 / 2**k for k in range(1, 9)])
    torch.testing.assert_close(alibi_slopes(8), expected)


def test_alibi_slopes_for_16_heads_step_by_square_roots_of_two():
    expected = torch.tensor([2 ** (-k / 2) for k in range(1, 17)])
    torch.testing.assert_close(alibi_slopes(16), expected)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 12, 20, 24, 64, 96])
def test_alibi_slopes_follow_the_reference_interleaving(n):
    slopes = alibi_slopes(n)
    assert slopes.shape == (n,)
    torch.testing.assert_close(slopes, torch.tensor(_reference_slopes(n)))
    assert (slopes > 0).all() and (slopes < 1).all()
    assert len(set(slopes.tolist())) == n  # every head its own slope


def test_alibi_slopes_for_12_heads_are_8_then_every_other_of_16():
    expected = alibi_slopes(8).tolist() + alibi_slopes(16)[0::2][:4].tolist()
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(expected))


@pytest.mark.parametrize(
    ("bad", "error"),
    [(0, ValueError), (-2, ValueError), (2.0, TypeError), (None, TypeError)],
)
def test_alibi_slopes_reject_bad_head_counts(bad, error):
    with pytest.raises(error, match="n_heads"):
        alibi_slopes(bad)


def test_alibi_bias_is_minus_slope_times_distance():
    bias = alibi_bias(4, 5, 7)
    assert bias.shape == (4, 5, 7)
    slopes = alibi_slopes(4)
    for h, i, j in [(0, 0, 0), (1, 4, 0), (2, 1, 6), (3, 3, 3)]:
        assert bias[h, i, j].item() == pytest.approx(-slopes[h].item() * abs(i - j))
    torch.testing.assert_close(bias.diagonal(dim1=1, dim2=2), torch.zeros(4, 5))


# ------------------------------------------------------------ T5 buckets


def _t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """Mesh TensorFlow's _relative_position_bucket (T5), transcribed for one int."""
    ret = 0
    n = -relative_position
    if bidirectional:
        num_buckets //= 2
        ret += int(n < 0) * num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    val_if_large = max_exact + int(
        math.log(n / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    )
    return ret + min(val_if_large, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(
    "num_buckets, max_distance", [(32, 128), (8, 16), (16, 16), (64, 512), (10, 50)]
)
def test_buckets_match_t5_on_many_offsets(bidirectional, num_buckets, max_distance):
    rel = torch.arange(-1500, 1501)
    got = relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
    expected = [
        _t5_bucket(r, bidirectional, num_buckets, max_distance) for r in rel.tolist()
    ]
    assert got.tolist() == expected
    assert got.dtype == torch.long
    assert got.min() >= 0 and got.max() == num_buckets - 1


def test_buckets_known_values_of_t5_defaults():
    rel = torch.tensor([0, -1, -7, -8, -127, -128, -10_000, 1, 7, 128, 10_000])
    assert relative_position_bucket(rel).tolist() == [
        0, 1, 7, 8, 15, 15, 15, 17, 23, 31, 31,
    ]  # fmt: skip
    # a causal decoder: keys after the query share bucket 0
    uni = relative_position_bucket(rel, bidirectional=False)
    assert uni.tolist()[:7] == [0, 1, 7, 8, 31, 31, 31]
    assert uni.tolist()[7:] == [0, 0, 0, 0]


def test_buckets_reject_bad_input():
    with pytest.raises(TypeError, match="integer"):
        relative_position_bucket(torch.tensor([1.5]))
    with pytest.raises(ValueError, match="max_distance"):
        relative_position_bucket(torch.tensor([3]), num_buckets=32, max_distance=8)
    with pytest.raises(ValueError, match="num_buckets"):
        relative_position_bucket(torch.tensor([3]), num_buckets=2)


def test_relative_position_bias_reads_one_scalar_per_head_and_bucket():
    rpb = RelativePositionBias(n_heads=3, bidirectional=True, num_buckets=8)
    assert torch.equal(rpb(4), torch.zeros(3, 4, 4))  # zero at initialisation
    with torch.no_grad():
        rpb.bias.weight.copy_(torch.randn(8, 3))
    bias = rpb(5, 6)
    assert bias.shape == (3, 5, 6)
    for i, j in [(0, 0), (4, 0), (0, 5), (2, 3)]:
        bucket = relative_position_bucket(torch.tensor(j - i), True, 8, 128)
        torch.testing.assert_close(bias[:, i, j], rpb.bias.weight[bucket])
    # relative: the same offset gives the same bias anywhere (Toeplitz)
    torch.testing.assert_close(bias[:, 1:, 1:], bias[:, :-1, :-1])
    assert isinstance(rpb.bias, nn.Embedding)
