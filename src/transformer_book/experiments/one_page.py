"""The appendix's toy tasks: the one-page listings trained in seconds.

The GPT of ``listings/gpt.py`` learns to sort digits: it reads ``x_1 .. x_n | `` and
writes the same digits in ascending order. The Transformer of
``listings/transformer.py`` learns to reverse a sequence of 3 to ``max_len``
digits: its encoder reads the digits, its decoder writes them backwards and then
EOS. Each is trained with the book's ``train`` loop (AdamW, a warm-up of
``WARMUP`` steps, then a linear decay to zero) and measured by greedy decoding of
``n_test`` held-out sequences drawn with their own generator (``TEST_SEED + seed``).

The appendix runs :func:`run_sort` and :func:`run_reverse` with seed 0 and asserts
the bounds its prose states; ``tests/test_experiments_one_page.py`` asserts them for
other seeds (``make seeds``).

Shape letters: B batch, n digits, S source positions, T target positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from .._validate import check_compute_device, check_int, check_seed
from ..data import IGNORE_INDEX
from ..device import set_seed
from ..listings.gpt import GPT
from ..listings.transformer import Transformer
from ..train import sequence_accuracy, train

__all__ = ["SEP", "PAD", "BOS", "EOS", "ToyRun", "run_sort", "run_reverse"]

SEP = 10  # the GPT's vocabulary: digits 0-9, then the separator
PAD, BOS, EOS = 0, 1, 2  # the Transformer's: padding, BOS, EOS, then digits 3-12
WARMUP = 20  # steps of linear warm-up before the linear decay
TEST_SEED = 10_000  # held-out sequences come from their own generator


@dataclass(frozen=True)
class ToyRun:
    """One toy task's result.

    losses: the training loss of every step; token_accuracy: the fraction of output
    tokens right (padding after EOS left out); exact_match: the fraction of held-out
    sequences written wholly right; inputs and outputs: the first held-out
    sequences and what the model wrote for them (token ids).
    """

    losses: list[float]
    token_accuracy: float
    exact_match: float
    inputs: list[list[int]]
    outputs: list[list[int]]


def _schedule(steps: int):
    """lr factor: linear warm-up over WARMUP steps, then linear decay to 0."""
    return lambda step: min((step + 1) / WARMUP, 1.0) * (1 - step / steps)


def _sort_batch(batch_size: int, n_digits: int, generator: torch.Generator) -> Tensor:
    """Rows ``x_1 .. x_n SEP sorted(x)``: (B, 2n + 1) token ids."""
    x = torch.randint(10, (batch_size, n_digits), generator=generator)  # (B, n)
    sep = torch.full((batch_size, 1), SEP)  # (B, 1)
    return torch.cat([x, sep, x.sort(dim=1).values], dim=1)  # (B, 2n + 1)


def _train_sort(seed, steps, n_digits, n_test, device) -> ToyRun:
    """The GPT listing learns to sort: data, model, loop and measure."""
    set_seed(seed)  # the initial weights
    model = GPT(11, 2 * n_digits + 1, d_model=32, n_heads=4, n_layers=2, d_ff=128)
    batches = torch.Generator().manual_seed(seed)

    def get_batch(step):  # predict each next token; score only the sorted half
        rows = _sort_batch(64, n_digits, batches)  # (B, 2n + 1)
        targets = rows[:, 1:].clone()  # (B, 2n)
        targets[:, :n_digits] = IGNORE_INDEX  # the unsorted digits and SEP: free
        return rows[:, :-1], targets

    def loss_fn(logits, targets):  # (B, 2n, V), (B, 2n)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    lr_lambda = _schedule(steps)
    history = train(
        model, get_batch, loss_fn, steps, 1e-2, lr_lambda=lr_lambda, device=device
    )
    test = _sort_batch(
        n_test, n_digits, torch.Generator().manual_seed(TEST_SEED + seed)
    )
    test = test.to(next(model.parameters()).device)  # where train put the model
    prompt, answer = test[:, : n_digits + 1], test[:, n_digits + 1 :]  # (B, n + 1)
    written = model.generate(prompt, n_digits)[:, n_digits + 1 :]  # (B, n)
    return ToyRun(
        losses=list(history["loss"]),
        token_accuracy=(written == answer).float().mean().item(),
        exact_match=sequence_accuracy(written, answer, pad_id=SEP),
        inputs=prompt[:3, :-1].tolist(),
        outputs=written[:3].tolist(),
    )


def _reverse_batch(
    batch_size: int, max_len: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Sources of 3 to max_len digits (ids 3-12) padded with PAD, and the targets
    ``BOS reversed(x) EOS PAD..``: (B, max_len) and (B, max_len + 2) ids."""
    lengths = torch.randint(3, max_len + 1, (batch_size, 1), generator=generator)
    x = torch.randint(3, 13, (batch_size, max_len), generator=generator)  # (B, S)
    position = torch.arange(max_len)  # (S,)
    padding = position >= lengths  # (B, S): True past each row's end
    src = x.masked_fill(padding, PAD)
    backwards = (lengths - 1 - position).clamp(min=0)  # (B, S): x_L .. x_1
    reversed_x = x.gather(1, backwards).masked_fill(padding, PAD)
    tgt = torch.full((batch_size, max_len + 2), PAD)  # (B, T)
    tgt[:, 0] = BOS
    tgt[:, 1:-1] = reversed_x
    tgt.scatter_(1, lengths + 1, EOS)  # EOS right after the last digit
    return src, tgt


def _train_reverse(seed, steps, max_len, n_test, device) -> ToyRun:
    """The Transformer listing learns to reverse: data, model, loop and measure."""
    set_seed(seed)  # the initial weights
    model = Transformer(13, max_len + 2, d_model=32, n_heads=4, n_layers=2, d_ff=128)
    batches = torch.Generator().manual_seed(seed)

    def get_batch(step):  # teacher forcing: read tgt[:, :-1], predict tgt[:, 1:]
        src, tgt = _reverse_batch(64, max_len, batches)
        targets = tgt[:, 1:].masked_fill(tgt[:, 1:] == PAD, IGNORE_INDEX)
        return (src, tgt[:, :-1]), targets  # ((B, S), (B, T - 1)), (B, T - 1)

    def loss_fn(logits, targets):  # (B, T - 1, V), (B, T - 1)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    lr_lambda = _schedule(steps)
    history = train(
        model, get_batch, loss_fn, steps, 1e-2, lr_lambda=lr_lambda, device=device
    )
    held_out = torch.Generator().manual_seed(TEST_SEED + seed)
    src, tgt = _reverse_batch(n_test, max_len, held_out)
    device = next(model.parameters()).device  # where train put the model
    src, tgt = src.to(device), tgt.to(device)
    written = model.greedy_decode(src, BOS, EOS, max_len + 1)  # (B, <= max_len + 2)
    length = max(written.shape[1], tgt.shape[1])
    written_, tgt_ = (
        F.pad(t, (0, length - t.shape[1]), value=PAD) for t in (written, tgt)
    )
    scored = tgt_[:, 1:] != PAD  # the digits and EOS
    right = (written_[:, 1:] == tgt_[:, 1:]) & scored
    return ToyRun(
        losses=list(history["loss"]),
        token_accuracy=(right.sum() / scored.sum()).item(),
        exact_match=sequence_accuracy(written, tgt, pad_id=PAD),
        inputs=src[:3].tolist(),
        outputs=written[:3].tolist(),
    )


def _check(seed: int, steps: int, length_name: str, length: int, n_test: int, device):
    check_seed("seed", seed)
    check_int("steps", steps, minimum=1)
    check_int(length_name, length, minimum=3)
    check_int("n_test", n_test, minimum=1)
    check_compute_device("device", device)


def run_sort(
    seed: int = 0,
    steps: int = 250,
    n_digits: int = 6,
    n_test: int = 1000,
    device: torch.device | str | None = None,
) -> ToyRun:
    """Train the GPT listing to sort ``n_digits`` digits; measure it held out.

    ``seed`` draws the initial weights, the training batches (64 rows each) and the
    ``n_test`` held-out rows. Chance is 1 in 10 per digit.
    """
    _check(seed, steps, "n_digits", n_digits, n_test, device)
    return _train_sort(seed, steps, n_digits, n_test, device)


def run_reverse(
    seed: int = 0,
    steps: int = 200,
    max_len: int = 6,
    n_test: int = 1000,
    device: torch.device | str | None = None,
) -> ToyRun:
    """Train the Transformer listing to reverse 3 to ``max_len`` digits; measure it.

    ``seed`` draws the initial weights, the training batches (64 rows each) and the
    ``n_test`` held-out rows. Chance is 1 in 10 per digit.
    """
    _check(seed, steps, "max_len", max_len, n_test, device)
    return _train_reverse(seed, steps, max_len, n_test, device)
