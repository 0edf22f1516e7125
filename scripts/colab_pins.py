"""Colab's package set and Python: read the set, refresh tests/colab/requirements.txt.

`make colab` builds its environment from tests/colab/requirements.txt, the versions of
Google Colab's published `pip freeze` (github.com/googlecolab/backend-info,
pip-freeze.txt). When Colab moves, download the new file and run

    python scripts/colab_pins.py path/to/pip-freeze.txt

which rewrites the version of every package listed there, strips local version tags
(+cpu, +cu128: PyPI has none), and names the packages Colab no longer lists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINS = ROOT / "tests" / "colab" / "requirements.txt"

# name==version, or name @ url (Colab installs torch from PyTorch's own index)
_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s+;#]+)")
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


def refresh(pins: str, freeze: str) -> tuple[str, list[str]]:
    """pins with every version Colab lists replaced; and the names it lacks."""
    colab = read_freeze(freeze)
    lines, missing = [], []
    for line in pins.splitlines(keepends=True):
        match = _PINNED.match(line)
        if match and normalise(match[1]) in colab:
            line = f"{match[1]}=={colab[normalise(match[1])]}\n"
        elif match:
            missing.append(match[1])
        lines.append(line)
    return "".join(lines), missing


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    text, missing = refresh(PINS.read_text(), Path(argv[0]).read_text())
    PINS.write_text(text)
    print(f"rewrote {PINS.relative_to(ROOT)}")
    for name in missing:
        print(f"  {name}: Colab no longer lists it; remove it, or keep it on purpose")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
