"""The slippery corridor and its offline data, for the Decision Transformer
(Chapter 8).

See the package docstring (``transformer_book.decision``) for the world's rules.
Shape letters: N trajectories, T time steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .._validate import (
    check_float_input,
    check_generator,
    check_has_values,
    check_int,
    check_real,
    check_seed,
    check_tensor,
)

__all__ = [
    "LENGTH",
    "HORIZON",
    "SLIP",
    "N_ACTIONS",
    "N_TRAJECTORIES",
    "max_return",
    "optimal_expected_return",
    "corridor_step",
    "returns_to_go",
    "Trajectories",
    "offline_dataset",
]

LENGTH = 5  # cells 0..4; start in 0, goal in 4
HORIZON = 13  # steps per episode
SLIP = 0.1  # probability that the chosen action is replaced by a random one
N_ACTIONS = 3  # A: left, stay, right
N_TRAJECTORIES = 1000  # trajectories in the offline data


def max_return(length: int = LENGTH, horizon: int = HORIZON) -> int:
    """The largest return of one episode: horizon - length + 2 (length - 1 steps
    to reach the goal, then a reward on every step from the one that arrives)."""
    check_int("length", length, minimum=2)
    check_int("horizon", horizon, minimum=1)
    return max(0, horizon - length + 2)


def optimal_expected_return(
    length: int = LENGTH, horizon: int = HORIZON, slip: float = SLIP
) -> float:
    """The best expected return any policy gets, by dynamic programming.

    V_H(s) = 0;  V_t(s) = max_a E[r + V_{t+1}(s')], the expectation over the slip,
    for the ``length`` cells s. Returns V_0(0). With ``slip=0`` it equals
    ``max_return``. Going right everywhere attains it.
    """
    check_int("length", length, minimum=2)
    check_int("horizon", horizon, minimum=1)
    check_real("slip", slip, 0.0, 1.0)
    shift = torch.arange(N_ACTIONS) - 1  # (A,): -1, 0, +1
    moved = (torch.arange(length)[:, None] + shift).clamp(0, length - 1)  # (L, A)
    value = torch.zeros(length, dtype=torch.float64)  # (L,): V_H
    for _ in range(horizon):
        gain = (moved == length - 1).double() + value[moved]  # (L, A): r + V(s')
        chosen = (1 - slip) * gain + slip * gain.mean(dim=1, keepdim=True)  # (L, A)
        value = chosen.max(dim=1).values  # (L,)
    return float(value[0])


def _check_ids(name: str, x: object, high: int, shape: str, dim: int) -> None:
    """An integer tensor of ``dim`` dimensions with values in [0, high)."""
    check_tensor(name, x, "int")
    check_has_values(name, x)
    if x.dim() != dim:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(x.shape)}")
    if x.device.type == "cpu" and x.numel() > 0:  # cheap on the CPU, as check_token_ids
        low, top = int(x.min()), int(x.max())
        if low < 0 or top >= high:
            raise ValueError(
                f"{name} must hold values in [0, {high}), got values from {low} "
                f"to {top}"
            )


def corridor_step(
    positions: Tensor,
    actions: Tensor,
    generator: torch.Generator | None = None,
    slip: float = SLIP,
    length: int = LENGTH,
) -> tuple[Tensor, Tensor]:
    """One step of the slippery corridor for a batch of agents.

    s' = clamp(s + a - 1, 0, L - 1), where a is the chosen action except with
    probability ``slip``, when it is drawn uniformly from {0, 1, 2};
    r = 1 if s' = L - 1 else 0. The slips are drawn on the CPU with ``generator``.

    Shapes: positions (B,), actions (B,) in {0, 1, 2} -> positions (B,), rewards (B,)
    """
    check_int("length", length, minimum=2)
    check_real("slip", slip, 0.0, 1.0)
    _check_ids("positions", positions, length, "(B,)", dim=1)
    _check_ids("actions", actions, N_ACTIONS, "(B,)", dim=1)
    if positions.device != actions.device:
        raise ValueError(
            f"positions is on {positions.device} but actions on {actions.device}"
        )
    check_generator("generator", generator)
    if positions.shape != actions.shape:
        raise ValueError(
            f"positions {tuple(positions.shape)} and actions {tuple(actions.shape)} "
            "must both have shape (B,)"
        )
    n = len(actions)
    slipped = torch.rand(n, generator=generator) < slip  # (B,)
    random = torch.randint(N_ACTIONS, (n,), generator=generator)  # (B,)
    taken = torch.where(slipped.to(actions.device), random.to(actions.device), actions)
    new = (positions + taken - 1).clamp(0, length - 1)  # (B,)
    return new, (new == length - 1).float()


def returns_to_go(rewards: Tensor, gamma: float = 1.0) -> Tensor:
    """R_t = sum_{t' >= t} gamma^(t' - t) r_t', the reward still to come at step t.

    The Decision Transformer uses gamma = 1 (undiscounted). Computed backwards:
    R_T = r_T, R_t = r_t + gamma R_{t+1}.

    Shapes: rewards (..., T) -> (..., T), time on the last axis
    """
    check_float_input("rewards", rewards, "(..., T)")
    gamma = check_real("gamma", gamma, 0.0, 1.0)
    check_has_values("rewards", rewards)
    out = torch.empty_like(rewards)  # no steps: no returns, an empty (..., 0)
    running = rewards.new_zeros(rewards.shape[:-1])  # (...,)
    for t in range(rewards.shape[-1] - 1, -1, -1):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


@dataclass(frozen=True)
class Trajectories:
    """Episodes of the corridor, one row each.

    Shapes: states, actions (N, T) int64; rewards, returns_to_go (N, T) float32;
    eps (N,): the behaviour policy's probability of acting at random.
    """

    states: Tensor  # s_t: the cell before the action
    actions: Tensor  # a_t: the action chosen (before any slip)
    rewards: Tensor  # r_t
    returns_to_go: Tensor  # R_t
    eps: Tensor

    @property
    def returns(self) -> Tensor:
        """Each episode's return R_1. Shapes: (N,)"""
        return self.returns_to_go[:, 0]


def offline_dataset(
    n_trajectories: int = N_TRAJECTORIES, seed: int = 0, random_share: float = 0.25
) -> Trajectories:
    """Episodes of a mix of behaviour policies, fixed by ``seed``.

    A ``random_share`` of them act uniformly at random (eps = 1); the others go
    right, except that with probability eps ~ U(0, 1), drawn once per episode,
    they act at random. Their returns spread from 0 to near ``max_return``.
    """
    check_int("n_trajectories", n_trajectories, minimum=1)
    check_seed("seed", seed)
    check_real("random_share", random_share, 0.0, 1.0)
    gen = torch.Generator().manual_seed(seed)
    n = n_trajectories
    eps = torch.rand(n, generator=gen)  # (N,)
    eps = torch.where(torch.rand(n, generator=gen) < random_share, 1.0, eps)
    positions = torch.zeros(n, dtype=torch.long)  # (N,): every episode starts in 0
    states, actions, rewards = [], [], []
    for _ in range(HORIZON):
        explore = torch.rand(n, generator=gen) < eps  # (N,)
        random = torch.randint(N_ACTIONS, (n,), generator=gen)
        chosen = torch.where(explore, random, 2)  # (N,): 2 = right
        states.append(positions)
        actions.append(chosen)
        positions, reward = corridor_step(positions, chosen, gen)
        rewards.append(reward)
    rewards = torch.stack(rewards, dim=1)  # H x (N,) -> (N, H)
    return Trajectories(
        states=torch.stack(states, dim=1),  # (N, H)
        actions=torch.stack(actions, dim=1),  # (N, H)
        rewards=rewards,
        returns_to_go=returns_to_go(rewards),  # (N, H)
        eps=eps,
    )
