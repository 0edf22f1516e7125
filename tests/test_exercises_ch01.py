"""The Chapter 1 checkers accept right answers and explain wrong ones."""

import pytest
import torch

from transformer_book.exercises import (
    check_gradient_ratio,
    check_rnn_step,
    check_spectral_radius,
)
from transformer_book.recurrent import rnn_step, spectral_radius

# --- rnn_step -------------------------------------------------------------------


def good_step(x, h, w_ih, w_hh, b):
    return torch.tanh(x @ w_ih.T + h @ w_hh.T + b)


def test_rnn_step_checker_accepts_right_answers(capsys):
    assert check_rnn_step(good_step) is None
    check_rnn_step(lambda x, h, w_ih, w_hh, b: rnn_step(x, h, w_ih, w_hh, b))
    assert "rnn_step: all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda x, h, wi, wh, b: x @ wi.T + h @ wh.T + b, "tanh"),
        (lambda x, h, wi, wh, b: torch.tanh(x @ wi.T + b), "does not depend on h_prev"),
        (lambda x, h, wi, wh, b: torch.tanh(x @ wi.T + h @ wh + b), "transposed"),
        (lambda x, h, wi, wh, b: torch.tanh(x @ wi.T + h @ wh.T), "bias"),
        (lambda x, h, wi, wh, b: good_step(x, h, wi, wh, b)[:1], "shape"),
        (lambda x, h, wi, wh, b: torch.sigmoid(x @ wi.T + h @ wh.T + b), "wrong"),
        (lambda x, h, wi, wh, b: (x @ wi).tanh(), "RuntimeError"),
    ],
)
def test_rnn_step_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_rnn_step(wrong)


# --- gradient_ratio ---------------------------------------------------------------


def good_ratio(rnn, x):
    x = x.clone().requires_grad_(True)
    _, h_last = rnn(x)
    h_last.sum().backward()
    return (x.grad[:, 0].norm() / x.grad[:, -1].norm()).item()


def test_gradient_ratio_checker_accepts_floats_and_scalar_tensors(capsys):
    assert check_gradient_ratio(good_ratio) is None
    check_gradient_ratio(lambda rnn, x: torch.tensor(good_ratio(rnn, x)))
    assert "gradient_ratio: all checks passed" in capsys.readouterr().out


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


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (upside_down, "upside down"),
        (all_outputs, "last hidden state"),
        (first_row_only, "whole \\(B, D\\) slice"),
        (no_grad_on_input, "raised"),
        (lambda rnn, x: torch.ones(3), "one number"),
        (lambda rnn, x: "0.1", "number"),
        (lambda rnn, x: float("nan"), "finite"),
    ],
)
def test_gradient_ratio_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_gradient_ratio(wrong)


# --- spectral_radius --------------------------------------------------------------


def test_spectral_radius_checker_accepts_right_answers(capsys):
    assert check_spectral_radius(spectral_radius) is None
    check_spectral_radius(lambda w: torch.linalg.eigvals(w).abs().max())
    assert "spectral_radius: all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda w: torch.linalg.matrix_norm(w, 2).item(), "singular value"),
        (lambda w: torch.linalg.eigvals(w).real.max().item(), "modulus"),
        (lambda w: torch.linalg.eigvals(w).real.abs().max().item(), "modulus"),
        (lambda w: w.abs().max().item(), "spectral radius for"),
        (lambda w: torch.linalg.eigvals(w).abs(), "one number"),
    ],
)
def test_spectral_radius_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_spectral_radius(wrong)
