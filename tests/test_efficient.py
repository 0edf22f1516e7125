"""Chapter 7's efficient attention against PyTorch and the papers' formulas.

Tiled attention equals exact attention and never builds the (Tq, Tk) matrix; the
sparse masks are the documented patterns with linearly many entries; Linformer and
Performer reduce to exact attention where they should and approach it where they
approximate it; the cost formulas match PyTorch's FLOP counter and a count of the
tiles the tiled loop actually moves. Sizes are small: the whole file runs in seconds.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.overrides import TorchFunctionMode
from torch.testing import assert_close
from torch.utils.flop_counter import FlopCounterMode

from transformer_book.attention import (
    MultiHeadAttention,
    causal_mask,
    scaled_dot_product_attention,
)
from transformer_book.efficient import (
    LinformerAttention,
    PerformerAttention,
    attention_flops,
    attention_memory_traffic,
    block_sparse_mask,
    blockwise_attention,
    blockwise_attention_traffic,
    flash_block_sizes,
    online_softmax_update,
    orthogonal_random_features,
    performer_attention,
    positive_random_features,
    sliding_window_mask,
)

FEW = settings(max_examples=20, deadline=None, derandomize=True, database=None)
TOL = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float64: {"atol": 1e-10, "rtol": 1e-10},
}


def randn(*shape, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)


def qkv(q_batch, k_batch, tq, tk, d=8, dv=5, seed=0, dtype=torch.float32):
    q = randn(*q_batch, tq, d, seed=seed, dtype=dtype)
    k = randn(*k_batch, tk, d, seed=seed + 1, dtype=dtype)
    v = randn(*k_batch, tk, dv, seed=seed + 2, dtype=dtype)
    return q, k, v


def flops(fn, *args, **kwargs):
    with FlopCounterMode(display=False) as counter:
        fn(*args, **kwargs)
    return counter.get_total_flops()


class LargestIntermediate(TorchFunctionMode):
    """Records the last two sizes of every tensor that an operation returns."""

    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        outs = result if isinstance(result, (tuple, list)) else (result,)
        self.shapes += [
            tuple(o.shape[-2:]) for o in outs if isinstance(o, torch.Tensor)
        ]
        return result


# ---------------------------------------------------------------- blockwise attention
@pytest.mark.parametrize(
    ("q_batch", "k_batch", "tq", "tk", "block_size"),
    [
        ((), (), 5, 7, 1),  # block of one row: the online softmax at its finest
        ((2,), (2,), 37, 29, 8),  # neither length a multiple of the block
        ((2, 3), (2, 3), 16, 16, 4),  # batch and heads, lengths multiples
        ((1,), (1,), 10, 3, 128),  # block longer than both lengths: one tile
        ((2, 1), (1, 3), 9, 11, 4),  # batch axes that broadcast
        ((2,), (2,), 13, 6, (5, 2)),  # separate (Br, Bc)
    ],
)
def test_blockwise_equals_pytorchs_attention(q_batch, k_batch, tq, tk, block_size):
    q, k, v = qkv(q_batch, k_batch, tq, tk)
    out = blockwise_attention(q, k, v, block_size=block_size)
    expected = F.scaled_dot_product_attention(q, k, v)
    assert out.shape == expected.shape and out.dtype == v.dtype
    assert_close(out, expected, **TOL[torch.float32])


@pytest.mark.parametrize("block_size", [1, 3, 8, 100])
def test_blockwise_with_a_causal_mask_equals_is_causal(block_size):
    q, k, v = qkv((2, 2), (2, 2), 19, 19)
    out = blockwise_attention(q, k, v, mask=causal_mask(19), block_size=block_size)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(out, expected, **TOL[torch.float32])


@pytest.mark.parametrize(
    "mask_shape", [(11, 9), (1, 9), (11, 1), (9,), (2, 11, 9), (2, 1, 9)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_blockwise_masks_and_empty_rows_equal_the_readable_attention(mask_shape, dtype):
    q, k, v = qkv((2,), (2,), 11, 9, dtype=dtype)
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(3)) < 0.4
    if mask.dim() >= 2 and mask.shape[-2] > 1:
        mask[..., 4, :] = False  # a query with no allowed key: zero output, not NaN
    out = blockwise_attention(q, k, v, mask=mask, block_size=4)
    expected, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    assert not torch.isnan(out).any()
    assert_close(out, expected, **TOL[dtype])
    if mask.dim() >= 2 and mask.shape[-2] > 1:
        assert torch.equal(out[..., 4, :], torch.zeros_like(out[..., 4, :]))


def test_blockwise_with_no_keys_or_no_queries():
    q, k, v = qkv((2,), (2,), 3, 0)
    assert torch.equal(blockwise_attention(q, k, v, block_size=2), torch.zeros(2, 3, 5))
    q, k, v = qkv((2,), (2,), 0, 4)
    assert blockwise_attention(q, k, v).shape == (2, 0, 5)


def test_blockwise_keeps_half_precision_and_follows_float32():
    q, k, v = qkv((2,), (2,), 12, 12, dtype=torch.float16)
    q = q * 30  # scores far beyond float16's range once multiplied out
    out = blockwise_attention(q, k, v, mask=causal_mask(12), block_size=5)
    expected, _ = scaled_dot_product_attention(
        q.float(), k.float(), v.float(), causal_mask(12)
    )
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
    assert_close(out.float(), expected, atol=2e-2, rtol=2e-2)


def test_blockwise_gradients_equal_the_readable_ones():
    q, k, v = qkv((2,), (2,), 5, 4, d=3, dv=2, dtype=torch.float64)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    mask = torch.rand(5, 4, generator=torch.Generator().manual_seed(2)) < 0.6
    mask[2] = False
    assert torch.autograd.gradcheck(
        lambda q, k, v: blockwise_attention(q, k, v, mask, block_size=2), (q, k, v)
    )
    out = blockwise_attention(q, k, v, mask, block_size=2)
    grads = torch.autograd.grad(out.pow(2).sum(), (q, k, v))
    ref, _ = scaled_dot_product_attention(q, k, v, mask)
    expected = torch.autograd.grad(ref.pow(2).sum(), (q, k, v))
    for got, want in zip(grads, expected, strict=True):
        assert_close(got, want, **TOL[torch.float64])


def test_blockwise_never_builds_the_full_score_matrix():
    q, k, v = qkv((2,), (2,), 64, 48, d=4, dv=4)
    mask = causal_mask(64)[:, :48]
    with LargestIntermediate() as watched:
        blockwise_attention(q, k, v, mask=mask, block_size=8)
    assert (64, 48) not in watched.shapes  # no (Tq, Tk) tensor, not even a mask
    assert max(a * b for a, b in watched.shapes if a > 4 and b > 4) == 8 * 8
    with LargestIntermediate() as readable:  # the check can fail: this one builds it
        scaled_dot_product_attention(q, k, v, mask=mask)
    assert (64, 48) in readable.shapes


def test_blockwise_does_the_same_flops_as_the_readable_attention():
    q, k, v = qkv((2, 3), (2, 3), 40, 40, d=8, dv=8)
    tiled = flops(blockwise_attention, q, k, v, block_size=16)
    assert tiled == flops(scaled_dot_product_attention, q, k, v)
    assert tiled == 2 * 3 * attention_flops(40, 8)["attention"]  # B H 4 T² Dh


@st.composite
def blockwise_inputs(draw):
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    tq, tk = draw(st.integers(1, 20)), draw(st.integers(1, 20))
    d, dv = draw(st.integers(1, 8)), draw(st.integers(1, 6))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    scale = draw(st.sampled_from([0.1, 1.0, 5.0]))
    seed = draw(st.integers(0, 2**16))
    q, k, v = (t * scale for t in qkv(batch, batch, tq, tk, d, dv, seed, dtype))
    gen = torch.Generator().manual_seed(seed)
    mask_shape = draw(st.sampled_from([(tq, tk), (1, tk), (*batch, tq, tk)]))
    mask = torch.rand(mask_shape, generator=gen) < draw(st.sampled_from([0.2, 0.7]))
    block = draw(st.one_of(st.integers(1, 25), st.tuples(*[st.integers(1, 9)] * 2)))
    return q, k, v, draw(st.sampled_from([None, mask])), block


@FEW
@given(blockwise_inputs())
def test_property_blockwise_equals_the_readable_attention(inputs):
    q, k, v, mask, block = inputs
    out = blockwise_attention(q, k, v, mask=mask, block_size=block)
    expected, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    assert_close(out, expected, **TOL[q.dtype])


# ---------------------------------------------------------------- online softmax
def fold(scores, v, cuts):
    """The online softmax over the key chunks cut at ``cuts``: (acc / l, m, l)."""
    m = torch.full((*scores.shape[:-1], 1), -math.inf, dtype=scores.dtype)
    row_sum = torch.zeros_like(m)
    acc = torch.zeros(*scores.shape[:-1], v.shape[-1], dtype=scores.dtype)
    edges = [0, *cuts, scores.shape[-1]]
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        m, row_sum, acc = online_softmax_update(
            m, row_sum, acc, scores[..., a:b], v[..., a:b, :]
        )
    return acc / row_sum, m, row_sum


def test_online_softmax_rescales_when_the_maximum_grows():
    scores = torch.tensor([[0.0, 1.0, 5.0, 2.0]], dtype=torch.float64)  # (1, 4)
    v = torch.eye(4, dtype=torch.float64)  # the output is then the weights
    out, m, row_sum = fold(scores, v, cuts=[2])  # the max rises from 1 to 5
    assert_close(out, torch.softmax(scores, dim=-1))
    assert m.item() == 5.0
    assert_close(row_sum, torch.exp(scores - 5.0).sum(-1, keepdim=True))


def test_online_softmax_one_step_is_the_papers_formula():
    m, row_sum = torch.tensor([[1.0], [-math.inf]]), torch.tensor([[2.0], [0.0]])
    acc, scores, v = randn(2, 3, seed=1), randn(2, 4, seed=2), randn(4, 3, seed=3)
    scores[1, :2] = -math.inf  # blocked keys
    m_new, sum_new, acc_new = online_softmax_update(m, row_sum, acc, scores, v)
    m_want = torch.maximum(m, scores.amax(-1, keepdim=True))
    p = torch.exp(scores - m_want)
    assert_close(m_new, m_want)
    assert_close(sum_new, torch.exp(m - m_want) * row_sum + p.sum(-1, keepdim=True))
    assert_close(acc_new, torch.exp(m - m_want) * acc + p @ v)


def test_online_softmax_of_a_fully_blocked_tile_keeps_an_empty_state():
    m, row_sum, acc = (
        torch.full((3, 1), -math.inf),
        torch.zeros(3, 1),
        torch.zeros(3, 2),
    )
    scores = torch.full((3, 4), -math.inf)
    m, row_sum, acc = online_softmax_update(m, row_sum, acc, scores, randn(4, 2))
    assert torch.all(m == -math.inf) and not row_sum.any() and not acc.any()
    assert not torch.isnan(acc).any()


@FEW
@given(
    st.integers(1, 4),
    st.integers(1, 16),
    st.lists(st.integers(1, 15), max_size=4),
    st.integers(0, 2**16),
)
def test_property_folding_any_chunks_gives_softmax_times_v(rows, t, cuts, seed):
    scores = randn(rows, t, seed=seed, dtype=torch.float64) * 4
    v = randn(t, 3, seed=seed + 1, dtype=torch.float64)
    cuts = sorted({c for c in cuts if c < t})
    out, _, _ = fold(scores, v, cuts)
    assert_close(out, torch.softmax(scores, dim=-1) @ v, **TOL[torch.float64])


# ---------------------------------------------------------------- sparse masks
@pytest.mark.parametrize(("t", "window"), [(1, 1), (6, 1), (6, 3), (7, 7), (5, 9)])
def test_sliding_window_mask_is_the_formula(t, window):
    mask = sliding_window_mask(t, window)
    expected = [[0 <= i - j < window for j in range(t)] for i in range(t)]
    assert mask.dtype == torch.bool and mask.tolist() == expected
    assert mask.sum() == sum(min(i + 1, window) for i in range(t))  # ~ t * window
    if window >= t:
        assert torch.equal(mask, causal_mask(t))


def test_a_sliding_window_hides_keys_outside_it():
    q, k, v = qkv((2,), (2,), 12, 12)
    mask = sliding_window_mask(12, 4)
    out = blockwise_attention(q, k, v, mask=mask, block_size=5)
    v2 = v.clone()
    v2[:, :7] += 100.0  # keys 0..6 are outside the window of query 10 (sees 7..10)
    out2 = blockwise_attention(q, k, v2, mask=mask, block_size=5)
    assert_close(out2[:, 10:], out[:, 10:])
    assert not torch.allclose(out2[:, 9], out[:, 9])  # query 9 sees key 6


def brute_block_sparse(t, block, n_global, causal):
    allowed = torch.zeros(t, t, dtype=torch.bool)
    for i in range(t):
        for j in range(t):
            a, b = i // block, j // block
            local = b in (a - 1, a) if causal else abs(a - b) <= 1
            ok = local or a < n_global or b < n_global
            allowed[i, j] = ok and (j <= i or not causal)
    return allowed


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("t", "block", "n_global"), [(10, 3, 1), (12, 4, 0), (7, 2, 2)]
)
def test_block_sparse_mask_is_the_documented_pattern(t, block, n_global, causal):
    mask = block_sparse_mask(t, block, n_global, causal=causal)
    assert torch.equal(mask, brute_block_sparse(t, block, n_global, causal))
    if causal:
        assert not (mask & ~causal_mask(t)).any()
    else:
        assert torch.equal(mask, mask.T)


def documented_count(n, block, g, causal):
    """The docstring's number of allowed entries for t = n * block."""
    g = min(g, n)
    if causal:
        lower = g * (n - 1) - g * (g - 1) // 2 + max(n - 1 - g, 0)
        return n * block * (block + 1) // 2 + block**2 * lower
    if n == g:
        return (n * block) ** 2
    return block**2 * ((2 * g + 3) * n - g**2 - 3 * g - 2)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("block", "n_global"), [(4, 0), (4, 1), (3, 2), (2, 5)])
def test_block_sparse_entries_are_the_formula_and_linear_in_t(block, n_global, causal):
    counts = []
    for n in range(1, 13):
        mask = block_sparse_mask(n * block, block, n_global, causal=causal)
        counts.append(int(mask.sum()))
        assert counts[-1] == documented_count(n, block, n_global, causal)
    steps = [b - a for a, b in zip(counts[:-1], counts[1:], strict=True)]
    assert len(set(steps[n_global + 1 :])) == 1  # constant steps: linear in t
    density = [c / (n * block) ** 2 for n, c in enumerate(counts, start=1)]
    assert density[-1] < density[-2] < density[n_global + 1]  # the dense mask: t²


# ---------------------------------------------------------------- Linformer
def test_linformer_with_identity_projections_is_multi_head_attention():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    lin = LinformerAttention(16, 4, seq_len=10, k=10)
    missing, unexpected = lin.load_state_dict(mha.state_dict(), strict=False)
    assert set(missing) == {"e_proj", "f_proj"} and not unexpected
    with torch.no_grad():
        lin.e_proj.copy_(torch.eye(10))
        lin.f_proj.copy_(torch.eye(10))
    x = randn(2, 10, 16)
    assert_close(lin(x), mha(x), **TOL[torch.float32])


def test_linformer_is_the_papers_formula_and_slices_e_and_f():
    torch.manual_seed(1)
    lin = LinformerAttention(12, 3, seq_len=20, k=5).double()
    x = randn(2, 13, 12, dtype=torch.float64)  # shorter than seq_len
    q = lin.q_proj(x).view(2, 13, 3, 4).transpose(1, 2)  # (B, H, T, Dh)
    k = (lin.e_proj[:, :13] @ lin.k_proj(x)).view(2, 5, 3, 4).transpose(1, 2)
    v = (lin.f_proj[:, :13] @ lin.v_proj(x)).view(2, 5, 3, 4).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1)  # (B, H, T, k)
    heads = (weights @ v).transpose(1, 2).reshape(2, 13, 12)
    assert_close(lin(x), lin.out_proj(heads), **TOL[torch.float64])


def test_linformer_and_performer_flops_grow_linearly_in_t():
    torch.manual_seed(0)
    lin = LinformerAttention(16, 2, seq_len=512, k=8)
    perf = PerformerAttention(16, 2, n_features=8)
    mha = MultiHeadAttention(16, 2)
    for module in (lin, perf):
        assert flops(module, randn(1, 512, 16)) == 2 * flops(module, randn(1, 256, 16))
    long, short = (flops(mha, randn(1, t, 16), need_weights=True) for t in (512, 256))
    assert long > 3 * short  # exact attention: the T² term dominates at T >> D


# ---------------------------------------------------------------- Performer
def test_orthogonal_features_are_orthogonal_in_groups_and_seeded():
    gen = torch.Generator().manual_seed(0)
    w = orthogonal_random_features(10, 4, gen)
    assert w.shape == (10, 4) and w.dtype == torch.float32
    for group in (w[0:4], w[4:8]):
        gram = group @ group.T
        assert_close(
            gram - torch.diag(gram.diagonal()), torch.zeros(4, 4), atol=1e-5, rtol=0
        )
    again = orthogonal_random_features(10, 4, torch.Generator().manual_seed(0))
    assert torch.equal(w, again)
    many = orthogonal_random_features(4000, 4, torch.Generator().manual_seed(1))
    assert abs(many.pow(2).sum(-1).mean().item() - 4) < 0.2  # E|w|² = d, as N(0, I)
    assert abs(many.mean().item()) < 0.05


def test_positive_random_features_estimate_the_softmax_kernel_without_bias():
    d, draws = 4, 2000
    x, y = randn(1, d, seed=5) * 0.5, randn(1, d, seed=6) * 0.5
    w = orthogonal_random_features(draws * d, d, torch.Generator().manual_seed(0))
    products = positive_random_features(x, w) * positive_random_features(y, w)
    # one estimate per independent group of d orthogonal features: m = d, not M
    estimates = products.view(draws, d).sum(dim=-1).double() * (draws * d) / d
    target = math.exp((x @ y.T).item())
    std_error = estimates.std().item() / math.sqrt(draws)
    assert estimates.min() > 0  # positive features: never a negative weight
    assert abs(estimates.mean().item() - target) < 4 * std_error
    assert abs(estimates.mean().item() / target - 1) < 0.03
    assert estimates.std() > 0.05 * target  # one draw alone is noisy


def explicit_favor(q, k, v, w, causal):
    """The (T, S) matrix of kernel estimates, masked and normalised by hand."""
    scale = q.shape[-1] ** -0.25
    a = positive_random_features(q * scale, w) @ positive_random_features(
        k * scale, w
    ).transpose(-2, -1)
    if causal:
        a = a * causal_mask(q.shape[-2])
    return (a @ v) / a.sum(-1, keepdim=True)


@pytest.mark.parametrize("causal", [False, True])
def test_performer_equals_the_explicit_kernel_matrix(causal):
    q, k, v = qkv((2, 3), (2, 3), 9, 9, d=4, dv=3, dtype=torch.float64)
    w = orthogonal_random_features(16, 4, torch.Generator().manual_seed(0)).double()
    out = performer_attention(q, k, v, w, causal=causal)
    assert_close(out, explicit_favor(q, k, v, w, causal), **TOL[torch.float64])


def test_performer_stays_finite_with_large_scores():
    q, k, v = qkv((2,), (2,), 16, 16, d=8)
    w = orthogonal_random_features(32, 8, torch.Generator().manual_seed(0))
    for causal in (False, True):
        out = performer_attention(q * 30, k * 30, v, w, causal=causal)
        assert torch.isfinite(out).all()
        half = performer_attention(q.half() * 30, k.half() * 30, v.half(), w, causal)
        assert half.dtype == torch.float16 and torch.isfinite(half).all()


def test_performer_approaches_exact_attention_as_features_grow():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2).eval()
    x = randn(2, 12, 16)
    errors = {}
    for causal in (False, True):
        exact = mha(x, mask=causal_mask(12) if causal else None)
        for m in (64, 4096):
            perf = PerformerAttention(16, 2, m, causal=causal)
            perf.load_state_dict(mha.state_dict())  # the same projections, strictly
            errors[causal, m] = (perf(x) - exact).abs().mean().item()
        assert errors[causal, 4096] < errors[causal, 64] / 2
    assert errors[False, 4096] < 0.02


def test_performer_redraw_and_dtype():
    perf = PerformerAttention(8, 2, 6, seed=3)
    first = perf.features.clone()
    perf.redraw()
    assert perf.seed == 4 and not torch.equal(perf.features, first)
    perf.redraw(3)
    assert torch.equal(perf.features, first)
    perf = perf.double()
    perf.redraw(5)
    assert perf.features.dtype == torch.float64
    assert perf(randn(1, 4, 8, dtype=torch.float64)).dtype == torch.float64
    assert "features" not in perf.state_dict()


# ---------------------------------------------------------------- costs
@pytest.mark.parametrize(
    ("t", "d_model", "n_heads"), [(5, 8, 1), (16, 12, 3), (33, 16, 4)]
)
def test_attention_flops_match_pytorchs_flop_counter(t, d_model, n_heads):
    mha = MultiHeadAttention(d_model, n_heads)
    counted = flops(mha, randn(2, t, d_model), need_weights=True)  # readable path
    formula = attention_flops(t, d_model, n_heads)
    assert counted == 2 * formula["total"]  # batch of 2
    assert formula["projections"] == 8 * t * d_model**2
    assert formula["attention"] == 4 * t**2 * d_model


def test_attention_overtakes_the_projections_at_t_equal_two_d():
    d = 64
    below, at, above = (attention_flops(t, d) for t in (2 * d - 1, 2 * d, 2 * d + 1))
    assert below["attention"] < below["projections"]
    assert at["attention"] == at["projections"]
    assert above["attention"] > above["projections"]


def test_memory_traffic_by_hand_and_tiled_falls_with_sram():
    traffic = attention_memory_traffic(4096, 64, sram_bytes=100 * 1024)
    assert traffic["block_q"] == math.ceil(25600 / 256) and traffic["block_k"] == 64
    assert traffic["standard"] == 4 * (4 * 4096 * 64 + 4 * 4096**2)
    assert traffic["tiled"] == 4 * (
        2 * 4096 * 64 + 2 * math.ceil(4096 / 100) * 4096 * 64
    )
    assert traffic["tiled"] < traffic["standard"] / 3
    sizes = [32 * 1024, 64 * 1024, 100 * 1024, 192 * 1024, 1024 * 1024]
    tiled = [attention_memory_traffic(4096, 64, m)["tiled"] for m in sizes]
    assert all(a > b for a, b in zip(tiled[:-1], tiled[1:], strict=True))
    standard = {attention_memory_traffic(4096, 64, m)["standard"] for m in sizes}
    assert len(standard) == 1  # the standard algorithm ignores the on-chip memory
    # Theorem 2's order: 2 T d + 8 T² d² / M elements (exact when Br divides T)
    m = 1024 * 1024 // 4
    assert tiled[-1] / 4 == 2 * 4096 * 64 + 8 * 4096**2 * 64**2 / m


@pytest.mark.parametrize(
    ("t", "d", "sram_bytes", "dtype"),
    [
        (50, 8, 1536, torch.float32),  # 12-row query blocks, 50 = 4 * 12 + 2
        (64, 16, 8192, torch.float32),  # blocks of 32 and 16
        (40, 4, 1000, torch.float64),  # 125 elements: blocks of 8 and 4
        (7, 8, 10**6, torch.float32),  # one block holds everything: 4 T d
    ],
)
def test_counted_tile_traffic_equals_the_formula(t, d, sram_bytes, dtype):
    size = dtype.itemsize
    q, k, v = qkv((), (), t, t, d=d, dv=d, dtype=dtype)
    blocks = flash_block_sizes(sram_bytes, d, dtype_bytes=size)
    counted = blockwise_attention_traffic(q, k, v, block_size=blocks)
    formula = attention_memory_traffic(t, d, sram_bytes, dtype_bytes=size)
    assert blocks == (formula["block_q"], formula["block_k"])
    assert counted["total"] == formula["tiled"]
    assert counted["written"] == t * d * size
    if blocks[0] < t:  # the count sees a smaller query block as more traffic
        half = (max(1, blocks[0] // 2), 3)
        smaller = blockwise_attention_traffic(q, k, v, block_size=half)
        assert smaller["total"] > counted["total"]


# ---------------------------------------------------------------- bad input
Q, K, V = randn(2, 5, 8), randn(2, 7, 8), randn(2, 7, 6)
M1, L1, ACC, S, VB = (
    torch.zeros(3, 1),
    torch.zeros(3, 1),
    torch.zeros(3, 2),
    randn(3, 4),
    randn(4, 2),
)
X16 = randn(2, 5, 16)
LIN = LinformerAttention(16, 4, seq_len=6, k=3)
PERF = PerformerAttention(16, 4, 8)
W4 = orthogonal_random_features(8, 8)


def bad(case_id, call, error, match):
    return pytest.param(call, error, match, id=case_id)


BAD = [
    bad(
        "bw-int-q",
        lambda: blockwise_attention(Q.long(), K, V),
        TypeError,
        r"q must be a floating",
    ),
    bad(
        "bw-d_k",
        lambda: blockwise_attention(Q, randn(2, 7, 4), V),
        ValueError,
        r"q and k",
    ),
    bad(
        "bw-mask-dtype",
        lambda: blockwise_attention(Q, K, V, torch.ones(5, 7)),
        TypeError,
        r"mask must be a bool",
    ),
    bad(
        "bw-mask-shape",
        lambda: blockwise_attention(Q, K, V, torch.ones(5, 6, dtype=torch.bool)),
        ValueError,
        r"mask of shape \(5, 6\)",
    ),
    bad(
        "bw-block-0",
        lambda: blockwise_attention(Q, K, V, block_size=0),
        ValueError,
        r"block_size must be positive",
    ),
    bad(
        "bw-block-float",
        lambda: blockwise_attention(Q, K, V, block_size=2.0),
        TypeError,
        r"block_size must be an int",
    ),
    bad(
        "bw-block-bool",
        lambda: blockwise_attention(Q, K, V, block_size=True),
        TypeError,
        r"block_size must be an int",
    ),
    bad(
        "bw-block-triple",
        lambda: blockwise_attention(Q, K, V, block_size=(2, 2, 2)),
        ValueError,
        r"block_size must be an int or a pair",
    ),
    bad(
        "bw-block-pair",
        lambda: blockwise_attention(Q, K, V, block_size=(2, -1)),
        ValueError,
        r"block_size\[1\] must be positive",
    ),
    bad(
        "os-m-shape",
        lambda: online_softmax_update(torch.zeros(3, 2), L1, ACC, S, VB),
        ValueError,
        r"row_max must have shape \(\.\.\., Br, 1\)",
    ),
    bad(
        "os-l-shape",
        lambda: online_softmax_update(M1, torch.zeros(2, 1), ACC, S, VB),
        ValueError,
        r"row_sum must have shape",
    ),
    bad(
        "os-acc",
        lambda: online_softmax_update(M1, L1, torch.zeros(3, 5), S, VB),
        ValueError,
        r"acc must have shape \(\.\.\., Br, Dv\)",
    ),
    bad(
        "os-v",
        lambda: online_softmax_update(M1, L1, ACC, S, randn(5, 2)),
        ValueError,
        r"v_block must have shape \(\.\.\., Bc, Dv\)",
    ),
    bad(
        "os-int",
        lambda: online_softmax_update(M1, L1, ACC, S.long(), VB),
        TypeError,
        r"scores must be a floating",
    ),
    bad(
        "os-1d",
        lambda: online_softmax_update(M1, L1, ACC, randn(4), VB),
        ValueError,
        r"scores must have at least 2",
    ),
    bad(
        "os-empty",
        lambda: online_softmax_update(M1, L1, ACC, randn(3, 0), randn(0, 2)),
        ValueError,
        r"scores .* no key column",
    ),
    bad(
        "os-batch",
        lambda: online_softmax_update(M1, L1, ACC, randn(2, 3, 4), randn(5, 4, 2)),
        ValueError,
        r"batch dimensions of row_max",
    ),
    bad("sw-t", lambda: sliding_window_mask(0, 2), ValueError, r"t must be positive"),
    bad(
        "sw-window",
        lambda: sliding_window_mask(4, 0),
        ValueError,
        r"window must be positive",
    ),
    bad(
        "sw-window-float",
        lambda: sliding_window_mask(4, 1.5),
        TypeError,
        r"window must be an int",
    ),
    bad(
        "sw-device",
        lambda: sliding_window_mask(4, 2, device="gpu0"),
        ValueError,
        r"device='gpu0'",
    ),
    bad(
        "bs-block",
        lambda: block_sparse_mask(8, 0),
        ValueError,
        r"block must be positive",
    ),
    bad(
        "bs-global",
        lambda: block_sparse_mask(8, 2, n_global=-1),
        ValueError,
        r"n_global must be non-negative",
    ),
    bad(
        "bs-causal",
        lambda: block_sparse_mask(8, 2, causal=1),
        TypeError,
        r"causal must be a bool",
    ),
    bad("bs-t", lambda: block_sparse_mask("8", 2), TypeError, r"t must be an int"),
    bad(
        "lin-indivisible",
        lambda: LinformerAttention(10, 4, 8, 2),
        ValueError,
        r"d_model=10 is not divisible by n_heads=4",
    ),
    bad(
        "lin-k",
        lambda: LinformerAttention(16, 4, 8, 0),
        ValueError,
        r"k must be positive",
    ),
    bad(
        "lin-seq_len",
        lambda: LinformerAttention(16, 4, 2.5, 2),
        TypeError,
        r"seq_len must be an int",
    ),
    bad(
        "lin-too-long",
        lambda: LIN(randn(2, 7, 16)),
        ValueError,
        r"x has T=7 positions, more than seq_len=6",
    ),
    bad(
        "lin-width",
        lambda: LIN(randn(2, 5, 8)),
        ValueError,
        r"x must have shape \(B, T, d_model=16\)",
    ),
    bad(
        "lin-dtype", lambda: LIN(X16.double()), TypeError, r"x has dtype torch.float64"
    ),
    bad(
        "perf-features",
        lambda: PerformerAttention(16, 4, 0),
        ValueError,
        r"n_features must be positive",
    ),
    bad(
        "perf-causal",
        lambda: PerformerAttention(16, 4, 8, causal="yes"),
        TypeError,
        r"causal must be a bool",
    ),
    bad(
        "perf-seed",
        lambda: PerformerAttention(16, 4, 8, seed=1.5),
        TypeError,
        r"seed must be an int",
    ),
    bad(
        "perf-redraw", lambda: PERF.redraw(seed="1"), TypeError, r"seed must be an int"
    ),
    bad("perf-x", lambda: PERF(X16.long()), TypeError, r"x must be a floating"),
    bad(
        "pa-features",
        lambda: performer_attention(Q, K, V, randn(8, 4)),
        ValueError,
        r"features must have shape \(M, d=8\)",
    ),
    bad(
        "pa-features-int",
        lambda: performer_attention(Q, K, V, W4.long()),
        TypeError,
        r"features must be a floating",
    ),
    bad(
        "pa-causal",
        lambda: performer_attention(Q, K, V, W4, causal=True),
        ValueError,
        r"causal attention needs as many queries as keys",
    ),
    bad(
        "pa-causal-type",
        lambda: performer_attention(Q, K, V, W4, causal=None),
        TypeError,
        r"causal must be a bool",
    ),
    bad(
        "pa-int-v",
        lambda: performer_attention(Q, K, V.int(), W4),
        TypeError,
        r"v must be a floating",
    ),
    bad(
        "prf-x",
        lambda: positive_random_features(Q.long(), W4),
        TypeError,
        r"x must be a floating",
    ),
    bad(
        "prf-width",
        lambda: positive_random_features(randn(3, 5), W4),
        ValueError,
        r"features must have shape \(M, d=5\)",
    ),
    bad(
        "orf-d",
        lambda: orthogonal_random_features(4, 0),
        ValueError,
        r"d must be positive",
    ),
    bad(
        "orf-n",
        lambda: orthogonal_random_features(-1, 4),
        ValueError,
        r"n_features must be positive",
    ),
    bad(
        "orf-generator",
        lambda: orthogonal_random_features(4, 4, generator=0),
        TypeError,
        r"generator must be a torch.Generator",
    ),
    bad("flops-t", lambda: attention_flops(0, 8), ValueError, r"t must be positive"),
    bad(
        "flops-heads",
        lambda: attention_flops(4, 10, 4),
        ValueError,
        r"d_model=10 is not divisible by n_heads=4",
    ),
    bad(
        "flops-d", lambda: attention_flops(4, 8.0), TypeError, r"d_model must be an int"
    ),
    bad(
        "traffic-sram",
        lambda: attention_memory_traffic(64, 8, 0),
        ValueError,
        r"sram_bytes must be positive",
    ),
    bad(
        "traffic-tiny",
        lambda: attention_memory_traffic(64, 8, 2, dtype_bytes=4),
        ValueError,
        r"sram_bytes=2 holds no element",
    ),
    bad(
        "traffic-dtype",
        lambda: attention_memory_traffic(64, 8, 1024, dtype_bytes=0),
        ValueError,
        r"dtype_bytes must be positive",
    ),
    bad(
        "traffic-d",
        lambda: flash_block_sizes(1024, -2),
        ValueError,
        r"d_head must be positive",
    ),
    bad(
        "traffic-t",
        lambda: attention_memory_traffic(1.5, 8, 1024),
        TypeError,
        r"t must be an int",
    ),
    bad(
        "count-block",
        lambda: blockwise_attention_traffic(Q, K, V, block_size=0),
        ValueError,
        r"block_size must be positive",
    ),
    bad(
        "count-q",
        lambda: blockwise_attention_traffic(Q.tolist(), K, V),
        TypeError,
        r"q must be a torch.Tensor",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), BAD)
def test_bad_input_names_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_everything_stays_on_the_device():
    q, k, v = (t.cuda() for t in qkv((2, 2), (2, 2), 33, 33, d=16, dv=16))
    mask = sliding_window_mask(33, 8, device="cuda") & block_sparse_mask(
        33, 4, device="cuda"
    )
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    out = blockwise_attention(q, k, v, mask, block_size=(8, 16))
    assert out.device == q.device
    assert_close(out, expected, **TOL[torch.float32])
    half = blockwise_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask, 8)
    assert half.dtype == torch.bfloat16
    assert_close(half.float(), expected, atol=3e-2, rtol=3e-2)
    x = randn(2, 20, 16).cuda()
    perf = PerformerAttention(16, 2, 32, causal=True).cuda()
    perf.redraw()
    assert perf.features.is_cuda and perf(x).is_cuda
    assert LinformerAttention(16, 2, 20, 4).cuda()(x).is_cuda


@pytest.mark.parametrize("which", range(5))
def test_online_softmax_update_names_mixed_dtypes(which):
    """Issue 44: one float64 input among float32 ones is named, not a RuntimeError."""
    state = [torch.full((3, 1), -math.inf), torch.zeros(3, 1), torch.zeros(3, 2)]
    args = [*state, randn(3, 4), randn(4, 2, seed=1)]
    args[which] = args[which].double()
    names = ("row_max", "row_sum", "acc", "scores", "v_block")
    with pytest.raises(TypeError, match=f"^{names[which]} has dtype torch.float64"):
        online_softmax_update(*args)
