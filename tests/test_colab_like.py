"""Run every chapter the way a Colab reader does: from the built package alone.

The package is built as a wheel and installed into a clean virtual environment that
holds the pinned torch, then only what the wheel itself declares, plus the kernel
that Colab provides (ipykernel) and nbclient to drive it. Each notebook is then
executed alone in an empty temporary folder, so a chapter that reads a file from the
repository, or imports something the package does not declare, fails here.
"""

from __future__ import annotations

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

RUNNER = """
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=600, kernel_name="python3").execute()
print("executed", sys.argv[1])
"""


def pinned(name: str) -> str:
    text = (ROOT / "requirements.txt").read_text()
    return re.search(rf"^{name}==\S+", text, re.M).group(0)


@pytest.fixture(scope="module")
def clean_python(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("colab")
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
    subprocess.run([*pip, pinned("torch")], check=True)
    subprocess.run([*pip, str(wheel)], check=True)
    subprocess.run([*pip, "ipykernel", "nbclient"], check=True)  # what Colab runs on
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


@pytest.mark.parametrize("notebook", toc_notebooks(), ids=lambda p: p.stem)
def test_notebook_runs_alone_in_an_empty_folder(clean_python, notebook, tmp_path):
    copy = tmp_path / notebook.name
    shutil.copy(notebook, copy)
    result = subprocess.run(
        [str(clean_python), "-c", RUNNER, str(copy)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "TRANSFORMER_BOOK_QUIET": "1",
        },
    )
    assert result.returncode == 0, result.stderr[-3000:]
