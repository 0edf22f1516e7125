import pytest
import torch

from transformer_book.data import lookup_task


def test_lookup_rows_hold_distinct_keys_and_the_answer():
    batch = lookup_task(
        256,
        n_pairs=6,
        n_keys=10,
        n_values=5,
        generator=torch.Generator().manual_seed(0),
    )
    assert batch.keys.shape == batch.values.shape == (256, 6)
    assert batch.query.shape == batch.target.shape == batch.position.shape == (256,)
    for row in batch.keys:
        assert len(set(row.tolist())) == 6
    rows = torch.arange(256)
    assert torch.equal(batch.keys[rows, batch.position], batch.query)
    assert torch.equal(batch.values[rows, batch.position], batch.target)
    # the answer's position varies, so no fixed position can be read off
    assert batch.position.unique().numel() == 6


def test_lookup_is_reproducible_with_a_generator():
    a = lookup_task(8, 4, 8, 8, generator=torch.Generator().manual_seed(1))
    b = lookup_task(8, 4, 8, 8, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a.keys, b.keys) and torch.equal(a.target, b.target)


def test_lookup_rejects_impossible_sizes():
    with pytest.raises(ValueError, match="n_keys"):
        lookup_task(4, n_pairs=5, n_keys=4, n_values=3)
    with pytest.raises(ValueError):
        lookup_task(0, n_pairs=2, n_keys=4, n_values=3)
