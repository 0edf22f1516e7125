"""Training the encoder-decoder on the toy translation task (Chapter 5, §5.3 and §5.6).

Chapter 5 trains ``models.EncoderDecoder`` on ``data.ToyTranslation`` the way the
paper trains its Transformer: teacher forcing, label smoothing and the warm-up
("Noam") schedule, then translates held-out sentences by greedy decoding and counts
the sentences translated exactly. ``run_translation(seed)`` is that experiment;
``run_deep(norm_first, seed)`` trains §5.3's deep model without warm-up with the
norm after or before each sublayer, and ``run_norm_placement(seed)`` trains it both
ways, side by side on a CPU. The chapter calls them with seed 0 and asserts
the bounds its prose states; ``tests/test_experiments_translation.py`` asserts the
same bounds for other seeds.

A seed fixes everything random: ``set_seed(seed)`` before the model is built, the
training batches from ``Generator().manual_seed(seed + 1)``, the held-out sentences
from ``Generator().manual_seed(seed + 2)``.

Shape letters: B batch, N held-out sentences, S source positions, T target
positions, V vocabulary size, H heads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from .._parallel import map_runs
from .._validate import (
    check_compute_device,
    check_instance,
    check_int,
    check_real,
    check_seed,
    check_tensor,
)
from ..data import ToyTranslation, TranslationBatch
from ..device import set_seed
from ..models import EncoderDecoder, EncoderDecoderConfig
from ..train import noam_lr_lambda, sequence_accuracy, train

__all__ = [
    "TASK",
    "STEPS",
    "WARMUP",
    "SCALE",
    "COOLDOWN",
    "BATCH_SIZE",
    "LABEL_SMOOTHING",
    "translation_config",
    "smoothed_loss",
    "label_smoothing_floor",
    "translation_batches",
    "our_schedule",
    "train_translation",
    "TranslationRun",
    "cross_attention_shares",
    "run_translation",
    "run_deep",
    "run_norm_placement",
    "input_blind_loss",
]

TASK = ToyTranslation(n_words=10, min_len=3, max_len=8)  # the chapter's language pair
STEPS = 400  # training steps of run_translation
WARMUP = 60  # steps of linear warm-up; the paper: 4000 of 100,000
SCALE = 0.4  # multiplies the paper's formula: a peak rate of 9.1e-3 for d_model=32
COOLDOWN = 100  # the last steps, over which the rate falls linearly to zero
BATCH_SIZE = 128  # fresh sentence pairs per step
LABEL_SMOOTHING = 0.1  # the paper's epsilon_ls


def translation_config(task: ToyTranslation = TASK) -> EncoderDecoderConfig:
    """The chapter's model: the paper's architecture, a thousand times smaller."""
    check_instance("task", task, ToyTranslation)
    return EncoderDecoderConfig(
        vocab_size=task.vocab_size,  # 23: <pad> <s> </s>, 10 source, 10 target words
        max_len=task.max_len + 2,  # 10: <s>, up to 8 words, </s>
        d_model=32,  # the paper: 512
        n_heads=4,  # the paper: 8
        n_layers=2,  # N; the paper: 6
        d_ff=128,  # 4 * d_model
        dropout=0.0,  # the paper: 0.1; our task has endless fresh data
        norm_first=False,  # post-norm, as the paper
        pad_id=task.pad_id,
    )


def smoothed_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Cross-entropy with label smoothing 0.1; padding positions are left out.

    Shapes: logits (B, T, V), targets (B, T) -> scalar
    """
    _check_logits_targets(logits, targets)
    return F.cross_entropy(
        logits.transpose(1, 2),  # (B, T, V) -> (B, V, T), the layout it expects
        targets,
        ignore_index=ToyTranslation.pad_id,
        label_smoothing=LABEL_SMOOTHING,
    )


def label_smoothing_floor(vocab_size: int, eps: float = LABEL_SMOOTHING) -> float:
    """The lowest loss label smoothing allows: the entropy of the smoothed target.

    The target puts 1 - eps + eps / V on the right token and eps / V on each other.
    """
    check_int("vocab_size", vocab_size, minimum=2)
    check_real("eps", eps, 0.0, 1.0, low_open=True, high_open=True)
    p_right, p_other = 1 - eps + eps / vocab_size, eps / vocab_size
    return -(
        p_right * math.log(p_right) + (vocab_size - 1) * p_other * math.log(p_other)
    )


def translation_batches(
    task: ToyTranslation,
    batch_size: int,
    generator: torch.Generator,
    device: torch.device | str | None = None,
) -> Callable[[int], tuple[tuple[Tensor, Tensor], Tensor]]:
    """``get_batch(step)`` for ``train``: fresh training pairs, teacher-forced.

    Each call returns ((src (B, S), tgt[:, :-1] (B, T - 1)), tgt[:, 1:] (B, T - 1)).
    """
    check_instance("task", task, ToyTranslation)
    check_int("batch_size", batch_size, minimum=1)
    check_instance("generator", generator, torch.Generator)
    check_compute_device("device", device)

    def get_batch(step: int) -> tuple[tuple[Tensor, Tensor], Tensor]:
        return task.sample(
            batch_size, split="train", generator=generator, device=device
        ).teacher_forcing()

    return get_batch


def our_schedule(steps: int = STEPS) -> Callable[[int], float]:
    """The learning rate of step 0, 1, ...: the paper's warm-up schedule for our
    d_model, times ``SCALE``, then a linear fall to zero over the last ``COOLDOWN``
    steps, so that the weights settle before training ends."""
    check_int("steps", steps, minimum=1)
    noam = noam_lr_lambda(translation_config().d_model, WARMUP, SCALE)

    def lr_lambda(step: int) -> float:
        return noam(step) * min(1.0, (steps - step) / COOLDOWN)

    return lr_lambda


def train_translation(
    seed: int = 0,
    steps: int = STEPS,
    lr_lambda: Callable[[int], float] | None = None,
    device: torch.device | str | None = None,
) -> tuple[EncoderDecoder, dict]:
    """A fresh model trained for ``steps`` steps of ``BATCH_SIZE`` sentence pairs.

    ``lr_lambda(step)`` is the learning rate (default: ``our_schedule(steps)``).
    Returns the model and ``train``'s history.
    """
    check_seed("seed", seed)
    check_int("steps", steps, minimum=1)
    if lr_lambda is not None and not callable(lr_lambda):
        raise TypeError(f"lr_lambda must be callable or None, got {lr_lambda!r}")
    check_compute_device("device", device)
    if lr_lambda is None:
        lr_lambda = our_schedule(steps)
    set_seed(seed)
    model = EncoderDecoder(translation_config())
    batches = translation_batches(
        TASK, BATCH_SIZE, torch.Generator().manual_seed(seed + 1), device
    )
    history = train(
        model, batches, smoothed_loss, steps, lr=1.0, lr_lambda=lr_lambda, device=device
    )
    return model, history


@dataclass(frozen=True)
class TranslationRun:
    """What ``run_translation`` returns: the trained model and its measurements."""

    model: EncoderDecoder  # trained, in eval mode
    history: dict  # train's history: "loss" per step, "seconds"
    test: TranslationBatch  # the held-out sentence pairs
    predicted: Tensor  # (N, 1 + n) greedy translations, starting with <s>
    accuracy: float  # fraction of held-out sentences translated exactly
    final_loss: float  # mean training loss over the last 10 steps
    confidence: float  # mean probability of the right token, teacher-forced
    alignment: list[float]  # per decoder block: weight on the aligned source word
    eos_share: list[float]  # per decoder block: weight on the source's </s>


@torch.no_grad()
def cross_attention_shares(
    model: EncoderDecoder, batch: TranslationBatch
) -> tuple[list[float], list[float]]:
    """Per decoder block, mean over heads: the weight on the aligned source word
    (the source word that the predicted target word translates) and on ``</s>``.

    Shapes: batch.src (B, S), batch.tgt (B, T); averaged over the words of every
    sentence (the query that predicts target word j reads source word n - j).
    """
    check_instance("model", model, EncoderDecoder)
    check_instance("batch", batch, TranslationBatch)
    src, tgt_in = batch.src, batch.tgt[:, :-1]
    _, cross = model.decode(tgt_in, model.encode(src), src, need_weights=True)
    n = (src > TASK.eos_id).sum(dim=1)  # (B,) words per sentence
    q = torch.arange(tgt_in.shape[1], device=src.device)  # (T,) query positions
    is_word = q[None, :] < n[:, None]  # (B, T): queries that predict a word
    aligned = (n[:, None] - 1 - q[None, :]).clamp(min=0)  # (B, T) source position
    alignment, eos_share = [], []
    for weights in cross:  # (B, H, T, S) per block
        w = weights.mean(dim=1)  # (B, T, S)
        on_word = w.gather(2, aligned[..., None])[..., 0]  # (B, T)
        on_eos = w.gather(2, n[:, None, None].expand(-1, w.shape[1], 1))[..., 0]
        alignment.append(on_word[is_word].mean().item())
        eos_share.append(on_eos[is_word].mean().item())
    return alignment, eos_share


def run_translation(
    seed: int = 0,
    steps: int = STEPS,
    n_test: int = 1000,
    device: torch.device | str | None = None,
) -> TranslationRun:
    """§5.6: train with the warm-up schedule, then translate ``n_test`` held-out
    sentences greedily and measure what the chapter claims about the result."""
    check_seed("seed", seed)
    check_int("steps", steps, minimum=10)
    check_int("n_test", n_test, minimum=1)
    check_compute_device("device", device)
    model, history = train_translation(seed, steps, device=device)
    test = TASK.sample(
        n_test, "test", torch.Generator().manual_seed(seed + 2), device=device
    )
    predicted = model.greedy_decode(test.src, TASK.bos_id, TASK.eos_id)  # (N, 1 + n)
    with torch.no_grad():
        (src, tgt_in), tgt_out = test.teacher_forcing()
        probs = model(src, tgt_in).softmax(dim=-1)  # (N, T, V)
        right = probs.gather(2, tgt_out[..., None])[..., 0]  # (N, T)
        confidence = right[tgt_out != TASK.pad_id].mean().item()
    alignment, eos_share = cross_attention_shares(model, test)
    return TranslationRun(
        model=model,
        history=history,
        test=test,
        predicted=predicted,
        accuracy=sequence_accuracy(predicted, test.tgt, TASK.pad_id),
        final_loss=sum(history["loss"][-10:]) / 10,
        confidence=confidence,
        alignment=alignment,
        eos_share=eos_share,
    )


def run_deep(
    norm_first: bool,
    seed: int = 0,
    n_layers: int = 6,
    steps: int = 80,
    lr: float = 5e-3,
    device: torch.device | str | None = None,
) -> Tensor:
    """§5.3: the full model with ``n_layers`` + ``n_layers`` blocks, trained at a
    constant learning rate without warm-up and without label smoothing.

    Returns the training loss of every step, shape (steps,).
    """
    check_instance("norm_first", norm_first, bool)
    _check_deep(seed, n_layers, steps, lr, device)
    return _run_deep(norm_first, seed, n_layers, steps, lr, device)


def run_norm_placement(
    seed: int = 0,
    n_layers: int = 6,
    steps: int = 80,
    lr: float = 5e-3,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    """§5.3's comparison: :func:`run_deep` post-norm and pre-norm, the same seed.

    The two models share nothing, and each is too small to keep two threads busy,
    so on a CPU they train side by side, one thread each (``_parallel.map_runs``):
    the losses are those of ``run_deep`` on one thread.

    Returns (post-norm losses, pre-norm losses), each of shape (steps,).
    """
    _check_deep(seed, n_layers, steps, lr, device)
    jobs = [
        (norm_first, seed, n_layers, steps, lr, device) for norm_first in (False, True)
    ]
    post, pre = map_runs(_run_deep, jobs, device)
    return post, pre


def _check_deep(seed, n_layers, steps, lr, device) -> None:
    check_seed("seed", seed)
    check_int("n_layers", n_layers, minimum=1)
    check_int("steps", steps, minimum=10)
    check_real("lr", lr, 0.0, low_open=True)
    check_compute_device("device", device)


def _run_deep(
    norm_first: bool, seed: int, n_layers: int, steps: int, lr: float, device
) -> Tensor:
    """``run_deep`` after its checks: the model built, trained, its losses."""
    cfg = EncoderDecoderConfig(
        TASK.vocab_size,
        TASK.max_len + 2,
        d_model=32,
        n_heads=4,
        n_layers=n_layers,
        d_ff=128,
        norm_first=norm_first,
    )
    set_seed(seed)
    model = EncoderDecoder(cfg)
    gen = torch.Generator().manual_seed(seed + 1)
    history = train(
        model,
        lambda step: TASK.sample(32, generator=gen, device=device).teacher_forcing(),
        lambda logits, targets: F.cross_entropy(
            logits.transpose(1, 2), targets, ignore_index=TASK.pad_id
        ),
        steps=steps,
        lr=lr,
        device=device,
    )
    return torch.tensor(history["loss"])


def input_blind_loss(n: int = 5000, seed: int = 9) -> float:
    """The loss of a model that ignores its input: the entropy of the target tokens."""
    check_int("n", n, minimum=1)
    check_seed("seed", seed)
    tgt = TASK.sample(n, generator=torch.Generator().manual_seed(seed)).tgt[:, 1:]
    counts = torch.bincount(tgt.flatten(), minlength=TASK.vocab_size)[1:].double()
    p = counts / counts.sum()
    return -(p * p.clamp_min(1e-12).log()).sum().item()


def _check_logits_targets(logits: object, targets: object) -> None:
    """logits (B, T, V) float and targets (B, T) int of the same B and T."""
    check_tensor("logits", logits, "float")
    check_tensor("targets", targets, "int")
    if logits.dim() != 3 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have shape (B, T, V), got {tuple(logits.shape)}")
    if targets.shape != logits.shape[:2]:
        raise ValueError(
            f"targets must have shape (B, T) = {tuple(logits.shape[:2])} of logits, "
            f"got {tuple(targets.shape)}"
        )
    if logits.is_meta or targets.is_meta or logits.device != targets.device:
        raise ValueError(
            f"logits and targets must be on one device that holds values, got "
            f"{logits.device} and {targets.device}"
        )
