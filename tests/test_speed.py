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
