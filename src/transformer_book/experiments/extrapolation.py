"""Length extrapolation of six position schemes (taught in Chapter 4, §4.7).

The same small decoder (``PositionLM``) is trained once per position scheme on
``lag_copy_task`` ("name the previous token") at length ``train_len``, then tested
on fresh sequences of 1, 2 and 4 times that length. The schemes share everything
else: the initial weights of the parts they have in common, the training data,
the optimiser and the number of steps.

``run_extrapolation(seed)`` is what the chapter runs with seed 0 and what
``tests/test_experiments_extrapolation.py`` runs with other seeds, so that the
chapter's table is checked as bounds that hold over seeds, not as one run's digits.

Shape letters: B batch, T positions, V ``vocab_size``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from .._parallel import map_runs
from .._validate import (
    check_compute_device,
    check_instance,
    check_int,
    check_real,
    check_seed,
)
from ..data import IGNORE_INDEX, lag_copy_task
from ..device import set_seed
from ..position_lm import SCHEMES, PositionLM, PositionLMConfig
from ..train import accuracy, train

__all__ = [
    "ExtrapolationConfig",
    "ExtrapolationResult",
    "train_scheme",
    "evaluate_lengths",
    "run_extrapolation",
]


@dataclass(frozen=True)
class ExtrapolationConfig:
    train_len: int = 16  # L: the length of every training sequence
    test_factors: tuple[int, ...] = (1, 2, 4)  # test lengths, in multiples of L
    vocab_size: int = 16  # token ids; chance accuracy is 1 / vocab_size
    lag: int = 1  # the target is the token `lag` positions back
    d_model: int = 32  # width of the residual stream
    n_heads: int = 4  # attention heads per layer
    n_layers: int = 2  # decoder blocks
    d_ff: int = 64  # hidden width of the feed-forward network
    num_buckets: int = 8  # T5: causal buckets (max_distance is L)
    steps: int = 200  # AdamW steps
    batch_size: int = 64  # sequences per step
    lr: float = 3e-3  # AdamW learning rate
    n_eval: int = 256  # test sequences per length

    def __post_init__(self):
        positive = (
            *("train_len", "vocab_size", "lag", "d_model", "n_heads", "n_layers"),
            *("d_ff", "num_buckets", "steps", "batch_size", "n_eval"),
        )
        for name in positive:
            check_int(name, getattr(self, name), minimum=1)
        check_real("lr", self.lr, 0.0, low_open=True)
        factors = self.test_factors
        if isinstance(factors, str) or not isinstance(factors, tuple | list):
            raise TypeError(f"test_factors must be a tuple of ints, got {factors!r}")
        for i, factor in enumerate(factors):
            check_int(f"test_factors[{i}]", factor, minimum=1)
        if not factors:
            raise ValueError(
                f"test_factors must be positive integers, got {self.test_factors}"
            )
        if self.train_len <= self.num_buckets // 2:
            raise ValueError(
                f"train_len={self.train_len} (T5's max_distance) must exceed "
                f"num_buckets // 2 = {self.num_buckets // 2}, the exact buckets"
            )
        if self.lag >= self.train_len:
            raise ValueError(
                f"lag={self.lag} leaves no target in sequences of "
                f"train_len={self.train_len}"
            )

    @property
    def test_lengths(self) -> list[int]:
        return [factor * self.train_len for factor in self.test_factors]

    def model_config(self, position: str) -> PositionLMConfig:
        """The model for one scheme; the learned table has a row for every test."""
        return PositionLMConfig(
            vocab_size=self.vocab_size,
            position=position,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            d_ff=self.d_ff,
            max_len=max(self.test_lengths),
            num_buckets=self.num_buckets,
            max_distance=self.train_len,  # the far bucket is reached in training
        )


@dataclass
class ExtrapolationResult:
    test_lengths: list[int]  # e.g. [16, 32, 64]
    accuracy: dict[str, list[float]]  # scheme -> accuracy at each test length
    by_position: dict[str, Tensor]  # scheme -> (T,) accuracy per position, longest T
    models: dict[str, PositionLM]  # scheme -> trained model, in eval mode
    seconds: float  # wall-clock time of training all the models (side by side)


def _check_seed_and_cfg(seed: object, cfg: object) -> None:
    check_seed("seed", seed)
    if seed >= 2**62:  # the streams are seeded with 2 * seed + 1 and 2 * seed + 2
        raise ValueError(f"seed must be below 2**62, got {seed}")
    check_instance("cfg", cfg, ExtrapolationConfig)


def _data_generator(seed: int, split: str) -> torch.Generator:
    # Training and test data never share a stream: odd seeds train, even seeds test
    # (seed 0 gives the streams 1 and 2 that the chapter has always used).
    return torch.Generator().manual_seed(2 * seed + (1 if split == "train" else 2))


def train_scheme(
    position: str,
    seed: int = 0,
    cfg: ExtrapolationConfig | None = None,
    device: torch.device | str | None = None,
) -> tuple[PositionLM, dict]:
    """Train one ``PositionLM`` with the given position scheme on length ``L``.

    Returns the model (in eval mode, on ``device``) and ``train``'s history.
    """
    cfg = ExtrapolationConfig() if cfg is None else cfg
    if position not in SCHEMES:
        raise ValueError(f"position={position!r} is not one of {SCHEMES}")
    _check_seed_and_cfg(seed, cfg)
    check_compute_device("device", device)
    set_seed(seed)  # the same initial weights for the parts every scheme shares
    model = PositionLM(cfg.model_config(position))
    gen = _data_generator(seed, "train")

    def get_batch(step: int) -> tuple[Tensor, Tensor]:
        batch = lag_copy_task(
            cfg.batch_size, cfg.train_len, cfg.vocab_size, lag=cfg.lag, generator=gen
        )
        return batch.tokens, batch.target  # (B, L), (B, L)

    def loss_fn(logits: Tensor, target: Tensor) -> Tensor:  # (B, T, V), (B, T)
        return F.cross_entropy(
            logits.flatten(0, 1), target.flatten(), ignore_index=IGNORE_INDEX
        )

    history = train(
        model, get_batch, loss_fn, steps=cfg.steps, lr=cfg.lr, device=device
    )
    return model, history


@torch.no_grad()
def evaluate_lengths(
    model: PositionLM,
    seed: int = 0,
    cfg: ExtrapolationConfig | None = None,
) -> tuple[list[float], Tensor]:
    """Accuracy at every test length, and per position at the longest one.

    Returns ``([acc at each of cfg.test_lengths], by_position (T_max,))``; position
    ``t < lag`` has no target and reads 0.
    """
    cfg = ExtrapolationConfig() if cfg is None else cfg
    check_instance("model", model, PositionLM)
    _check_seed_and_cfg(seed, cfg)
    device = next(model.parameters()).device
    model.eval()
    accs, by_position = [], torch.zeros(0)
    for length in cfg.test_lengths:
        batch = lag_copy_task(
            cfg.n_eval,
            length,
            cfg.vocab_size,
            lag=cfg.lag,
            generator=_data_generator(seed, "test"),
            device=device,
        )
        logits = model(batch.tokens)  # (n_eval, T) -> (n_eval, T, V)
        accs.append(accuracy(logits, batch.target, ignore_index=IGNORE_INDEX))
        if length == max(cfg.test_lengths):
            correct = logits.argmax(-1) == batch.target  # (n_eval, T)
            by_position = correct.float().mean(0).cpu()  # (T,)
    return accs, by_position


def run_extrapolation(
    seed: int = 0,
    schemes: Sequence[str] = SCHEMES,
    cfg: ExtrapolationConfig | None = None,
    device: torch.device | str | None = None,
) -> ExtrapolationResult:
    """Train one model per scheme on length L and test it at cfg.test_lengths.

    >>> result = run_extrapolation(seed=0)            # doctest: +SKIP
    >>> result.accuracy["alibi"]                      # doctest: +SKIP
    [0.99, 0.98, 0.98]                                # at L, 2L, 4L
    """
    cfg = ExtrapolationConfig() if cfg is None else cfg
    _check_seed_and_cfg(seed, cfg)
    if isinstance(schemes, str):
        raise ValueError(f"schemes must be a sequence of names, got {schemes!r}")
    if not isinstance(schemes, Sequence):
        raise TypeError(f"schemes must be a sequence of names, got {schemes!r}")
    check_compute_device("device", device)
    unknown = [s for s in schemes if s not in SCHEMES]
    if unknown or not schemes:
        raise ValueError(f"schemes must be taken from {SCHEMES}, got {list(schemes)}")
    result = ExtrapolationResult(cfg.test_lengths, {}, {}, {}, 0.0)
    # the schemes share nothing: on a CPU they train side by side, one thread each
    start = time.perf_counter()
    runs = map_runs(_scheme_run, [(p, seed, cfg, device) for p in schemes], device)
    # the wall time's share that went to training (the runs also test their models)
    training, busy = (sum(run[i] for run in runs) for i in (3, 4))
    result.seconds = (time.perf_counter() - start) * training / busy
    for position, (model, accs, by_position, *_) in zip(schemes, runs, strict=True):
        result.models[position] = model
        result.accuracy[position] = accs
        result.by_position[position] = by_position
    return result


def _scheme_run(
    position: str, seed: int, cfg: ExtrapolationConfig, device
) -> tuple[PositionLM, list[float], Tensor, float, float]:
    """One scheme of ``run_extrapolation``: its model trained, then tested; with
    the seconds of its training and of the whole run."""
    start = time.perf_counter()
    model, history = train_scheme(position, seed, cfg, device)
    accs, by_position = evaluate_lengths(model, seed, cfg)
    return model, accs, by_position, history["seconds"], time.perf_counter() - start
