"""Run every chapter as a reader in Google Colab does: on Colab's own package set.

A clean virtual environment is built on Colab's Python (3.13) from Colab's published
package versions (tests/colab/requirements.txt: torch 2.11, numpy 2.1, matplotlib
3.10, ipywidgets 7.7.1, ipykernel 6.17, IPython 7.34...), installed first. Then the
book's wheel is installed the way the chapters' Colab setup cell installs it, a plain
`pip install` that keeps what is there (Colab's pins as constraints), then Chapter 8's
pretrained MiniLM with `--no-deps`, as the chapter's install cell does, and nbval to
drive the notebooks. Each notebook is then executed alone in an empty temporary folder,
so a chapter that reads a file from the repository, imports something the package does
not declare, or uses an API that Colab's versions lack (ipywidgets 7.7.1 has no
`Stack`), fails here.

nbval compares every output with the committed one, under the numeric configuration
that this process was started with: `make colab` passes the Makefile's ALT_NUMERICS
(other kernels, one thread), so the same run also proves that no committed output
depends on the CPU's kernels or thread count. And no cell may write to stderr, compared
or not (tests/colab/nbval_no_stderr.py): a reader in Colab would see it in red.

The zh-TW edition's notebooks are the English ones but for their Markdown and their
concept checks, which take `lang="zh-TW"` (tests/test_edition.py proves it, cell by
cell and output by output). So each zh-TW chapter is run here as the cells that differ:
its setup cell, the import of `concept_check`, and every concept check, with the
committed outputs; every other cell of it runs here already, as the English chapter's.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from colab_pins import find_python, normalise, read_freeze  # noqa: E402
from toc_notebooks import toc_notebooks  # noqa: E402

pytestmark = pytest.mark.slow

SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
COLAB_PINS = ROOT / "tests" / "colab" / "requirements.txt"
NO_STDERR = ROOT / "tests" / "colab" / "nbval_no_stderr.py"
COLAB_PYTHON = "3.13"  # Colab's, since pip-freeze.txt of 2026-08-19
# The variables that choose kernels, threads and worker processes, passed on to the
# clean environment
NUMERICS = (
    "ATEN_CPU_CAPABILITY",
    "MKL_ENABLE_INSTRUCTIONS",
    "DNNL_MAX_CPU_ISA",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "TRANSFORMER_BOOK_WORKERS",
)


def colab_python() -> Path:
    """Colab's Python; fails, never skips: the stage is Colab only on Colab's Python."""
    found = find_python(COLAB_PYTHON)
    if found is None:
        pytest.fail(
            f"make colab runs the book on Colab's Python, {COLAB_PYTHON}, and found "
            f"none: not python{COLAB_PYTHON} on PATH, nor under pyenv ($PYENV_ROOT or "
            f"~/.pyenv/versions/{COLAB_PYTHON}.*). Install it (`pyenv install "
            f"{COLAB_PYTHON}`, or actions/setup-python with python-version "
            f"{COLAB_PYTHON}).",
            pytrace=False,
        )
    return found


def constraints(tmp: Path) -> Path:
    """Colab's pins, and requirements.txt's for the packages Colab lacks (mplfonts,
    nbval): what pip may install on top of Colab's set, at known versions."""
    colab = read_freeze(COLAB_PINS.read_text())
    book = [
        line
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in line and normalise(line.split("==")[0]) not in colab
    ]
    path = tmp / "constraints.txt"
    path.write_text(COLAB_PINS.read_text() + "\n".join(book) + "\n")
    return path


PIP_WAITS_S = (30, 120)  # the pauses before the second and the third try


def pip_install(command: list[str]) -> None:
    """Run a pip install, tried again twice after a pause if it fails.

    Colab's set holds PyPI's CUDA build of torch, several GB of wheels: a download cut
    off by the network (pip's exit status 2, a read time-out) is not the book's fault,
    so it is tried again; a failure that lasts through three tries fails the stage,
    with pip's own last lines.
    """
    for attempt, wait in enumerate((*PIP_WAITS_S, None), start=1):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode == 0:
            return
        output = (done.stdout + done.stderr).strip().splitlines()
        if wait is None:
            tail = "\n".join(output[-40:])
            pytest.fail(
                f"pip failed {attempt} times (exit status {done.returncode}): "
                f"{' '.join(command)}\n{tail}",
                pytrace=False,
            )
        print(f"pip failed (exit status {done.returncode}), trying again in {wait} s:")
        print("\n".join(output[-10:]))
        time.sleep(wait)


def build_clean_python(tmp: Path) -> Path:
    """Build the wheel and a Colab environment that holds it, in the folder tmp."""
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
    subprocess.run([str(colab_python()), "-m", "venv", str(tmp / "env")], check=True)
    python = tmp / "env" / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    pins = ["-c", str(constraints(tmp))]
    pip_install([*pip, "-r", str(COLAB_PINS)])  # Colab's set first
    pip_install([*pip, *pins, str(wheel)])  # the setup cell's install
    nodeps = ["--no-deps", "-r", str(ROOT / "requirements-nodeps.txt")]
    pip_install([*pip, *nodeps])  # Chapter 8's install cell
    pip_install([*pip, *pins, "nbval"])  # pytest is Colab's
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    shutil.copy(NO_STDERR, site)  # the plugin, importable as -p nbval_no_stderr
    if os.environ.get("COLAB_ENV_FREEZE"):  # the weekly watch reads what pip pulled
        freeze = subprocess.run(
            [str(python), "-m", "pip", "freeze", "--all"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        Path(os.environ["COLAB_ENV_FREEZE"]).write_text(freeze)
    return python


@pytest.fixture(scope="session")
def clean_python(tmp_path_factory) -> Path:
    """One clean environment for the whole run, shared by pytest-xdist's workers.

    `make colab` runs the notebooks two at a time (`-n 2`): each worker is a process
    with its own session, so the first to arrive builds the environment in the run's
    common temporary folder while holding a lock, and the others wait and reuse it.
    `make test` names a folder in $COLAB_ENV instead and builds the environment there
    from its start, in the background (this module's environment test, run alone),
    while the other stages run: most of the build is waiting on PyPI's downloads. The
    stage then waits for the lock and reuses it, or builds it again if that failed.
    """
    if os.environ.get("COLAB_ENV"):  # make test builds it in the background first
        tmp = Path(os.environ["COLAB_ENV"]).resolve()
    else:
        base = tmp_path_factory.getbasetemp()
        if "PYTEST_XDIST_WORKER" in os.environ:
            base = base.parent  # the folder that all workers' temporary folders share
        tmp = base / "colab"
    tmp.mkdir(parents=True, exist_ok=True)
    python = tmp / "env" / "bin" / "python"
    with open(tmp / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (tmp / "built").exists():
            shutil.rmtree(tmp / "env", ignore_errors=True)  # what a failed build left
            shutil.rmtree(tmp / "dist", ignore_errors=True)
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


def test_the_environment_is_colabs(clean_python):
    """Python 3.13, and every package at Colab's version: the wheel, nbval and the
    MiniLM package installed on top changed none of them."""
    script = (
        "import sys, json, importlib.metadata as m\n"
        "print(json.dumps([sys.version_info[:2], "
        "{d.metadata['Name']: d.version for d in m.distributions()}]))"
    )
    out = subprocess.run(
        [str(clean_python), "-c", script], check=True, capture_output=True, text=True
    ).stdout
    version, installed = json.loads(out)
    assert ".".join(map(str, version)) == COLAB_PYTHON
    installed = read_freeze("\n".join(f"{n}=={v}" for n, v in installed.items()))
    differ = {
        name: (installed.get(name), pinned)
        for name, pinned in read_freeze(COLAB_PINS.read_text()).items()
        if installed.get(name) != pinned
    }
    assert not differ, f"(installed, Colab's) versions differ: {differ}"


ZH_TW = ROOT / "zh-TW" / "book"
_ZH_TW_CONCEPT = re.compile(r'^concept_check\("[\d.]+", lang="zh-TW"\)$')


def edition_cells(notebook: Path) -> nbformat.NotebookNode:
    """The cells of a zh-TW chapter that the English chapter does not run: its setup
    cell, the import of concept_check, and its concept checks, with their outputs."""
    nb = nbformat.read(notebook, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    checks = [cell for cell in code if _ZH_TW_CONCEPT.match(cell.source)]
    imports = nbformat.v4.new_code_cell(
        "from transformer_book.concepts import concept_check", execution_count=1
    )
    nb.cells = [code[0], imports, *checks]
    return nb


@pytest.mark.parametrize(
    "notebook",
    [*toc_notebooks(), *(ZH_TW / p.name for p in toc_notebooks())],
    ids=lambda p: f"zh-TW-{p.stem}" if "zh-TW" in p.parts else p.stem,
)
def test_notebook_runs_alone_with_its_outputs(clean_python, notebook, tmp_path):
    copy = tmp_path / notebook.name
    if "zh-TW" in notebook.parts:
        nbformat.write(edition_cells(notebook), copy)
    else:
        shutil.copy(notebook, copy)
    numerics = {name: os.environ[name] for name in NUMERICS if name in os.environ}
    result = subprocess.run(
        [
            str(clean_python),
            *("-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", "."),
            *("-p", "nbval_no_stderr", "--nbval"),
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
