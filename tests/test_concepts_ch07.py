"""The computable answers of Chapter 7's concept checks, computed with the package."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from transformer_book.attention import scaled_dot_product_attention
from transformer_book.concepts.ch07 import CHECKS
from transformer_book.distributed import TINY_GPT, next_token_loss, token_batch
from transformer_book.efficient import (
    attention_flops,
    attention_memory_traffic,
    blockwise_attention,
    sliding_window_mask,
)
from transformer_book.experiments.efficiency import kv_cache_bytes
from transformer_book.models import GPT, GPTConfig


def marked(key: str, index: int = 0) -> str:
    question = CHECKS[key][index]
    return question.options[question.answer]


def test_where_the_t_squared_products_overtake_the_projections():
    d_model = 512
    crossing = next(
        t
        for t in range(1, 4 * d_model)
        if (f := attention_flops(t, d_model, 8))["attention"] >= f["projections"]
    )
    assert crossing == 2 * d_model
    assert marked("7.1") == f"T = {crossing}"


def test_flash_attention_changes_the_traffic_not_the_flops_or_the_result():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 256, 32, generator=gen) for _ in range(3))
    counts = []
    for fn in (
        lambda: scaled_dot_product_attention(q, k, v),
        lambda: blockwise_attention(q, k, v, block_size=64),
    ):
        with FlopCounterMode(display=False) as counter:
            out = fn()
        counts.append(counter.get_total_flops())
        out = out[0] if isinstance(out, tuple) else out
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    assert counts[0] == counts[1] == attention_flops(256, 32)["attention"]
    traffic = attention_memory_traffic(4096, 64, sram_bytes=100_000)
    assert traffic["tiled"] < traffic["standard"]
    assert marked("7.2").startswith("The bytes moved")


def test_multi_query_cache_bytes_per_token():
    cfg = GPTConfig(vocab_size=20, max_len=8, d_model=64, n_heads=4, n_kv_heads=1)
    _, cache = GPT(cfg).forward_cached(torch.zeros(1, 5, dtype=torch.long))
    measured = sum(t.numel() * t.element_size() for pair in cache for t in pair)
    assert measured == 5 * kv_cache_bytes(cfg, 1)
    assert kv_cache_bytes(cfg, 1) == 256  # what the chapter prints for multi-query


def test_sliding_window_entries():
    assert marked("7.5") == str(int(sliding_window_mask(64, 16).sum()))


def test_the_averaged_half_batch_gradients_are_the_whole_batch_gradient():
    batch = token_batch(8)
    grads = []
    for rows in (batch, batch[0::2], batch[1::2]):
        torch.manual_seed(0)
        model = GPT(TINY_GPT)
        next_token_loss(model, rows).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    whole, first, second = grads
    for g, a, b in zip(whole, first, second, strict=True):
        torch.testing.assert_close(g, (a + b) / 2, atol=1e-6, rtol=1e-5)
    assert marked("7.6").startswith("The gradient of the mean loss over all 8")


def test_batching_raises_tokens_per_second_and_shrinks_the_fixed_share():
    from transformer_book.speed import (
        batch_tokens_per_s,
        bench_gpt,
        decode_step_profile,
    )

    torch.manual_seed(0)
    gpt = bench_gpt(16 + 32)
    rates = batch_tokens_per_s(gpt, (1, 64), new_tokens=32)
    assert rates[64] > rates[1]
    shares = {b: decode_step_profile(gpt, b)["everything else"] for b in (1, 64)}
    assert shares[1] > shares[64]
    assert marked("7.4").startswith("Decoding many users'")
