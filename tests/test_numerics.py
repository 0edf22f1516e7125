"""The numeric configurations `make test` runs its stages under (scripts/numerics.py):
which kernel set each name selects on a CPU of each kind, the variables that hold
ATen, MKL and oneDNN to it, and that the variables do select those kernels."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from numerics import (  # noqa: E402
    LEVELS,
    NAMES,
    ceiling,
    environment,
    main,
    native_level,
    resolve,
)


@pytest.mark.parametrize(
    ("name", "top", "expected"),
    [
        ("avx2", "avx512", "avx2"),  # an AVX-512 machine runs nbval on AVX2 kernels
        ("best", "avx512", "avx512"),  # ... the seeds on its own
        ("default", "avx512", "default"),
        ("avx2", "avx2", "avx2"),  # an AVX2 machine: two sets
        ("best", "avx2", "avx2"),
        ("avx512", "avx2", "avx2"),  # never above the CPU: ATen would crash
        ("avx2", "default", "default"),  # ARM, or an old x86
        ("best", "default", "default"),
    ],
)
def test_each_name_resolves_to_a_level_the_cpu_runs(name, top, expected):
    assert resolve(name, top) == expected


def test_an_aten_capability_already_set_is_a_ceiling():
    assert ceiling("avx512", "avx2") == "avx2"
    assert ceiling("avx512", "AVX2") == "avx2"  # ATen reads it in any case
    assert ceiling("avx2", "avx512") == "avx2"  # never above the CPU
    assert ceiling("avx512", None) == "avx512"
    assert ceiling("avx2", "zvector") == "avx2"  # a value ATen ignores is ignored


@pytest.mark.parametrize(
    ("level", "mkl", "dnnl", "threads"),
    [
        ("default", "SSE4_2", "SSE41", "1"),
        ("avx2", "AVX2", "AVX2", None),
        ("avx512", "AVX512", "AVX512_CORE", None),
    ],
)
def test_mkl_and_onednn_are_held_to_the_same_level(level, mkl, dnnl, threads):
    env = environment(level)
    assert env["ATEN_CPU_CAPABILITY"] == level
    assert env["MKL_ENABLE_INSTRUCTIONS"] == mkl
    assert env["DNNL_MAX_CPU_ISA"] == dnnl
    assert env.get("OMP_NUM_THREADS") == threads
    assert env.get("MKL_NUM_THREADS") == threads


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: resolve("sse", "avx2"), "name must be one of"),
        (lambda: resolve("avx2", "best"), "top must be one of"),
        (lambda: environment("best"), "level must be one of"),
    ],
)
def test_bad_names_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_bad_command_line_prints_the_usage(capsys):
    assert main([]) == 2
    assert main(["sse4"]) == 2
    assert "usage: numerics.py" in capsys.readouterr().err


def test_the_native_level_is_what_torch_detects():
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    found = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    ).stdout.strip()
    assert native_level() == (found.lower() if found.lower() in LEVELS else "default")


@pytest.mark.parametrize("name", NAMES)
def test_the_printed_variables_select_those_kernels_in_torch(name):
    """What the Makefile passes to `env` makes torch run the level it names."""
    printed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "numerics.py"), name],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    env = dict(os.environ) | dict(item.split("=", 1) for item in printed)
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    found = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    expected = resolve(
        name, ceiling(native_level(), os.environ.get("ATEN_CPU_CAPABILITY"))
    )
    assert found.lower() == expected
    assert torch.backends.cpu.get_cpu_capability()  # this process is untouched
