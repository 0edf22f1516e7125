"""MultiHeadAttention's two paths (fused and readable) and grouped-query attention.

Without ``need_weights`` the heads run through torch's fused kernel; with it,
through the readable function. Both must give the same output and gradients, for
every mask the book uses. ``n_kv_heads`` shares key/value heads between query heads:
checked against an ordinary MultiHeadAttention whose key/value weights are the
shared ones repeated.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import transformer_book.attention as attention
from transformer_book.attention import MultiHeadAttention, causal_mask, padding_mask
from transformer_book.models import GPT, GPTConfig

B, T, D, H = 2, 7, 16, 4


def masks():
    lengths = torch.tensor([7, 4])
    empty_row = causal_mask(T).clone()
    empty_row[2] = False  # one query row with no allowed key
    return {
        "none": None,
        "causal (T, T)": causal_mask(T),
        "padding (B, 1, T)": padding_mask(lengths),
        "padding and causal (B, T, T)": padding_mask(lengths) & causal_mask(T),
        "per head (B, H, T, T)": torch.rand(B, H, T, T, generator=_gen()) > 0.3,
        "a row with no key": empty_row,
    }


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("name", list(masks()))
def test_fused_and_readable_paths_agree_with_gradients(name):
    mask = masks()[name]
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).double()
    x = torch.randn(B, T, D, dtype=torch.float64, requires_grad=True)
    fused = mha(x, mask=mask)
    readable, _ = mha(x, mask=mask, need_weights=True)
    assert_close(fused, readable, atol=1e-12, rtol=0)
    (g_fused,) = torch.autograd.grad(fused.square().sum(), x)
    (g_readable,) = torch.autograd.grad(readable.square().sum(), x)
    assert torch.isfinite(g_fused).all()
    assert_close(g_fused, g_readable, atol=1e-12, rtol=0)


def test_a_row_with_no_key_gives_zeros_on_the_fused_path():
    mask = masks()["a row with no key"]
    q, k, v = torch.randn(3, 1, H, T, D // H).unbind(0)
    out = attention.fused_scaled_dot_product_attention(q, k, v, mask)
    assert (out[..., 2, :] == 0).all() and torch.isfinite(out).all()


def test_the_fused_kernel_runs_only_without_weights(monkeypatch):
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs.get("dropout_p", 0.0))
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    mha = MultiHeadAttention(D, H, dropout=0.25)
    x = torch.randn(B, T, D)
    mha.eval()(x, mask=causal_mask(T))
    assert calls == [0.0], "eval: the fused kernel, without dropout"
    mha.train()(x)
    assert calls == [0.0, 0.25], "train: the fused kernel applies the dropout"
    mha(x, need_weights=True)
    assert len(calls) == 2, "weights requested: the readable path"


def test_fused_dropout_is_inverted_dropout():
    # E[output] over dropout masks equals the output without dropout
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, dropout=0.5).double()
    x = torch.randn(1, T, D, dtype=torch.float64)
    expected = mha.eval()(x)
    mha.train()
    mean = torch.stack([mha(x) for _ in range(1000)]).mean(0)
    assert (mean - expected).abs().max() < 0.1
    assert (mha(x) - expected).abs().max() > 0.2, "dropout did act"


# ---------------------------------------------------------- grouped-query attention


def expanded(gqa: MultiHeadAttention) -> MultiHeadAttention:
    """An ordinary MultiHeadAttention whose key/value heads repeat gqa's shared ones."""
    full = MultiHeadAttention(gqa.d_model, gqa.n_heads).to(gqa.q_proj.weight.dtype)
    group = gqa.n_heads // gqa.n_kv_heads
    with torch.no_grad():
        for name in ("q_proj", "out_proj"):
            getattr(full, name).load_state_dict(getattr(gqa, name).state_dict())
        for name in ("k_proj", "v_proj"):
            small, big = getattr(gqa, name), getattr(full, name)
            w = small.weight.view(gqa.n_kv_heads, gqa.d_head, gqa.d_model)
            big.weight.copy_(w.repeat_interleave(group, dim=0).reshape_as(big.weight))
            b = small.bias.view(gqa.n_kv_heads, gqa.d_head)
            big.bias.copy_(b.repeat_interleave(group, dim=0).reshape(-1))
    return full


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("need_weights", [False, True])
def test_grouped_query_attention_equals_repeated_key_value_heads(
    n_kv_heads, need_weights
):
    torch.manual_seed(0)
    gqa = MultiHeadAttention(D, H, n_kv_heads=n_kv_heads).double()
    full = expanded(gqa)
    x = torch.randn(B, T, D, dtype=torch.float64)
    mask = padding_mask(torch.tensor([7, 5])) & causal_mask(T)
    out = gqa(x, mask=mask, need_weights=need_weights)
    ref = full(x, mask=mask, need_weights=need_weights)
    if need_weights:
        assert_close(out[1], ref[1], atol=1e-12, rtol=0)
        out, ref = out[0], ref[0]
    assert_close(out, ref, atol=1e-12, rtol=0)


def test_fewer_key_value_heads_shrink_the_projections():
    sizes = {
        n: sum(p.numel() for p in MultiHeadAttention(64, 8, n_kv_heads=n).parameters())
        for n in (8, 2, 1)
    }
    # q and out: 2 (64*64 + 64); k and v: 2 (64 * 8n + 8n)
    assert sizes == {n: 2 * (64 * 64 + 64) + 2 * (64 * 8 * n + 8 * n) for n in sizes}


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_gpt_with_shared_key_value_heads_caches_less_and_decodes_alike(n_kv_heads):
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=30, max_len=24, n_kv_heads=n_kv_heads)
    model = GPT(cfg).eval()
    idx = torch.randint(0, 30, (2, 5))
    _, cache = model.forward_cached(idx)
    assert cache[0][0].shape == (2, n_kv_heads, 5, cfg.d_model // cfg.n_heads)
    logits, _ = model.forward_cached(idx[:, -1:], model.forward_cached(idx[:, :-1])[1])
    assert_close(logits[:, -1], model(idx)[:, -1], atol=1e-5, rtol=0)
    greedy = dict(temperature=0)
    assert torch.equal(
        model.generate(idx, 10, use_cache=True, **greedy),
        model.generate(idx, 10, use_cache=False, **greedy),
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(n_kv_heads=3), "n_heads=4 is not divisible by n_kv_heads=3"),
        (dict(n_kv_heads=0), "n_kv_heads"),
        (dict(n_kv_heads=2.0), "n_kv_heads"),
    ],
)
def test_bad_n_kv_heads_is_named(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        MultiHeadAttention(D, H, **kwargs)


@pytest.mark.parametrize("n_kv_heads", [3, 0, True, 2.0])
def test_bad_n_kv_heads_in_a_config_is_named(n_kv_heads):
    with pytest.raises(ValueError, match="n_kv_heads"):
        GPTConfig(vocab_size=10, max_len=8, n_kv_heads=n_kv_heads)
