"""Independent runs side by side, one process per core (Chapter 7).

An experiment often trains several small models that share nothing but their data:
one per kind of attention, one per number of key/value heads. Chapter 7 trains each
on one thread, so on a 2-core CPU the second core would idle. ``map_runs`` runs them
in worker processes instead, as many at a time as there are cores, and returns
exactly what running them one after another returns: every run seeds itself, and a
worker runs one thread, as the caller does, so the arithmetic is the same.

The workers are forked: a fork is a copy of the calling process, imported torch
included, so a worker starts in milliseconds (a spawned one would spend seconds
importing torch). Where forking is not safe the runs go one after another: off Linux
(macOS's system libraries do not survive a fork; Windows cannot fork), on a device
other than the CPU (a forked process cannot use CUDA), once CUDA has been set up in
the caller, inside a worker, or with one core. So do runs in a caller that uses more
than one thread: a forked copy of a process whose OpenMP threads have run hangs at
its first parallel region, and runs on one thread would not compute what the caller
computes.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence

import torch

__all__: list[str] = []  # an implementation detail of the experiments


def _worker_init() -> None:
    torch.set_num_threads(1)  # as the caller: the same arithmetic
    os.environ["TRANSFORMER_BOOK_QUIET"] = "1"  # no interleaved progress bars


def can_fork(device: torch.device | str | None) -> bool:
    """Whether work on ``device`` may go to forked processes (see the module)."""
    return (
        sys.platform.startswith("linux")
        and torch.device(device or "cpu").type == "cpu"
        and not torch.cuda.is_initialized()
        and not multiprocessing.current_process().daemon
    )


def map_runs(
    run: Callable, jobs: Sequence[tuple], device: torch.device | str | None
) -> list:
    """``[run(*job) for job in jobs]``, the jobs side by side where the CPU allows.

    ``run`` must be a function of a module and its jobs' arguments and results
    picklable (they travel between processes). Results come back in the jobs' order;
    an exception in a run is raised here.
    """
    jobs = list(jobs)
    workers = min(len(jobs), os.cpu_count() or 1)
    if workers < 2 or torch.get_num_threads() != 1 or not can_fork(device):
        return [run(*job) for job in jobs]
    context = multiprocessing.get_context("fork")
    with context.Pool(workers, _worker_init) as pool:
        return pool.starmap(run, jobs, chunksize=1)
