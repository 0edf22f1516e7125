"""Fetch local copies of the npm packages the built book loads, into _build/npm/.

`make book` runs this before building: the packages are those of the jsdelivr URLs
in _config.yml (`mathjax_path`, `nb_ipywidgets_js`), and the build points the pages
at the copies (book/_ext/book_offline.py), so the book works offline. Packages named
on the command line are fetched too (`make browser`: axe-core, for the browser
test). `npm pack` fetches each package's own tarball (no dependency tree).

Without npm, or without a network, it says so and exits 0: the build still works,
and its pages load what is missing from the CDN.

    python scripts/npm_copies.py [<package>@<version> ...]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from book_offline import NPM_COPIES, cdn_package, fetch  # noqa: E402


def book_packages(config_file: Path = ROOT / "_config.yml") -> list[str]:
    """The ``<package>@<version>`` of every jsdelivr npm URL the book's pages load."""
    config = yaml.safe_load(Path(config_file).read_text())["sphinx"]["config"]
    urls = [config.get("mathjax_path", ""), *config.get("nb_ipywidgets_js", {})]
    return sorted({found[0] for url in urls if (found := cdn_package(url))})


def main(extra: list[str]) -> int:
    specs = book_packages() + [s for s in extra if s not in book_packages()]
    npm = shutil.which("npm")
    missing = [s for s in specs if not (NPM_COPIES / s).is_dir()]
    if missing and npm is None:
        print(
            f"npm_copies: npm not found, so no local copies of {', '.join(missing)}: "
            "the book's pages will load them from the CDN (install Node.js's npm for "
            "a book that works offline)"
        )
        return 0
    for spec in missing:
        try:
            folder = fetch(spec, npm=npm)
        except (OSError, subprocess.SubprocessError) as error:
            detail = getattr(error, "stderr", b"") or b""
            print(
                f"npm_copies: could not fetch {spec} ({error}; "
                f"{detail.decode(errors='replace').strip()[:200]}): the pages will "
                "load it from the CDN"
            )
            continue
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        print(f"npm_copies: {spec} -> {folder.relative_to(ROOT)} ({size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
