"""make bench (part 2): the package's attention against PyTorch's, and decoding.

Prints, side by side in one run: forward + backward time of the package's
MultiHeadAttention over nn.MultiheadAttention's (B=8, d_model=256, 8 heads) at
T = 128, 512 and 1024, with and without a causal mask; then GPT decoding
(bare_decode.report): the tokens/s of GPT.generate over a bare functional
PyTorch loop on the same weights (same tokens), with the KV cache over without
for 512 new tokens, and at batch 1, 8 and 64. Figures only: BOOK.md's budgets
(attention ratio <= 1.1, decoding ratio >= 0.8) are printed, not asserted.
"""

from __future__ import annotations

import argparse

import torch
from bare_decode import report

from transformer_book.device import get_device, set_seed
from transformer_book.speed import mha_forward_backward_ms


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

    print()
    new = 16 if args.quick else 512
    print("\n".join(report(device, new, repeats=2 if args.quick else 5)))


if __name__ == "__main__":
    main()
