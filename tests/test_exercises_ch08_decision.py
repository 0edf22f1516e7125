"""The Chapter 8 checkers (decisions and scaling) accept right answers and name the
mistake in wrong ones."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
import torch
from test_exercises_checking import disguises

import transformer_book.decision as decision
import transformer_book.experiments.scaling as scaling
from transformer_book.decision import returns_to_go
from transformer_book.exercises.ch08_decision import (
    check_power_law_fit,
    check_returns_to_go,
)
from transformer_book.experiments.scaling import fit_power_law

# -- Exercise: returns-to-go ------------------------------------------------------


def rtg_backwards(rewards, gamma=1.0):
    """The published solution: R_T = r_T, then R_t = r_t + gamma R_{t+1}."""
    out = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def rtg_flip_cumsum(rewards, gamma=1.0):
    """Another right answer: discount, reverse cumulative sum, undo the discount."""
    t = torch.arange(rewards.shape[-1], dtype=torch.float64)
    if gamma == 0.0:
        return rewards.clone()
    scale = gamma**t
    summed = (rewards.double() * scale).flip(-1).cumsum(-1).flip(-1) / scale
    return summed.to(rewards.dtype)


def rtg_matrix(rewards, gamma=1.0):
    """Another: a (T, T) matrix of discounts, in float64."""
    t = torch.arange(rewards.shape[-1])
    later = (t[None, :] - t[:, None]).double()  # t' - t
    weights = torch.where(later >= 0, gamma ** later.clamp(min=0), 0.0)
    return rewards.double() @ weights.T


def rtg_published(rewards, gamma=1.0):
    """The notebook's solution: float64 inside, the input's dtype out."""
    out = torch.zeros_like(rewards, dtype=torch.float64)
    running = torch.zeros(rewards.shape[:-1], dtype=torch.float64)
    for t in range(rewards.shape[-1] - 1, -1, -1):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out.to(rewards.dtype if rewards.is_floating_point() else torch.float32)


def rtg_python_loops(rewards, gamma=1.0):
    """Plain Python lists, in a new tensor of float64."""
    rows = []
    for row in rewards.tolist():
        out, running = [], 0.0
        for r in reversed(row):
            running = r + gamma * running
            out.append(running)
        rows.append(out[::-1])
    return torch.tensor(rows, dtype=torch.float64)


@pytest.mark.parametrize(
    "right",
    [rtg_backwards, rtg_flip_cumsum, rtg_matrix, rtg_published, rtg_python_loops],
)
def test_returns_to_go_checker_accepts_right_answers(right, capsys):
    assert check_returns_to_go(right) is None
    assert "returns_to_go: all checks passed" in capsys.readouterr().out


def forward_cumsum(rewards, gamma=1.0):
    out, running = torch.empty_like(rewards), torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1]):
        running = gamma * running + rewards[..., t]
        out[..., t] = running
    return out


def exclusive(rewards, gamma=1.0):
    return rtg_backwards(rewards, gamma) - rewards


def from_episode_start(rewards, gamma=1.0):
    t = torch.arange(rewards.shape[-1])
    return (rewards * gamma**t).flip(-1).cumsum(-1).flip(-1)


def discounts_r_t(rewards, gamma=1.0):
    return gamma * rtg_backwards(rewards, gamma)


def ignores_gamma(rewards, gamma=1.0):
    return rewards.flip(-1).cumsum(-1).flip(-1)


def whole_return(rewards, gamma=1.0):
    return rewards.sum(-1, keepdim=True).expand_as(rewards).clone()


def over_the_batch(rewards, gamma=1.0):
    return rtg_backwards(rewards.T.contiguous(), gamma).T


def in_place(rewards, gamma=1.0):
    for t in reversed(range(rewards.shape[-1] - 1)):
        rewards[..., t] += gamma * rewards[..., t + 1]
    return rewards


def calls_the_package(rewards, gamma=1.0):
    return returns_to_go(rewards, gamma)


def calls_the_module(rewards, gamma=1.0):
    return decision.returns_to_go(rewards, gamma)


def rl_habit(rewards, gamma=0.99):
    return rtg_backwards(rewards, gamma)


def no_default(rewards, gamma):
    return rtg_backwards(rewards, gamma)


def not_attempted(rewards, gamma=1.0):
    raise NotImplementedError


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (forward_cumsum, "the sum runs the wrong way"),
        (exclusive, "off by one: R_t includes r_t"),
        (whole_return, "the whole episode's return"),
        (from_episode_start, "discount counts from the start"),
        (discounts_r_t, "r_t itself is not discounted"),
        (ignores_gamma, "gamma is ignored"),
        (over_the_batch, "over the batch axis"),
        (lambda r, gamma=1.0: r.sum(-1), "shape"),
        (lambda r, gamma=1.0: rtg_backwards(r, gamma) + 0.1, "returns-to-go are wrong"),
        (lambda r: rtg_backwards(r), "TypeError"),
        (in_place, "in place"),
        (calls_the_package, "without calling the package's returns_to_go"),
        (calls_the_module, "without calling the package's returns_to_go"),
        (rl_habit, "without gamma, your function does not compute the undiscounted"),
        (no_default, "missing 1 required positional argument: 'gamma'"),
        *[(fn, "package's returns_to_go") for fn in disguises(returns_to_go)],
    ],
)
def test_returns_to_go_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_returns_to_go(wrong)


def test_a_stub_is_not_attempted_yet(capsys):
    assert check_returns_to_go(not_attempted) is None
    assert check_power_law_fit(lambda x, y: not_attempted(x)) is None
    assert capsys.readouterr().out.count("not attempted yet") == 2


# -- Exercise: fitting a power law ------------------------------------------------


def fit_by_hand(x, y):
    """The published solution: slope and intercept of the log-log line."""
    lx, ly = torch.log(x), torch.log(y)
    slope = ((lx - lx.mean()) * (ly - ly.mean())).sum() / ((lx - lx.mean()) ** 2).sum()
    intercept = ly.mean() - slope * lx.mean()
    return torch.exp(intercept).item(), -slope.item()


def fit_with_numpy(x, y):
    slope, intercept = np.polyfit(np.log(x.numpy()), np.log(y.numpy()), 1)
    return math.exp(intercept), -slope


def fit_with_lstsq(x, y):
    design = torch.stack([torch.ones_like(x), x.log()], dim=1)
    intercept, slope = torch.linalg.lstsq(design, y.log()[:, None]).solution[:, 0]
    return intercept.exp(), -slope  # 0-d tensors are numbers too


def fit_in_float32(x, y):
    return fit_by_hand(x.float(), y.float())


def fit_published(x, y):
    """The notebook's solution."""
    lx = torch.as_tensor(x, dtype=torch.float64).log()
    ly = torch.as_tensor(y, dtype=torch.float64).log()
    slope = ((lx - lx.mean()) * (ly - ly.mean())).sum() / ((lx - lx.mean()) ** 2).sum()
    intercept = ly.mean() - slope * lx.mean()
    return intercept.exp().item(), -slope.item()


def fit_as_list(x, y):
    return list(fit_by_hand(x, y))


def fit_in_base_10(x, y):
    """Base 10 on both axes: the same line, a = 10 ** intercept."""
    lx, ly = np.log10(x.numpy()), np.log10(y.numpy())
    slope, intercept = np.polyfit(lx, ly, 1)
    return 10**intercept, -slope


@pytest.mark.parametrize(
    "right",
    [
        fit_by_hand,
        fit_with_numpy,
        fit_with_lstsq,
        fit_in_float32,
        fit_published,
        fit_as_list,
        fit_in_base_10,
    ],
)
def test_power_law_checker_accepts_right_answers(right, capsys):
    assert check_power_law_fit(right) is None
    assert "power_law_fit: all checks passed" in capsys.readouterr().out


def fit_log10(x, y):
    """Mixed bases: the slope of natural logs, the intercept raised as base 10."""
    a, b = fit_by_hand(x, y)
    return 10 ** math.log(a), b


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda x, y: (fit_by_hand(x, y)[0], -fit_by_hand(x, y)[1]), "wrong sign"),
        (lambda x, y: fit_by_hand(x, y)[::-1], "swapped"),
        (lambda x, y: (math.log(fit_by_hand(x, y)[0]), fit_by_hand(x, y)[1]), "log a"),
        (fit_log10, "same base"),
        (lambda x, y: (1.0, fit_by_hand(y, x)[1]), "log x on log y"),
        (lambda x, y: (y[0].item(), 0.1), "not the least-squares line"),
        (lambda x, y: fit_by_hand(x, y)[0], "return the two numbers"),
        (lambda x, y: ("a", "b"), "a should be a number"),
        (lambda x, y: fit_by_hand(x.log_(), y), "in place"),
        (lambda x, y: fit_power_law(x, y)[:2], "package's fit_power_law"),
        (lambda x, y: scaling.fit_power_law(x, y), "package's fit_power_law"),
        (lambda x, y: (*fit_by_hand(x, y), 1.0), "got a tuple of 3"),
        *[
            (fn, "package's fit_power_law")
            for original in (fit_power_law, scaling._log_fit)
            for fn in disguises(original)
        ],
    ],
)
def test_power_law_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_power_law_fit(wrong)


def test_the_package_functions_pass_when_they_are_not_forbidden(capsys, monkeypatch):
    import transformer_book.exercises.ch08_decision as ch08

    monkeypatch.setattr(ch08, "forbidden", lambda *a, **k: contextlib.nullcontext())
    assert check_returns_to_go(returns_to_go) is None
    assert (
        check_power_law_fit(lambda x, y: (fit_power_law(x, y).a, fit_power_law(x, y).b))
        is None
    )
    assert capsys.readouterr().out.count("all checks passed") == 2


def test_the_forbidden_functions_are_restored_after_a_check():
    with pytest.raises(AssertionError):
        check_returns_to_go(calls_the_module)
    with pytest.raises(AssertionError):
        check_power_law_fit(lambda x, y: scaling.fit_power_law(x, y))
    assert decision.returns_to_go is returns_to_go
    assert scaling.fit_power_law is fit_power_law
    assert scaling.fit_power_law([1.0, 2.0], [2.0, 1.0]).b == pytest.approx(1.0)
