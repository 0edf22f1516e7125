"""Images as tokens (Chapter 8): the digits, patches, the ViT, rollout, baselines."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits
from torch.testing import assert_close

from transformer_book.vision import (
    CNNBaseline,
    MLPBaseline,
    ViT,
    ViTConfig,
    attention_rollout,
    load_digit_images,
    patchify,
    unpatchify,
)

FEW = settings(max_examples=25, deadline=None, derandomize=True, database=None)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# -- The digits -------------------------------------------------------------------


def test_the_split_sizes_shapes_and_ranges():
    x_train, y_train = load_digit_images("train")
    x_test, y_test = load_digit_images("test")
    assert x_train.shape == (1442, 1, 8, 8) and y_train.shape == (1442,)
    assert x_test.shape == (355, 1, 8, 8) and y_test.shape == (355,)
    assert x_train.dtype == torch.float32 and y_train.dtype == torch.long
    for x in (x_train, x_test):
        assert x.min() == 0.0 and x.max() == 1.0
    for y in (y_train, y_test):
        assert set(y.tolist()) == set(range(10))
    counts = torch.bincount(y_test, minlength=10)
    assert counts.min() >= 34 and counts.max() <= 36  # every digit, evenly


def test_the_split_is_every_fifth_image_of_each_digit():
    digits = load_digits()
    test_index = []
    for digit in range(10):
        where = np.flatnonzero(digits.target == digit)
        test_index += list(where[4::5])  # the 5th, 10th, ... image of the digit
    test_index = sorted(test_index)
    train_index = sorted(set(range(len(digits.target))) - set(test_index))
    for split, index in (("test", test_index), ("train", train_index)):
        images, labels = load_digit_images(split)
        expected = torch.tensor(digits.images[index], dtype=torch.float32) / 16
        assert torch.equal(images[:, 0], expected)
        assert labels.tolist() == digits.target[index].tolist()


def test_the_split_is_the_same_on_every_machine():
    images, labels = load_digit_images("test")
    assert labels[:12].tolist() == [5, 0, 9, 8, 7, 1, 2, 6, 3, 4, 0, 2]
    assert int(labels.sum()) == 1595
    assert int((images * 16).round().long().sum()) == 111152  # the raw 0..16 values


def test_callers_cannot_corrupt_the_cache():
    images, labels = load_digit_images("train")
    images.fill_(7.0)
    labels.fill_(-1)
    again, labels_again = load_digit_images("train")
    assert again.max() == 1.0 and labels_again.min() == 0


def test_an_unknown_split_is_refused():
    with pytest.raises(ValueError, match="split"):
        load_digit_images("validation")


# -- Patches ----------------------------------------------------------------------


def patchify_by_loops(images, patch):
    """The documented layout, one element at a time."""
    B, C, H, W = images.shape
    rows, cols = H // patch, W // patch
    out = torch.empty(B, rows * cols, C * patch * patch, dtype=images.dtype)
    for b in range(B):
        for r in range(rows):
            for c in range(cols):
                for ch in range(C):
                    for i in range(patch):
                        for j in range(patch):
                            k = ch * patch * patch + i * patch + j
                            pixel = images[b, ch, r * patch + i, c * patch + j]
                            out[b, r * cols + c, k] = pixel
    return out


@pytest.mark.parametrize(
    ("shape", "patch"),
    [
        ((2, 1, 8, 8), 2),
        ((1, 3, 4, 6), 2),
        ((2, 2, 6, 9), 3),
        ((1, 1, 4, 4), 4),
        ((1, 2, 3, 2), 1),
    ],
)
def test_patchify_matches_the_loops(shape, patch):
    images = randn(*shape)
    assert torch.equal(patchify(images, patch), patchify_by_loops(images, patch))


def test_patchify_on_a_labelled_image():
    # pixel (y, x) holds 10 * y + x: patch 1 of a 4 x 4 image is its top-right block
    image = (10 * torch.arange(4)[:, None] + torch.arange(4)[None, :]).float()
    patches = patchify(image[None, None], 2)
    assert patches.shape == (1, 4, 4)
    assert patches[0, 1].tolist() == [2, 3, 12, 13]
    assert patches[0, 2].tolist() == [20, 21, 30, 31]


@st.composite
def patched_images(draw):
    patch = draw(st.integers(1, 4))
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    b, c = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    return randn(b, c, rows * patch, cols * patch, seed=seed), patch


@FEW
@given(patched_images())
def test_unpatchify_inverts_patchify(case):
    images, patch = case
    patches = patchify(images, patch)
    B, C, H, W = images.shape
    assert patches.shape == (B, (H // patch) * (W // patch), C * patch * patch)
    assert torch.equal(unpatchify(patches, patch, H, W), images)
    shuffled = randn(*patches.shape, seed=1)
    assert torch.equal(patchify(unpatchify(shuffled, patch, H, W), patch), shuffled)


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: patchify(randn(8, 8), 2), ValueError, "images"),
        (lambda: patchify(np.zeros((1, 1, 8, 8)), 2), TypeError, "images"),
        (lambda: patchify(randn(1, 1, 8, 8), 3), ValueError, "patch"),
        (lambda: patchify(randn(1, 1, 8, 6), 4), ValueError, "patch"),
        (lambda: patchify(randn(1, 1, 8, 8), 2.0), TypeError, "patch"),
        (lambda: patchify(randn(1, 1, 8, 8), 0), ValueError, "patch"),
        (lambda: patchify(randn(1, 1, 8, 8), True), TypeError, "patch"),
        (lambda: unpatchify(randn(1, 15, 4), 2, 8, 8), ValueError, "patches"),
        (lambda: unpatchify(randn(1, 16, 5), 2, 8, 8), ValueError, "patches"),
        (lambda: unpatchify(randn(16, 4), 2, 8, 8), ValueError, "patches"),
        (lambda: unpatchify(randn(1, 16, 4), 3, 8, 8), ValueError, "patch"),
        (lambda: unpatchify(randn(1, 16, 4), 2, 8, "8"), TypeError, "width"),
        (lambda: unpatchify([[0.0]], 1, 1, 1), TypeError, "patches"),
    ],
)
def test_bad_patch_arguments_are_named(call, error, name):
    with pytest.raises(error, match=name):
        call()


# -- The ViT ----------------------------------------------------------------------


def small_vit(seed=0, **kwargs):
    torch.manual_seed(seed)
    return ViT(ViTConfig(**kwargs)).eval()


def test_vit_config_defaults_and_patches():
    cfg = ViTConfig()
    assert (cfg.image_size, cfg.patch, cfg.channels, cfg.n_classes) == (8, 2, 1, 10)
    assert cfg.n_patches == 16
    assert ViTConfig(image_size=12, patch=4).n_patches == 9


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"patch": 3}, ValueError, "patch"),
        ({"image_size": 0}, ValueError, "image_size"),
        ({"d_model": 30}, ValueError, "d_model"),
        ({"n_layers": 1.5}, TypeError, "n_layers"),
        ({"channels": -1}, ValueError, "channels"),
        ({"n_classes": 0}, ValueError, "n_classes"),
        ({"d_ff": "64"}, TypeError, "d_ff"),
        ({"dropout": 1.0}, ValueError, "dropout"),
    ],
)
def test_a_bad_config_names_the_field(kwargs, error, name):
    with pytest.raises(error, match=name):
        ViTConfig(**kwargs)


def test_vit_logits_and_attention_weights_have_the_documented_shapes():
    model = small_vit()
    images = torch.rand(5, 1, 8, 8)
    assert model(images).shape == (5, 10)
    logits, weights = model(images, need_weights=True)
    assert logits.shape == (5, 10)
    assert len(weights) == 2
    for w in weights:
        assert w.shape == (5, 4, 17, 17)  # (B, H, 1 + N, 1 + N)
        assert (w >= 0).all()
        assert_close(w.sum(dim=-1), torch.ones(5, 4, 17))


def test_vit_on_colour_images_of_another_size():
    model = small_vit(image_size=12, patch=4, channels=3, n_classes=5, n_layers=3)
    logits, weights = model(torch.rand(2, 3, 12, 12), need_weights=True)
    assert logits.shape == (2, 5)
    assert len(weights) == 3 and weights[0].shape == (2, 4, 10, 10)


def test_the_readable_path_gives_the_fused_path_logits():
    model = small_vit(seed=1)
    images = torch.rand(6, 1, 8, 8, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        for block in model.blocks:  # larger weights than at initialisation
            block.self_attn.q_proj.weight.mul_(8.0)
        fused = model(images)
        readable, weights = model(images, need_weights=True)
    assert (fused - readable).abs().max() < 1e-6
    assert fused.std() > 0.05  # not a trivial comparison of near-zero logits
    spread = weights[0].amax(dim=-1).mean()
    assert spread > 2 / 17  # attention far from uniform: the weights matter


def test_the_first_layer_weights_are_its_attention_on_the_embedded_patches():
    model = small_vit(seed=3)
    images = torch.rand(2, 1, 8, 8)
    _, weights = model(images, need_weights=True)
    block = model.blocks[0]
    _, expected = block.self_attn(block.norm1(model.embed(images)), need_weights=True)
    assert_close(weights[0], expected)


def test_without_positions_the_vit_sees_a_bag_of_patches():
    model = small_vit(seed=4)
    images = torch.rand(3, 1, 8, 8)
    order = torch.randperm(16, generator=torch.Generator().manual_seed(0))
    shuffled = unpatchify(patchify(images, 2)[:, order], 2, 8, 8)
    with torch.no_grad():
        model.position.normal_(std=1.0)
        assert (model(images) - model(shuffled)).abs().max() > 1e-3
        model.position.zero_()
        assert_close(model(images), model(shuffled), atol=1e-5, rtol=1e-5)


def test_the_vit_classifies_from_the_cls_token():
    model = small_vit(seed=5)
    images = torch.rand(2, 1, 8, 8)
    with torch.no_grad():
        x = model.embed(images)  # (B, T, D)
        for block in model.blocks:
            x = block(x)
        expected = model.head(model.norm(x[:, 0]))  # eq. 4: y = LN(z_L^0)
        mean_pooled = model.head(model.norm(x[:, 1:].mean(dim=1)))
        logits = model(images)
    assert_close(logits, expected)
    assert (logits - mean_pooled).abs().max() > 1e-3


def test_the_vit_parameters():
    model = small_vit()
    names = dict(model.named_parameters())
    assert names["cls_token"].shape == (1, 1, 32)
    assert names["position"].shape == (1, 17, 32)
    assert names["patch_embed.weight"].shape == (32, 4)
    assert sum(p.numel() for p in model.parameters()) == 18218
    assert all(b.norm_first for b in model.blocks)
    assert all(b.feed_forward.activation == "gelu" for b in model.blocks)


@pytest.mark.parametrize(
    ("images", "error"),
    [
        (torch.rand(2, 1, 8, 6), ValueError),
        (torch.rand(2, 3, 8, 8), ValueError),
        (torch.rand(1, 8, 8), ValueError),
        (torch.zeros(2, 1, 8, 8, dtype=torch.long), TypeError),
        (np.zeros((2, 1, 8, 8), dtype=np.float32), TypeError),
    ],
)
def test_bad_images_are_named(images, error):
    with pytest.raises(error, match="images"):
        small_vit()(images)
    with pytest.raises(error, match="images"):
        MLPBaseline()(images)
    with pytest.raises(error, match="images"):
        CNNBaseline()(images)


def test_a_vit_needs_a_vit_config():
    with pytest.raises(TypeError, match="cfg"):
        ViT({"image_size": 8})


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_vit_runs_on_cuda_as_on_the_cpu():
    model = small_vit(seed=6)
    images = torch.rand(4, 1, 8, 8)
    expected, expected_weights = model(images, need_weights=True)
    model = model.cuda()
    logits, weights = model(images.cuda(), need_weights=True)
    assert_close(logits.cpu(), expected, atol=1e-4, rtol=1e-4)
    assert_close(attention_rollout(weights).cpu(), attention_rollout(expected_weights))
    assert_close(model(images.cuda()).cpu(), expected, atol=1e-4, rtol=1e-4)


# -- Attention rollout ------------------------------------------------------------


def test_rollout_by_hand_two_layers():
    # layer 1: heads [[1, 0], [.5, .5]] and [[0, 1], [.5, .5]] average to all 0.5;
    # A'_1 = 0.5 I + 0.5 mean = [[.75, .25], [.25, .75]]
    layer1 = torch.tensor([[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [0.5, 0.5]]])
    # layer 2: mean [[1, 0], [.5, .5]]; A'_2 = [[1, 0], [.25, .75]]
    layer2 = torch.tensor([[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]])
    rollout = attention_rollout([layer1[None], layer2[None]], residual=0.5)
    # A'_2 A'_1 = [[.75, .25], [.25 * .75 + .75 * .25, .25 * .25 + .75 * .75]]
    assert_close(rollout, torch.tensor([[[0.75, 0.25], [0.375, 0.625]]]))


def test_rollout_renormalises_the_rows():
    # one head whose rows sum to 0.4 and to 0 (a padded query): with residual 0.5,
    # A' = [[.6, .1], [0, .5]], rows renormalised to [[6/7, 1/7], [0, 1]]
    weights = torch.tensor([[[[0.2, 0.2], [0.0, 0.0]]]])
    expected = torch.tensor([[[6 / 7, 1 / 7], [0.0, 1.0]]])
    assert_close(attention_rollout([weights], residual=0.5), expected)


def random_weights(n_layers, B=2, H=3, T=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, T, generator=gen).softmax(-1) for _ in range(n_layers)]


@FEW
@given(
    st.integers(1, 4),
    st.floats(0.0, 1.0),
    st.integers(0, 2**16),
)
def test_rollout_rows_are_distributions(n_layers, residual, seed):
    rollout = attention_rollout(random_weights(n_layers, seed=seed), residual)
    assert rollout.shape == (2, 5, 5)
    assert (rollout >= 0).all()
    assert_close(rollout.sum(dim=-1), torch.ones(2, 5))


def test_rollout_of_one_layer_without_residual_is_the_head_mean():
    weights = random_weights(1)
    assert_close(attention_rollout(weights, residual=0.0), weights[0].mean(dim=1))


def test_rollout_with_residual_one_is_the_identity():
    rollout = attention_rollout(random_weights(3), residual=1.0)
    assert_close(rollout, torch.eye(5).expand(2, 5, 5))


def test_rollout_is_the_product_of_the_layers_first_on_the_right():
    weights = random_weights(3, seed=1)
    a = [0.3 * torch.eye(5) + 0.7 * w.mean(dim=1) for w in weights]
    assert_close(attention_rollout(weights, residual=0.3), a[2] @ a[1] @ a[0])
    assert (attention_rollout(weights, 0.3) - a[0] @ a[1] @ a[2]).abs().max() > 1e-3


def test_rollout_keeps_the_dtype():
    weights = [w.double() for w in random_weights(2)]
    assert attention_rollout(weights).dtype == torch.float64


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: attention_rollout([]), ValueError, "weights"),
        (lambda: attention_rollout(random_weights(1)[0]), TypeError, "weights"),
        (lambda: attention_rollout([torch.rand(2, 3, 5)]), ValueError, r"weights\[0\]"),
        (lambda: attention_rollout([torch.rand(1, 2, 4, 5)]), ValueError, "weights"),
        (
            lambda: attention_rollout(random_weights(1) + random_weights(1, T=4)),
            ValueError,
            r"weights\[1\]",
        ),
        (lambda: attention_rollout([torch.ones(1, 1, 2, 2).long()]), TypeError, "w"),
        (lambda: attention_rollout(random_weights(1), 1.5), ValueError, "residual"),
        (lambda: attention_rollout(random_weights(1), -0.1), ValueError, "residual"),
        (lambda: attention_rollout(random_weights(1), "0.5"), TypeError, "residual"),
    ],
)
def test_bad_rollout_arguments_are_named(call, error, name):
    with pytest.raises(error, match=name):
        call()


# -- The baselines ----------------------------------------------------------------


def test_the_baselines_shapes_and_documented_sizes():
    images = torch.rand(3, 1, 8, 8)
    mlp, cnn = MLPBaseline(), CNNBaseline()
    assert mlp(images).shape == (3, 10) and cnn(images).shape == (3, 10)
    assert sum(p.numel() for p in mlp.parameters()) == 9610  # 64*128+128 + 128*10+10
    # 1*16*9+16 + 16*32*9+32 + 32*2*2*10+10
    assert sum(p.numel() for p in cnn.parameters()) == 6090
    colour = CNNBaseline(image_size=12, channels=3, n_classes=4, widths=(4, 8))
    assert colour(torch.rand(2, 3, 12, 12)).shape == (2, 4)
    assert MLPBaseline(image_size=4, hidden=7)(torch.rand(2, 1, 4, 4)).shape == (2, 10)


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: CNNBaseline(image_size=6), ValueError, "image_size"),
        (lambda: CNNBaseline(widths=(16,)), ValueError, "widths"),
        (lambda: CNNBaseline(widths=(16, 0)), ValueError, "widths"),
        (lambda: MLPBaseline(hidden=0), ValueError, "hidden"),
        (lambda: MLPBaseline(channels=1.0), TypeError, "channels"),
        (lambda: MLPBaseline(n_classes=0), ValueError, "n_classes"),
    ],
)
def test_bad_baseline_arguments_are_named(call, error, name):
    with pytest.raises(error, match=name):
        call()


def test_attention_rollout_names_mixed_dtypes():
    """Issue 44: layers of different dtypes are named, not a matmul's RuntimeError."""
    weights = torch.rand(2, 1, 2, 4, 4).softmax(-1)
    with pytest.raises(TypeError, match=r"weights\[1\].*dtype"):
        attention_rollout([weights[0], weights[1].double()])
