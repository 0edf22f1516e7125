"""``transformer_book.distributed``: one DistributedDataParallel step on 2 processes
(gloo) equals one step of one process on the whole batch; the single-process step
against the SGD formula; the mean of shard means (Hypothesis); bad input.

Two tests start processes (forked on Linux, in milliseconds; spawned elsewhere, a few
seconds each); the rest run here.
"""

import functools
import multiprocessing
import sys
import time

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from transformer_book.distributed import (
    TINY_GPT,
    ddp_step,
    next_token_loss,
    single_process_step,
    tiny_gpt,
    token_batch,
)
from transformer_book.models import GPT, GPTConfig

FEW = settings(max_examples=10, deadline=None, derandomize=True, database=None)
BATCH = token_batch(batch_size=4)
EXACT = {"atol": 1e-12, "rtol": 1e-10}  # float64: only the order of sums differs
SMALL_GPT = functools.partial(
    GPT, GPTConfig(vocab_size=11, max_len=6, d_model=8, n_heads=2, n_layers=1, d_ff=16)
)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_two_processes_take_the_step_of_one_on_the_whole_batch():
    batch = token_batch(batch_size=6, seed=1)
    ddp = ddp_step(batch=batch, world_size=2, lr=0.5, dtype=torch.float64)
    one = single_process_step(batch=batch, lr=0.5, dtype=torch.float64)
    assert_close(torch.tensor(ddp.loss), torch.tensor(one.loss), **EXACT)
    assert ddp.grads.keys() == one.grads.keys() == ddp.params.keys()
    for name in one.grads:
        assert_close(ddp.grads[name], one.grads[name], **EXACT, msg=name)
        assert_close(ddp.params[name], one.params[name], **EXACT, msg=name)
        assert ddp.params[name].dtype == torch.float64
    assert ddp.replica_difference == 0.0  # the copies stay identical
    # each process saw its own shard: rows 0, 2, 4 and rows 1, 3, 5
    shards = [
        single_process_step(batch=batch[r::2], dtype=torch.float64) for r in (0, 1)
    ]
    assert ddp.shard_losses == pytest.approx([s.loss for s in shards], abs=1e-12)
    assert abs(ddp.shard_losses[0] - ddp.shard_losses[1]) > 1e-3
    # and its gradients are the average over the processes, not its own
    own = shards[0].grads["token.weight"]
    assert (ddp.grads["token.weight"] - own).abs().max() > 1e-4


def slow_tiny_gpt():
    """A model that takes 30 s to build: its processes outlive any short timeout."""
    time.sleep(30)
    return tiny_gpt()


def test_processes_that_run_past_the_timeout_are_ended():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"within timeout=0.5 s"):
        ddp_step(model_fn=slow_tiny_gpt, batch=BATCH, timeout=0.5)
    assert time.monotonic() - start < 20  # ended, not waited for
    assert multiprocessing.active_children() == []


def test_on_linux_the_processes_are_forked_elsewhere_spawned(monkeypatch):
    import transformer_book.distributed as distributed

    methods = []
    start_processes = distributed.mp.start_processes

    def recording(*args, **kwargs):
        methods.append(kwargs["start_method"])
        return start_processes(*args, **kwargs)

    monkeypatch.setattr(distributed.mp, "start_processes", recording)
    ddp_step(batch=BATCH)
    assert methods == ["fork" if sys.platform.startswith("linux") else "spawn"]


def test_single_process_step_is_the_sgd_formula():
    batch = token_batch(batch_size=4, seed=3)
    result = single_process_step(batch=batch, lr=0.25, seed=7)
    torch.manual_seed(7)
    model = tiny_gpt()
    loss = next_token_loss(model, batch)
    loss.backward()
    assert result.loss == pytest.approx(loss.item(), rel=1e-6)
    assert result.shard_losses == [result.loss] and result.replica_difference == 0.0
    named = dict(model.named_parameters())
    assert result.params.keys() == named.keys()  # the tied output table once
    for name, p in named.items():
        assert_close(result.grads[name], p.grad)
        assert_close(result.params[name], p.detach() - 0.25 * p.grad)
    assert max(g.abs().max() for g in result.grads.values()) > 0


def test_the_defaults_run_and_the_seed_decides_the_model():
    a, b = single_process_step(), single_process_step()
    c = single_process_step(seed=1)
    assert a.loss == b.loss and a.loss != c.loss
    assert a.params["token.weight"].shape == (TINY_GPT.vocab_size, TINY_GPT.d_model)


def test_next_token_loss_is_the_cross_entropy_of_the_shifted_tokens():
    batch = token_batch(batch_size=3, seed=2)
    model = tiny_gpt()
    logits = model(batch[:, :-1])
    expected = torch.stack(
        [F.cross_entropy(logits[i], batch[i, 1:]) for i in range(3)]
    ).mean()
    assert_close(next_token_loss(model, batch), expected)


@FEW
@given(st.integers(1, 4), st.integers(1, 3), st.integers(0, 100))
def test_the_mean_of_equal_shard_means_is_the_whole_batch_mean(n, rows, seed):
    """The identity DDP relies on: average the shard losses, average the gradients."""
    batch = token_batch(batch_size=n * rows, seed=seed)
    torch.manual_seed(seed)
    model = tiny_gpt().double()
    shard_means = [next_token_loss(model, batch[r::n]) for r in range(n)]
    assert_close(torch.stack(shard_means).mean(), next_token_loss(model, batch))


def test_token_batch():
    batch = token_batch(batch_size=5, seed=4)
    assert batch.shape == (5, TINY_GPT.max_len + 1) and batch.dtype == torch.int64
    assert 0 <= batch.min() and batch.max() < TINY_GPT.vocab_size
    assert torch.equal(batch, token_batch(batch_size=5, seed=4))
    assert not torch.equal(batch, token_batch(batch_size=5, seed=5))


def test_a_partial_of_a_package_model_works():
    batch = torch.randint(11, (2, 7), generator=torch.Generator().manual_seed(0))
    result = single_process_step(SMALL_GPT, batch)
    assert result.params["token.weight"].shape == (11, 8)


def interactive_model():
    return torch.nn.Linear(2, 2)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"world_size": 0}, ValueError, r"world_size must be positive, got 0"),
        ({"world_size": "2"}, TypeError, r"world_size must be an int"),
        ({"world_size": 3}, ValueError, r"batch of shape \(4, 17\).*world_size=3"),
        ({"batch": BATCH[:0]}, ValueError, r"batch of shape \(0, 17\)"),
        ({"batch": BATCH[0, 0]}, ValueError, r"batch of shape \(\)"),
        ({"batch": [[1, 2]]}, TypeError, r"batch must be a torch.Tensor"),
        ({"lr": 0.0}, ValueError, r"lr must be positive"),
        ({"lr": float("nan")}, ValueError, r"lr must be positive"),
        ({"seed": -1}, ValueError, r"seed must be non-negative"),
        ({"dtype": torch.int64}, TypeError, r"dtype must be a floating-point"),
        ({"dtype": "float32"}, TypeError, r"dtype must be a floating-point"),
        ({"timeout": 0}, ValueError, r"timeout must be positive"),
        ({"model_fn": None}, TypeError, r"model_fn must be callable"),
        ({"loss_fn": 3}, TypeError, r"loss_fn must be callable"),
        ({"model_fn": lambda: None}, TypeError, r"model_fn cannot be sent"),
        ({"loss_fn": lambda m, b: 0}, TypeError, r"loss_fn cannot be sent"),
    ],
)
def test_ddp_step_bad_input_is_named_before_any_process_starts(kwargs, error, match):
    with pytest.raises(error, match=match):
        ddp_step(**{"batch": BATCH, **kwargs})


def test_a_notebooks_function_is_refused_with_advice(monkeypatch):
    main = sys.modules["__main__"]
    monkeypatch.delattr(main, "__file__", raising=False)  # as in a Jupyter kernel
    monkeypatch.setattr(main, "interactive_model", interactive_model, raising=False)
    monkeypatch.setattr(interactive_model, "__module__", "__main__")
    with pytest.raises(ValueError, match=r"model_fn is defined in this notebook"):
        ddp_step(interactive_model, BATCH)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"batch": BATCH[:0]}, ValueError, r"batch of shape \(0, 17\)"),
        ({"lr": -1}, ValueError, r"lr must be positive"),
        ({"model_fn": lambda: "not a module"}, TypeError, r"model_fn\(\) must return"),
        ({"dtype": torch.bool}, TypeError, r"dtype must be a floating-point"),
    ],
)
def test_single_process_step_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        single_process_step(**{"batch": BATCH, **kwargs})
