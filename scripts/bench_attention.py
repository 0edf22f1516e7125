"""make bench (part 2): the package's attention against PyTorch's, and the KV cache.

Prints, side by side in one run: forward + backward time of the package's
MultiHeadAttention over nn.MultiheadAttention's (B=8, d_model=256, 8 heads) at
T = 128, 512 and 1024, with and without a causal mask; and the tokens per second
of GPT.generate with and without the KV cache for 512 new tokens. Figures only:
BOOK.md's budget is a ratio <= 1.1, which this prints and does not assert.
"""

from __future__ import annotations

import argparse

import torch

from transformer_book.device import get_device, set_seed
from transformer_book.speed import kv_cache_speed_up, mha_forward_backward_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (tests)")
    args = parser.parse_args()
    device = get_device()
    set_seed(0)
    print(f"on {device}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    lengths = (16, 32) if args.quick else (128, 512, 1024)
    print("\nMultiHeadAttention / nn.MultiheadAttention, forward + backward")
    print(f"{'T':>6} {'mask':>7} {'package ms':>11} {'torch ms':>9} {'ratio':>6}")
    for t in lengths:
        for causal in (False, True):
            ours, theirs = mha_forward_backward_ms(
                t, causal, repeats=3 if args.quick else 7, device=device
            )
            name = "causal" if causal else "none"
            ratio = ours / theirs
            print(f"{t:>6} {name:>7} {ours:>11.2f} {theirs:>9.2f} {ratio:>6.2f}")

    new = 16 if args.quick else 512
    cached, full = kv_cache_speed_up(new, device)
    print(
        f"\nGPT.generate, {new} new tokens (d_model 128, 2 layers): with the KV "
        f"cache {cached:,.0f} tokens/s, without {full:,.0f} tokens/s: "
        f"{cached / full:.1f}x"
    )


if __name__ == "__main__":
    main()
