"""Chapter 8's scaling experiment (experiments.scaling), and its claims for other seeds.

The fast tests check the pieces: the power-law fits against exact synthetic laws
and bad input, Kaplan's parameter count against the formula 12 L D^2 plus the
small terms, and C = 6 N D. The tests marked ``seeds`` rerun ``run_scaling`` with
seeds 1, 2 and 3 and assert the bounds the chapter states for seed 0.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_book.experiments.scaling import (
    LOSS_GAP,
    N_LAYERS,
    SIZES,
    SKIP_GAP,
    fit_power_law,
    fit_power_law_offset,
    non_embedding_parameters,
    run_scaling,
    scaling_claims,
    training_flops,
)
from transformer_book.models import GPT, GPTConfig

FEW = settings(max_examples=25, deadline=None, derandomize=True, database=None)
X = [1e3, 3e3, 1e4, 3e4, 1e5, 3e5]


@FEW
@given(a=st.floats(0.1, 100.0), b=st.floats(-1.0, 2.0))
def test_fit_power_law_recovers_an_exact_power_law(a, b):
    fit = fit_power_law(X, [a * x**-b for x in X])
    assert fit.a == pytest.approx(a, rel=1e-9)
    assert fit.b == pytest.approx(b, abs=1e-9)
    assert fit.r_squared == pytest.approx(1.0)
    assert fit.predict(2e4) == pytest.approx(a * 2e4**-b, rel=1e-9)


def test_fit_power_law_is_the_least_squares_line_in_log_log_space():
    x = torch.tensor([2.0, 3.0, 10.0, 50.0], dtype=torch.float64)
    y = torch.tensor([5.0, 4.1, 3.3, 2.0], dtype=torch.float64)
    design = torch.stack([torch.ones(4, dtype=torch.float64), x.log()], dim=1)
    intercept, slope = torch.linalg.lstsq(design, y.log()[:, None]).solution[:, 0]
    fit = fit_power_law(x, y)  # tensors are accepted as well as sequences
    assert fit.a == pytest.approx(math.exp(intercept), rel=1e-9)
    assert fit.b == pytest.approx(-slope.item(), rel=1e-9)
    predicted = intercept + slope * x.log()
    residual = ((y.log() - predicted) ** 2).sum()
    total = ((y.log() - y.log().mean()) ** 2).sum()
    assert fit.r_squared == pytest.approx(1 - (residual / total).item(), rel=1e-9)
    assert 0.9 < fit.r_squared < 1.0


@pytest.mark.parametrize(
    ("c", "a", "b"), [(1.5, 3.0, 0.4), (4.2, 30.0, 0.5), (0.0, 3.0, 0.4)]
)
def test_the_offset_fit_recovers_an_exact_floor_and_power_law(c, a, b):
    fit = fit_power_law_offset(X, [c + a * x**-b for x in X])
    assert fit.c == pytest.approx(c, abs=1e-6)
    assert fit.a == pytest.approx(a, rel=1e-4)
    assert fit.b == pytest.approx(b, rel=1e-4)
    assert fit.r_squared == pytest.approx(1.0)
    assert fit.predict(5e3) == pytest.approx(c + a * 5e3**-b, rel=1e-6)


def test_the_offset_fit_fits_at_least_as_well_as_the_plain_one():
    y = [5.7, 5.15, 4.9, 4.66]
    x = [6592, 25472, 100096, 223872]
    plain, offset = fit_power_law(x, y), fit_power_law_offset(x, y)
    plain_sse = sum((plain.predict(u) - v) ** 2 for u, v in zip(x, y, strict=True))
    offset_sse = sum((offset.predict(u) - v) ** 2 for u, v in zip(x, y, strict=True))
    assert offset_sse <= plain_sse + 1e-12
    assert 0 <= offset.c < min(y)


@pytest.mark.parametrize(
    ("x", "y", "error", "name"),
    [
        ([1.0, 0.0, 3.0], [1.0, 2.0, 3.0], ValueError, "x"),
        ([1.0, 2.0, 3.0], [1.0, -2.0, 3.0], ValueError, "y"),
        ([1.0, 2.0, math.inf], [1.0, 2.0, 3.0], ValueError, "x"),
        ([1.0, 2.0, 3.0], [1.0, math.nan, 3.0], ValueError, "y"),
        ([1.0, 2.0], [1.0, 2.0, 3.0], ValueError, "x and y"),
        ([2.0, 2.0, 2.0], [1.0, 2.0, 3.0], ValueError, "x"),
        ([2.0], [1.0], ValueError, "x"),
        ("123", [1.0, 2.0, 3.0], TypeError, "x"),
        ([1.0, 2.0, 3.0], 5.0, TypeError, "y"),
        ([1.0, "b", 3.0], [1.0, 2.0, 3.0], TypeError, "x"),
        (torch.ones(2, 2), [1.0, 2.0], ValueError, "x"),
    ],
)
@pytest.mark.parametrize("fit", [fit_power_law, fit_power_law_offset])
def test_bad_points_are_named(fit, x, y, error, name):
    with pytest.raises(error, match=name):
        fit(x, y)


@pytest.mark.parametrize("d_model", [16, 48, 96])
def test_non_embedding_parameters_are_12_layers_d_squared_and_the_small_terms(
    d_model,
):
    cfg = GPTConfig(
        50, 16, d_model=d_model, n_heads=2, n_layers=N_LAYERS, d_ff=4 * d_model
    )
    model = GPT(cfg)
    d = d_model
    attention = 4 * d * d + 4 * d  # q, k, v and output projections, with biases
    feed_forward = 8 * d * d + 4 * d + d  # D -> 4D -> D, with biases
    per_block = attention + feed_forward + 2 * 2 * d  # and two LayerNorms
    expected = N_LAYERS * per_block + 2 * d  # and the final LayerNorm
    assert non_embedding_parameters(model) == expected
    total = sum(p.numel() for p in model.parameters())
    assert total - non_embedding_parameters(model) == (50 + 16) * d


def test_compute_is_six_n_d():
    assert training_flops(1000, 2000) == 12_000_000
    with pytest.raises(ValueError, match="tokens"):
        training_flops(10, -1)
    with pytest.raises(TypeError, match="n_params"):
        training_flops(1.5, 10)
    with pytest.raises(TypeError, match="model"):
        non_embedding_parameters(torch.nn.Linear(2, 2))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"seed": -1}, "seed"),
        ({"steps": 0}, "steps"),
        ({"sizes": ()}, "sizes"),
        ({"sizes": ((32, 2),)}, "sizes"),
        ({"sizes": ((32,),)}, "sizes"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_scaling(**kwargs)


def test_a_tiny_run_gives_the_table_and_the_fits():
    run = run_scaling(seed=0, steps=3, sizes=((16, 2), (8, 1)))
    assert [r.d_model for r in run.rows] == [8, 16], "sorted by N"
    small, large = run.rows
    assert small.params < large.params < large.total_params
    assert small.tokens == large.tokens == 3 * 8 * 63
    assert large.flops == 6 * large.params * large.tokens
    assert 0 < run.fit.r_squared <= 1
    assert math.isfinite(run.offset_fit.c)
    assert run.unigram_loss == pytest.approx(math.log(373), abs=0.05)


# ---------------------------------------------- the chapter's claims, other seeds


def check_claims(run) -> None:
    assert [r.d_model for r in run.rows] == [d for d, _ in SIZES]
    claims = scaling_claims(run)
    assert all(claims.values()), (claims, [r.loss for r in run.rows], run.fit)


def test_claims_fail_when_the_losses_do_not_fall():
    from dataclasses import replace

    run = run_scaling(0, steps=2, sizes=((16, 1), (32, 2), (48, 3)))
    flat = replace(run, rows=tuple(replace(r, loss=5.0) for r in run.rows))
    claims = scaling_claims(flat)
    assert not claims[f"the largest beats the smallest by {LOSS_GAP} nats or more"]
    assert not claims[
        f"each model beats the one two sizes smaller by {SKIP_GAP} nats or more"
    ]


@pytest.mark.seeds
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_loss_falls_with_size_as_a_power_law_for_other_seeds(seed):
    check_claims(run_scaling(seed))
