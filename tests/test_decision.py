"""The Decision Transformer sketch (decision) against loops, the corridor's optimum
and its own claims.

The fast tests check the pieces: returns-to-go against a loop and as a recursion
(Hypothesis), the corridor's rules and optimum (brute force, dynamic programming,
Monte Carlo), the offline data, the model's interleaving and causality, rollouts
and the rank correlation. The tests marked ``seeds`` rerun ``run_decision`` with
seeds 1, 2 and 3 and assert the bounds the chapter states for seed 0.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_book import decision
from transformer_book.decision import (
    HORIZON,
    LENGTH,
    TARGETS,
    DecisionConfig,
    DecisionTransformer,
    corridor_step,
    decision_claims,
    max_return,
    offline_dataset,
    optimal_expected_return,
    rank_correlation,
    returns_to_go,
    rollout,
    run_decision,
    train_decision_transformer,
)

FEW = settings(max_examples=30, deadline=None, derandomize=True, database=None)


def rtg_loop(rewards: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """R[b, t] = sum over t' >= t of gamma^(t' - t) r[b, t'], two plain loops."""
    out = torch.zeros_like(rewards, dtype=torch.float64)
    batch, steps = rewards.shape
    for b in range(batch):
        for t in range(steps):
            out[b, t] = sum(
                gamma ** (k - t) * float(rewards[b, k]) for k in range(t, steps)
            )
    return out


# -- returns-to-go ----------------------------------------------------------------


@pytest.mark.parametrize("gamma", [1.0, 0.99, 0.5, 0.0])
def test_returns_to_go_equals_the_sum_written_as_loops(gamma):
    rewards = torch.randn(4, 9, generator=torch.Generator().manual_seed(0))
    got = returns_to_go(rewards, gamma)
    assert got.shape == rewards.shape and got.dtype == rewards.dtype
    torch.testing.assert_close(
        got.double(), rtg_loop(rewards, gamma), atol=1e-5, rtol=0
    )


def test_undiscounted_returns_to_go_is_the_reversed_cumulative_sum():
    rewards = torch.tensor([[1.0, 0.0, 2.0, 3.0]])
    assert returns_to_go(rewards).tolist() == [[6.0, 5.0, 5.0, 3.0]]
    assert returns_to_go(rewards, gamma=0.0).tolist() == rewards.tolist()


rows = st.lists(
    st.floats(-5, 5, allow_nan=False, width=32), min_size=1, max_size=12
).map(lambda r: torch.tensor([r], dtype=torch.float64))


@FEW
@given(rewards=rows, gamma=st.floats(0.0, 1.0))
def test_returns_to_go_satisfies_the_recursion(rewards, gamma):
    got = returns_to_go(rewards, gamma)
    torch.testing.assert_close(got[:, -1], rewards[:, -1])
    torch.testing.assert_close(got[:, :-1], rewards[:, :-1] + gamma * got[:, 1:])
    torch.testing.assert_close(got, rtg_loop(rewards, gamma), atol=1e-9, rtol=1e-9)


@FEW
@given(rewards=rows.map(torch.abs))
def test_undiscounted_returns_to_go_of_non_negative_rewards_never_grows(rewards):
    got = returns_to_go(rewards)
    assert (got[:, 1:] <= got[:, :-1] + 1e-12).all()
    assert got[0, 0] == pytest.approx(float(rewards.sum()))


def test_returns_to_go_takes_any_leading_shape():
    rewards = torch.rand(2, 3, 5)
    flat = returns_to_go(rewards.view(6, 5), 0.9).view(2, 3, 5)
    torch.testing.assert_close(returns_to_go(rewards, 0.9), flat)
    torch.testing.assert_close(returns_to_go(rewards[0, 0], 0.9), flat[0, 0])


# -- the corridor and its optimum -------------------------------------------------


def test_the_corridor_moves_clamps_and_rewards_the_goal():
    positions = torch.tensor([0, 0, 2, LENGTH - 1, LENGTH - 2, LENGTH - 1])
    actions = torch.tensor([0, 2, 1, 2, 2, 0])
    new, reward = corridor_step(positions, actions, slip=0.0)
    assert new.tolist() == [0, 1, 2, LENGTH - 1, LENGTH - 1, LENGTH - 2]
    assert reward.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0, 0.0]


def test_a_slip_replaces_the_action_by_a_uniform_one():
    n = 30000
    gen = torch.Generator().manual_seed(0)
    start = torch.full((n,), 2)
    new, _ = corridor_step(start, torch.full((n,), 2), gen, slip=1.0)
    shares = torch.bincount(new - 1, minlength=3).float() / n  # left, stay, right
    torch.testing.assert_close(shares, torch.full((3,), 1 / 3), atol=0.015, rtol=0)
    new, _ = corridor_step(start, torch.full((n,), 2), gen, slip=decision.SLIP)
    moved_right = (new == 3).float().mean().item()
    assert moved_right == pytest.approx(1 - decision.SLIP * 2 / 3, abs=0.01)


@pytest.mark.parametrize(("length", "horizon"), [(3, 4), (4, 5), (2, 3), (4, 2)])
def test_max_return_is_the_best_of_every_action_sequence(length, horizon):
    best = 0.0
    for plan in itertools.product(range(3), repeat=horizon):
        position, total = torch.zeros(1, dtype=torch.long), 0.0
        for a in plan:
            position, r = corridor_step(
                position, torch.tensor([a]), slip=0.0, length=length
            )
            total += float(r)
        best = max(best, total)
    assert max_return(length, horizon) == best
    assert optimal_expected_return(length, horizon, slip=0.0) == best


def test_the_optimal_expected_return_is_what_going_right_gets_on_average():
    n = 20000
    gen = torch.Generator().manual_seed(1)
    position, total = torch.zeros(n, dtype=torch.long), torch.zeros(n)
    for _ in range(HORIZON):
        position, reward = corridor_step(position, torch.full((n,), 2), gen)
        total += reward
    expected = optimal_expected_return()
    assert expected < max_return()  # slips cost something on average
    assert total.mean().item() == pytest.approx(expected, abs=0.05)


def test_the_offline_data_is_consistent_fixed_by_its_seed_and_varied():
    data = offline_dataset(200, seed=3)
    assert data.states.shape == data.actions.shape == (200, HORIZON)
    assert (data.states[:, 0] == 0).all()
    step = data.states[:, 1:] - data.states[:, :-1]
    assert step.abs().max() <= 1, "one cell per step at most"
    arrived = data.states[:, 1:] == LENGTH - 1
    assert torch.equal(data.rewards[:, :-1] == 1, arrived), "reward = on the goal"
    torch.testing.assert_close(data.returns_to_go, returns_to_go(data.rewards))
    again = offline_dataset(200, seed=3)
    assert torch.equal(again.actions, data.actions)
    assert not torch.equal(offline_dataset(200, seed=4).actions, data.actions)
    assert data.returns.min() == 0 and data.returns.max() >= max_return() - 1
    assert data.returns.float().std() > max_return() / 4, "returns spread widely"


# -- the model --------------------------------------------------------------------


def episode(batch=2, steps=HORIZON, seed=0):
    gen = torch.Generator().manual_seed(seed)
    rtg = torch.randint(0, max_return() + 1, (batch, steps), generator=gen).float()
    states = torch.randint(LENGTH, (batch, steps), generator=gen)
    actions = torch.randint(3, (batch, steps), generator=gen)
    return rtg, states, actions


def test_the_model_predicts_one_action_per_step():
    torch.manual_seed(0)
    model = DecisionTransformer(DecisionConfig())
    for steps in (1, 5, HORIZON):
        assert model(*episode(3, steps)).shape == (3, steps, 3)


def test_each_action_is_predicted_from_what_came_before_it_only():
    torch.manual_seed(0)
    model = DecisionTransformer(DecisionConfig()).eval()
    rtg, states, actions = episode()
    logits = model(rtg, states, actions)
    t = 4
    later_actions = actions.clone()
    later_actions[:, t:] = (actions[:, t:] + 1) % 3  # a_t and after
    later_rtg, later_states = rtg.clone(), states.clone()
    later_rtg[:, t + 1 :] += 3.0
    later_states[:, t + 1 :] = (states[:, t + 1 :] + 1) % LENGTH
    changed = model(later_rtg, later_states, later_actions)
    torch.testing.assert_close(changed[:, : t + 1], logits[:, : t + 1])
    assert not torch.allclose(changed[:, t + 1 :], logits[:, t + 1 :])


@pytest.mark.parametrize("which", ["returns_to_go", "states", "timesteps"])
def test_the_prediction_reads_the_return_the_state_and_the_time(which):
    torch.manual_seed(0)
    model = DecisionTransformer(DecisionConfig()).eval()
    rtg, states, actions = episode()
    timesteps = torch.arange(HORIZON).expand(2, HORIZON)
    base = model(rtg, states, actions, timesteps)
    if which == "returns_to_go":
        rtg = rtg.clone()
        rtg[:, 3] += 4.0
    elif which == "states":
        states = states.clone()
        states[:, 3] = (states[:, 3] + 2) % LENGTH
    else:
        timesteps = timesteps.clone()
        timesteps[:, 3] = 0
    changed = model(rtg, states, actions, timesteps)
    torch.testing.assert_close(changed[:, :3], base[:, :3])
    assert not torch.allclose(changed[:, 3], base[:, 3])


def test_training_lowers_the_loss_and_is_deterministic():
    data = offline_dataset(100, seed=0)
    model, history = train_decision_transformer(0, 30, data, batch_size=16)
    first, last = history["loss"][:5], history["loss"][-5:]
    assert sum(last) < sum(first) - 0.5, (first, last)
    assert not model.training
    once, _ = train_decision_transformer(0, 3, data, batch_size=4)
    again, _ = train_decision_transformer(0, 3, data, batch_size=4)
    assert all(
        torch.equal(p, q)
        for p, q in zip(once.parameters(), again.parameters(), strict=True)
    )


def test_rollout_plays_one_or_several_targets_and_restores_the_mode():
    torch.manual_seed(0)
    model = DecisionTransformer(DecisionConfig()).train()
    one = rollout(model, 4.0, n_episodes=5, seed=1)
    several = rollout(model, [0.0, 4.0], n_episodes=5, seed=1)
    assert one.shape == (5,) and several.shape == (2, 5)
    assert model.training
    assert ((one >= 0) & (one <= max_return())).all()
    assert torch.equal(rollout(model, 4.0, n_episodes=5, seed=1), one)


def test_rank_correlation_is_spearmans():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    assert rank_correlation(x, x**3) == pytest.approx(1.0)
    assert rank_correlation(x, -x) == pytest.approx(-1.0)
    # ranks 1..5 against 2, 1, 4, 3, 5: 1 - 6 * 4 / (5 * 24) = 0.8
    y = torch.tensor([2.0, 1.0, 4.0, 3.0, 5.0])
    assert rank_correlation(x, y) == pytest.approx(0.8)
    ties = torch.tensor([1.0, 1.0, 2.0])  # ranks 1.5, 1.5, 3
    assert rank_correlation(ties, torch.tensor([0.0, 1.0, 2.0])) == pytest.approx(
        0.8660254, abs=1e-6
    )


# -- bad input --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: returns_to_go([1.0, 2.0]), TypeError, "rewards"),
        (lambda: returns_to_go(torch.tensor([1, 2])), TypeError, "rewards"),
        (lambda: returns_to_go(torch.tensor(1.0)), ValueError, "rewards"),
        (lambda: returns_to_go(torch.ones(2, 3), gamma=1.5), ValueError, "gamma"),
        (lambda: returns_to_go(torch.ones(2, 3), gamma="1"), TypeError, "gamma"),
        (lambda: max_return(length=1), ValueError, "length"),
        (lambda: optimal_expected_return(slip=2.0), ValueError, "slip"),
        (
            lambda: corridor_step(torch.tensor([0]), torch.tensor([3])),
            ValueError,
            "actions",
        ),
        (
            lambda: corridor_step(torch.tensor([LENGTH]), torch.tensor([0])),
            ValueError,
            "positions",
        ),
        (
            lambda: corridor_step(torch.tensor([0, 1]), torch.tensor([0])),
            ValueError,
            "actions",
        ),
        (lambda: corridor_step([0], torch.tensor([0])), TypeError, "positions"),
        (lambda: offline_dataset(0), ValueError, "n_trajectories"),
        (lambda: offline_dataset(seed=-1), ValueError, "seed"),
        (lambda: DecisionConfig(d_model=30, n_heads=4), ValueError, "n_heads"),
        (lambda: DecisionConfig(return_scale=0.0), ValueError, "return_scale"),
        (lambda: train_decision_transformer(steps=0), ValueError, "steps"),
        (lambda: train_decision_transformer(data="x"), TypeError, "data"),
        (lambda: rollout("model", 1.0), TypeError, "model"),
        (lambda: rank_correlation(torch.ones(3), torch.ones(4)), ValueError, "x"),
        (lambda: run_decision(seed=-1), ValueError, "seed"),
        (lambda: run_decision(targets=()), ValueError, "targets"),
    ],
)
def test_bad_arguments_are_named(call, error, name):
    with pytest.raises(error, match=name):
        call()


@pytest.mark.parametrize(
    ("change", "error", "name"),
    [
        (lambda r, s, a: (r, s.float(), a), TypeError, "states"),
        (lambda r, s, a: (r, s + LENGTH, a), ValueError, "states"),
        (lambda r, s, a: (r, s, a + 3), ValueError, "actions"),
        (lambda r, s, a: (r.long(), s, a), TypeError, "returns_to_go"),
        (lambda r, s, a: (r[:, :-1], s, a), ValueError, "returns_to_go"),
        (lambda r, s, a: (r, s, a[:1]), ValueError, "actions"),
    ],
)
def test_bad_model_inputs_are_named(change, error, name):
    model = DecisionTransformer(DecisionConfig())
    with pytest.raises(error, match=name):
        model(*change(*episode()))


def test_too_long_episodes_and_bad_targets_are_named():
    model = DecisionTransformer(DecisionConfig(horizon=4))
    with pytest.raises(ValueError, match="horizon"):
        model(*episode(steps=5))
    with pytest.raises(ValueError, match="timesteps"):
        model(*episode(steps=4), timesteps=torch.full((2, 4), 4))
    with pytest.raises(ValueError, match=r"target_return\[1\]"):
        rollout(model, [1.0, float("nan")])
    with pytest.raises(TypeError, match="target_return"):
        rollout(model, "high")


# -- the chapter's claims, other seeds --------------------------------------------


def check_claims(run) -> None:
    assert run.targets == TARGETS
    claims = decision_claims(run)
    assert all(claims.values()), (claims, run.achieved)


def test_claims_fail_for_a_model_that_ignores_the_target():
    from dataclasses import replace

    run = run_decision(0, steps=1, n_episodes=4)
    flat = replace(run, achieved=(4.0,) * len(run.targets), rank_correlation=0.0)
    claims = decision_claims(flat)
    assert not claims["the achieved return rises with the requested one"]
    assert not claims["at the top, near the data's best"]


@pytest.mark.seeds
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_achieved_return_follows_the_requested_one_for_other_seeds(seed):
    check_claims(run_decision(seed))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_training_and_rollouts_run_on_the_gpu():
    data = offline_dataset(64, seed=0)
    model, _ = train_decision_transformer(0, 5, data, device="cuda")
    assert next(model.parameters()).is_cuda
    assert rollout(model, [2.0, 6.0], n_episodes=3).shape == (2, 3)


# ---- issue 44


def test_rank_correlation_computes_in_float64_and_stays_within_one():
    gen = torch.Generator().manual_seed(0)
    for n in (3, 7, 40, 101):
        x = torch.randn(n, generator=gen, dtype=torch.float64)
        assert rank_correlation(x, x) == 1.0
        assert rank_correlation(x, -x) == -1.0
        y = torch.randn(n, generator=gen, dtype=torch.float64)
        assert -1.0 <= rank_correlation(x, y) <= 1.0


@pytest.mark.parametrize("which", ["x", "y"])
def test_rank_correlation_refuses_nan(which):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    bad = torch.tensor([1.0, float("nan"), 3.0, 4.0, 5.0])
    args = (bad, x) if which == "x" else (x, bad)
    with pytest.raises(ValueError, match=f"^{which} "):
        rank_correlation(*args)


def test_a_decision_transformer_refuses_zero_steps_and_takes_an_empty_batch():
    model = DecisionTransformer(DecisionConfig(d_model=8, d_ff=8)).eval()
    none = torch.zeros(1, 0, dtype=torch.long)
    with pytest.raises(ValueError, match="states.*no steps"):
        model(none.float(), none, none)
    empty = torch.zeros(0, 3, dtype=torch.long)
    logits = model(empty.float(), empty, empty)
    assert logits.shape == (0, 3, model.cfg.n_actions)
