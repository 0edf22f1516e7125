"""Print the notebooks listed in _toc.yml, in book order (used by the Makefile)."""

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


if __name__ == "__main__":
    print(" ".join(str(p.relative_to(ROOT)) for p in toc_notebooks()))
