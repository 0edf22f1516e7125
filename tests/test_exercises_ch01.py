"""The Chapter 1 checkers accept right answers and explain wrong ones.

Per checker: right answers written in several ways (float64 among them) pass, and
each wrong answer is rejected with a message that names its mistake.
"""

import contextlib
import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn import RNNCell as Cell

import transformer_book.exercises.ch01_rnn as ch01
from transformer_book.exercises import (
    check_gradient_ratio,
    check_rnn_step,
    check_spectral_radius,
)
from transformer_book.recurrent import rnn_step, spectral_radius

# --- rnn_step -------------------------------------------------------------------


def good_step(x, h, w_ih, w_hh, b):
    return torch.tanh(x @ w_ih.T + h @ w_hh.T + b)


RIGHT_STEPS = {
    "book": good_step,
    "float64": lambda x, h, wi, wh, b: good_step(
        *(t.double() for t in (x, h, wi, wh, b))
    ),
    "F.linear": lambda x, h, wi, wh, b: torch.tanh(
        F.linear(x, wi, b) + F.linear(h, wh)
    ),
    "einsum": lambda x, h, wi, wh, b: torch.tanh(
        torch.einsum("bd,hd->bh", x, wi) + torch.einsum("bk,hk->bh", h, wh) + b
    ),
    "one matrix": lambda x, h, wi, wh, b: torch.tanh(
        torch.cat([x, h], dim=1) @ torch.cat([wi, wh], dim=1).T + b
    ),
}


@pytest.mark.parametrize("right", RIGHT_STEPS.values(), ids=RIGHT_STEPS.keys())
def test_rnn_step_checker_accepts_right_answers(right, capsys):
    assert check_rnn_step(right) is None
    assert "all checks passed" in capsys.readouterr().out


def writes_into_h_prev(x, h, w_ih, w_hh, b):
    h.copy_(good_step(x, h, w_ih, w_hh, b))
    return h


def with_the_cell(x, h, w_ih, w_hh, b, cell_class=None):
    cell = (cell_class or nn.RNNCell)(w_ih.shape[1], w_ih.shape[0])
    with torch.no_grad():
        cell.weight_ih.copy_(w_ih)
        cell.weight_hh.copy_(w_hh)
        cell.bias_ih.copy_(b)
        cell.bias_hh.zero_()
    return cell(x, h)


def with_an_imported_cell(x, h, w_ih, w_hh, b):
    return with_the_cell(x, h, w_ih, w_hh, b, cell_class=Cell)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda x, h, wi, wh, b: x @ wi.T + h @ wh.T + b, "tanh"),
        (lambda x, h, wi, wh, b: torch.tanh(x @ wi.T + b), "does not depend on h_prev"),
        (lambda x, h, wi, wh, b: torch.tanh(x @ wi.T + h @ wh + b), "W_hh is applied"),
        (lambda x, h, wi, wh, b: torch.tanh(x @ wi + h @ wh.T + b), "W_ih is applied"),
        (lambda x, h, wi, wh, b: torch.tanh(x @ wi.T + h @ wh.T), "bias"),
        (lambda x, h, wi, wh, b: good_step(x, h, wi, wh, b)[:1], "shape"),
        (lambda x, h, wi, wh, b: torch.sigmoid(x @ wi.T + h @ wh.T + b), "is wrong"),
        (lambda x, h, wi, wh, b: torch.tanh(x @ wi.T + b.mm(b)), "RuntimeError"),
        (writes_into_h_prev, "modified h_prev in place"),
        (with_the_cell, "without calling nn.RNNCell"),
        (with_an_imported_cell, "without calling nn.RNNCell"),
        (lambda *args: rnn_step(*args), "package's rnn_step"),
    ],
)
def test_rnn_step_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_rnn_step(wrong)


def test_the_banned_functions_are_restored_and_the_package_agrees(monkeypatch):
    with pytest.raises(AssertionError):
        check_rnn_step(with_an_imported_cell)
    assert nn.RNNCell is Cell and torch.nn.modules.rnn.RNNCell is Cell
    assert ch01.recurrent.rnn_step is rnn_step
    monkeypatch.setattr(ch01, "forbidden", lambda *a, **k: contextlib.nullcontext())
    check_rnn_step(rnn_step)
    check_rnn_step(with_the_cell)


# --- gradient_ratio ---------------------------------------------------------------


def good_ratio(rnn, x):
    x = x.clone().requires_grad_(True)
    _, h_last = rnn(x)
    h_last.sum().backward()
    return (x.grad[:, 0].norm() / x.grad[:, -1].norm()).item()


def book_ratio(rnn, x):
    x = x.clone().requires_grad_(True)
    _, h_last = rnn(x)
    (grad,) = torch.autograd.grad(h_last.sum(), x)
    return (grad[:, 0].norm() / grad[:, -1].norm()).item()


def on_the_given_x(rnn, x):  # x is the checker's copy: marking it is fine
    x.requires_grad_(True)
    _, h_last = rnn(x)
    h_last.sum().backward()
    return x.grad[:, 0].norm() / x.grad[:, -1].norm()


def in_float32(rnn, x):
    return good_ratio(copy.deepcopy(rnn).float(), x.float())


RIGHT_RATIOS = {
    "backward": good_ratio,
    "autograd.grad": book_ratio,
    "tensor": lambda rnn, x: torch.tensor(good_ratio(rnn, x)),
    "numpy": lambda rnn, x: np.float64(good_ratio(rnn, x)),
    "given x": on_the_given_x,
    "float32 copy": in_float32,
}


@pytest.mark.parametrize("right", RIGHT_RATIOS.values(), ids=RIGHT_RATIOS.keys())
def test_gradient_ratio_checker_accepts_right_answers(right, capsys):
    assert check_gradient_ratio(right) is None
    assert "all checks passed" in capsys.readouterr().out


def upside_down(rnn, x):
    return 1.0 / good_ratio(rnn, x)


def all_outputs(rnn, x):
    x = x.clone().requires_grad_(True)
    outputs, _ = rnn(x)
    outputs.sum().backward()
    return (x.grad[:, 0].norm() / x.grad[:, -1].norm()).item()


def first_row_only(rnn, x):
    x = x.clone().requires_grad_(True)
    _, h_last = rnn(x)
    h_last.sum().backward()
    return (x.grad[0, 0].norm() / x.grad[0, -1].norm()).item()


def no_grad_on_input(rnn, x):
    _, h_last = rnn(x)
    h_last.sum().backward()
    return (x.grad[:, 0].norm() / x.grad[:, -1].norm()).item()


def converts_the_rnn(rnn, x):
    return good_ratio(rnn.float(), x.float())


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (upside_down, "upside down"),
        (all_outputs, "last hidden state"),
        (first_row_only, "whole \\(B, D\\) slice"),
        (lambda rnn, x: good_ratio(rnn, x) ** 2, "squared"),
        (no_grad_on_input, "raised"),
        (converts_the_rnn, "modified the rnn"),
        (lambda rnn, x: torch.ones(3), "one number"),
        (lambda rnn, x: "0.1", "number"),
        (lambda rnn, x: float("nan"), "finite"),
    ],
)
def test_gradient_ratio_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_gradient_ratio(wrong)


# --- spectral_radius --------------------------------------------------------------

RIGHT_RADII = {
    "package": spectral_radius,
    "tensor": lambda w: torch.linalg.eigvals(w).abs().max(),
    "float64": lambda w: torch.linalg.eigvals(w.double()).abs().max().item(),
    "numpy": lambda w: np.abs(np.linalg.eigvals(w.numpy())).max(),
    "python": lambda w: max(abs(e) for e in torch.linalg.eigvals(w).tolist()),
}


@pytest.mark.parametrize("right", RIGHT_RADII.values(), ids=RIGHT_RADII.keys())
def test_spectral_radius_checker_accepts_right_answers(right, capsys):
    assert check_spectral_radius(right) is None
    assert "all checks passed" in capsys.readouterr().out


def abs_in_place(w):
    return torch.linalg.eigvals(w.abs_()).abs().max().item()


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda w: torch.linalg.matrix_norm(w, 2).item(), "singular value"),
        (lambda w: torch.linalg.eigvals(w).real.max().item(), "modulus"),
        (lambda w: torch.linalg.eigvals(w).real.abs().max().item(), "modulus"),
        (lambda w: w.abs().max().item(), "spectral radius for"),
        (lambda w: torch.linalg.eigvals(w).abs(), "one number"),
        (lambda w: max(torch.linalg.eigvals(w).tolist(), key=abs), "complex number"),
        (lambda w: torch.linalg.eigvalsh(w).abs().max().item(), "eigvalsh"),
        (abs_in_place, "modified W in place"),
    ],
)
def test_spectral_radius_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_spectral_radius(wrong)
