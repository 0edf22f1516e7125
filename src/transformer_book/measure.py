"""What Chapter 1 measures on recurrent networks and attention: how gradients
fade with distance, and how much memory training keeps; and the peak memory of a
call, with which Chapter 7 measures attention's O(T²).

:func:`jacobian_norms` and :func:`spectral_radius` answer "do gradients survive
T steps?"; :func:`saved_tensor_bytes` answers "what does the backward pass keep?".
They work on any module, the readable ones of :mod:`transformer_book.recurrent`
and PyTorch's alike.

Shape letters: B batch, T time steps, D input width, K outputs of ``fn``.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable

import torch
from torch import Tensor
from torch._C._profiler import _ExtraFields_Allocation

from ._validate import check_real, check_tensor

__all__ = [
    "jacobian_norms",
    "spectral_radius",
    "rescale_spectral_radius",
    "saved_tensor_bytes",
    "peak_memory",
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
    if weight.is_meta:
        raise ValueError("weight is on the meta device, which holds no values")
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
    if isinstance(exclude, Tensor | str) or not isinstance(exclude, Iterable):
        raise TypeError(
            f"exclude must be an iterable of tensors, got {type(exclude).__name__}"
        )
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


# Chapter 7: how the memory of attention grows with T.

# What PyTorch's native code writes to the process's stderr (file descriptor 2), which
# a Jupyter kernel forwards into the notebook, under the cell, in red: log lines, which
# begin with a level and a timestamp. Kineto (the profiler) writes
#   ERROR:2026-08-19 12:00:00 4242:4242 DeviceProperties.cpp:48] gpuGetDeviceCount ...
# (levels V, INFO, WARNING, ERROR, STAGE, USDT: its start and stop lines, and on a CUDA
# build of torch without a GPU, e.g. in Colab, its failed look for one); c10 writes
#   [W819 12:00:00.123456789 CPUAllocator.cpp:245] Memory block of unknown size ...
# (or, built with glog, the same without the bracket and with a thread id). None of
# it is the book's, and none of it tells the reader anything about fn. A Python warning
# (file.py:12: UserWarning: ...) or anything else fn writes does not match, and shows.
_PROFILER_NOISE = re.compile(
    r"^(?:[A-Z?]+:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ "  # Kineto
    r"|\[?[FEWIV]\d{3,4} \d\d:\d\d:\d\d\.\d+ (?:\d+ )?)"  # c10 (or glog)
    r"\S+:\d+\] "  # the source file and line
)


def peak_memory(fn: Callable[..., object], *args: object, **kwargs: object) -> int:
    """Peak bytes of tensor memory that ``fn(*args, **kwargs)`` holds while it runs.

    Chapter 7 measures with it that attention written out keeps T x T scores (peak
    memory grows as T^2) while the fused and blockwise ones never do (it grows as T).

    On the CPU it counts the tensors that PyTorch's CPU allocator hands out while
    ``fn`` runs, each with its exact size in bytes: PyTorch's profiler
    (``torch.autograd.profiler.profile(profile_memory=True)``) reports every
    allocation and every free with its address, and a running sum over them, in
    time order, reaches the peak. Only memory that ``fn`` itself allocates is
    counted: what existed before the call counts as zero, and freeing it does not
    lower the count. The profiler watches the thread that calls ``fn`` (a backward
    pass included), not threads that ``fn`` starts. Python objects, NumPy arrays
    and libraries' own buffers (a BLAS workspace) are not tensors and are not
    counted; a Python number in an operation is (``x + 1`` makes a 0-d tensor).

    On a GPU, if CUDA is in use by the end of the call, the peak of
    ``torch.cuda.max_memory_allocated`` (the current device) above what was
    allocated before is measured too, and the larger of the two is returned; this
    resets CUDA's peak statistics. The caching allocator rounds blocks up (to 512
    bytes), and counts them as allocated until freed, whatever it caches.

    Overhead: recording each operator and its allocations, then reading them back,
    costs about 0.1 ms per operator, which only loops of small operators notice;
    one fused attention call at T = 8192 takes as long as without it. ``fn`` runs once
    and its result is dropped. What the profiler prints to stderr is kept out of
    the notebook.
    """
    _check_callable("fn", fn)
    cuda_before = 0
    if _cuda_in_use():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        cuda_before = torch.cuda.memory_allocated()
    # One profiler at a time: a call inside another's fn pauses the outer
    # recording, records its own, and hands its allocations on to the outer one,
    # which then resumes (an outer profiler left running would record nothing).
    outer = _RECORDINGS[-1] if _RECORDINGS else None
    if outer is not None:
        outer.stop()
    recording = _Recording()
    _RECORDINGS.append(recording)
    try:
        with _profiler_logs_hidden():
            recording.start()
            try:
                fn(*args, **kwargs)
            finally:
                recording.stop()
    finally:
        _RECORDINGS.pop()
        if outer is not None:
            outer.allocations += recording.allocations
            outer.start()
    peak = _peak_of_allocations(recording.allocations)
    if _cuda_in_use():  # since before the call, or started by fn: its peak is fresh
        torch.cuda.synchronize()
        peak = max(peak, torch.cuda.max_memory_allocated() - cuda_before)
    return peak


class _Recording:
    """The CPU allocations of one ``peak_memory`` call, over one or more profiler
    sessions (paused while a nested call records its own)."""

    def __init__(self):
        self.allocations: list[tuple[int, int, int]] = []  # (time, bytes, address)
        self.profiler = None

    def start(self) -> None:
        # torch.autograd.profiler rather than torch.profiler: the latter imports
        # torch._inductor on its first start (seconds), which memory does not need.
        self.profiler = torch.autograd.profiler.profile(profile_memory=True)
        self.profiler.__enter__()

    def stop(self) -> None:
        if self.profiler is None:
            return
        self.profiler.__exit__(None, None, None)
        tree = self.profiler.kineto_results.experimental_event_tree()
        self.allocations += _allocations(tree)
        self.profiler = None


_RECORDINGS: list[_Recording] = []  # the peak_memory calls running, outermost first


def _cuda_in_use() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def _allocations(roots: list) -> list[tuple[int, int, int]]:
    """(time, bytes, address) of every CPU allocation (bytes > 0) and free
    (bytes < 0) in a profiler's event tree."""
    allocations, stack = [], list(roots)
    while stack:  # the tree nests allocations inside operators: flatten it
        event = stack.pop()
        stack.extend(event.children)
        fields = event.extra_fields
        if isinstance(fields, _ExtraFields_Allocation) and fields.device.type == "cpu":
            allocations.append((event.start_time_ns, fields.alloc_size, fields.ptr))
    return allocations


def _peak_of_allocations(allocations: list[tuple[int, int, int]]) -> int:
    """The largest running sum of the allocations, in time order.

    A free counts only if its allocation was seen: blocks made before the profiler
    started are not ours (and their sizes are unknown to it).
    """
    live: dict[int, int] = {}  # address -> bytes, of the blocks allocated here
    current = peak = 0
    for _, size, ptr in sorted(allocations, key=lambda a: a[0]):  # time order
        if size > 0:
            live[ptr] = size
            current += size
            peak = max(peak, current)
        elif ptr in live:
            current -= live.pop(ptr)
    return peak


@contextlib.contextmanager
def _profiler_logs_hidden():
    """Send stderr (fd 2) to a file meanwhile, then pass on all but profiler noise.

    Kineto and c10 write their logs from C++, below ``sys.stderr``; a Jupyter
    kernel forwards that file descriptor into the cell's output, with timestamps.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, AttributeError, ValueError):  # no stderr to redirect
        yield
        return
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, AttributeError, ValueError):
                sys.stderr.flush()  # Python's own writes to fd 2 go to the log too
            os.dup2(saved, 2)
            os.close(saved)
            log.seek(0)
            lines = log.read().decode(errors="replace").splitlines(keepends=True)
            kept = "".join(line for line in lines if not _PROFILER_NOISE.search(line))
            if kept:
                sys.stderr.write(kept)
