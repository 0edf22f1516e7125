"""What the feed-forward network adds when attention already mixes (Chapter 5).

Each row is ``T`` tokens from ``N_VALUES`` values; the target at position ``t`` is
``TABLE[x[t - 1], x[t + 1]]`` (neighbours taken cyclically), a fixed random table of
``N_VALUES**2`` entries. Attention must bring the two neighbours into position ``t``;
then a per-position non-linear map must turn the pair into its table entry. One
encoder block with its feed-forward network is compared with one attention layer
without it, widened so that it has at least as many parameters.

Shape letters: B batch, T positions, D model width, V number of values.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import MultiHeadAttention
from ..blocks import EncoderBlock
from ..device import set_seed
from ..train import accuracy, train

__all__ = [
    "N_VALUES",
    "SEQ_LEN",
    "neighbour_table",
    "neighbour_batch",
    "AttentionOnlyBlock",
    "MixThenMap",
    "FFNResult",
    "run_feed_forward",
]

N_VALUES, SEQ_LEN = 20, 8  # token values; positions per row
D_WITH_FFN, D_FF, D_WITHOUT_FFN, N_HEADS = 32, 128, 56, 4


def neighbour_table(n_values: int = N_VALUES) -> Tensor:
    """The fixed random table (n_values, n_values) -> value id, the same every call."""
    gen = torch.Generator().manual_seed(1000)
    return torch.randint(n_values, (n_values, n_values), generator=gen)


def neighbour_batch(
    batch_size: int, generator: torch.Generator, table: Tensor
) -> tuple[Tensor, Tensor]:
    """Rows x (B, T) and targets (B, T): target[t] = table[x[t - 1], x[t + 1]]."""
    x = torch.randint(len(table), (batch_size, SEQ_LEN), generator=generator)
    return x, table[x.roll(1, dims=1), x.roll(-1, dims=1)]  # (B, T)


class AttentionOnlyBlock(nn.Module):
    """The encoder block without its feed-forward sub-layer: LN(x + SelfAttn(x))."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.norm1 = nn.LayerNorm(d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm1(x + self.self_attn(x))  # (B, T, D)


class MixThenMap(nn.Module):
    """Token and learned position embeddings, one block, a linear read-out.

    Shapes: x (B, T) ids -> logits (B, T, V).
    """

    def __init__(self, block: nn.Module, d_model: int, n_values: int = N_VALUES):
        super().__init__()
        self.token = nn.Embedding(n_values, d_model)
        self.position = nn.Embedding(SEQ_LEN, d_model)
        self.block = block
        self.readout = nn.Linear(d_model, n_values)

    def forward(self, x: Tensor) -> Tensor:
        h = self.token(x) + self.position.weight[: x.shape[1]]  # (B, T, D)
        return self.readout(self.block(h))  # (B, T, D) -> (B, T, V)


def _models() -> dict[str, MixThenMap]:
    return {
        "with FFN": MixThenMap(EncoderBlock(D_WITH_FFN, N_HEADS, D_FF), D_WITH_FFN),
        "without FFN": MixThenMap(
            AttentionOnlyBlock(D_WITHOUT_FFN, N_HEADS), D_WITHOUT_FFN
        ),
    }


@dataclass(frozen=True)
class FFNResult:
    """What ``run_feed_forward`` measured; dict keys "with FFN" and "without FFN"."""

    models: dict[str, MixThenMap]  # trained, eval mode
    n_params: dict[str, int]
    accuracy: dict[str, float]  # held-out positions predicted right
    ffn_zeroed: float  # accuracy of "with FFN" after its FFN's output is zeroed
    histories: dict[str, dict]


def run_feed_forward(
    seed: int = 0, steps: int = 250, lr: float = 5e-3, batch_size: int = 128
) -> FFNResult:
    """Train both models on the neighbour-table task and test them on 2000 rows.

    Weights from ``seed``, training rows from ``seed + 1``, test rows from
    ``seed + 123``.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    for name, value in (("steps", steps), ("batch_size", batch_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    table = neighbour_table()
    test_x, test_y = neighbour_batch(
        2000, torch.Generator().manual_seed(seed + 123), table
    )
    models, histories, acc = {}, {}, {}
    for name in ("with FFN", "without FFN"):
        set_seed(seed)
        model = _models()[name]
        gen = torch.Generator().manual_seed(seed + 1)
        histories[name] = train(
            model,
            lambda step, gen=gen: neighbour_batch(batch_size, gen, table),
            lambda logits, y: F.cross_entropy(logits.flatten(0, 1), y.flatten()),
            steps=steps,
            lr=lr,
            device="cpu",
        )
        with torch.no_grad():
            acc[name] = accuracy(model(test_x), test_y)
        models[name] = model
    ffn = models["with FFN"].block.feed_forward
    saved = [p.detach().clone() for p in ffn.linear2.parameters()]
    with torch.no_grad():
        for p in ffn.linear2.parameters():
            p.zero_()
        zeroed = accuracy(models["with FFN"](test_x), test_y)
        for p, s in zip(ffn.linear2.parameters(), saved, strict=True):
            p.copy_(s)
    n_params = {n: sum(p.numel() for p in m.parameters()) for n, m in models.items()}
    return FFNResult(models, n_params, acc, zeroed, histories)
