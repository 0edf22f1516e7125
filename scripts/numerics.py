"""Print the environment that selects one numeric configuration (used by the Makefile).

CPUs differ in the kernels PyTorch runs: ATen picks `avx512`, `avx2` or the portable
`default` kernels by what the CPU can do, and MKL and oneDNN pick their own code paths
the same way. Each set has its own summation orders, so the last digits of a result,
and the exact path of a training run, differ between them. A result that holds under
two of them need not hold under the third, so `make test` runs each that the machine
can run, one per stage that executes every chapter:

    nbval  avx2     the kernels of most readers' laptops (x86 without AVX-512)
    seeds  best     the machine's highest: avx512 where the CPU has it, else avx2
    colab  default  the portable kernels, one thread (what an ARM or an old CPU runs
                    is closest to these)

A configuration above what the CPU can run falls back to the highest it can (ATen
would crash with an illegal instruction), and says so on stderr. An
``ATEN_CPU_CAPABILITY`` already set when this runs is a ceiling: with
``ATEN_CPU_CAPABILITY=avx2 make test`` an AVX-512 machine tests as an AVX2 one does.

Usage: ``python scripts/numerics.py NAME`` prints ``VAR=value ...`` for ``env``;
``--describe NAME`` prints one line for a person instead.
"""

from __future__ import annotations

import os
import subprocess
import sys

LEVELS = ("default", "avx2", "avx512")  # ATen's x86 capabilities, lowest first
# What MKL and oneDNN are held to at each level (their own names for the same ISA)
HELD = {
    "default": {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "DNNL_MAX_CPU_ISA": "SSE41"},
    "avx2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2"},
    "avx512": {"MKL_ENABLE_INSTRUCTIONS": "AVX512", "DNNL_MAX_CPU_ISA": "AVX512_CORE"},
}
THREADS = {"default": 1}  # the portable configuration also runs on one thread
NAMES = (*LEVELS, "best")


def native_level(python: str = sys.executable) -> str:
    """The highest of LEVELS this CPU runs, as PyTorch itself detects it."""
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    found = subprocess.run(
        [python, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    return found.lower() if found.lower() in LEVELS else "default"


def ceiling(native: str, outer: str | None) -> str:
    """The highest level allowed: the CPU's, lowered by an ATEN_CPU_CAPABILITY that
    is already set (a value ATen does not know is ignored, as ATen ignores it)."""
    if outer is not None and outer.lower() in LEVELS:
        return min(native, outer.lower(), key=LEVELS.index)
    return native


def resolve(name: str, top: str) -> str:
    """The level configuration ``name`` runs at under the ceiling ``top``."""
    if name not in NAMES:
        raise ValueError(f"name must be one of {', '.join(NAMES)}; got {name!r}")
    if top not in LEVELS:
        raise ValueError(f"top must be one of {', '.join(LEVELS)}; got {top!r}")
    wanted = top if name == "best" else name
    return min(wanted, top, key=LEVELS.index)


def environment(level: str) -> dict[str, str]:
    """The variables that hold ATen, MKL and oneDNN (and the thread count) to level."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}; got {level!r}")
    env = {"ATEN_CPU_CAPABILITY": level, **HELD[level]}
    if level in THREADS:
        n = str(THREADS[level])
        env |= {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n}
    return env


def main(argv: list[str]) -> int:
    describe = argv[:1] == ["--describe"]
    args = argv[1:] if describe else argv
    if len(args) != 1 or args[0] not in NAMES:
        print(f"usage: numerics.py [--describe] {{{','.join(NAMES)}}}", file=sys.stderr)
        return 2
    top = ceiling(native_level(), os.environ.get("ATEN_CPU_CAPABILITY"))
    level = resolve(args[0], top)
    env = environment(level)
    if describe:
        threads = (
            f", {env['OMP_NUM_THREADS']} thread" if "OMP_NUM_THREADS" in env else ""
        )
        note = "" if args[0] in ("best", level) else f" ({args[0]} is above this CPU's)"
        print(f"numeric configuration: {level} kernels{threads}{note}")
    else:
        print(" ".join(f"{k}={v}" for k, v in env.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
