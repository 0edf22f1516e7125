"""What the feed-forward network adds when attention already mixes (Chapter 5).

Each row is ``SEQ_LEN`` tokens from ``N_VALUES`` values; the target at position ``t``
is ``TABLE[x[t - 1], x[t + 1]]`` (neighbours taken cyclically), a fixed random table
of ``N_VALUES**2`` entries. Attention must bring the two neighbours into position
``t``; then a per-position non-linear map must turn the pair into its table entry.
One encoder block with its feed-forward network is compared with one attention layer
without it, widened so that it has at least as many parameters, and the trained
block is measured once more with its feed-forward network's output set to zero.

The chapter calls ``run_feed_forward`` with random seed 0 and asserts the bounds its
prose states; ``tests/test_experiments_feed_forward.py`` runs it with other seeds and
asserts the same bounds.

Shape letters: B batch, T positions, D model width, V number of values.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._validate import (
    check_compute_device,
    check_instance,
    check_int,
    check_seed,
    check_tensor,
    check_token_ids,
)
from ..attention import MultiHeadAttention
from ..blocks import EncoderBlock, _check_sequence
from ..device import set_seed
from ..train import accuracy, train

__all__ = [
    "N_VALUES",
    "SEQ_LEN",
    "MODEL_NAMES",
    "neighbour_table",
    "neighbour_batch",
    "AttentionOnlyBlock",
    "MixThenMap",
    "make_model",
    "FFNResult",
    "run_feed_forward",
]

N_VALUES, SEQ_LEN = 20, 8  # token values; positions per row
D_WITH_FFN, D_FF, D_WITHOUT_FFN, N_HEADS = 32, 128, 56, 4
BATCH_SIZE, LR, N_TEST = 128, 5e-3, 2000
MODEL_NAMES = ("with FFN", "without FFN")


def neighbour_table(n_values: int = N_VALUES) -> Tensor:
    """The fixed random table (n_values, n_values) -> value id, the same every call."""
    check_int("n_values", n_values, minimum=1)
    gen = torch.Generator().manual_seed(1000)
    return torch.randint(n_values, (n_values, n_values), generator=gen)


def neighbour_batch(
    batch_size: int, generator: torch.Generator, table: Tensor
) -> tuple[Tensor, Tensor]:
    """Rows x (B, T) and targets (B, T): target[t] = table[x[t - 1], x[t + 1]]."""
    check_int("batch_size", batch_size, minimum=1)
    check_instance("generator", generator, torch.Generator)
    check_tensor("table", table, "int")
    if table.dim() != 2 or table.shape[0] != table.shape[1] or len(table) == 0:
        raise ValueError(
            f"table must be a square (V, V) table of value ids, got "
            f"{tuple(table.shape)}"
        )
    if table.device.type != "cpu":
        raise ValueError(f"table must be on the CPU, got {table.device}")
    x = torch.randint(len(table), (batch_size, SEQ_LEN), generator=generator)
    return x, table[x.roll(1, dims=1), x.roll(-1, dims=1)]  # (B, T)


class AttentionOnlyBlock(nn.Module):
    """The encoder block without its feed-forward sub-layer: LN(x + SelfAttn(x)).

    Shapes: x (B, T, D) -> (B, T, D).
    """

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.d_model = check_int("d_model", d_model, minimum=1)
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.norm1 = nn.LayerNorm(d_model)

    def forward(self, x: Tensor) -> Tensor:
        _check_sequence("x", x, self.d_model, self.norm1.weight)
        return self.norm1(x + self.self_attn(x))  # (B, T, D)


class MixThenMap(nn.Module):
    """Token and learned position embeddings, one block, a linear read-out.

    Shapes: x (B, T) ids, T <= SEQ_LEN -> logits (B, T, V).
    """

    def __init__(self, block: nn.Module, d_model: int, n_values: int = N_VALUES):
        super().__init__()
        check_instance("block", block, nn.Module)
        check_int("d_model", d_model, minimum=1)
        self.n_values = check_int("n_values", n_values, minimum=1)
        self.token = nn.Embedding(n_values, d_model)
        self.position = nn.Embedding(SEQ_LEN, d_model)
        self.block = block
        self.readout = nn.Linear(d_model, n_values)

    def forward(self, x: Tensor) -> Tensor:
        check_token_ids("x", x, self.n_values)
        if not 1 <= x.shape[1] <= SEQ_LEN:
            raise ValueError(
                f"x must have 1 to SEQ_LEN={SEQ_LEN} positions, got {tuple(x.shape)}"
            )
        h = self.token(x) + self.position.weight[: x.shape[1]]  # (B, T, D)
        return self.readout(self.block(h))  # (B, T, D) -> (B, T, V)


def make_model(name: str) -> MixThenMap:
    """A fresh model: "with FFN" (d_model 32, d_ff 128), or "without FFN" (d_model
    56, attention only, slightly more parameters)."""
    if name == "with FFN":
        return MixThenMap(EncoderBlock(D_WITH_FFN, N_HEADS, D_FF), D_WITH_FFN)
    if name == "without FFN":
        return MixThenMap(AttentionOnlyBlock(D_WITHOUT_FFN, N_HEADS), D_WITHOUT_FFN)
    raise ValueError(f"name must be one of {MODEL_NAMES}, got {name!r}")


@dataclass(frozen=True)
class FFNResult:
    """What ``run_feed_forward`` measured; dict keys are ``MODEL_NAMES``."""

    models: dict[str, MixThenMap]  # trained, eval mode
    n_params: dict[str, int]
    accuracy: dict[str, float]  # held-out positions predicted right
    ffn_zeroed: float  # accuracy of "with FFN" with its FFN's output set to zero
    histories: dict[str, dict]  # train's history of each model


def run_feed_forward(
    seed: int = 0, steps: int = 250, device: torch.device | str | None = None
) -> FFNResult:
    """Train both models on the neighbour-table task and test them on 2000 rows.

    Weights from ``seed``, training rows from ``seed + 1``, test rows from
    ``seed + 123``.
    """
    check_seed("seed", seed)
    check_int("steps", steps, minimum=1)
    check_compute_device("device", device)
    return _run_feed_forward(seed, steps, device)


def _run_feed_forward(seed: int, steps: int, device) -> FFNResult:
    """``run_feed_forward`` after its checks: data, models, training loop, measure."""
    table = neighbour_table()  # (V, V): the value of each (left, right) pair
    test_gen = torch.Generator().manual_seed(seed + 123)
    test_x, test_y = neighbour_batch(N_TEST, test_gen, table)  # (N_TEST, T) each
    models, histories, acc = {}, {}, {}
    for name in MODEL_NAMES:
        set_seed(seed)
        models[name] = model = make_model(name)
        gen = torch.Generator().manual_seed(seed + 1)  # the same rows for both

        def batch(step: int, gen=gen) -> tuple[Tensor, Tensor]:
            return neighbour_batch(BATCH_SIZE, gen, table)

        histories[name] = train(model, batch, _loss, steps, lr=LR, device=device)
        acc[name] = _accuracy(model, test_x, test_y)
    # the trained block once more, its feed-forward output replaced by zeros: the
    # second Add & Norm then normalises attention's output alone
    ffn = models["with FFN"].block.feed_forward
    hook = ffn.register_forward_hook(lambda module, args, out: torch.zeros_like(out))
    try:
        ffn_zeroed = _accuracy(models["with FFN"], test_x, test_y)
    finally:
        hook.remove()  # the returned model is the trained one, FFN and all
    n_params = {n: sum(p.numel() for p in m.parameters()) for n, m in models.items()}
    return FFNResult(models, n_params, acc, ffn_zeroed, histories)


def _loss(logits: Tensor, target: Tensor) -> Tensor:
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())  # (B*T, V)


@torch.no_grad()
def _accuracy(model: MixThenMap, x: Tensor, y: Tensor) -> float:
    logits = model(x.to(model.readout.weight.device)).cpu()  # (B, T, V)
    return accuracy(logits, y)
