"""The built book works offline: local copies of the scripts the pages load.

The pages load three JavaScript packages: MathJax (formulas), require.js and the
ipywidgets HTML manager (widgets). The configuration names them by their jsdelivr
URLs (``mathjax_path`` and the keys of ``nb_ipywidgets_js``), which say the npm
package and version: ``https://cdn.jsdelivr.net/npm/<package>@<version>/<file>``.

``scripts/npm_copies.py`` (run by ``make book``) fetches each package with
``npm pack`` into ``_build/npm/<package>@<version>/``. This extension then

1. points each such URL at ``_static/npm/<package>@<version>/<file>`` where the
   package's copy is there, and leaves the CDN URL where it is not (no npm, or no
   network when the copies were fetched), saying so in the build's log;
2. copies into the built edition's ``_static/npm/`` the files a page needs: the file
   it loads, the files that file loads in turn (``ALSO_NEEDED``: MathJax's
   components and fonts, the widget manager's fonts) and the package's licence.

So a copy of ``_build/html``, opened from disk or served locally with no network,
shows every widget and formula. Both editions use the same copies (the zh-TW
build reads the same ``_build/npm``), each in its own ``_static/npm/``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

# The repository's root (this file is book/_ext/book_offline.py)
ROOT = Path(__file__).resolve().parents[2]
# Where scripts/npm_copies.py unpacks the npm packages: <package>@<version>/
NPM_COPIES = ROOT / "_build" / "npm"
# The folder under the built edition's _static/ that holds the copies
STATIC_FOLDER = "npm"

CDN = "https://cdn.jsdelivr.net/npm/"
_CDN_URL = re.compile(
    r"^https://cdn\.jsdelivr\.net/npm/"
    r"(?P<spec>(?:@[a-z0-9][\w.-]*/)?[a-z0-9][\w.-]*@[\w.+-]+)/(?P<file>[^?#]+)$"
)

# Besides the file a page loads, what it loads in turn, by package name (globs
# relative to the package's folder). MathJax's combined component loads the TeX
# extensions it needs (autoload), the CHTML fonts, and, from its menu, the
# accessibility components (explorer, speech: a11y/ and sre/). The widget manager's
# style sheets name its icon fonts (woff2, then woff and ttf; the eot and svg forms
# are for browsers that read neither).
ALSO_NEEDED = {
    "mathjax": [
        "es5/input/**/*",
        "es5/output/chtml/**/*",
        "es5/ui/**/*",
        "es5/a11y/**/*",
        "es5/sre/**/*",
    ],
    "@jupyter-widgets/html-manager": ["dist/*.woff2", "dist/*.woff", "dist/*.ttf"],
}
# Copied from every package: its licence and its manifest (name and version)
ALWAYS = ["LICENSE*", "package.json"]


def cdn_package(url: str) -> tuple[str, str] | None:
    """(``<package>@<version>``, file in the package) of a jsdelivr npm URL, or None
    for any other URL."""
    if not isinstance(url, str):
        raise TypeError(f"url must be a string, not {type(url).__name__}")
    match = _CDN_URL.match(url)
    if match is None:
        return None
    file = PurePosixPath(match.group("file"))
    if ".." in file.parts:
        raise ValueError(f"url names a file outside its package: {url!r}")
    return match.group("spec"), file.as_posix()


def package_name(spec: str) -> str:
    """``@jupyter-widgets/html-manager`` of ``@jupyter-widgets/html-manager@1.0.6``."""
    name, at, version = spec.rpartition("@")
    if not at or not name or not version or name.endswith("/"):
        raise ValueError(f"spec must be <package>@<version>: {spec!r}")
    return name


def local_file(url: str, copies: Path = NPM_COPIES) -> str | None:
    """The path, relative to ``_static/``, of the local copy of the file that ``url``
    names, or None where there is none (not a jsdelivr npm URL, or not fetched).

    jsdelivr minifies any file on request, so ``require.min.js`` of a package that
    ships only ``require.js`` is served from ``require.js``.
    """
    found = cdn_package(url)
    if found is None:
        return None
    spec, file = found
    folder = Path(copies) / spec
    if not (folder / file).is_file() and file.endswith(".min.js"):
        file = file.removesuffix(".min.js") + ".js"
    if not (folder / file).is_file():
        return None
    return f"{STATIC_FOLDER}/{spec}/{file}"


def files_to_copy(spec: str, file: str, copies: Path = NPM_COPIES) -> list[str]:
    """The files of package ``spec`` that a page loading ``file`` needs, relative to
    the package's folder, sorted."""
    folder = Path(copies) / spec
    if not (folder / file).is_file():
        raise FileNotFoundError(f"no local copy of {spec}/{file} in {copies}")
    patterns = ALWAYS + ALSO_NEEDED.get(package_name(spec), [])
    chosen = {file}
    for pattern in patterns:
        chosen |= {
            p.relative_to(folder).as_posix()
            for p in folder.glob(pattern)
            if p.is_file()
        }
    return sorted(chosen)


def copy_package(spec: str, file: str, static: Path, copies: Path = NPM_COPIES) -> int:
    """Copy what a page loading ``spec``'s ``file`` needs into ``static``/npm/``spec``
    (files already there with the same size and time are left alone); return the
    number of bytes the copies hold."""
    total = 0
    for name in files_to_copy(spec, file, copies):
        source = Path(copies) / spec / name
        target = Path(static) / STATIC_FOLDER / spec / name
        stat = source.stat()
        total += stat.st_size
        if target.is_file():
            there = target.stat()
            if there.st_size == stat.st_size and there.st_mtime == stat.st_mtime:
                continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return total


def fetch(spec: str, copies: Path = NPM_COPIES, npm: str = "npm") -> Path:
    """Unpack npm package ``spec`` (``<package>@<version>``) into ``copies``/``spec``
    with ``npm pack`` (the package's own tarball, no dependencies) unless it is
    there; return its folder. Raises OSError where npm is missing or fails."""
    package_name(spec)
    folder = Path(copies) / spec
    if folder.is_dir():
        return folder
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [npm, "pack", "--silent", spec],
            cwd=tmp,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=300,
        )
        (tarball,) = Path(tmp).glob("*.tgz")
        unpacked = Path(tmp) / "unpacked"
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        with tarfile.open(tarball) as tar:
            tar.extractall(unpacked, **safe)
        (top,) = unpacked.iterdir()  # npm's tarballs hold one folder, "package"
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(top), str(folder))
    return folder


def config_urls(config) -> list[str]:
    """The URLs of the scripts the pages load: MathJax's and the widgets'."""
    return [config.mathjax_path, *dict(config.nb_ipywidgets_js or {})]


def _use_local_copies(app, config) -> None:
    from sphinx.util import logging

    local, copies, missing = {}, [], []
    for url in config_urls(config):
        found, path = cdn_package(url), local_file(url)
        if path is not None:
            local[url] = path
            spec = found[0]
            copies.append((spec, path.removeprefix(f"{STATIC_FOLDER}/{spec}/")))
        elif found is not None:
            missing.append(found[0])
    if config.mathjax_path in local:
        config.mathjax_path = local[config.mathjax_path]
    # A local copy is loaded without ``crossorigin``: from disk (file://) a script
    # loaded in CORS mode is blocked
    config.nb_ipywidgets_js = {
        local.get(url, url): (
            {k: v for k, v in attributes.items() if k != "crossorigin"}
            if url in local
            else attributes
        )
        for url, attributes in dict(config.nb_ipywidgets_js or {}).items()
    }
    # (package, file in it) of each local copy the pages load
    app.tb_offline_copies = sorted(copies)
    for spec in missing:
        logging.getLogger(__name__).info(
            f"book_offline: no local copy of {spec} in {NPM_COPIES} (npm missing, or "
            f"no network when `make book` fetched it): the pages load it from the CDN, "
            f"and an offline reader will not see what it renders"
        )


def _copy_into_build(app) -> None:
    from sphinx.util import logging

    if app.builder.format != "html" or not app.tb_offline_copies:
        return
    static = Path(app.outdir) / "_static"
    total = sum(
        copy_package(spec, file, static) for spec, file in app.tb_offline_copies
    )
    specs = ", ".join(sorted({spec for spec, _ in app.tb_offline_copies}))
    logging.getLogger(__name__).info(
        f"book_offline: local copies of {specs} in _static/{STATIC_FOLDER} "
        f"({total / 1e6:.1f} MB): the pages work offline"
    )


def setup(app):
    app.connect("config-inited", _use_local_copies, priority=900)
    app.connect("builder-inited", _copy_into_build)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
