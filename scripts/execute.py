"""Execute notebooks in place, each in a fresh kernel in an empty folder.

    python scripts/execute.py book/02_attention.ipynb ...   # execute and save
    python scripts/execute.py --bench book/*.ipynb           # time only, save nothing

Widget state is stored in the notebook so the HTML book can render the widgets.
Progress bars are switched off (TRANSFORMER_BOOK_QUIET=1) so outputs stay stable.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execute(path: Path, save: bool) -> float:
    nb = nbformat.read(path, as_version=4)
    os.environ["TRANSFORMER_BOOK_QUIET"] = "1"
    with tempfile.TemporaryDirectory() as empty:  # no paths into the repository
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
    if save:
        nbformat.write(nb, path)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--bench", action="store_true", help="time only, save nothing")
    args = parser.parse_args()
    times = {}
    for path in args.notebooks:
        times[path] = execute(path, save=not args.bench)
        print(f"{times[path]:7.1f} s  {path}", flush=True)
    if args.bench:
        print("\nslowest first:")
        for path, seconds in sorted(times.items(), key=lambda kv: -kv[1]):
            print(f"{seconds:7.1f} s  {path}")
    print(f"{sum(times.values()):7.1f} s  total ({len(times)} notebooks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
