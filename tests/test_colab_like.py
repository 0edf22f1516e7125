"""Run every chapter the way a reader on another machine does: from the wheel alone.

The package is built as a wheel and installed into a clean virtual environment that
holds the pinned torch, then only what the wheel itself declares (at the versions
of requirements.txt), plus the kernel that Colab provides (ipykernel) and nbval to
drive it. Each notebook is then executed alone in an empty temporary folder, so a
chapter that reads a file from the repository, or imports something the package does
not declare, fails here.

nbval compares every output with the committed one, under the numeric configuration
that this process was started with: `make colab` passes the Makefile's ALT_NUMERICS
(other kernels, one thread), so the same run also proves that no committed output
depends on the CPU's kernels or thread count.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from toc_notebooks import toc_notebooks  # noqa: E402

pytestmark = pytest.mark.slow

SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
# The variables that choose kernels and threads, passed on to the clean environment
NUMERICS = (
    "ATEN_CPU_CAPABILITY",
    "MKL_ENABLE_INSTRUCTIONS",
    "DNNL_MAX_CPU_ISA",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
)


def pinned(name: str) -> str:
    text = (ROOT / "requirements.txt").read_text()
    return re.search(rf"^{name}==\S+", text, re.M).group(0)


def build_clean_python(tmp: Path) -> Path:
    """Build the wheel and a clean environment that holds it, in the folder tmp."""
    dist = tmp / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(ROOT),
        ],
        check=True,
    )
    wheel = next(dist.glob("transformer_book-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "env")], check=True)
    python = tmp / "env" / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    pins = ["-c", str(ROOT / "requirements.txt")]  # the versions the outputs come from
    subprocess.run([*pip, pinned("torch")], check=True)
    subprocess.run([*pip, *pins, str(wheel)], check=True)
    subprocess.run([*pip, *pins, "ipykernel", "nbval", "pytest"], check=True)
    return python


@pytest.fixture(scope="session")
def clean_python(tmp_path_factory) -> Path:
    """One clean environment for the whole run, shared by pytest-xdist's workers.

    `make colab` runs the notebooks two at a time (`-n 2`): each worker is a process
    with its own session, so the first to arrive builds the environment in the run's
    common temporary folder while holding a lock, and the others wait and reuse it.
    """
    base = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        base = base.parent  # the folder that all workers' temporary folders share
    tmp = base / "colab"
    tmp.mkdir(exist_ok=True)
    python = tmp / "env" / "bin" / "python"
    with open(tmp / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (tmp / "built").exists():
            build_clean_python(tmp)
            (tmp / "built").touch()
    return python


def test_the_wheel_holds_the_package_and_declares_loose_floors(clean_python):
    out = subprocess.run(
        [
            str(clean_python),
            "-c",
            "import importlib.metadata as m; print(m.requires('transformer-book'))",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "torch>=2.1" in out
    assert "==" not in out, (
        "the package must not pin exact versions (Colab keeps its own)"
    )


# Every chapter, and one chapter of the zh-TW edition: its concept checks render in
# Chinese from the catalogue inside the wheel, and everything else is the English
# notebook's
EDITION_CHAPTER = (
    Path(__file__).resolve().parent.parent / "zh-TW/book/02_attention.ipynb"
)


@pytest.mark.parametrize(
    "notebook",
    [*toc_notebooks(), EDITION_CHAPTER],
    ids=lambda p: f"{p.parent.parent.name}-{p.stem}" if "zh-TW" in p.parts else p.stem,
)
def test_notebook_runs_alone_with_its_outputs(clean_python, notebook, tmp_path):
    copy = tmp_path / notebook.name
    shutil.copy(notebook, copy)
    numerics = {name: os.environ[name] for name in NUMERICS if name in os.environ}
    result = subprocess.run(
        [
            str(clean_python),
            *("-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", "."),
            "--nbval",
            *("--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE)),
            copy.name,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "TRANSFORMER_BOOK_QUIET": "1",
            **numerics,
        },
    )
    assert result.returncode == 0, (
        f"under {numerics or 'the default numerics'}:\n{result.stdout[-5000:]}"
    )
