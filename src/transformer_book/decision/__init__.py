"""The Decision Transformer: reinforcement learning as sequence modelling (Chapter 8).

Chen et al. (2021). A trajectory is written as a sequence of tokens

    R_1, s_1, a_1, R_2, s_2, a_2, ..., R_T, s_T, a_T

where R_t = r_t + r_{t+1} + ... + r_T is the **return-to-go** (剩餘回報), the
reward still to come. A causal Transformer reads it and predicts each action a_t
from the hidden state at the token s_t: behaviour cloning, conditioned on the
return the trajectory went on to get. To act, one asks for a return: start with
R_1 = the target, act, subtract each reward received from what is still asked,
repeat. There is no value function and no policy gradient, only next-token
prediction.

The world is a **slippery corridor** (``corridor_step``): ``LENGTH`` cells, the
agent starts in cell 0 and the goal is the last cell. At each of ``HORIZON`` steps
it moves left (0), stays (1) or moves right (2), walls clamp it, and with
probability ``SLIP`` the action it chose is replaced by one drawn uniformly. The
reward r_t is 1 when the move ends on the goal, else 0. The most an episode can
get is ``max_return()`` = HORIZON - LENGTH + 2 = 10: four moves right, then a
reward on every step from the one that arrives; slips make the best *expected*
return smaller, ``optimal_expected_return()`` = 9.29.

The offline data (``offline_dataset``) mixes a random policy with noisy scripted
ones ("go right, except with probability eps act at random"), so its returns span
0 to the maximum, with a mean near 4. Nothing here plans: the model only learns
which actions the trajectories with a given return-to-go took. Asked for 0, 2,
..., 10 (``run_decision``), it gets within 0.75 of each target below the top and
9.2-9.5 at the top, the best expected return; asked for more than 10, it still
gets about 9.3 (measured for seeds 0-3; the bounds below).

One file per concept, everything importable from here:

=============  =================================================================
module         what it holds
=============  =================================================================
``corridor``   the world: ``corridor_step``, ``returns_to_go``, ``max_return``,
               ``optimal_expected_return``, the offline data (``offline_dataset``)
``model``      ``DecisionConfig`` and ``DecisionTransformer``
``training``   ``train_decision_transformer``, ``rollout``, ``run_decision`` and
               the claims Chapter 8 states (``decision_claims``)
=============  =================================================================

Shape letters: N trajectories, B batch of episodes, T time steps (at most the
horizon), D ``d_model``, A actions (3), K targets.
"""

from __future__ import annotations

from .corridor import (
    HORIZON,
    LENGTH,
    N_ACTIONS,
    N_TRAJECTORIES,
    SLIP,
    Trajectories,
    corridor_step,
    max_return,
    offline_dataset,
    optimal_expected_return,
    returns_to_go,
)
from .model import (
    DecisionConfig,
    DecisionTransformer,
)
from .training import (
    ABOVE_MEAN,
    OPTIMAL_GAP,
    RANK_BOUND,
    STEPS,
    TARGETS,
    TOP_FRACTION,
    TRACKING_ERROR,
    DecisionRun,
    decision_claims,
    rank_correlation,
    rollout,
    run_decision,
    train_decision_transformer,
)

__all__ = [
    "LENGTH",
    "HORIZON",
    "SLIP",
    "N_ACTIONS",
    "N_TRAJECTORIES",
    "STEPS",
    "TARGETS",
    "RANK_BOUND",
    "TOP_FRACTION",
    "TRACKING_ERROR",
    "ABOVE_MEAN",
    "OPTIMAL_GAP",
    "max_return",
    "optimal_expected_return",
    "corridor_step",
    "returns_to_go",
    "Trajectories",
    "offline_dataset",
    "DecisionConfig",
    "DecisionTransformer",
    "train_decision_transformer",
    "rollout",
    "rank_correlation",
    "DecisionRun",
    "run_decision",
    "decision_claims",
]
