"""What Chapter 1 measures on recurrent networks and attention: how gradients
fade with distance, and how much memory training keeps.

:func:`jacobian_norms` and :func:`spectral_radius` answer "do gradients survive
T steps?"; :func:`saved_tensor_bytes` answers "what does the backward pass keep?".
They work on any module, the readable ones of :mod:`transformer_book.recurrent`
and PyTorch's alike.

Shape letters: B batch, T time steps, D input width, K outputs of ``fn``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor

from ._validate import check_real, check_tensor

__all__ = [
    "jacobian_norms",
    "spectral_radius",
    "rescale_spectral_radius",
    "saved_tensor_bytes",
]


def jacobian_norms(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """||dy/dx_t||_F for every time step t, averaged over the batch, y = fn(x).

    ``fn`` maps a batch of sequences to one vector per sequence, e.g. the last
    hidden state; it must not mix the rows of the batch. One backward pass per
    output unit builds the whole (K, D) Jacobian of each step. Use float64 to
    measure norms below float32's range (about 1e-38).

    Shapes: x: (B, T, D); fn(x): (B, K); returns (T,)
    """
    _check_callable("fn", fn)
    check_tensor("x", x, "float")
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, D), got {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"x has an empty batch: shape {tuple(x.shape)}")
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        y = fn(x)
        check_tensor("fn(x)", y, "float")
        if y.dim() != 2 or y.shape[0] != x.shape[0]:
            raise ValueError(
                f"fn(x) must have shape (B={x.shape[0]}, K), got {tuple(y.shape)}"
            )
        squares = torch.zeros(x.shape[:2], dtype=x.dtype, device=x.device)  # (B, T)
        for k in range(y.shape[1]):
            (grad,) = torch.autograd.grad(y[:, k].sum(), x, retain_graph=True)
            squares += grad.pow(2).sum(dim=-1)  # (B, T, D) -> (B, T)
    return squares.sqrt().mean(dim=0)  # (B, T) -> (T,)


def spectral_radius(weight: Tensor) -> float:
    """max |lambda| over the eigenvalues lambda of a square matrix.

    For a linear RNN, h_T depends on h_t through W^(T-t), whose norm grows or
    shrinks like spectral_radius(W)^(T-t).
    """
    check_tensor("weight", weight, "float")
    if weight.dim() != 2 or weight.shape[0] != weight.shape[1] or not weight.numel():
        raise ValueError(
            f"weight must be a non-empty square matrix, got {tuple(weight.shape)}"
        )
    weight = weight.detach().double().cpu()
    if not torch.isfinite(weight).all():
        raise ValueError("weight holds NaN or inf: it has no spectral radius")
    eigenvalues = torch.linalg.eigvals(weight)
    return eigenvalues.abs().max().item()


def rescale_spectral_radius(weight: Tensor, radius: float) -> Tensor:
    """``weight`` scaled so that its spectral radius equals ``radius``."""
    radius = check_real("radius", radius, low=0.0)
    current = spectral_radius(weight)
    if current == 0.0:
        raise ValueError("weight has spectral radius 0 and cannot be rescaled")
    return weight * (radius / current)


def saved_tensor_bytes(
    fn: Callable[..., object], *args: object, exclude: Iterable[Tensor] = ()
) -> int:
    """Bytes that autograd keeps for the backward pass while ``fn(*args)`` runs.

    Each tensor storage is counted once. Tensors in ``exclude`` (typically the
    parameters and the input, which exist anyway) are not counted. This is the
    activation memory that training needs on top of the model itself.
    """
    _check_callable("fn", fn)
    exclude = list(exclude)
    for i, t in enumerate(exclude):
        check_tensor(f"exclude[{i}]", t)
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    kept: dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in skip:
            kept[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, _unpack):
        fn(*args)
    return sum(kept.values())


def _unpack(t: Tensor) -> Tensor:
    return t


def _check_callable(name: str, fn: object) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
