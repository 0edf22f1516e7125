"""The Decision Transformer's model: return, state and action tokens, interleaved,
through causal blocks (Chapter 8).

Shape letters: B batch of episodes, T time steps, D ``d_model``, A actions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._validate import (
    check_float_input,
    check_instance,
    check_int,
    check_on,
    check_real,
)
from ..attention import causal_mask
from ..blocks import encoder_stack
from ..models.gpt import gpt2_init_
from .corridor import HORIZON, LENGTH, N_ACTIONS, _check_ids, max_return

__all__ = [
    "DecisionConfig",
    "DecisionTransformer",
]


@dataclass(frozen=True)
class DecisionConfig:
    """A Decision Transformer for a small discrete world."""

    n_states: int = LENGTH  # state ids 0..n_states-1: the corridor's cells
    n_actions: int = N_ACTIONS  # A: action ids 0..A-1
    horizon: int = HORIZON  # time steps 0..horizon-1: rows of the timestep table
    return_scale: float = float(max_return())  # R_t / return_scale enters the Linear
    d_model: int = 32  # D: width of the residual stream
    n_heads: int = 2  # attention heads per block
    n_layers: int = 2  # causal pre-norm blocks
    d_ff: int = 128  # feed-forward width, 4 * D
    dropout: float = 0.0  # on the sub-layers

    def __post_init__(self):
        for name in ("n_states", "n_actions", "horizon", "d_model", "n_layers"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("n_heads", self.n_heads, minimum=1)
        check_int("d_ff", self.d_ff, minimum=1)
        check_real("return_scale", self.return_scale, low=0.0, low_open=True)
        check_real("dropout", self.dropout, 0.0, 1.0, high_open=True)
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
            )


class DecisionTransformer(nn.Module):
    """Return, state and action tokens, interleaved; a_t read at the s_t token.

    token(R_t) = W_R (R_t / scale) + E_time[t];  token(s_t) = E_s[s_t] + E_time[t];
    token(a_t) = E_a[a_t] + E_time[t]. The 3T tokens go through LayerNorm, L causal
    pre-norm blocks (Chapter 5's ``EncoderBlock`` with ``causal_mask``) and a final
    LayerNorm; a linear head turns the hidden state at s_t into logits for a_t. The
    causal mask is what keeps a_t from its own token: s_t sees R_1..R_t, s_1..s_t
    and a_1..a_{t-1} only.

    Shapes: returns_to_go (B, T) float, states (B, T), actions (B, T) int,
            timesteps (B, T) int or None (0..T-1) -> logits (B, T, A)
    """

    def __init__(self, cfg: DecisionConfig):
        super().__init__()
        check_instance("cfg", cfg, DecisionConfig)
        self.cfg = cfg
        self.embed_return = nn.Linear(1, cfg.d_model)
        self.embed_state = nn.Embedding(cfg.n_states, cfg.d_model)
        self.embed_action = nn.Embedding(cfg.n_actions, cfg.d_model)
        self.embed_time = nn.Embedding(cfg.horizon, cfg.d_model)
        self.embed_norm = nn.LayerNorm(cfg.d_model)
        self.blocks = encoder_stack(cfg)  # pre-norm GELU blocks
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.n_actions)
        gpt2_init_(self, cfg.n_layers)

    def forward(
        self,
        returns_to_go: Tensor,
        states: Tensor,
        actions: Tensor,
        timesteps: Tensor | None = None,
    ) -> Tensor:
        self._check(returns_to_go, states, actions, timesteps)
        B, T = states.shape
        if timesteps is None:
            timesteps = torch.arange(T, device=states.device).expand(B, T)
        time = self.embed_time(timesteps)  # (B, T, D)
        scaled = (returns_to_go / self.cfg.return_scale).unsqueeze(-1)  # (B, T, 1)
        tokens = torch.stack(
            [
                self.embed_return(scaled.to(time.dtype)) + time,
                self.embed_state(states) + time,
                self.embed_action(actions) + time,
            ],
            dim=2,
        )  # (B, T, 3, D): R_t, s_t, a_t side by side
        x = self.embed_norm(tokens.flatten(1, 2))  # (B, 3T, D): R1 s1 a1 R2 ...
        mask = causal_mask(3 * T, device=x.device)  # (3T, 3T)
        for block in self.blocks:
            x = block(x, mask=mask)
        at_states = self.norm(x.unflatten(1, (T, 3))[:, :, 1])  # (B, T, D): s_t
        return self.head(at_states)  # (B, T, D) -> (B, T, A)

    def _check(self, returns_to_go, states, actions, timesteps) -> None:
        cfg = self.cfg
        _check_ids("states", states, cfg.n_states, "(B, T)", dim=2)
        _check_ids("actions", actions, cfg.n_actions, "(B, T)", dim=2)
        check_float_input("returns_to_go", returns_to_go, "(B, T)", dim=2)
        given = [("returns_to_go", returns_to_go), ("actions", actions)]
        if timesteps is not None:
            _check_ids("timesteps", timesteps, cfg.horizon, "(B, T)", dim=2)
            given.append(("timesteps", timesteps))
        for name, x in given:
            if x.shape != states.shape:
                raise ValueError(
                    f"{name} {tuple(x.shape)} and states {tuple(states.shape)} must "
                    "have the same shape (B, T)"
                )
        weight = self.embed_return.weight
        for name, x in [("states", states), *given]:
            check_on(name, x, weight)
        if states.shape[1] == 0:
            raise ValueError(f"states has no steps (shape {tuple(states.shape)})")
        if states.shape[1] > cfg.horizon:
            raise ValueError(
                f"states has {states.shape[1]} steps, more than horizon={cfg.horizon}"
            )
