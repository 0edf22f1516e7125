"""Colab's package set and Python: read the set, refresh tests/colab/requirements.txt.

`make colab` builds its environment from tests/colab/requirements.txt, the versions of
Google Colab's published `pip freeze` (github.com/googlecolab/backend-info,
pip-freeze.txt). When Colab moves, download the new file and run

    python scripts/colab_pins.py path/to/pip-freeze.txt [--commit SHA --date YYYY-MM-DD]
        [--installed env-freeze.txt] [--summary changes.md]

which rewrites the version of every package listed there, strips local version tags
(+cpu, +cu128: PyPI has none), names the packages Colab no longer lists, and, given
the commit and date of the freeze file, rewrites the header's source line. With
``--installed`` (a `pip freeze` of the environment `make colab` built), a package that
pip installed, that Colab lists and that the pins lack is added at Colab's version.
``--summary`` writes the changes as Markdown, for the weekly watch's pull request or
issue (.github/workflows/colab-watch.yml).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINS = ROOT / "tests" / "colab" / "requirements.txt"

# name==version, or name @ url (Colab installs torch from PyTorch's own index)
_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s+;#]+)")
# The header's machine-written line: where the pins come from
_SOURCE = re.compile(
    r"^# Source: github\.com/googlecolab/backend-info, pip-freeze\.txt at commit "
    r"(\S+) of (\d{4}-\d{2}-\d{2})\.$",
    re.M,
)
_WHEEL_URL = re.compile(  # .../torch-2.11.0%2Bcpu-cp313-...whl: 2.11.0
    r"^([A-Za-z0-9][A-Za-z0-9._-]*) @ \S+/[^/]+?-"
    r"([0-9][0-9A-Za-z.]*?)(?:%2B\w+)?-\S+\.whl"
)


def normalise(name: str) -> str:
    """A package name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_freeze(text: str) -> dict[str, str]:
    """{normalised name: version} of a `pip freeze`, local version tags stripped.

    Lines that install from a URL take the version from the wheel's file name;
    those without one (git checkouts, local files) are left out.
    """
    versions = {}
    for line in text.splitlines():
        match = _PINNED.match(line.strip()) or _WHEEL_URL.match(line.strip())
        if match:
            versions[normalise(match[1])] = match[2]
    return versions


def find_python(version: str) -> Path | None:
    """A Python of that version ("3.13"): `python3.13` on PATH, else under pyenv.

    pyenv keeps its versions in $PYENV_ROOT/versions (~/.pyenv by default), and its
    shim on PATH fails where a version is installed but not selected; so each
    candidate is asked its version. None where there is none.
    """
    candidates = [shutil.which(f"python{version}")]
    for root in filter(None, [os.environ.get("PYENV_ROOT"), Path.home() / ".pyenv"]):
        releases = {  # 3.13.1, not 3.13.1t (free-threaded) or 3.13-dev
            tuple(map(int, p.parents[1].name.split("."))): p
            for p in Path(root).glob(f"versions/{version}.*/bin/python{version}")
            if re.fullmatch(r"\d+\.\d+\.\d+", p.parents[1].name)
        }
        candidates += [releases[key] for key in sorted(releases, reverse=True)]
    for candidate in filter(None, candidates):
        answer = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        if answer.returncode == 0 and answer.stdout.strip() == version:
            return Path(candidate)
    return None


def source(pins: str) -> tuple[str, str]:
    """(commit, date) of the freeze file the pins were taken from (the header)."""
    match = _SOURCE.search(pins)
    if match is None:
        raise ValueError("pins have no '# Source: ... at commit X of YYYY-MM-DD.' line")
    return match[1], match[2]


def refresh(
    pins: str,
    freeze: str,
    installed: Iterable[str] = (),
    commit: str | None = None,
    date: str | None = None,
) -> tuple[str, list[str]]:
    """pins with every version Colab lists replaced; and the names it lacks.

    ``installed``: names of packages the book's environment pulled in; those that
    Colab lists and the pins lack are appended at Colab's version. ``commit`` and
    ``date`` (YYYY-MM-DD) replace the header's source line.
    """
    colab = read_freeze(freeze)
    if (commit is None) != (date is None):
        raise ValueError("commit and date go together")
    if commit is not None:
        if not re.fullmatch(r"[0-9a-f]{7,40}", commit):
            raise ValueError(f"commit must be a hexadecimal git hash, got {commit!r}")
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
            raise ValueError(f"date must be YYYY-MM-DD, got {date!r}")
        source(pins)  # the line must be there
        pins = _SOURCE.sub(
            lambda m: m[0].replace(m[1], commit[:12]).replace(m[2], date), pins
        )
    lines, missing, pinned = [], [], set()
    for line in pins.splitlines(keepends=True):
        match = _PINNED.match(line)
        if match and normalise(match[1]) in colab:
            line = f"{match[1]}=={colab[normalise(match[1])]}\n"
        elif match:
            missing.append(match[1])
        if match:
            pinned.add(normalise(match[1]))
        lines.append(line)
    added = sorted({normalise(n) for n in installed} & set(colab) - pinned)
    if added:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        lines.append(
            "# added by scripts/colab_pins.py: pulled in, and on Colab's list\n"
        )
        lines += [f"{name}=={colab[name]}\n" for name in added]
    return "".join(lines), missing


def changes(old: str, new: str) -> str:
    """What a refresh changed, as Markdown: the source, and each pin changed,
    added or dropped."""
    before, after = read_freeze(old), read_freeze(new)
    rows = [
        f"| {name} | {before.get(name, '')} | {after.get(name, '')} |"
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    ]
    was, now = source(old), source(new)
    head = (
        f"Colab's pip-freeze.txt: commit {was[0]} of {was[1]} → {now[0]} of {now[1]}."
    )
    if not rows:
        return head + "\n\nNo pin changed.\n"
    return "\n".join([head, "", "| package | was | now |", "|---|---|---|", *rows, ""])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("freeze", type=Path, help="Colab's pip-freeze.txt")
    parser.add_argument("--commit", help="the freeze file's commit in backend-info")
    parser.add_argument("--date", help="that commit's date, YYYY-MM-DD")
    parser.add_argument(
        "--installed",
        type=Path,
        help="`pip freeze` of the environment make colab built",
    )
    parser.add_argument("--summary", type=Path, help="write the changes as Markdown")
    args = parser.parse_args(argv)
    installed = read_freeze(args.installed.read_text()) if args.installed else {}
    old = PINS.read_text()
    try:
        text, missing = refresh(
            old, args.freeze.read_text(), installed, args.commit, args.date
        )
    except ValueError as error:
        parser.error(str(error))
    PINS.write_text(text)
    print(f"rewrote {PINS.relative_to(ROOT)}")
    for name in missing:
        print(f"  {name}: Colab no longer lists it; remove it, or keep it on purpose")
    if args.summary:
        summary = changes(old, text)
        if missing:
            summary += "\nNo longer on Colab's list: " + ", ".join(missing) + "\n"
        args.summary.write_text(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
