"""``transformer_book._parallel``: runs side by side in forked processes return what
runs one after another return, bit for bit, in order; errors come back; where a fork
is not safe the runs stay in this process."""

import os
import sys

import pytest
import torch

import transformer_book._parallel as parallel
from transformer_book.experiments.efficiency import (
    run_kv_sharing,
    run_lookup_approximations,
)

LINUX = sys.platform.startswith("linux")


def seeded_sum(seed: int, n: int) -> tuple[float, int, int, str | None]:
    torch.manual_seed(seed)
    x = torch.randn(n, n) @ torch.randn(n, n)
    quiet = os.environ.get("TRANSFORMER_BOOK_QUIET")
    return x.sum().item(), os.getpid(), torch.get_num_threads(), quiet


def fails_on_two(seed: int) -> int:
    if seed == 2:
        raise ValueError(f"run {seed} failed")
    return seed


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_side_by_side_equals_one_after_another(monkeypatch):
    jobs = [(seed, 64) for seed in range(5)]
    side_by_side = parallel.map_runs(seeded_sum, jobs, "cpu")
    monkeypatch.setattr(parallel, "can_fork", lambda device: False)
    in_turn = parallel.map_runs(seeded_sum, jobs, "cpu")
    assert [r[0] for r in side_by_side] == [r[0] for r in in_turn]  # exact
    assert {r[1] for r in in_turn} == {os.getpid()}
    if LINUX and (os.cpu_count() or 1) > 1:
        assert os.getpid() not in {r[1] for r in side_by_side}
        # a worker runs one thread, as this process, and prints no progress bars
        assert {r[2] for r in side_by_side} == {1}
        assert {r[3] for r in side_by_side} == {"1"}


def test_a_caller_on_more_threads_runs_them_in_turn():
    # its OpenMP threads would hang a forked copy, and one thread computes otherwise
    torch.set_num_threads(2)
    pids = {r[1] for r in parallel.map_runs(seeded_sum, [(0, 4), (1, 4)], "cpu")}
    assert pids == {os.getpid()}


def test_an_error_in_a_run_comes_back():
    with pytest.raises(ValueError, match="run 2 failed"):
        parallel.map_runs(fails_on_two, [(seed,) for seed in range(4)], "cpu")


@pytest.mark.parametrize("device", ["meta", torch.device("meta")])
def test_other_devices_stay_in_this_process(device):
    assert not parallel.can_fork(device)
    pids = {r[1] for r in parallel.map_runs(seeded_sum, [(0, 4), (1, 4)], device)}
    assert pids == {os.getpid()}


def test_fork_only_on_linux(monkeypatch):
    monkeypatch.setattr(parallel.sys, "platform", "darwin")
    assert not parallel.can_fork("cpu")
    monkeypatch.setattr(parallel.sys, "platform", "linux")
    assert parallel.can_fork("cpu") == (not torch.cuda.is_initialized())


def test_the_experiments_give_the_same_numbers_either_way(monkeypatch):
    lookup = run_lookup_approximations(seed=2, steps=5, n_test=64)
    kv = run_kv_sharing(seed=1, steps=3)
    monkeypatch.setattr(parallel, "can_fork", lambda device: False)
    assert run_lookup_approximations(seed=2, steps=5, n_test=64) == lookup
    assert run_kv_sharing(seed=1, steps=3) == kv
