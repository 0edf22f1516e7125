"""``transformer_book._parallel``: runs side by side in forked processes return what
runs one after another on one thread return, bit for bit, in order, whatever the
caller's threads; errors come back; where a fork is not safe the runs stay in this
process, on one thread, and the caller's threads are restored."""

import os
import sys

import pytest
import torch

import transformer_book._parallel as parallel
from transformer_book.experiments.efficiency import (
    run_kv_sharing,
    run_lookup_approximations,
)
from transformer_book.experiments.extrapolation import (
    ExtrapolationConfig,
    run_extrapolation,
)
from transformer_book.experiments.recall import run_recall
from transformer_book.experiments.scaling import run_scaling
from transformer_book.experiments.translation import run_norm_placement

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


def test_a_caller_on_more_threads_gets_what_one_thread_computes(monkeypatch):
    jobs = [(seed, 96) for seed in range(4)]
    one_thread = parallel.map_runs(seeded_sum, jobs, "cpu")
    torch.set_num_threads(2)
    # a product of two threads' partial sums can differ in its last bits from one
    # thread's; the runs compute on one thread all the same, forked or here
    torch.randn(256, 256) @ torch.randn(256, 256)  # this process's threads have run
    forked = parallel.map_runs(seeded_sum, jobs, "cpu")
    assert torch.get_num_threads() == 2
    monkeypatch.setattr(parallel, "can_fork", lambda device: False)
    here = parallel.map_runs(seeded_sum, jobs, "cpu")
    assert torch.get_num_threads() == 2  # restored
    assert [r[0] for r in forked] == [r[0] for r in one_thread]  # exact
    assert [r[0] for r in here] == [r[0] for r in one_thread]
    assert {r[2] for r in here} == {1} and {r[1] for r in here} == {os.getpid()}
    if LINUX and (os.cpu_count() or 1) > 1:
        assert os.getpid() not in {r[1] for r in forked}
        assert {r[2] for r in forked} == {1}


def test_threads_are_restored_after_an_error(monkeypatch):
    torch.set_num_threads(2)
    monkeypatch.setattr(parallel, "can_fork", lambda device: False)
    with pytest.raises(ValueError, match="run 2 failed"):
        parallel.map_runs(fails_on_two, [(seed,) for seed in range(4)], "cpu")
    assert torch.get_num_threads() == 2


def test_an_error_in_a_run_comes_back():
    with pytest.raises(ValueError, match="run 2 failed"):
        parallel.map_runs(fails_on_two, [(seed,) for seed in range(4)], "cpu")


@pytest.mark.parametrize("device", ["meta", torch.device("meta")])
def test_other_devices_stay_in_this_process(device):
    assert not parallel.can_fork(device)
    torch.set_num_threads(2)
    runs = parallel.map_runs(seeded_sum, [(0, 4), (1, 4)], device)
    assert {r[1] for r in runs} == {os.getpid()}
    assert {r[2] for r in runs} == {2}  # a device's threads are left alone


def test_fork_only_on_linux(monkeypatch):
    monkeypatch.setattr(parallel.sys, "platform", "darwin")
    assert not parallel.can_fork("cpu")
    monkeypatch.setattr(parallel.sys, "platform", "linux")
    assert parallel.can_fork("cpu") == (not torch.cuda.is_initialized())


def _experiments():
    """Small runs of every experiment that uses map_runs, as comparable values."""
    extrapolation = run_extrapolation(
        seed=1, schemes=("none", "rope"), cfg=ExtrapolationConfig(steps=3)
    )
    scaling = run_scaling(seed=1, steps=2, sizes=((16, 1), (32, 2)))
    return {
        "lookup": run_lookup_approximations(seed=2, steps=5, n_test=64),
        "kv": run_kv_sharing(seed=1, steps=3),
        "recall": run_recall(seed=1, kinds=("LSTM",), distances=(4, 8), steps=3),
        "extrapolation": (extrapolation.accuracy, extrapolation.by_position),
        "scaling": [(row.params, row.loss) for row in scaling.rows],
        "norm placement": [
            t.tolist() for t in run_norm_placement(seed=1, n_layers=1, steps=10)
        ],
    }


def test_the_experiments_give_the_same_numbers_either_way(monkeypatch):
    side_by_side = _experiments()
    monkeypatch.setattr(parallel, "can_fork", lambda device: False)
    in_turn = _experiments()
    by_position = "extrapolation"
    for name, value in side_by_side.items():
        if name == by_position:  # tensors: compared exactly, one by one
            assert value[0] == in_turn[name][0]
            for scheme, t in value[1].items():
                assert torch.equal(t, in_turn[name][1][scheme]), scheme
        else:
            assert value == in_turn[name], name


def test_map_forked_runs_a_closure_in_workers_after_their_init():
    offset = 10  # a closure: not picklable, inherited by the fork

    def task(i):
        return i + offset, os.getpid(), os.environ.get("MAP_FORKED_INIT")

    def init():
        os.environ["MAP_FORKED_INIT"] = "ran"

    results = parallel.map_forked(task, 5, init)
    if not (LINUX and (os.cpu_count() or 1) > 1):
        assert results is None
        return
    assert [r[0] for r in results] == [10, 11, 12, 13, 14]  # in order
    assert os.getpid() not in {r[1] for r in results}
    assert {r[2] for r in results} == {"ran"}
    assert "MAP_FORKED_INIT" not in os.environ  # the init ran in the workers only
    assert parallel._TASK is None  # nothing left behind for a later fork


def test_map_forked_declines_what_it_cannot_fork(monkeypatch):
    assert parallel.map_forked(lambda i: i, 1) is None  # one task: nothing to share
    monkeypatch.setattr(parallel, "can_fork", lambda device: False)
    assert parallel.map_forked(lambda i: i, 4) is None


def test_map_forked_raises_a_task_error_here():
    def task(i):
        if i == 3:
            raise ValueError(f"task {i} failed")
        return i

    if LINUX and (os.cpu_count() or 1) > 1:
        with pytest.raises(ValueError, match="task 3 failed"):
            parallel.map_forked(task, 4)
        assert parallel._TASK is None


def test_one_worker_keeps_the_runs_here(monkeypatch):
    monkeypatch.setenv(parallel.WORKERS_VARIABLE, "1")
    assert parallel.max_workers() == 1
    assert parallel.map_forked(lambda i: i, 4) is None
    torch.set_num_threads(2)
    runs = parallel.map_runs(seeded_sum, [(0, 4), (1, 4)], "cpu")
    assert {r[1] for r in runs} == {os.getpid()} and {r[2] for r in runs} == {1}
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", ""])
def test_a_bad_worker_count_is_named(monkeypatch, value):
    monkeypatch.setenv(parallel.WORKERS_VARIABLE, value)
    with pytest.raises(ValueError, match="TRANSFORMER_BOOK_WORKERS"):
        parallel.max_workers()
