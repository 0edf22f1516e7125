"""The two-relation task of Chapter 3: every target is what its relation says."""

import pytest
import torch

from transformer_book.data import IGNORE_INDEX, two_relation_task


def batch(seed=0, **kwargs):
    args = {"batch_size": 64, "n_pairs": 5, "n_keys": 9, "n_values": 7} | kwargs
    return two_relation_task(**args, generator=torch.Generator().manual_seed(seed))


def test_shapes_and_dtypes():
    b = batch()
    for name in ("keys", "values", "partner", "previous"):
        t = getattr(b, name)
        assert t.shape == (64, 10) and t.dtype == torch.int64, name
    assert b.target.shape == (64, 10, 2)


def test_every_key_occurs_exactly_twice_and_ids_are_in_range():
    b = batch()
    counts = torch.zeros(64, 9, dtype=torch.long).scatter_add_(
        1, b.keys, torch.ones_like(b.keys)
    )
    assert set(counts.unique().tolist()) <= {0, 2}
    assert (counts == 2).sum(dim=1).eq(5).all()
    assert b.values.min() >= 0 and b.values.max() < 7


def test_partner_is_the_other_position_with_the_same_key():
    b = batch()
    positions = torch.arange(10).expand(64, 10)
    assert (b.partner != positions).all()
    assert torch.equal(b.keys.gather(1, b.partner), b.keys)
    assert torch.equal(b.partner.gather(1, b.partner), positions)  # an involution


def test_targets_follow_the_two_relations():
    b = batch()
    assert (b.target[:, 0, 0] == IGNORE_INDEX).all()
    assert torch.equal(b.target[:, 1:, 0], b.values[:, :-1])  # previous value
    assert torch.equal(b.target[..., 1], b.values.gather(1, b.partner))
    assert torch.equal(b.previous[0], torch.arange(-1, 9))


def test_partners_are_spread_over_the_positions():
    """No fixed offset finds the partner: it sits anywhere in the row."""
    b = batch(batch_size=2000)
    offsets = (b.partner - torch.arange(10)).flatten()
    share = torch.bincount(offsets + 9).float() / offsets.numel()
    assert share.max() < 0.15
    assert (b.target[:, 1:, 0] == b.target[:, 1:, 1]).float().mean() < 0.25


def test_same_generator_seed_gives_the_same_batch_and_device_is_honoured():
    a, b = batch(seed=3), batch(seed=3)
    assert torch.equal(a.keys, b.keys) and torch.equal(a.target, b.target)
    assert not torch.equal(a.keys, batch(seed=4).keys)
    assert batch(device="meta").keys.device.type == "meta"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_pairs": 10, "n_keys": 9}, "n_pairs=10"),
        ({"n_values": 0}, "positive"),
        ({"batch_size": 0}, "positive"),
    ],
)
def test_bad_sizes_raise_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        batch(**kwargs)
