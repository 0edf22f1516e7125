"""Execute notebooks in place, each in a fresh kernel in an empty folder.

    python scripts/execute.py book/02_attention.ipynb ...   # execute and save
    python scripts/execute.py --bench book/*.ipynb           # time only, save nothing

Widget state is stored in the notebook so the HTML book can render the widgets.
Progress bars are switched off (TRANSFORMER_BOOK_QUIET=1) so outputs stay stable.

Each saved notebook records how long its execution took and on what, in its metadata
(``metadata.transformer_book.execution``: seconds, budget, CPU, threads, kernels,
date). ``tests/test_notebooks.py`` fails a committed notebook whose recorded run took
longer than its budget, so that timings printed on a loaded machine never reach the
reader: execute again on an idle machine.

Machines of the same kind differ in speed, and one host's speed changes from day to
day (on 2026-12-07 the same 2-core AMD EPYC ran Chapter 6's unchanged code in 73.2 s,
against the 53.7 s it had recorded earlier that day). So each saved run also records
a calibration: the best of three runs of a fixed training workload (:func:`calibrate`),
timed just before the notebook, and the run's time scaled to the reference machine,
``seconds * REFERENCE_CALIBRATION_S / calibration``, which is what the budget test
compares. A loaded machine still fails it: other work slows the notebook far more
than the short calibration.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

# The budgets on the 2-core CPU machine (BOOK.md, README): a chapter 60 s, Chapter 8,
# which runs a real pretrained model, 90 s, an appendix page 30 s (Appendix B, which
# trains a GPT on real text, a chapter's 60 s, issue 43); the book 5 minutes.
BOOK_BUDGET_S = 300.0
CHAPTER_BUDGET_S = 60.0
BUDGETS_S = {"08_beyond_text": 90.0, "appendix_gpt_text": 60.0}
APPENDIX_BUDGET_S = 30.0


# The calibration on the reference machine, the idle 2-core AMD EPYC (AVX2) of the
# budgets' measurements (README, MAINTAINING.md): on the slower host of 2026-12-07
# the calibration took 0.37 s (median of five processes, 0.35-0.45 s), and that host
# ran Chapter 6's unchanged code 1.363 times slower than the reference day had (commit
# 32872ee: 73.2 s, against its recorded 53.7 s); 0.37 / 1.363 = 0.272. The
# calibration's own noise, about 12% between processes on a busy host, is why a
# chapter keeps headroom under its budget.
REFERENCE_CALIBRATION_S = 0.272
# A calibration above this was timed on a loaded machine, not a slow one: with other
# processes on the two cores, torch's worker threads wait on each other and the
# short workload slows far more than a notebook does (2026-12-07, under four other
# jobs: 16.5 s against a notebook 2.7 times slower), so its scaling means nothing.
LOADED_CALIBRATION_S = 2 * REFERENCE_CALIBRATION_S


def calibrate(repeats: int = 9) -> float:
    """Seconds of a fixed CPU workload like a chapter's: 10 AdamW steps of a small
    two-layer Transformer encoder on (32, 64, 64) inputs, on torch's default
    threads; after one warm-up run, the median of ``repeats`` runs."""
    import statistics

    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True),
        nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True),
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(32, 64, 64)
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        for _ in range(10):
            loss = model(x).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def budget_seconds(path: Path) -> float:
    """The execution budget of a notebook of the book, by its name."""
    if path.stem in BUDGETS_S:
        return BUDGETS_S[path.stem]
    if path.stem.startswith("appendix"):
        return APPENDIX_BUDGET_S
    return BUDGETS_S.get(path.stem, CHAPTER_BUDGET_S)


def cpu_name() -> str:
    """The CPU's model name (Linux), else what the platform module says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def execution_record(
    path: Path, seconds: float, calibration: float | None = None
) -> dict:
    """What the notebook's metadata keeps of one execution; with the calibration
    timed before it, the time scaled to the reference machine."""
    import torch

    scaled = {}
    if calibration is not None:
        if not calibration > 0:
            raise ValueError(f"calibration must be positive, got {calibration!r}")
        scaled = {
            "calibration_seconds": round(calibration, 3),
            "reference_seconds": round(
                seconds * REFERENCE_CALIBRATION_S / calibration, 1
            ),
        }
    return {
        "seconds": round(seconds, 1),
        **scaled,
        "budget_seconds": budget_seconds(path),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "kernels": torch.backends.cpu.get_cpu_capability(),
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "date": datetime.date.today().isoformat(),
    }


def execute(path: Path, save: bool) -> tuple[float, float]:
    """Execute one notebook in a fresh kernel; return its seconds and the
    calibration timed just before it."""
    nb = nbformat.read(path, as_version=4)
    calibration = calibrate()
    os.environ["TRANSFORMER_BOOK_QUIET"] = "1"
    with tempfile.TemporaryDirectory() as empty:  # no paths into the repository
        # the zh-TW figures' rendering time (_figure_text): a reader never waits for it
        zh_seconds = Path(tempfile.gettempdir()) / f"zh_figures_s_{os.getpid()}"
        zh_seconds.unlink(missing_ok=True)
        os.environ["TRANSFORMER_BOOK_FIGURES_ZH_SECONDS"] = str(zh_seconds)
        # the committed notebooks carry the zh-TW renderings; a --bench run does not
        os.environ["TRANSFORMER_BOOK_FIGURES_ZH"] = "1" if save else "0"
        client = NotebookClient(
            nb,
            timeout=600,
            kernel_name="python3",
            resources={"metadata": {"path": empty}},
            store_widget_state=True,
            record_timing=False,
        )
        start = time.perf_counter()
        client.execute()
        seconds = time.perf_counter() - start
        zh = float(zh_seconds.read_text()) if zh_seconds.exists() else 0.0
        zh_seconds.unlink(missing_ok=True)
        seconds -= zh
    if save:
        book = nb.metadata.setdefault("transformer_book", {})
        book["execution"] = execution_record(path, seconds, calibration)
        book["execution"]["zh_figures_seconds"] = round(zh, 1)
        nbformat.write(nb, path)
    return seconds, calibration


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--bench", action="store_true", help="time only, save nothing")
    args = parser.parse_args()
    import torch

    times, scaled = {}, {}
    print(
        f"CPU: {cpu_name()}, {os.cpu_count()} cores, kernels "
        f"{torch.backends.cpu.get_cpu_capability()}, torch {torch.__version__}\n"
        "seconds as measured, and scaled to the reference machine by the calibration "
        f"timed before each notebook (reference {REFERENCE_CALIBRATION_S} s)",
        flush=True,
    )
    for path in args.notebooks:
        times[path], calibration = execute(path, save=not args.bench)
        scaled[path] = times[path] * REFERENCE_CALIBRATION_S / calibration
        over = scaled[path] > budget_seconds(path)  # what the budget test compares
        note = f"  over its {budget_seconds(path):.0f} s budget" if over else ""
        if calibration > LOADED_CALIBRATION_S:
            note += "  (the machine is loaded: the scaled time means nothing)"
        print(
            f"{times[path]:7.1f} s  (scaled {scaled[path]:5.1f} s, calibration "
            f"{calibration:.3f} s)  {path}{note}",
            flush=True,
        )
    if args.bench:
        print("\nslowest first (scaled):")
        for path, seconds in sorted(scaled.items(), key=lambda kv: -kv[1]):
            print(f"{seconds:7.1f} s  {path}")
    print(
        f"{sum(times.values()):7.1f} s  total (scaled {sum(scaled.values()):.1f} s, "
        f"{len(times)} notebooks; budget {BOOK_BUDGET_S:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
