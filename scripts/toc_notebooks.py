"""Print the notebooks listed in _toc.yml, in book order (used by the Makefile).

Every notebook of the table of contents is executed, tested by nbval, benchmarked and
run on Colab's package set alike. The numbered chapters (``01_...`` to ``08_...``)
also follow the chapter conventions (exercises, concept checks, a widget); an
appendix page (``appendix_...``) is a notebook that is not a numbered chapter.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def toc_notebooks() -> list[Path]:
    """The .ipynb files of _toc.yml, in order (a tiny reader: no YAML dependency)."""
    paths = []
    for line in (ROOT / "_toc.yml").read_text().splitlines():
        line = line.strip()
        for key in ("- file:", "file:", "root:"):
            if line.startswith(key):
                name = line.split(":", 1)[1].strip()
                if (ROOT / f"{name}.ipynb").exists():
                    paths.append(ROOT / f"{name}.ipynb")
    return paths


def chapter_number(path: Path) -> int | None:
    """The chapter a notebook is (``05_transformer.ipynb`` -> 5); None for a page
    that is not a numbered chapter, such as the appendix."""
    match = re.match(r"(\d\d)_", path.name)
    return int(match.group(1)) if match else None


def chapter_notebooks() -> list[Path]:
    """The numbered chapters of _toc.yml, in order."""
    return [p for p in toc_notebooks() if chapter_number(p) is not None]


if __name__ == "__main__":
    print(" ".join(str(p.relative_to(ROOT)) for p in toc_notebooks()))
