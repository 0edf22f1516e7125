"""The benchmark's reference for GPT decoding: a bare functional PyTorch loop.

Greedy decoding of a ``transformer_book.models.GPT`` with its own weights, written
as one would write it with no package: functional operations only, a cache
preallocated for the whole generation and written in place, no mask for a single
new token, no checks and no modules. ``make bench`` and ``make gpu-check`` time
``GPT.generate`` against it (``compare``), alternating the two in one process, and
check that both give the same tokens. It is not part of the book's package: it
serves only as the floor that the package's decoding is measured against.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F


@torch.no_grad()
def bare_generate(model, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """``model.generate(prompt, new_tokens, temperature=0)``, with nothing around it."""
    cfg = model.cfg
    B, T0 = prompt.shape
    D, H = cfg.d_model, cfg.n_heads
    Hkv, Dh = cfg.n_kv_heads or H, cfg.d_model // cfg.n_heads
    eps = model.norm.eps
    table, positions = model.token.weight, model.position.weight
    layers = [
        (
            (b.norm1.weight, b.norm1.bias),
            (b.self_attn.q_proj.weight, b.self_attn.q_proj.bias),
            (b.self_attn.k_proj.weight, b.self_attn.k_proj.bias),
            (b.self_attn.v_proj.weight, b.self_attn.v_proj.bias),
            (b.self_attn.out_proj.weight, b.self_attn.out_proj.bias),
            (b.norm2.weight, b.norm2.bias),
            (b.feed_forward.linear1.weight, b.feed_forward.linear1.bias),
            (b.feed_forward.linear2.weight, b.feed_forward.linear2.bias),
        )
        for b in model.blocks
    ]
    total = T0 + new_tokens
    cache = table.new_empty(len(layers), 2, B, Hkv, total, Dh)
    out = torch.empty(B, total, dtype=torch.long, device=prompt.device)
    out[:, :T0] = prompt
    start, x = 0, table[prompt] + positions[:T0]  # (B, T0, D)
    for t in range(T0, total):
        T = x.shape[1]
        for i, (n1, wq, wk, wv, wo, n2, w1, w2) in enumerate(layers):
            h = F.layer_norm(x, (D,), n1[0], n1[1], eps)
            q = F.linear(h, *wq)
            keys = cache[i, 0, :, :, : start + T]
            values = cache[i, 1, :, :, : start + T]
            keys[:, :, start:] = F.linear(h, *wk).view(B, T, Hkv, Dh).transpose(1, 2)
            values[:, :, start:] = F.linear(h, *wv).view(B, T, Hkv, Dh).transpose(1, 2)
            if T == 1:
                a = F.scaled_dot_product_attention(
                    q.view(B, Hkv, H // Hkv, Dh), keys, values
                ).reshape(B, 1, D)
            else:
                keys = keys.repeat_interleave(H // Hkv, dim=1)
                values = values.repeat_interleave(H // Hkv, dim=1)
                q = q.view(B, T, H, Dh).transpose(1, 2)
                a = F.scaled_dot_product_attention(q, keys, values, is_causal=True)
                a = a.transpose(1, 2).reshape(B, T, D)
            x = x + F.linear(a, *wo)
            h = F.layer_norm(x, (D,), n2[0], n2[1], eps)
            x = x + F.linear(F.gelu(F.linear(h, *w1)), *w2)
        h = F.layer_norm(x[:, -1], (D,), model.norm.weight, model.norm.bias, eps)
        out[:, t] = F.linear(h, table).argmax(dim=-1)
        start += T
        x = table[out[:, t : t + 1]] + positions[t : t + 1]  # (B, 1, D)
    return out


def compare(model, prompt: torch.Tensor, new_tokens: int, repeats: int = 5):
    """Tokens/s of ``GPT.generate`` (greedy, cached) and of ``bare_generate``.

    The two take turns, ``repeats`` times each after a warm-up, so that both see
    the same load on the machine; each keeps its best run. Raises AssertionError
    unless both give the same tokens. Returns (package tokens/s, bare tokens/s).
    """
    sync = torch.cuda.synchronize if prompt.device.type == "cuda" else lambda: None
    runs = {
        "package": lambda: model.generate(prompt, new_tokens, temperature=0),
        "bare": lambda: bare_generate(model, prompt, new_tokens),
    }
    tokens = {name: run() for name, run in runs.items()}  # warm-up
    assert torch.equal(tokens["package"], tokens["bare"]), "the tokens differ"
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            sync()
            start = time.perf_counter()
            run()
            sync()
            best[name] = min(best[name], time.perf_counter() - start)
    n = prompt.shape[0] * new_tokens
    return n / best["package"], n / best["bare"]


def report(device, new_tokens: int = 512, repeats: int = 5) -> list[str]:
    """The decoding figures ``make bench`` and ``make gpu-check`` print, side by side.

    On ``speed.bench_gpt`` (d_model 128, 2 layers, a 16-token prompt, greedy): the
    package/bare tokens/s ratio, the KV cache's speed-up over recomputing, and the
    cached tokens/s at batch 1, 8 and 64.
    """
    from transformer_book.speed import batch_tokens_per_s, bench_gpt, kv_cache_speed_up

    model = bench_gpt(new_tokens + 16, device)
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(model.cfg.vocab_size, (1, 16), generator=gen).to(device)
    package, bare = compare(model, prompt, new_tokens, repeats)
    cached, full = kv_cache_speed_up(new_tokens, device)
    batches = batch_tokens_per_s(model, (1, 8, 64), min(new_tokens, 128), 16, 3)
    return [
        f"GPT decoding on {device}: d_model 128, 2 layers, a 16-token prompt, greedy",
        f"{'package / bare loop, ' + str(new_tokens) + ' tokens':<44}"
        f"{package:>9,.0f} / {bare:,.0f} tokens/s = {package / bare:.2f}"
        "  (same tokens; budget >= 0.8)",
        f"{'with the KV cache / without, ' + str(new_tokens) + ' tokens':<44}"
        f"{cached:>9,.0f} / {full:,.0f} tokens/s = {cached / full:.1f}x",
        f"{'tokens/s at batch 1, 8, 64':<44}"
        + ", ".join(f"{batches[b]:,.0f}" for b in (1, 8, 64)),
    ]
