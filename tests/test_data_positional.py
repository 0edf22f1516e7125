"""Tests of the Chapter 4 task generator (lag copy)."""

import pytest
import torch

from transformer_book.data import IGNORE_INDEX, lag_copy_task


@pytest.mark.parametrize("lag", [1, 3])
def test_target_is_the_token_lag_positions_back(lag):
    batch = lag_copy_task(
        8, 12, 10, lag=lag, generator=torch.Generator().manual_seed(0)
    )
    assert batch.tokens.shape == batch.target.shape == (8, 12)
    assert batch.tokens.dtype == torch.long
    assert (batch.target[:, :lag] == IGNORE_INDEX).all()
    assert torch.equal(batch.target[:, lag:], batch.tokens[:, :-lag])
    assert batch.tokens.min() >= 0 and batch.tokens.max() < 10


def test_tokens_are_uniform_and_reproducible():
    gen = lambda: torch.Generator().manual_seed(5)  # noqa: E731
    a, b = (
        lag_copy_task(500, 20, 4, generator=gen()),
        lag_copy_task(500, 20, 4, generator=gen()),
    )
    assert torch.equal(a.tokens, b.tokens)
    counts = torch.bincount(a.tokens.flatten(), minlength=4).float() / a.tokens.numel()
    assert (counts - 0.25).abs().max() < 0.02
    c = lag_copy_task(500, 20, 4, generator=torch.Generator().manual_seed(6))
    assert not torch.equal(a.tokens, c.tokens)


def test_lag_longer_than_the_sequence_leaves_nothing_to_predict():
    batch = lag_copy_task(2, 3, 5, lag=3)
    assert (batch.target == IGNORE_INDEX).all()


def test_device_argument_is_used():
    batch = lag_copy_task(2, 4, 5, device="cpu")
    assert batch.tokens.device.type == batch.target.device.type == "cpu"


@pytest.mark.parametrize(
    "args", [(0, 4, 5, 1), (2, 0, 5, 1), (2, 4, 0, 1), (2, 4, 5, 0)]
)
def test_bad_sizes_are_rejected(args):
    with pytest.raises(ValueError, match="must be positive"):
        lag_copy_task(*args)
