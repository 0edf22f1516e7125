"""Chapter 2's look-up experiment: its functions, and its claims over other seeds."""

from __future__ import annotations

import pytest
import torch

from transformer_book.device import set_seed
from transformer_book.experiments.lookup import (
    MODELS,
    N_KEYS,
    N_PAIRS,
    N_VALUES,
    LookupAttention,
    LookupResult,
    UniformAverage,
    half_norms,
    lookup_batches,
    run_lookup,
    train_lookup,
)


def ids(batch: int = 5, seed: int = 0):
    (keys, values, query), target = lookup_batches(seed, batch)(0)
    return keys, values, query, target


def test_lookup_batches_have_the_train_format_and_follow_the_seed():
    keys, values, query, target = ids(batch=5)
    assert keys.shape == values.shape == (5, N_PAIRS)
    assert query.shape == target.shape == (5,)
    assert int(keys.max()) < N_KEYS and int(values.max()) < N_VALUES
    for a, b in zip(ids(batch=5), (keys, values, query, target), strict=True):
        assert torch.equal(a, b)  # the same seed draws the same rows
    other = ids(batch=5, seed=1)
    assert not torch.equal(other[0], keys)


def test_attention_model_shapes_and_weights():
    keys, values, query, _ = ids(batch=5)
    model = LookupAttention(N_KEYS, N_VALUES)
    assert model(keys, values, query).shape == (5, N_VALUES)
    out, weights = model.attend(keys, values, query)
    assert out.shape == (5, 1, 16) and weights.shape == (5, 1, N_PAIRS)
    torch.testing.assert_close(weights.sum(-1), torch.ones(5, 1))
    assert weights.std() > 0  # a query-dependent choice, not a constant


def test_uniform_average_gives_every_item_the_same_weight():
    keys, values, query, _ = ids(batch=5)
    model = UniformAverage(N_KEYS, N_VALUES)
    out, weights = model.attend(keys, values, query)
    torch.testing.assert_close(weights, torch.full((5, 1, N_PAIRS), 1 / N_PAIRS))
    expected = model.W_V(model.items(keys, values)).mean(dim=1, keepdim=True)
    torch.testing.assert_close(out, expected)
    # the query does not enter: another query gives the same logits
    torch.testing.assert_close(
        model(keys, values, query), model(keys, values, keys[:, -1])
    )


def test_half_norms_split_the_columns_at_the_key_embedding_width():
    model = LookupAttention(N_KEYS, N_VALUES, d_half=4, d_k=3)
    with torch.no_grad():
        model.W_K.weight.zero_()
        model.W_K.weight[0, 1] = 3.0  # reads the key half
        model.W_K.weight[2, 5] = 4.0  # reads the value half
        model.W_V.weight.fill_(1.0)  # (3, 8): 12 ones in each half
    norms = half_norms(model)
    assert norms["W_K"] == pytest.approx((3.0, 4.0))
    assert norms["W_V"] == pytest.approx((12**0.5, 12**0.5))


def test_train_lookup_starts_both_models_from_the_same_weights():
    set_seed(4)
    start = LookupAttention(N_KEYS, N_VALUES).W_K.weight.detach().clone()
    model, history = train_lookup(UniformAverage, seed=4, steps=1)
    assert isinstance(model, UniformAverage) and len(history["loss"]) == 1
    torch.testing.assert_close(model.W_K.weight.detach(), start)  # W_K unused: no step


def test_run_lookup_returns_its_measurements():
    result = run_lookup(seed=5, steps=2, n_test=64)
    assert isinstance(result, LookupResult)
    assert set(result.models) == set(result.histories) == set(MODELS)
    assert set(result.accuracy) == set(MODELS)
    assert all(0.0 <= a <= 1.0 for a in result.accuracy.values())
    assert all(len(h["loss"]) == 2 for h in result.histories.values())
    assert result.test.keys.shape == (64, N_PAIRS)
    assert result.weights.shape == (64, N_PAIRS)
    torch.testing.assert_close(result.weights.sum(-1), torch.ones(64))
    assert 0.0 < result.weight_on_match < 1.0
    # the bag-of-values guess, recomputed from the test rows
    counts = torch.nn.functional.one_hot(result.test.values, N_VALUES).sum(1)
    bag = (counts.argmax(1) == result.test.target).float().mean().item()
    assert result.bag_guess == pytest.approx(bag)
    set_seed(5)
    assert result.norms["initial"] == half_norms(LookupAttention(N_KEYS, N_VALUES))
    assert result.norms["trained"] == half_norms(result.models["attention"])
    assert result.norms["trained"] != result.norms["initial"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"seed": -1},
        {"seed": 1.5},
        {"steps": 0},
        {"batch_size": 0},
        {"n_test": 0},
        {"lr": 0.0},
    ],
)
def test_run_lookup_rejects_bad_arguments(kwargs):
    with pytest.raises((ValueError, TypeError)):  # TypeError: a seed that is no int
        run_lookup(**kwargs)


def test_lookup_batches_rejects_an_empty_batch():
    with pytest.raises(ValueError, match="batch_size"):
        lookup_batches(0, batch_size=0)


@pytest.mark.seeds
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lookup_claims_hold_for_other_seeds(seed):
    """The bounds Chapter 2 asserts after its run with seed 0 (§2.5)."""
    result = run_lookup(seed=seed)
    acc = result.accuracy
    uniform, bag_guess = acc["uniform average"], result.bag_guess
    assert acc["attention"] >= 0.99, acc
    assert result.weight_on_match >= 0.99, result.weight_on_match
    assert 0.20 <= uniform <= 0.30, acc
    assert abs(uniform - bag_guess) <= 0.02, (uniform, bag_guess)

    initial, trained = result.norms["initial"], result.norms["trained"]
    for name, reads in (("W_K", 0), ("W_V", 1)):
        start, other_start = initial[name][reads], initial[name][1 - reads]
        grown, other = trained[name][reads], trained[name][1 - reads]
        assert 1.2 <= min(start, other_start) <= max(start, other_start) <= 2.0
        assert grown >= 2.5 * start, (name, initial[name], trained[name])
        assert grown >= 2.5 * other, (name, trained[name])
        assert 0.8 <= other / other_start <= 1.2, (name, initial[name], trained[name])
