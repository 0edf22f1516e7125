"""Checkers for Chapter 8's section on images as tokens (the Vision Transformer).

``check_patchify(fn)``: cut images into flattened P x P patches, the ViT's tokens.
``check_attention_rollout(fn)``: Abnar & Zuidema's attention rollout.

Both exercises ask the reader to write the function, not to call the package's
(``vision.patchify``, ``vision.attention_rollout``): while a check runs, those
raise.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .. import vision
from ._checking import call, checker, expect_shape, expect_unchanged, forbidden, matches

__all__ = ["check_patchify", "check_attention_rollout"]


# -- Exercise: patchify ---------------------------------------------------------

# The image seen as (B, C, r, i, c, j): patch row r, patch column c, and the pixel
# (i, j) inside the patch. An answer is an order of these axes, then a flattening
# into (B, N, C*P*P); the right one is (B, r, c | C, i, j).
_RIGHT = ("r", "c", "C", "i", "j")
_MISTAKES = (
    (
        ("c", "r", "C", "i", "j"),
        "the patches are in the wrong order: number them row by row, left to "
        "right along the top patch row first, then the next patch row down",
    ),
    (
        ("r", "c", "C", "j", "i"),
        "the pixels inside each patch are transposed: flatten a patch row by row "
        "(pixel (i, j) of the patch goes to position i * P + j)",
    ),
    (
        ("r", "c", "i", "j", "C"),
        "the channels are interleaved: flatten each patch channel first, all of "
        "channel 0's P * P pixels, then channel 1's",
    ),
    (
        ("c", "r", "C", "j", "i"),
        "the image is transposed: both the patch order and the pixels inside each "
        "patch read columns where they should read rows",
    ),
)


def _arrange(images: Tensor, patch: int, order: tuple[str, ...]) -> Tensor:
    """The patches of ``images`` with the axes in ``order`` (names as above)."""
    B, C, Hi, Wi = images.shape
    x = images.reshape(B, C, Hi // patch, patch, Wi // patch, patch)
    axis = {"C": 1, "r": 2, "i": 3, "c": 4, "j": 5}
    x = x.permute(0, *(axis[name] for name in order))
    return x.reshape(B, (Hi // patch) * (Wi // patch), -1)


def _patchify_cases() -> list[tuple[str, Tensor, int]]:
    gen = torch.Generator().manual_seed(8)

    def images(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=gen)

    return [
        ("two 8 x 8 grey images, patch=2", images(2, 1, 8, 8), 2),
        ("a 3-channel 4 x 6 image, patch=2", images(1, 3, 4, 6), 2),
        ("two 2-channel 6 x 6 images, patch=3", images(2, 2, 6, 6), 3),
        ("a 4 x 4 image, patch=4 (one patch)", images(1, 1, 4, 4), 4),
        ("a 3 x 2 image, patch=1 (one pixel each)", images(1, 1, 3, 2), 1),
    ]


def _name_the_mistake(got, right, mistakes, where: str, otherwise: str, **tol):
    """Return if ``got`` matches ``right``; else raise the message of the first
    (expected, message) pair of ``mistakes`` that it matches, or ``otherwise``."""
    if matches(got, right, **tol):
        return
    for expected, message in mistakes:
        if matches(got, expected, **tol):
            raise AssertionError(f"for {where}, {message}")
    raise AssertionError(f"for {where}, {otherwise}")


def _diagnose_patches(got: Tensor, images: Tensor, patch: int, where: str) -> None:
    plain = (
        images.reshape(got.shape),
        "the values are in the image's own memory order: a reshape alone cuts the "
        "image into strips of rows, not P x P patches",
    )
    mistakes = [plain] + [(_arrange(images, patch, o), m) for o, m in _MISTAKES]
    _name_the_mistake(
        got,
        _arrange(images, patch, _RIGHT),
        mistakes,
        where,
        "the patches are wrong: patch n = r * (W / P) + c must hold the pixels of "
        "rows r*P..r*P+P-1 and columns c*P..c*P+P-1",
        atol=0.0,
        rtol=0.0,
    )


@checker("patchify")
def check_patchify(fn: Callable) -> None:
    """``fn(images, patch)`` -> (B, N, C*P*P): the ViT's flattened patches.

    Patches in row-major order; each flattened channel first, then row by row.
    Checked on grey and colour images, square and not, patches of 1 to 4 pixels.
    """
    with forbidden(vision, "patchify", reader=fn):
        for where, images, patch in _patchify_cases():
            given = images.clone()
            got = call(fn, given, patch)
            expect_unchanged(given, images, "images")
            B, C, Hi, Wi = images.shape
            n, dim = (Hi // patch) * (Wi // patch), C * patch * patch
            swapped = isinstance(got, Tensor) and tuple(got.shape) == (B, dim, n)
            if swapped and n != dim:
                raise AssertionError(
                    f"for {where}, the axes are swapped: return (B, N, C*P*P), one "
                    "row per patch"
                )
            expect_shape(got, (B, n, dim), f"the patches for {where}")
            _diagnose_patches(got, images, patch, where)


# -- Exercise: attention rollout --------------------------------------------------


def _rollout(weights: list[Tensor], residual: float, **wrong) -> Tensor:
    """The rollout in float64; the keywords reproduce common mistakes.

    ``first_left``: multiply with the first layer on the left; ``no_renorm``: skip
    the renormalisation; ``swapped``: residual weighs the attention and 1 -
    residual the identity; ``head_sum``: sum the heads instead of averaging them;
    ``no_residual``: leave out the identity; ``last_only``: the last layer alone.
    """
    T = weights[0].shape[-1]
    eye = torch.eye(T, dtype=torch.float64)
    keep = 1.0 - residual if wrong.get("swapped") else residual
    if wrong.get("no_residual"):
        keep = 0.0
    layers = weights[-1:] if wrong.get("last_only") else weights
    rollout = eye.expand(weights[0].shape[0], T, T)
    for w in layers:
        heads = w.double().sum(1) if wrong.get("head_sum") else w.double().mean(1)
        a = keep * eye + (1.0 - keep) * heads  # (B, T, T)
        if not wrong.get("no_renorm"):
            a = a / a.sum(dim=-1, keepdim=True)
        rollout = rollout @ a if wrong.get("first_left") else a @ rollout
    return rollout


_ROLLOUT_MISTAKES = (
    (
        "first_left",
        "the layers are multiplied in the wrong order: the first layer goes on "
        "the right, rollout = A'_L ... A'_2 A'_1",
    ),
    (
        "no_renorm",
        "the rows are not renormalised: after adding the identity, divide each "
        "row of A' by its sum",
    ),
    ("swapped", "`residual` must weigh the identity and 1 - residual the attention"),
    ("head_sum", "average the heads, do not sum them"),
    ("no_residual", "the residual connection is missing: A' = residual * I + ..."),
    ("last_only", "multiply all the layers, not only the last one"),
)


def _attention(gen: torch.Generator, L: int, B: int, H: int, T: int) -> list[Tensor]:
    """L layers of random attention weights (B, H, T, T), rows summing to 1."""
    return [(torch.randn(B, H, T, T, generator=gen) * 2).softmax(-1) for _ in range(L)]


def _rollout_cases() -> list[tuple[str, list[Tensor], float]]:
    gen = torch.Generator().manual_seed(9)
    padded = _attention(gen, 2, 2, 2, 5)
    for w in padded:  # the last key is padding: its column is 0, rows sum below 1
        w[..., -1] = 0.0
    return [
        ("two layers, residual=0.5", _attention(gen, 2, 2, 3, 5), 0.5),
        ("three layers, residual=0.3", _attention(gen, 3, 1, 2, 4), 0.3),
        ("one layer, residual=0", _attention(gen, 1, 2, 4, 6), 0.0),
        ("rows that sum below 1 (a padded key)", padded, 0.5),
        ("four layers of one head, residual=0.8", _attention(gen, 4, 3, 1, 3), 0.8),
    ]


def _diagnose_rollout(got: Tensor, weights: list[Tensor], residual, where) -> None:
    mistakes = [
        (_rollout(weights, residual, **{mistake: True}), message)
        for mistake, message in _ROLLOUT_MISTAKES
    ]
    _name_the_mistake(
        got,
        _rollout(weights, residual),
        mistakes,
        where,
        "the rollout is wrong: per layer A' = residual * I + (1 - residual) * mean "
        "over heads, rows renormalised, then the product",
    )


@checker("attention_rollout")
def check_attention_rollout(fn: Callable) -> None:
    """``fn(weights, residual=0.5)`` -> (B, T, T), from L layers (B, H, T, T).

    A' = residual * I + (1 - residual) * mean_h W_h, rows renormalised to sum 1,
    rollout = A'_L ... A'_1. Checked on one to four layers, several residuals,
    and rows that sum below 1.
    """
    with forbidden(vision, "attention_rollout", reader=fn):
        for where, weights, residual in _rollout_cases():
            given = [w.clone() for w in weights]
            got = call(fn, given, residual=residual)
            for i, (g, w) in enumerate(zip(given, weights, strict=True)):
                expect_unchanged(g, w, f"weights[{i}]")
            B, _, T, _ = weights[0].shape
            expect_shape(got, (B, T, T), f"the rollout for {where}")
            _diagnose_rollout(got, weights, residual, where)
        weights = _rollout_cases()[0][1]
        got = call(fn, [w.clone() for w in weights])
        if not matches(got, _rollout(weights, 0.5)):
            raise AssertionError("called without `residual`, use residual=0.5")
