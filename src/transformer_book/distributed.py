"""More than one process: data-parallel training with ``torch.distributed``
(Chapter 7).

Data parallelism copies the whole model into every process and splits each batch
between them. Process r computes the loss and the gradients of its own shard, the
processes then **all-reduce** the gradients (sum them over the processes and
divide by their number), and every process takes the same optimizer step, so the
copies never drift apart. With N equal shards the mean of the shard means is the
mean over the whole batch,

    L = (1/N) sum_r L_r,   so   dL/dw = (1/N) sum_r dL_r/dw,

which is exactly what ``DistributedDataParallel`` computes: one step on N
processes equals one step of one process on the whole batch, up to rounding.
``ddp_step`` runs it with the gloo backend (CPU tensors) on processes of this
machine; ``single_process_step`` runs the same step, the same code, in one.

On Linux the processes are forked: each is a copy of this process, imported torch
included, and starts in milliseconds. Elsewhere (macOS, Windows) they are spawned:
each starts a fresh Python that imports this package, which takes seconds. So that
the same call works everywhere, the model and the loss must be functions of a
module (this package's, or a ``.py`` file's), not of a notebook, e.g.
``functools.partial(GPT, GPTConfig(vocab_size=50, max_len=16))``, and a script must
call ``ddp_step`` under ``if __name__ == "__main__":``, since spawn runs the
script's top level again in every process; a notebook needs nothing.

Shape letters: B global batch, b = B / N rows per process, T positions,
V ``vocab_size``.
"""

from __future__ import annotations

import datetime
import os
import pickle
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from ._parallel import can_fork
from ._validate import check_int, check_real, check_seed, check_tensor
from .models import GPT, GPTConfig

__all__ = [
    "StepResult",
    "TINY_GPT",
    "tiny_gpt",
    "token_batch",
    "next_token_loss",
    "ddp_step",
    "single_process_step",
]

TINY_GPT = GPTConfig(vocab_size=32, max_len=16, d_model=32, n_heads=2, n_layers=2)


@dataclass
class StepResult:
    """What one training step did: the loss before it, the gradients, new weights."""

    loss: float  # mean loss over the whole batch, before the step
    shard_losses: list[float]  # each process's mean loss over its own shard
    grads: dict[str, Tensor]  # every parameter's gradient, after the all-reduce
    params: dict[str, Tensor]  # every parameter after the optimizer step
    replica_difference: float  # largest |difference| of a parameter between processes


def tiny_gpt() -> GPT:
    """The default model: Chapter 6's GPT at ``TINY_GPT``'s size (43,648 weights)."""
    return GPT(TINY_GPT)


def token_batch(
    batch_size: int = 8, seed: int = 0, cfg: GPTConfig = TINY_GPT
) -> Tensor:
    """Random token ids, one position longer than the model reads (the targets).

    Shapes: returns (B, T + 1) with T = cfg.max_len
    """
    batch_size = check_int("batch_size", batch_size, 1)
    seed = check_int("seed", seed, 0)
    if not isinstance(cfg, GPTConfig):
        raise TypeError(f"cfg must be a GPTConfig, got {type(cfg).__name__}")
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(cfg.vocab_size, (batch_size, cfg.max_len + 1), generator=gen)


def next_token_loss(model: nn.Module, batch: Tensor) -> Tensor:
    """Cross-entropy of every next token, averaged over all of them.

    Shapes: batch (b, T + 1) token ids -> a scalar
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    _check_token_batch(batch)
    inputs, targets = batch[:, :-1], batch[:, 1:]  # (b, T + 1) -> 2 x (b, T)
    logits = model(inputs)  # (b, T) -> (b, T, V)
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())  # (b*T, V)


def single_process_step(
    model_fn: Callable[[], nn.Module] = tiny_gpt,
    batch: Tensor | None = None,
    lr: float = 0.1,
    seed: int = 0,
    loss_fn: Callable[[nn.Module, Tensor], Tensor] = next_token_loss,
    dtype: torch.dtype = torch.float32,
) -> StepResult:
    """One SGD step of one process on the whole batch: the reference for ``ddp_step``.

    The model is ``model_fn()`` built after ``torch.manual_seed(seed)``, in ``dtype``.

    Shapes: batch (B, ...), by default ``token_batch()``: (8, 17)
    """
    batch = _check_step("single_process_step", model_fn, batch, 1, lr, seed, loss_fn)
    _check_dtype(dtype)
    model = _build(model_fn, seed, dtype)
    loss, grads, params = _step(model, model, loss_fn, batch, lr)
    return StepResult(loss, [loss], grads, params, 0.0)


def ddp_step(
    model_fn: Callable[[], nn.Module] = tiny_gpt,
    batch: Tensor | None = None,
    world_size: int = 2,
    lr: float = 0.1,
    seed: int = 0,
    loss_fn: Callable[[nn.Module, Tensor], Tensor] = next_token_loss,
    dtype: torch.dtype = torch.float32,
    timeout: float = 120.0,
) -> StepResult:
    """The same SGD step on ``world_size`` processes with DistributedDataParallel.

    Every process builds ``model_fn()`` from the same seed, wraps it in DDP (gloo
    backend, one thread each), and takes rows ``rank::world_size`` of the batch
    (as ``DistributedSampler`` would). Its backward pass all-reduces the
    gradients; every process then steps. Returned: process 0's gradients and new
    weights, the global loss (the mean of the shard losses) and how far the
    processes' weights differ (0.0: they stay identical). The rendezvous is a free
    port of 127.0.0.1; a process that fails raises its error here, and one that
    hangs is ended after ``timeout`` seconds (spawning, off Linux, takes a few).

    Shapes: batch (B, ...), B divisible by world_size; each process gets (B/N, ...)
    """
    world_size = check_int("world_size", world_size, 1)
    batch = _check_step("ddp_step", model_fn, batch, world_size, lr, seed, loss_fn)
    _check_dtype(dtype)
    timeout = check_real("timeout", timeout, 0.0, low_open=True)
    with tempfile.TemporaryDirectory(prefix="ddp_step_") as out_dir:
        args = (world_size, _free_port(), model_fn, loss_fn, batch, lr, seed, dtype)
        context = mp.start_processes(
            _ddp_worker,
            args=(*args, timeout, out_dir),
            nprocs=world_size,
            join=False,
            start_method="fork" if can_fork("cpu") else "spawn",
        )
        deadline = time.monotonic() + timeout
        try:  # join raises the first failed process's error, with its traceback
            while not context.join(timeout=0.05):
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"ddp_step: the {world_size} processes did not finish within "
                        f"timeout={timeout} s"
                    )
        finally:
            for process in context.processes:  # none outlives the call
                if process.is_alive():
                    process.kill()
                    process.join()
        ranks = [
            torch.load(os.path.join(out_dir, f"rank{r}.pt"), weights_only=True)
            for r in range(world_size)
        ]
    difference = max(
        (rank["params"][name] - ranks[0]["params"][name]).abs().max().item()
        for rank in ranks
        for name in ranks[0]["params"]
    )
    shard_losses = [rank["loss"] for rank in ranks]
    return StepResult(
        loss=sum(shard_losses) / world_size,
        shard_losses=shard_losses,
        grads=ranks[0]["grads"],
        params=ranks[0]["params"],
        replica_difference=difference,
    )


def _ddp_worker(rank: int, world_size: int, port: int, *job) -> None:
    """One process of ``ddp_step`` (top-level, so that a spawned one can import it)."""
    model_fn, loss_fn, batch, lr, seed, dtype, timeout, out_dir = job
    torch.set_num_threads(1)  # N processes share the CPU's cores
    loopback = _loopback_interface()
    if loopback is not None:  # in this process only: every rank is on this machine
        os.environ.setdefault("GLOO_SOCKET_IFNAME", loopback)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout),
    )
    try:
        model = _build(model_fn, seed, dtype)
        ddp = DistributedDataParallel(model)  # broadcasts process 0's weights too
        shard = batch[rank::world_size]  # (B, ...) -> (B/N, ...)
        loss, grads, params = _step(ddp, model, loss_fn, shard, lr)
        result = {"loss": loss, "grads": grads, "params": params}
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _step(run: nn.Module, model: nn.Module, loss_fn, batch: Tensor, lr: float):
    """Forward and backward through ``run`` (the model or its DDP wrapper), then SGD.

    Returns the loss, the gradients and the new parameters of ``model``, by name.
    """
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loss = loss_fn(run, batch)
    loss.backward()  # under DDP, the gradients are all-reduced (averaged) here
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    optimizer.step()
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    return loss.item(), grads, params


def _build(model_fn, seed: int, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(seed)
    model = model_fn()
    if not isinstance(model, nn.Module):
        raise TypeError(f"model_fn() must return an nn.Module, got {type(model)}")
    return model.to(dtype)


def _check_step(caller, model_fn, batch, world_size, lr, seed, loss_fn) -> Tensor:
    """The arguments both steps share; returns the batch (the default if None)."""
    for name, fn in (("model_fn", model_fn), ("loss_fn", loss_fn)):
        if not callable(fn):
            raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
        if caller == "ddp_step":
            _check_importable(name, fn)
    check_real("lr", lr, 0.0, low_open=True)
    check_seed("seed", seed)
    batch = token_batch() if batch is None else batch
    check_tensor("batch", batch)
    if batch.dim() == 0 or batch.shape[0] == 0 or batch.shape[0] % world_size:
        raise ValueError(
            f"batch of shape {tuple(batch.shape)} does not split into world_size="
            f"{world_size} equal, non-empty shards: its first dimension must be a "
            "positive multiple of world_size"
        )
    if batch.device.type != "cpu":
        raise ValueError(f"batch must be on the CPU (gloo), got {batch.device}")
    if loss_fn is next_token_loss:  # its check here, not in another process
        _check_token_batch(batch)
    return batch


def _check_token_batch(batch: object) -> None:
    """A (b, T + 1) integer tensor of token ids, T >= 1, with values to read."""
    check_tensor("batch", batch, "int")
    if batch.dim() != 2 or batch.shape[1] < 2 or batch.shape[0] < 1:
        raise ValueError(
            f"batch must have shape (b, T + 1) of token ids with b >= 1 and T >= 1, "
            f"got {tuple(batch.shape)}"
        )
    if batch.is_meta:
        raise ValueError("batch is on the meta device, which holds no values")


def _check_importable(name: str, fn: object) -> None:
    """A spawned process (off Linux) receives ``fn`` by name: it must be importable
    there, and is held to it everywhere, so that a call works on every system."""
    try:
        payload = pickle.dumps(fn)
    except (pickle.PicklingError, TypeError, AttributeError) as err:
        raise TypeError(
            f"{name} cannot be sent to another process ({err}): use a function "
            "defined at the top of a module, or functools.partial of one"
        ) from None
    if b"__main__" in payload and not hasattr(sys.modules["__main__"], "__file__"):
        raise ValueError(
            f"{name} is defined in this notebook or shell, which a spawned process "
            "cannot import: define it in a .py file, or use the package's, e.g. "
            "functools.partial(GPT, GPTConfig(vocab_size=50, max_len=16))"
        )


def _check_dtype(dtype: object) -> None:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")


def _free_port() -> int:
    """A TCP port of 127.0.0.1 that no one uses now (the system picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _loopback_interface() -> str | None:
    """The loopback interface's name ("lo" on Linux, "lo0" on macOS), for gloo.

    Without it gloo looks up the machine's hostname, which on some machines does not
    resolve to a local address. Windows names its interfaces otherwise: None there.
    """
    if sys.platform == "win32":
        return None
    names = [name for _, name in socket.if_nameindex() if name.startswith("lo")]
    return names[0] if names else None
