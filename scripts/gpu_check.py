"""make gpu-check: run the package's GPU path and print its figures.

Checks device selection, bfloat16 autocast, the fused attention kernel against the
readable one, multi-head attention against PyTorch's, and a short training run.
On a machine without CUDA it says so and exits with status 1; `--device cpu` runs
the same checks on the CPU (the tests use it to keep this script working).
"""

from __future__ import annotations

import argparse
import sys

import torch
from bare_decode import report
from torch import nn

from transformer_book.attention import (
    MultiHeadAttention,
    causal_mask,
    fused_scaled_dot_product_attention,
    scaled_dot_product_attention,
)
from transformer_book.data import lookup_task
from transformer_book.device import autocast, get_device, set_seed
from transformer_book.speed import median_ms, mha_forward_backward_ms
from transformer_book.train import accuracy, train


class LookupModel(nn.Module):
    """One multi-head attention layer that reads the value stored under a query key."""

    def __init__(self, n_keys: int, n_values: int, d_model: int = 64, n_heads: int = 4):
        super().__init__()
        self.key_embed = nn.Embedding(n_keys, d_model)
        self.value_embed = nn.Embedding(n_values, d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.head = nn.Linear(d_model, n_values)

    def forward(self, keys, values, query):
        items = self.key_embed(keys) + self.value_embed(values)  # (B, N, D)
        q = self.key_embed(query)[:, None]  # (B, 1, D)
        return self.head(self.attn(q, items, items)[:, 0])  # (B, V)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="small sizes (tests)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("make gpu-check: no CUDA device on this machine, nothing was checked.")
        print("Run it where torch.cuda.is_available() is True (Colab's GPU runtime).")
        return 1
    device = torch.device(args.device)
    set_seed(0)
    print(f"torch {torch.__version__}, get_device() = {get_device()}, on {device}")
    if device.type == "cuda":
        print(f"GPU: {torch.cuda.get_device_name(device)}")

    a = torch.randn(64, 64, device=device)
    with autocast(device):
        dtype = (a @ a).dtype
    print(f"autocast matmul dtype: {dtype}")
    assert dtype == (torch.bfloat16 if device.type == "cuda" else torch.float32)

    B, H, T, Dh = (2, 2, 128, 16) if args.quick else (4, 8, 2048, 64)
    q, k, v = (torch.randn(B, H, T, Dh, device=device) for _ in range(3))
    mask = causal_mask(T, device=device)
    ref, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    low = torch.bfloat16 if device.type == "cuda" else torch.float32
    qh, kh, vh = q.to(low), k.to(low), v.to(low)
    readable = scaled_dot_product_attention(qh, kh, vh, mask=mask)[0]
    fused = fused_scaled_dot_product_attention(qh, kh, vh, mask=mask)
    err_r = (readable.float() - ref).abs().max().item()
    err_f = (fused.float() - ref).abs().max().item()
    print(
        f"attention {low}: max error vs float32: readable {err_r:.1e}, "
        f"fused {err_f:.1e}"
    )
    assert err_r < 5e-2 and err_f < 5e-2
    t_read = median_ms(
        lambda: scaled_dot_product_attention(qh, kh, vh, mask=mask), device=device
    )
    t_fused = median_ms(
        lambda: fused_scaled_dot_product_attention(qh, kh, vh, mask=mask), device=device
    )
    print(
        f"attention (B={B}, H={H}, T={T}, Dh={Dh}): readable {t_read:.2f} ms, "
        f"fused {t_fused:.2f} ms ({t_read / t_fused:.1f}x)"
    )

    torch_mha = nn.MultiheadAttention(64, 4, batch_first=True).to(device)
    ours = MultiHeadAttention.from_torch(torch_mha)
    x = torch.randn(2, 16, 64, device=device)
    m = causal_mask(16, device=device)
    err = (ours(x, mask=m) - torch_mha(x, x, x, attn_mask=~m)[0]).abs().max().item()
    print(
        f"MultiHeadAttention vs nn.MultiheadAttention on {device}: max error {err:.2e}"
    )
    assert err < 1e-4

    set_seed(0)
    model = LookupModel(n_keys=32, n_values=16).to(device)
    gen = torch.Generator().manual_seed(0)

    def get_batch(step):
        b = lookup_task(256, 8, 32, 16, generator=gen, device=device)
        return (b.keys, b.values, b.query), b.target

    steps = 50 if args.quick else 400
    history = train(
        model,
        get_batch,
        nn.functional.cross_entropy,
        steps=steps,
        lr=3e-3,
        device=device,
        progress=False,
    )
    test = lookup_task(
        2048, 8, 32, 16, generator=torch.Generator().manual_seed(1), device=device
    )
    with torch.no_grad(), autocast(device):
        acc = accuracy(model(test.keys, test.values, test.query).float(), test.target)
    print(
        f"training: {steps} steps in {history['seconds']:.1f} s, "
        f"held-out accuracy {acc:.1%}"
    )

    # Chapter 7's figures: fused attention against PyTorch's module, and the cache
    t = 128 if args.quick else 1024
    ours, theirs = mha_forward_backward_ms(t, causal=True, device=device)
    print(
        f"MultiHeadAttention forward+backward, B=8, T={t}, causal: {ours:.2f} ms, "
        f"{8 * t / (ours / 1000):,.0f} tokens/s ({theirs:.2f} ms for "
        f"nn.MultiheadAttention, ratio {ours / theirs:.2f})"
    )
    new = 16 if args.quick else 512
    print("\n".join(report(device, new, repeats=2 if args.quick else 5)))
    print("gpu-check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
