"""Chapter 8's ViT experiment: its functions, and its claims over other seeds."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import transformer_book.experiments.vision as experiment
from transformer_book.device import set_seed
from transformer_book.experiments.vision import (
    CNN_MIN_ACCURACY,
    KINDS,
    MLP_MIN_ACCURACY,
    TOP_PATCH_INK_MIN,
    VIT_MAX_LEAD,
    VIT_MIN_ACCURACY,
    ClsMaps,
    cls_attention_maps,
    ink_share,
    make_model,
    n_parameters,
    run_digits,
    top_patch_ink,
    train_classifier,
)
from transformer_book.vision import (
    CNNBaseline,
    MLPBaseline,
    ViT,
    attention_rollout,
    load_digit_images,
)

# (imported as experiment.test_accuracy: a bare name test_* would be collected)


def test_make_model_gives_each_kind():
    expected = {"ViT": ViT, "MLP": MLPBaseline, "CNN": CNNBaseline}
    for kind in KINDS:
        model = make_model(kind)
        assert isinstance(model, expected[kind])
        assert model(torch.rand(3, 1, 8, 8)).shape == (3, 10)
    with pytest.raises(ValueError, match="kind"):
        make_model("ResNet")


def test_n_parameters_counts_the_trained_numbers():
    assert n_parameters(nn.Linear(3, 2)) == 8
    frozen = nn.Linear(3, 2)
    frozen.bias.requires_grad_(False)
    assert n_parameters(frozen) == 6
    assert [n_parameters(make_model(k)) for k in KINDS] == [18218, 9610, 6090]
    with pytest.raises(TypeError, match="model"):
        n_parameters("ViT")


def test_train_classifier_draws_batches_from_the_seed(monkeypatch):
    seen = []

    def first_batch_only(model, get_batch, loss_fn, steps, **kwargs):
        seen.append((get_batch(0), get_batch(1), steps, kwargs))

    monkeypatch.setattr(experiment, "train", first_batch_only)
    for seed in (5, 5, 6):
        train_classifier(make_model("MLP"), seed=seed, steps=7, batch_size=9, lr=0.02)
    ((x5, y5), (x5b, _), steps, kwargs), ((x5_again, _), _, _, _), ((x6, _), *_) = seen
    assert steps == 7 and kwargs["lr"] == 0.02 and kwargs["weight_decay"] == 0.1
    assert x5.shape == (9, 1, 8, 8) and y5.shape == (9,)
    assert torch.equal(x5, x5_again) and not torch.equal(x5, x6)
    assert not torch.equal(x5, x5b)  # a new batch every step
    images, labels = load_digit_images("train")
    row = (images == x5[0]).flatten(1).all(dim=1).nonzero()[:, 0]
    assert len(row) >= 1 and y5[0] in labels[row]  # training images, with labels
    lr_lambda = kwargs["lr_lambda"]  # 7 steps: warm-up of 7, then cosine
    assert lr_lambda(0) == pytest.approx(1 / 7)
    assert lr_lambda(6) == pytest.approx(0.5 * (1 + math.cos(math.pi * 6 / 7)))


def test_the_default_schedule_warms_up_then_decays():
    lr_lambda = experiment._warmup_cosine(400, 40)
    assert lr_lambda(0) == pytest.approx(1 / 40)
    assert lr_lambda(19) == pytest.approx(0.5 * (1 + math.cos(math.pi * 19 / 400)) / 2)
    peak = max(range(400), key=lr_lambda)
    assert 35 <= peak <= 40 and lr_lambda(399) < 1e-3


def test_train_classifier_is_deterministic_and_learns():
    histories = []
    for _ in range(2):
        set_seed(3)
        model = make_model("MLP")
        history = train_classifier(model, seed=3, steps=30, lr=0.03)
        histories.append(history["loss"])
    assert histories[0] == histories[1] and len(histories[0]) == 30
    assert sum(histories[0][-5:]) < sum(histories[0][:5]) / 2
    assert not model.training
    assert experiment.test_accuracy(model) > 0.6  # chance: 0.1


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"seed": -1}, ValueError, "seed"),
        ({"seed": 1.5}, TypeError, "seed"),
        ({"steps": 0}, ValueError, "steps"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"lr": 0.0}, ValueError, "lr"),
    ],
)
def test_train_classifier_rejects_bad_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        train_classifier(make_model("MLP"), **kwargs)


class Always(nn.Module):
    """Names the same digit for every image."""

    def __init__(self, digit: int):
        super().__init__()
        self.digit = digit
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, images):
        logits = torch.zeros(len(images), 10, device=images.device)
        logits[:, self.digit] = self.scale
        return logits


def test_test_accuracy_scores_the_test_split():
    model = Always(3).train()
    assert experiment.test_accuracy(model) == pytest.approx(36 / 355)  # 183 // 5 3s
    assert experiment.test_accuracy(model, "train") == pytest.approx(147 / 1442)
    assert model.training  # put back as it was
    with pytest.raises(TypeError, match="model"):
        experiment.test_accuracy(lambda x: x)
    with pytest.raises(ValueError, match="split"):
        experiment.test_accuracy(model, "dev")


def test_run_digits_trains_the_three_kinds_alike():
    result = run_digits(seed=4, steps=3)
    assert list(result.accuracy) == list(KINDS) == list(result.n_parameters)
    assert all(0.0 <= a <= 1.0 for a in result.accuracy.values())
    assert all(
        a * 355 == pytest.approx(round(a * 355)) for a in result.accuracy.values()
    )
    assert result.n_parameters == {"ViT": 18218, "MLP": 9610, "CNN": 6090}
    assert all(s > 0 for s in result.seconds.values())
    assert isinstance(result.vit, ViT) and not result.vit.training
    set_seed(4)
    vit = make_model("ViT")
    train_classifier(vit, seed=4, steps=3)
    assert experiment.test_accuracy(vit) == result.accuracy["ViT"]
    for p, q in zip(vit.parameters(), result.vit.parameters(), strict=True):
        assert torch.equal(p, q)


def test_run_digits_rejects_a_bad_seed():
    with pytest.raises(ValueError, match="seed"):
        run_digits(seed=-1, steps=1)


def test_cls_attention_maps_read_the_cls_row_on_the_patch_grid():
    set_seed(0)
    model = make_model("ViT")
    images, _ = load_digit_images("test")
    images = images[:6]
    maps = cls_attention_maps(model, images)
    for m in (maps.last_layer, maps.rollout, maps.ink):
        assert m.shape == (6, 4, 4)
    _, weights = model(images, need_weights=True)
    assert_close(maps.last_layer.flatten(1), weights[-1].mean(dim=1)[:, 0, 1:])
    rollout = attention_rollout(weights, 0.5)
    assert_close(maps.rollout.flatten(1), rollout[:, 0, 1:])
    assert (maps.rollout.flatten(1).sum(1) < 1).all()  # the [CLS] column is left out
    for b in range(6):
        for r in range(4):
            for c in range(4):
                block = images[b, 0, 2 * r : 2 * r + 2, 2 * c : 2 * c + 2]
                assert maps.ink[b, r, c] == (block.sum() > 0)
    other = cls_attention_maps(model, images, residual=0.9).rollout
    assert (other - maps.rollout).abs().max() > 1e-3
    with pytest.raises(TypeError, match="model"):
        cls_attention_maps(make_model("CNN"), images)
    with pytest.raises(TypeError, match="images"):
        cls_attention_maps(model, images.long())


def hand_maps():
    last = torch.tensor([[[0.1, 0.5], [0.2, 0.1]]])
    rollout = torch.tensor([[[0.4, 0.1], [0.2, 0.1]]])  # sums to 0.8
    ink = torch.tensor([[[True, False], [False, True]]])
    return ClsMaps(last_layer=last, rollout=rollout, ink=ink)


def test_ink_share_and_top_patch_by_hand():
    maps = hand_maps()
    assert ink_share(maps) == pytest.approx((0.5 / 0.8, 0.5))
    assert ink_share(maps, "last_layer") == pytest.approx((0.2 / 0.9, 0.5))
    assert top_patch_ink(maps) == pytest.approx((0.0, 0.5))  # 0.5 is on no ink
    assert top_patch_ink(maps, "rollout") == pytest.approx((1.0, 0.5))


def test_ink_functions_reject_bad_arguments():
    with pytest.raises(TypeError, match="maps"):
        ink_share({"rollout": None})
    with pytest.raises(ValueError, match="which"):
        top_patch_ink(hand_maps(), "first_layer")


def test_the_bounds_are_consistent():
    assert 0.1 < VIT_MIN_ACCURACY <= MLP_MIN_ACCURACY <= CNN_MIN_ACCURACY < 1.0
    assert 0.0 < VIT_MAX_LEAD <= 0.02
    _, ink_fraction = ink_share(
        cls_attention_maps(make_model("ViT"), load_digit_images("test")[0])
    )
    assert ink_fraction < TOP_PATCH_INK_MIN < 1.0  # above what chance gives


@pytest.mark.seeds
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_vision_claims_hold_for_other_seeds(seed):
    result = run_digits(seed=seed)
    acc = result.accuracy
    assert acc["ViT"] >= VIT_MIN_ACCURACY, acc
    assert acc["MLP"] >= MLP_MIN_ACCURACY, acc
    assert acc["CNN"] >= CNN_MIN_ACCURACY, acc
    assert acc["ViT"] <= acc["CNN"] + VIT_MAX_LEAD, acc
    assert acc["ViT"] <= acc["MLP"] + VIT_MAX_LEAD, acc
    maps = cls_attention_maps(result.vit, load_digit_images("test")[0])
    top, ink_fraction = top_patch_ink(maps)
    assert top >= TOP_PATCH_INK_MIN > ink_fraction, (top, ink_fraction)
