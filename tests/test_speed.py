"""transformer_book.speed and scripts/bench_attention.py: they run and report.

Times are never asserted (machines are noisy); these tests check that the figures
come out, are positive, and that bad arguments are named.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer_book.models import GPT, GPTConfig
from transformer_book.speed import (
    _shares,
    batch_tokens_per_s,
    bench_gpt,
    decode_step_profile,
    generation_tokens_per_s,
    kv_cache_speed_up,
    median_ms,
    mha_forward_backward_ms,
)

ROOT = Path(__file__).resolve().parent.parent


def test_median_ms_is_the_median_of_the_runs(monkeypatch):
    ticks = iter([0.0, 0.003, 1.0, 1.001, 2.0, 2.010])  # runs of 3, 1 and 10 ms
    monkeypatch.setattr("transformer_book.speed.time.perf_counter", lambda: next(ticks))
    calls = []
    assert median_ms(lambda: calls.append(1), repeats=3) == pytest.approx(3.0)
    assert len(calls) == 4, "one warm-up and three timed runs"


def test_the_two_modules_are_timed_on_the_same_work():
    ours, theirs = mha_forward_backward_ms(
        8, causal=True, batch=2, d_model=16, n_heads=2, repeats=1
    )
    assert ours > 0 and theirs > 0


def test_generation_speed_with_and_without_the_cache():
    model = GPT(GPTConfig(vocab_size=20, max_len=16)).eval()
    prompt = torch.zeros(1, 4, dtype=torch.long)
    for use_cache in (True, False):
        assert generation_tokens_per_s(model, prompt, 4, use_cache) > 0


def test_tokens_per_second_count_every_row_of_the_batch(monkeypatch):
    monkeypatch.setattr("transformer_book.speed.median_ms", lambda *a, **k: 500.0)
    model = GPT(GPTConfig(vocab_size=20, max_len=16)).eval()
    prompt = torch.zeros(3, 4, dtype=torch.long)
    assert generation_tokens_per_s(model, prompt, 5, True) == pytest.approx(30.0)
    rates = batch_tokens_per_s(model, (1, 4), new_tokens=5, prompt_len=4, repeats=1)
    assert rates == {1: pytest.approx(10.0), 4: pytest.approx(40.0)}


def test_batch_tokens_per_s_runs_each_batch_size():
    model = bench_gpt(24)
    rates = batch_tokens_per_s(model, (1, 2), new_tokens=4, prompt_len=4, repeats=1)
    assert list(rates) == [1, 2] and all(r > 0 for r in rates.values())
    assert model.cfg.d_model == 128 and model.cfg.n_layers == 2 and not model.training


def test_the_decode_step_profile_splits_the_step_into_shares():
    shares = decode_step_profile(bench_gpt(24), batch=2, prompt_len=4, steps=2)
    assert list(shares) == ["matrix products", "attention", "everything else"]
    assert sum(shares.values()) == pytest.approx(1.0)
    assert all(0 < share < 1 for share in shares.values())


class Event:
    def __init__(self, name, total, parent=None):
        self.name, self.cpu_time_total, self.cpu_parent = name, total, parent


def test_shares_are_the_medians_over_steps_of_their_top_level_operators():
    events = []
    for matrix in (30.0, 20.0, 90.0):  # the third step was interrupted
        step = Event("decode step", 100.0)
        linear = Event("aten::linear", matrix, step)
        events += [
            step,
            linear,
            Event("aten::addmm", matrix - 5, linear),  # inside linear: not again
            Event("aten::scaled_dot_product_attention", 10.0, step),
            Event("aten::layer_norm", 5.0, step),
        ]
    events.append(Event("aten::linear", 50.0))  # outside any step
    shares = _shares(events)
    expected = {"matrix products": 0.3, "attention": 0.1, "everything else": 0.6}
    assert shares == pytest.approx(expected)


def test_kv_cache_speed_up_times_both_ways():
    cached, full = kv_cache_speed_up(4)
    assert cached > 0 and full > 0


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: median_ms("f"), TypeError, "fn must be callable"),
        (lambda: median_ms(lambda: None, repeats=0), ValueError, "repeats"),
        (lambda: mha_forward_backward_ms(0), ValueError, "t must"),
        (lambda: kv_cache_speed_up(0), ValueError, "new_tokens"),
        (lambda: bench_gpt(1), ValueError, "max_len"),
        (lambda: bench_gpt(True), TypeError, "max_len"),
        (lambda: batch_tokens_per_s(bench_gpt(8), (1,), 4, 8), ValueError, "max_len"),
        (lambda: batch_tokens_per_s(bench_gpt(8), (), 2), ValueError, "batches"),
        (lambda: batch_tokens_per_s(bench_gpt(8), (0,), 2), ValueError, "batches"),
        (lambda: batch_tokens_per_s(bench_gpt(8), (1.5,), 2), TypeError, "batches"),
        (lambda: batch_tokens_per_s(bench_gpt(8), 4, 2), ValueError, "batches"),
        (lambda: batch_tokens_per_s(bench_gpt(8), new_tokens=0), ValueError, "new_"),
        (lambda: batch_tokens_per_s(bench_gpt(8), repeats=0), ValueError, "repeats"),
        (lambda: batch_tokens_per_s("gpt"), TypeError, "model must be a GPT"),
        (lambda: decode_step_profile(bench_gpt(8), batch=0), ValueError, "batch"),
        (lambda: decode_step_profile(bench_gpt(8), steps=0), ValueError, "steps"),
        (lambda: decode_step_profile(bench_gpt(8), prompt_len=8), ValueError, "max_"),
        (lambda: decode_step_profile(bench_gpt(8), prompt_len=0), ValueError, "prompt"),
        (
            lambda: generation_tokens_per_s(bench_gpt(8), [1], 2, True),
            TypeError,
            "prompt",
        ),
    ],
)
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_the_bench_script_prints_the_ratios_and_the_cache_speed_up():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_attention.py"), "--quick"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.count("causal") == 2 and "ratio" in out
    assert "with the KV cache" in out and "tokens/s" in out
    assert "package / bare loop" in out and "(same tokens" in out
    assert "tokens/s at batch 1, 8, 64" in out
