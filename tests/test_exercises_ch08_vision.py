"""The Chapter 8 ViT checkers accept right answers and name the mistake in wrong
ones."""

from __future__ import annotations

import contextlib

import pytest
import torch
from test_exercises_checking import disguises

import transformer_book.vision as vision
from transformer_book.exercises.ch08_vision import (
    check_attention_rollout,
    check_patchify,
)
from transformer_book.vision import attention_rollout, patchify

# -- Exercise: patchify -----------------------------------------------------------


def patchify_solution(images, patch):
    """The published solution: name the patch axes, move them, flatten."""
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // patch, patch, W // patch, patch)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, rows, cols, C, P, P)
    return x.reshape(B, -1, C * patch * patch)


def patchify_with_unfold(images, patch):
    B, C, _, _ = images.shape
    x = images.unfold(2, patch, patch).unfold(3, patch, patch)  # (B,C,r,c,P,P)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * patch * patch)


def patchify_loops(images, patch):
    B, C, H, W = images.shape
    patches = []
    for r in range(0, H, patch):
        for c in range(0, W, patch):
            patches.append(images[:, :, r : r + patch, c : c + patch].reshape(B, -1))
    return torch.stack(patches, dim=1)


def patchify_in_float64(images, patch):
    return patchify_solution(images.double(), patch)


@pytest.mark.parametrize(
    "right",
    [patchify_solution, patchify_with_unfold, patchify_loops, patchify_in_float64],
)
def test_patchify_checker_accepts_right_answers(right, capsys):
    assert check_patchify(right) is None
    assert "patchify: all checks passed" in capsys.readouterr().out


def arranged(order):
    """patchify with the axes (B, C, r, i, c, j) moved to ``order``."""

    def fn(images, patch):
        B, C, H, W = images.shape
        x = images.reshape(B, C, H // patch, patch, W // patch, patch)
        return x.permute(0, *order).reshape(B, (H // patch) * (W // patch), -1)

    return fn


def in_place(images, patch):
    out = patchify_solution(images, patch).clone()
    images.zero_()
    return out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (arranged((4, 2, 1, 3, 5)), "patches are in the wrong order"),
        (arranged((2, 4, 1, 5, 3)), "pixels inside each patch are transposed"),
        (arranged((2, 4, 3, 5, 1)), "channels are interleaved"),
        (arranged((4, 2, 1, 5, 3)), "image is transposed"),
        (
            lambda x, p: x.reshape(x.shape[0], -1, x.shape[1] * p * p),
            "a reshape alone",
        ),
        (lambda x, p: patchify_solution(x, p).transpose(1, 2), "axes are swapped"),
        (lambda x, p: patchify_solution(x, p)[:, :-1], "shape"),
        (lambda x, p: patchify_solution(x, p).tolist(), "should be a tensor"),
        (lambda x, p: patchify_solution(x, p) * 2, "the patches are wrong"),
        (in_place, "modified images in place"),
        (lambda x, p: patchify(x, p), "without calling the package's patchify"),
        (lambda x, p: vision.patchify(x, p), "without calling the package's patchify"),
        *[(fn, "package's patchify") for fn in disguises(patchify)],
    ],
)
def test_patchify_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_patchify(wrong)


def test_patchify_checker_reports_a_stub_as_not_attempted(capsys):
    def stub(images, patch):
        raise NotImplementedError

    assert check_patchify(stub) is None
    out = capsys.readouterr().out
    assert "patchify: not attempted yet" in out and "passed" not in out


# -- Exercise: attention rollout --------------------------------------------------


def rollout_solution(weights, residual=0.5):
    """The published solution."""
    T = weights[0].shape[-1]
    eye = torch.eye(T, dtype=weights[0].dtype)
    rollout = eye
    for w in weights:
        a = residual * eye + (1 - residual) * w.mean(dim=1)  # (B, T, T)
        a = a / a.sum(dim=-1, keepdim=True)
        rollout = a @ rollout
    return rollout


def rollout_stacked(weights, residual=0.5):
    """Another right answer: stack the layers, then fold them."""
    a = torch.stack(weights).mean(dim=2)  # (L, B, T, T)
    a = residual * torch.eye(a.shape[-1]) + (1 - residual) * a
    a = a / a.sum(dim=-1, keepdim=True)
    out = a[0]
    for layer in a[1:]:
        out = layer @ out
    return out


def rollout_published(weights, residual=0.5):
    """The notebook's solution."""
    result = None
    for w in weights:  # layer 1 first
        a = w.mean(dim=1)  # (B, T, T): the heads' mean
        eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
        a = residual * eye + (1 - residual) * a
        a = a / a.sum(dim=-1, keepdim=True)
        result = a if result is None else a @ result  # later layers on the left
    return result


def rollout_in_float64(weights, residual=0.5):
    return rollout_solution([w.double() for w in weights], residual)


@pytest.mark.parametrize(
    "right", [rollout_solution, rollout_stacked, rollout_published, rollout_in_float64]
)
def test_rollout_checker_accepts_right_answers(right, capsys):
    assert check_attention_rollout(right) is None
    assert "attention_rollout: all checks passed" in capsys.readouterr().out


def rollout_with(**mistake):
    def fn(weights, residual=0.5):
        keep = 1 - residual if mistake.get("swapped") else residual
        if mistake.get("no_residual"):
            keep = 0.0
        eye = torch.eye(weights[0].shape[-1])
        rollout = eye
        for w in weights[-1:] if mistake.get("last_only") else weights:
            heads = w.sum(dim=1) if mistake.get("head_sum") else w.mean(dim=1)
            if mistake.get("head_max"):
                heads = w.amax(dim=1)
            a = keep * eye + (1 - keep) * heads
            if not mistake.get("no_renorm"):
                a = a / a.sum(dim=-1, keepdim=True)
            rollout = rollout @ a if mistake.get("first_left") else a @ rollout
        return rollout

    return fn


def rollout_in_place(weights, residual=0.5):
    for w in weights:
        w.mul_(1.0)
        w[..., 0, 0] += 1.0
    return rollout_solution(weights, residual)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (rollout_with(first_left=True), "wrong order: the first layer goes on"),
        (rollout_with(no_renorm=True), "not renormalised"),
        (rollout_with(swapped=True), "must weigh the identity"),
        (rollout_with(head_sum=True), "average the heads"),
        (rollout_with(no_residual=True), "residual connection is missing"),
        (rollout_with(last_only=True), "all the layers"),
        (rollout_with(head_max=True), "the rollout is wrong"),
        (lambda w, residual=0.5: torch.stack(w).mean(2).sum(0), "rollout is wrong"),
        (lambda w, residual=0.5: w[-1], "shape"),
        (lambda w, residual=0.3: rollout_solution(w, residual), "residual=0.5"),
        (rollout_in_place, r"modified weights\[0\] in place"),
        (
            lambda w, residual=0.5: attention_rollout(w, residual),
            "without calling the package's attention_rollout",
        ),
        (
            lambda w, residual=0.5: vision.attention_rollout(w, residual),
            "without calling the package's attention_rollout",
        ),
        *[(fn, "package's attention_rollout") for fn in disguises(attention_rollout)],
    ],
)
def test_rollout_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_attention_rollout(wrong)


def test_rollout_checker_reports_a_stub_as_not_attempted(capsys):
    def stub(weights, residual=0.5):
        raise NotImplementedError

    assert check_attention_rollout(stub) is None
    assert "attention_rollout: not attempted yet" in capsys.readouterr().out


# -- Both -------------------------------------------------------------------------


def test_the_package_functions_pass_when_they_are_not_forbidden(capsys, monkeypatch):
    import transformer_book.exercises.ch08_vision as ch08

    monkeypatch.setattr(ch08, "forbidden", lambda *a, **k: contextlib.nullcontext())
    assert check_patchify(patchify) is None
    assert check_attention_rollout(attention_rollout) is None
    assert capsys.readouterr().out.count("all checks passed") == 2


def test_the_forbidden_functions_are_restored_after_a_check():
    with pytest.raises(AssertionError):
        check_patchify(lambda x, p: vision.patchify(x, p))
    with pytest.raises(AssertionError):
        check_attention_rollout(lambda w, residual=0.5: vision.attention_rollout(w))
    assert vision.patchify is patchify and vision.attention_rollout is attention_rollout
    images = torch.rand(2, 1, 8, 8)
    assert patchify(images, 2).shape == (2, 16, 4)
    model = vision.ViT(vision.ViTConfig())
    assert model(images).shape == (2, 10)  # the ViT's own patchify works again


def test_a_crash_is_reported_as_such():
    def crashes(images, patch):
        raise RuntimeError("boom")

    with pytest.raises(AssertionError, match="your function raised RuntimeError"):
        check_patchify(crashes)
