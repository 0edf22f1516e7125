"""scripts/pretrain_variants.py: the shipped checkpoints are traceable to the script.

Re-running the script's first steps reproduces the loss curve recorded with each
shipped checkpoint. The tolerance, 1e-4 relative, is far above what another CPU's
kernels change in 15 steps (float32 rounding, about 1e-6 relative, compounded over
few steps) and far below what any change of the recipe does: another seed or
another learning rate moves the losses by more than 1e-3 (checked below), so the
test fails if the script and the weights part ways.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from transformer_book.checkpoints import shipped_checkpoint, shipped_record
from transformer_book.experiments.variants import probe_set
from transformer_book.experiments.variants_probes import score_model
from transformer_book.tokenizer import get_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import pretrain_variants  # noqa: E402

STEPS = 15  # re-run steps per model: a few seconds each on one thread
RTOL = 1e-4


def first_losses(name: str, **changes) -> torch.Tensor:
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # as the script runs
    try:
        _, history = pretrain_variants.pretrain(name, STEPS, **changes)
    finally:
        torch.set_num_threads(before)
    return torch.tensor(history["loss"], dtype=torch.float64)


def recorded(name: str) -> torch.Tensor:
    return torch.tensor(shipped_record(name)["loss"][:STEPS], dtype=torch.float64)


def max_relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs() / b.abs()).max().item()


@pytest.mark.parametrize("name", ["BERT", "GPT", "T5"])
def test_the_first_steps_reproduce_the_recorded_losses(name):
    record, plan = shipped_record(name), pretrain_variants.PLANS[name]
    assert record["seed"] == pretrain_variants.SEED
    assert record["lr"] == pretrain_variants.LR
    assert record["schedule_steps"] == plan["steps"]
    assert record["steps"] == plan["steps"]  # the full run shipped
    assert record["config"]["dropout"] == plan["dropout"]
    assert record["corruption"] == plan["corruption"]
    assert max_relative_difference(first_losses(name), recorded(name)) <= RTOL


def test_another_seed_or_learning_rate_does_not_reproduce_them():
    losses = recorded("GPT")
    for changes in ({"seed": 1}, {"lr": 2 * pretrain_variants.LR}):
        assert max_relative_difference(first_losses("GPT", **changes), losses) > 1e-3


@pytest.mark.parametrize(
    ("name", "change"),
    [("BERT", {"mask_prob": 0.15}), ("T5", {"noise_density": 0.15})],
)
def test_another_corruption_rate_does_not_reproduce_them(name, change, monkeypatch):
    """The plan's corruption is part of the recipe the record pins down."""
    plan = pretrain_variants.PLANS[name]
    changed = {**plan, "corruption": {**plan["corruption"], **change}}
    monkeypatch.setitem(pretrain_variants.PLANS, name, changed)
    assert max_relative_difference(first_losses(name), recorded(name)) > 1e-3


@pytest.mark.parametrize("name", ["BERT", "GPT", "T5"])
def test_the_recorded_probe_curve_ends_at_the_shipped_weights(name):
    """The record's last probe scores (float32, at the end of the run) are the
    shipped float16 checkpoint's, up to what float16 storage moves."""
    record = shipped_record(name)
    curve = record["probes"]
    every = record["probe_every"]
    assert [p["step"] for p in curve] == [
        *range(every, record["steps"], every),
        record["steps"],
    ]
    scores = score_model(name, shipped_checkpoint(name), get_tokenizer(), probe_set())
    for key, value in scores.items():
        if key.endswith("acc"):
            assert abs(value - curve[-1][key]) <= 0.01, (key, value, curve[-1])
        else:
            assert value == pytest.approx(curve[-1][key], rel=0.02), key
