"""The long-range recall task of Chapter 1."""

import pytest
import torch

from transformer_book.data import RecallBatch, recall_task


@pytest.mark.parametrize("distance", [1, 2, 17])
def test_layout_symbol_fillers_query(distance):
    batch = recall_task(32, distance, n_symbols=5, n_fillers=3)
    assert isinstance(batch, RecallBatch)
    assert batch.tokens.shape == (32, distance + 1)
    assert batch.target.shape == (32,)
    assert torch.equal(batch.tokens[:, 0], batch.target)  # the symbol comes first
    assert ((batch.target >= 0) & (batch.target < 5)).all()
    fillers = batch.tokens[:, 1:-1]
    assert ((fillers >= 5) & (fillers < 8)).all()  # never a symbol's id
    assert (batch.tokens[:, -1] == 8).all()  # the query token, `distance` after


def test_every_symbol_and_filler_occurs():
    batch = recall_task(2000, 10, n_symbols=8, n_fillers=8)
    assert set(batch.target.tolist()) == set(range(8))
    assert set(batch.tokens[:, 1:-1].flatten().tolist()) == set(range(8, 16))


def test_generator_makes_it_reproducible_and_device_is_honoured():
    a = recall_task(4, 6, generator=torch.Generator().manual_seed(1), device="cpu")
    b = recall_task(4, 6, generator=torch.Generator().manual_seed(1), device="cpu")
    c = recall_task(4, 6, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.target, b.target)
    assert not torch.equal(a.tokens, c.tokens)
    assert a.tokens.device.type == "cpu" and a.tokens.dtype == torch.int64


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 2, "distance": 0}, "distance"),
        ({"batch_size": 0, "distance": 3}, "positive"),
        ({"batch_size": 2, "distance": 3, "n_symbols": 0}, "positive"),
        ({"batch_size": 2, "distance": 3, "n_fillers": 0}, "positive"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        recall_task(**kwargs)
