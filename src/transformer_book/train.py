"""A short training loop that returns its history (shown in Chapter 1, §1.4).

No trainer classes, no callbacks: ``train`` runs AdamW for a number of steps on
batches drawn from a function and returns the losses; plotting is separate. On a
GPU the same call runs under bfloat16 autocast.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import torch
from torch import Tensor, nn

from ._validate import (
    check_compute_device,
    check_has_values,
    check_int,
    check_real,
    check_tensor,
)
from .device import autocast

__all__ = [
    "train",
    "accuracy",
    "progress_enabled",
    "noam_lr_lambda",
    "sequence_accuracy",
]

Batch = tuple[Tensor | tuple[Tensor, ...], Tensor]


def progress_enabled() -> bool:
    """Progress bars are shown unless ``CI`` or ``TRANSFORMER_BOOK_QUIET`` is set.

    ``make execute`` and the tests set the latter, so committed notebooks hold no
    progress bars, while a reader in Jupyter or Colab sees them.
    """
    return not (os.environ.get("CI") or os.environ.get("TRANSFORMER_BOOK_QUIET"))


def _to(x, device: torch.device):
    if isinstance(x, Tensor):
        return x.to(device)
    return tuple(t.to(device) for t in x)


def _check_train_arguments(
    model, get_batch, loss_fn, steps, lr, weight_decay, lr_lambda, max_grad_norm, device
) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not any(True for _ in model.parameters()):
        raise ValueError("model has no parameters to train")
    for name, fn in (("get_batch", get_batch), ("loss_fn", loss_fn)):
        if not callable(fn):
            raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
    if lr_lambda is not None and not callable(lr_lambda):
        raise TypeError(f"lr_lambda must be callable, got {type(lr_lambda).__name__}")
    check_int("steps", steps, minimum=1)
    check_real("lr", lr, low=0.0)
    check_real("weight_decay", weight_decay, low=0.0)
    if max_grad_norm is not None:
        check_real("max_grad_norm", max_grad_norm, low=0.0, low_open=True)
    check_compute_device("device", device)


def _check_batch(step: int, batch: object) -> None:
    """``get_batch(step)`` returned (inputs, targets), all tensors."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError(
            f"get_batch({step}) must return (inputs, targets), got "
            f"{type(batch).__name__}"
        )
    inputs, targets = batch
    check_tensor(f"the targets of get_batch({step})", targets)
    if isinstance(inputs, (tuple, list)):
        for i, t in enumerate(inputs):
            check_tensor(f"inputs[{i}] of get_batch({step})", t)
    else:
        check_tensor(f"the inputs of get_batch({step})", inputs)


def train(
    model: nn.Module,
    get_batch: Callable[[int], Batch],
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    steps: int,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    lr_lambda: Callable[[int], float] | None = None,
    max_grad_norm: float | None = 1.0,
    device: torch.device | str | None = None,
    progress: bool | None = None,
) -> dict[str, list[float] | float]:
    """Train ``model`` with AdamW for ``steps`` steps and return its history.

    ``get_batch(step)`` returns ``(inputs, targets)``; ``inputs`` is a tensor or a
    tuple of tensors passed to ``model(*inputs)``. ``loss_fn(model_output, targets)``
    returns a scalar. ``lr_lambda(step)`` multiplies ``lr`` (e.g. a warm-up).

    Returns ``{"step": [...], "loss": [...], "seconds": total}`` with the loss of
    every step.
    """
    _check_train_arguments(
        model,
        get_batch,
        loss_fn,
        steps,
        lr,
        weight_decay,
        lr_lambda,
        max_grad_norm,
        device,
    )
    device = (
        torch.device(device) if device is not None else next(model.parameters()).device
    )
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = (
        torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda) if lr_lambda else None
    )
    history: dict[str, list[float] | float] = {"step": [], "loss": []}
    show = progress_enabled() if progress is None else progress
    bar = None
    if show:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, desc="training", leave=False)
    start = time.perf_counter()
    for step in range(steps):
        batch = get_batch(step)
        _check_batch(step, batch)
        inputs, targets = batch
        inputs, targets = _to(inputs, device), targets.to(device)
        with autocast(device):
            output = model(*inputs) if isinstance(inputs, tuple) else model(inputs)
            check_tensor("the model's output", output, "float")
            loss = loss_fn(output.float(), targets)
        if not isinstance(loss, Tensor) or loss.dim() != 0:
            shape = tuple(loss.shape) if isinstance(loss, Tensor) else type(loss)
            raise ValueError(f"loss_fn must return a scalar tensor, got {shape}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if max_grad_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        history["step"].append(step)
        history["loss"].append(loss.item())
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    if bar is not None:
        bar.close()
    history["seconds"] = time.perf_counter() - start
    model.eval()
    return history


@torch.no_grad()
def accuracy(logits: Tensor, targets: Tensor, ignore_index: int | None = None) -> float:
    """Fraction of positions whose arg-max prediction equals the target.

    Shapes: logits (..., V), targets (...). Positions whose target equals
    ``ignore_index`` are left out.
    """
    check_tensor("logits", logits)
    check_tensor("targets", targets, "int")
    check_has_values("logits", logits)
    check_has_values("targets", targets)
    if logits.dim() < 1 or logits.shape[-1] < 1 or logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} "
            "do not match: logits must be (..., V) with targets (...)"
        )
    if ignore_index is not None:
        check_int("ignore_index", ignore_index)
    correct = logits.argmax(dim=-1) == targets
    if ignore_index is not None:
        keep = targets != ignore_index
        n_kept = keep.sum().item()
        if n_kept == 0:
            raise ValueError(
                f"no position to score: every target equals ignore_index="
                f"{ignore_index} (or targets is empty)"
            )
        return (correct & keep).sum().item() / n_kept
    if targets.numel() == 0:
        raise ValueError(f"no position to score: targets {tuple(targets.shape)}")
    return correct.float().mean().item()


def noam_lr_lambda(
    d_model: int, warmup: int, scale: float = 1.0
) -> Callable[[int], float]:
    """The warm-up schedule of Vaswani et al. (2017), §5.3, for ``train``'s lr_lambda.

    lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

    The rate grows linearly for ``warmup`` steps, peaks at
    ``scale * (d_model * warmup)^-0.5``, then decays as 1/sqrt(step). Steps count
    from 1 (PyTorch's ``LambdaLR`` asks for step 0 first). Pass ``lr=1.0`` to
    ``train`` so that the returned value is the learning rate itself.
    """
    check_int("d_model", d_model, minimum=1)
    check_int("warmup", warmup, minimum=1)
    check_real("scale", scale, low=0.0, low_open=True)

    def lr_lambda(step: int) -> float:
        step += 1
        return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)

    return lr_lambda


@torch.no_grad()
def sequence_accuracy(predicted: Tensor, targets: Tensor, pad_id: int) -> float:
    """Fraction of sequences predicted exactly, every token right (padding ignored).

    Shapes: predicted (B, T1), targets (B, T2) token ids; the shorter one is padded
    with ``pad_id`` so lengths may differ (a decoder may stop early or run on).
    """
    check_tensor("predicted", predicted, "int")
    check_tensor("targets", targets, "int")
    check_has_values("predicted", predicted)
    check_has_values("targets", targets)
    check_int("pad_id", pad_id)
    if predicted.dim() != 2 or targets.dim() != 2 or len(predicted) != len(targets):
        raise ValueError(
            f"predicted {tuple(predicted.shape)} and targets {tuple(targets.shape)} "
            "must be (B, T) with the same B"
        )
    if len(targets) == 0:
        raise ValueError(f"no sequence to score: targets {tuple(targets.shape)}")
    length = max(predicted.shape[1], targets.shape[1])
    pad = torch.nn.functional.pad
    predicted = pad(predicted, (0, length - predicted.shape[1]), value=pad_id)
    targets = pad(targets, (0, length - targets.shape[1]), value=pad_id)
    return (predicted == targets).all(dim=1).float().mean().item()
