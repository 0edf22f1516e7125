"""Independent runs side by side, one process per core, each on one thread.

An experiment often trains several small models that share nothing but their data:
one per kind of attention, one per number of key/value heads, one per size. A small
model keeps two threads only partly busy (on a 2-core CPU, Chapter 8's from-scratch
classifiers train 1.25 times as fast on two threads as on one), while two processes of
one thread each keep both cores busy. ``map_runs`` runs them in worker processes, as
many at a time as there are cores, each on one thread.

Every run computes on one thread wherever it runs, so the results do not depend on the
machine's number of cores or on where the runs went: bit for bit, they are what the
runs return one after another on one thread. Where the runs cannot go to workers they
do exactly that, here: off Linux (macOS's system libraries do not survive a fork;
Windows cannot fork), on a device other than the CPU (a forked process cannot use
CUDA), once CUDA has been set up in this process, inside a worker, with one core, or
where $TRANSFORMER_BOOK_WORKERS is 1 (``max_workers``).
On a CPU, torch's threads are set to one for their duration and then restored.

The workers are forked: a fork is a copy of the calling process, imported torch
included, so a worker starts in milliseconds (a spawned one would spend seconds
importing torch). A forked copy of a process whose OpenMP threads have run is safe
as long as it runs no parallel region on more than one thread, which is why a worker
sets its threads to one before anything else.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence

import torch

__all__: list[str] = []  # an implementation detail of the experiments


# What the forked workers run: set just before the fork, so a worker inherits it and
# nothing but indices and results travel between the processes
_TASK: tuple[Callable[[int], object], Callable[[], None] | None] | None = None


def _worker_init() -> None:
    torch.set_num_threads(1)  # first: one thread, the arithmetic of every run
    os.environ["TRANSFORMER_BOOK_QUIET"] = "1"  # no interleaved progress bars
    if _TASK is not None and _TASK[1] is not None:
        _TASK[1]()


def _call(index: int) -> object:
    return _TASK[0](index)


def can_fork(device: torch.device | str | None) -> bool:
    """Whether work on ``device`` may go to forked processes (see the module)."""
    return (
        sys.platform.startswith("linux")
        and torch.device(device or "cpu").type == "cpu"
        and not torch.cuda.is_initialized()
        and not multiprocessing.current_process().daemon
    )


WORKERS_VARIABLE = "TRANSFORMER_BOOK_WORKERS"


def max_workers() -> int:
    """The most worker processes at a time: $TRANSFORMER_BOOK_WORKERS where it is set
    (1 keeps every run in this process: the test stages that already run two
    notebooks at a time set it, so that two cores do not get four busy processes),
    else no limit beyond the cores."""
    value = os.environ.get(WORKERS_VARIABLE)
    if value is None:
        return os.cpu_count() or 1
    if not value.isdigit() or int(value) < 1:
        raise ValueError(
            f"{WORKERS_VARIABLE} must be a positive integer, got {value!r}"
        )
    return int(value)


def map_forked(
    task: Callable[[int], object],
    n: int,
    init: Callable[[], None] | None = None,
) -> list | None:
    """``[task(i) for i in range(n)]`` in forked workers on one thread each, as many
    at a time as there are cores (at most ``max_workers()``); None where that cannot
    be (``n`` < 2, one core or one worker allowed, or not ``can_fork("cpu")``), and
    the caller runs the tasks itself.

    ``task`` is not pickled: the workers inherit it, so a closure or a notebook's
    function will do; its results must be picklable. ``init`` runs first in every
    worker. An exception in a task is raised here.
    """
    global _TASK
    workers = min(n, os.cpu_count() or 1, max_workers())
    if workers < 2 or not can_fork("cpu"):
        return None
    _TASK = (task, init)
    try:
        context = multiprocessing.get_context("fork")
        with context.Pool(workers, _worker_init) as pool:
            return pool.map(_call, range(n), chunksize=1)
    finally:
        _TASK = None


def map_runs(
    run: Callable, jobs: Sequence[tuple], device: torch.device | str | None
) -> list:
    """``[run(*job) for job in jobs]`` on one thread, side by side where the CPU allows.

    The results must be picklable (they travel back from the workers). Results come
    back in the jobs' order; an exception in a run is raised here.
    """
    jobs = list(jobs)
    if torch.device(device or "cpu").type != "cpu":
        return [run(*job) for job in jobs]
    side_by_side = map_forked(lambda i: run(*jobs[i]), len(jobs))
    if side_by_side is not None:
        return side_by_side
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the arithmetic of a worker
    try:
        return [run(*job) for job in jobs]
    finally:
        torch.set_num_threads(threads)
