"""`make gpu-check` cannot run here, so its script runs on the CPU to stay working."""

import subprocess
import sys
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gpu_check.py"


def test_gpu_check_runs_its_checks_on_the_cpu():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "gpu-check: all checks passed" in result.stdout
    assert "held-out accuracy" in result.stdout


def test_gpu_check_says_clearly_when_there_is_no_gpu():
    if torch.cuda.is_available():
        return
    result = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True
    )
    assert result.returncode == 1
    assert "no CUDA device" in result.stdout
