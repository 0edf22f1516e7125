"""Long-range recall: an LSTM against one attention layer (Chapter 1, §1.4).

Each model reads ``[symbol, filler, ..., filler, ?]`` and must name the symbol,
which sits ``distance`` steps before the query (:func:`~transformer_book.data.
recall_task`). Every model gets the same budget: ``steps`` steps of AdamW at the
same learning rate on the same fresh batches, from an initialisation drawn with the
same seed. The chapter runs :func:`run_recall` with seed 0 and asserts the bounds its
prose states; ``tests/test_experiments_recall.py`` asserts them for seeds 1, 2, 3.

Shape letters: B batch, T = distance + 1 tokens, C = n_symbols classes.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .._parallel import map_runs
from .._validate import check_compute_device, check_int, check_real, check_seed
from ..data import recall_task
from ..device import set_seed
from ..recurrent import AttentionClassifier, LSTMClassifier
from ..train import accuracy, train

__all__ = [
    "KINDS",
    "DISTANCES",
    "make_model",
    "recall_accuracy",
    "run_recall",
]

KINDS = ("LSTM", "LSTM, forget bias 3", "attention")
"""The contenders: PyTorch's default LSTM, an LSTM whose forget gates start open
(bias 3, so f = sigmoid(3) ~ 0.95), and one attention layer without positions."""

DISTANCES = (4, 8, 16, 32, 64)
"""The distances between the symbol and the query that the chapter measures."""

TEST_SEED = 10_000  # held-out sequences come from their own generator: 10_000 + seed


def make_model(
    kind: str, n_symbols: int = 8, n_fillers: int = 8, d_model: int = 32
) -> nn.Module:
    """A fresh classifier of ``kind`` (one of :data:`KINDS`) for the recall task.

    Its vocabulary holds the symbols, the fillers and the query token.

    Shapes: tokens (B, T) int -> logits (B, n_symbols)
    """
    check_int("n_symbols", n_symbols, minimum=1)
    check_int("n_fillers", n_fillers, minimum=1)
    vocab_size = n_symbols + n_fillers + 1
    if kind == "LSTM":
        return LSTMClassifier(vocab_size, n_symbols, d_model=d_model)
    if kind == "LSTM, forget bias 3":
        return LSTMClassifier(vocab_size, n_symbols, d_model=d_model, forget_bias=3.0)
    if kind == "attention":
        return AttentionClassifier(vocab_size, n_symbols, d_model=d_model, n_heads=2)
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def _check(
    kind: str, distance: int, seed: int, steps: int, lr: float, n_test: int
) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    check_seed("seed", seed)
    if seed >= 2**53:  # the batches are seeded with distance + 1000 * seed
        raise ValueError(f"seed must be below 2**53, got {seed}")
    check_int("distance", distance, minimum=1)
    check_int("steps", steps, minimum=1)
    check_real("lr", lr, 0.0, low_open=True)
    check_int("n_test", n_test, minimum=1)


def recall_accuracy(
    kind: str,
    distance: int,
    seed: int = 0,
    steps: int = 150,
    lr: float = 3e-3,
    n_test: int = 1000,
    device: torch.device | str | None = None,
) -> float:
    """Train one ``kind`` model at one ``distance``; its accuracy on new sequences.

    ``seed`` draws the initial weights (the same for every distance), the training
    batches (64 sequences each, 8 symbols, 8 fillers) and the ``n_test`` held-out
    sequences. Chance is 1/8.
    """
    _check(kind, distance, seed, steps, lr, n_test)
    check_compute_device("device", device)
    set_seed(seed)
    model = make_model(kind)
    batches = torch.Generator().manual_seed(distance + 1000 * seed)

    def get_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        batch = recall_task(64, distance, generator=batches)
        return batch.tokens, batch.target  # (B, T), (B,)

    train(model, get_batch, F.cross_entropy, steps, lr=lr, device=device)
    held_out = torch.Generator().manual_seed(TEST_SEED + seed)
    test = recall_task(n_test, distance, generator=held_out, device=device)
    with torch.no_grad():
        return accuracy(model(test.tokens), test.target)  # logits (n_test, C)


def run_recall(
    seed: int = 0,
    kinds: Sequence[str] = KINDS,
    distances: Sequence[int] = DISTANCES,
    steps: int = 150,
    lr: float = 3e-3,
    n_test: int = 1000,
    device: torch.device | str | None = None,
) -> dict[str, list[float]]:
    """The chapter's recall table: ``{kind: [accuracy at each distance]}``.

    Each entry is :func:`recall_accuracy` of that kind at that distance with this
    ``seed``; the lists follow the order of ``distances``.
    """
    for name, value in (("kinds", kinds), ("distances", distances)):
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise TypeError(f"{name} must be a sequence, got {value!r}")
    check_compute_device("device", device)
    if len(kinds) == 0 or len(distances) == 0:
        raise ValueError(
            f"kinds and distances must not be empty, got {kinds!r}, {distances!r}"
        )
    for kind in kinds:
        for distance in distances:
            _check(kind, distance, seed, steps, lr, n_test)
    # every (kind, distance) is a model of its own: on a CPU they train side by side,
    # one thread each
    jobs = [(k, d, seed, steps, lr, n_test, device) for k in kinds for d in distances]
    accuracies = iter(map_runs(recall_accuracy, jobs, device))
    return {kind: [next(accuracies) for _ in distances] for kind in kinds}
