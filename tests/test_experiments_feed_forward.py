"""Chapter 5's feed-forward experiment: its functions, and its claims over seeds."""

from __future__ import annotations

import pytest
import torch

from transformer_book.experiments.feed_forward import (
    N_VALUES,
    SEQ_LEN,
    FFNResult,
    neighbour_batch,
    neighbour_table,
    run_feed_forward,
)


def test_targets_are_the_table_entry_of_the_two_neighbours():
    table = neighbour_table()
    assert table.shape == (N_VALUES, N_VALUES)
    assert torch.equal(table, neighbour_table())
    x, y = neighbour_batch(4, torch.Generator().manual_seed(0), table)
    assert x.shape == y.shape == (4, SEQ_LEN)
    for b in range(4):
        for t in range(SEQ_LEN):
            left, right = x[b, t - 1], x[b, (t + 1) % SEQ_LEN]
            assert y[b, t] == table[left, right]


def test_run_feed_forward_returns_its_measurements():
    result = run_feed_forward(seed=5, steps=2)
    assert isinstance(result, FFNResult)
    assert set(result.accuracy) == {"with FFN", "without FFN"}
    # the model without the FFN has at least as many parameters
    assert result.n_params["without FFN"] >= result.n_params["with FFN"]
    assert all(0.0 <= a <= 1.0 for a in result.accuracy.values())
    assert 0.0 <= result.ffn_zeroed <= 1.0
    assert all(len(h["loss"]) == 2 for h in result.histories.values())


@pytest.mark.parametrize(
    "kwargs", [{"seed": -1}, {"seed": 1.5}, {"steps": 0}, {"batch_size": 0}, {"lr": 0}]
)
def test_run_feed_forward_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        run_feed_forward(**kwargs)


@pytest.mark.seeds
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_feed_forward_claims_hold_for_other_seeds(seed):
    result = run_feed_forward(seed=seed)
    acc = result.accuracy
    assert acc["with FFN"] >= 0.97, acc
    assert acc["without FFN"] <= 0.75, acc
    assert result.ffn_zeroed <= 0.35, result.ffn_zeroed
