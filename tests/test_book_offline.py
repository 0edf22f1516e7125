"""The built book's local copies of its scripts (book/_ext/book_offline.py) and their
fetching (scripts/npm_copies.py): URL parsing, which files are copied, the CDN kept
where a copy is missing, and both editions naming the same scripts."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import book_offline  # noqa: E402
import npm_copies  # noqa: E402

MANAGER = (
    "https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.6/dist/embed-amd.js"
)
REQUIRE = "https://cdn.jsdelivr.net/npm/requirejs@2.3.4/require.min.js"
MATHJAX = "https://cdn.jsdelivr.net/npm/mathjax@3.2.2/es5/tex-mml-chtml.js"


def fake_copies(tmp_path: Path) -> Path:
    """A _build/npm holding small stand-ins of the three packages."""
    copies = tmp_path / "npm"
    files = {
        "@jupyter-widgets/html-manager@1.0.6": [
            "dist/embed-amd.js",
            "dist/0123456789abcdef0123.woff2",
            "dist/0123456789abcdef0123.eot",
            "dist/unrelated.js",
            "LICENSE",
            "package.json",
        ],
        "requirejs@2.3.4": ["require.js", "package.json", "README.md"],
        "mathjax@3.2.2": [
            "es5/tex-mml-chtml.js",
            "es5/input/tex/extensions/physics.js",
            "es5/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff",
            "es5/tex-chtml.js",
            "LICENSE",
            "package.json",
        ],
    }
    for spec, names in files.items():
        for name in names:
            path = copies / spec / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{spec}/{name}")
    return copies


def test_cdn_package_reads_the_package_and_the_file():
    assert book_offline.cdn_package(MANAGER) == (
        "@jupyter-widgets/html-manager@1.0.6",
        "dist/embed-amd.js",
    )
    assert book_offline.cdn_package(REQUIRE) == ("requirejs@2.3.4", "require.min.js")
    assert book_offline.cdn_package("https://example.org/npm/a@1/b.js") is None
    # no version: jsdelivr would serve the newest, which is no copy to pin
    assert (
        book_offline.cdn_package("https://cdn.jsdelivr.net/npm/mathjax/es5/a.js")
        is None
    )


def test_cdn_package_refuses_bad_input():
    with pytest.raises(TypeError, match="url"):
        book_offline.cdn_package(None)
    with pytest.raises(ValueError, match="url"):
        book_offline.cdn_package("https://cdn.jsdelivr.net/npm/a@1/x/../../b@2/c.js")


def test_package_name():
    assert (
        book_offline.package_name("@jupyter-widgets/html-manager@1.0.6")
        == "@jupyter-widgets/html-manager"
    )
    assert book_offline.package_name("mathjax@3.2.2") == "mathjax"
    for bad in ["mathjax", "@3.2.2", "mathjax@", "@scope/@1"]:
        with pytest.raises(ValueError, match="spec"):
            book_offline.package_name(bad)


def test_local_file_finds_the_copy_or_none(tmp_path):
    copies = fake_copies(tmp_path)
    assert (
        book_offline.local_file(MANAGER, copies)
        == "npm/@jupyter-widgets/html-manager@1.0.6/dist/embed-amd.js"
    )
    # jsdelivr minifies on request: require.min.js is the package's require.js
    assert book_offline.local_file(REQUIRE, copies) == "npm/requirejs@2.3.4/require.js"
    assert book_offline.local_file(MATHJAX.replace("3.2.2", "3.2.1"), copies) is None
    assert book_offline.local_file(MATHJAX.replace("chtml", "svg"), copies) is None
    assert book_offline.local_file("https://example.org/a.js", copies) is None


def test_files_to_copy_are_the_file_its_assets_and_the_licence(tmp_path):
    copies = fake_copies(tmp_path)
    assert book_offline.files_to_copy(
        "@jupyter-widgets/html-manager@1.0.6", "dist/embed-amd.js", copies
    ) == [
        "LICENSE",
        "dist/0123456789abcdef0123.woff2",
        "dist/embed-amd.js",
        "package.json",
    ]
    assert book_offline.files_to_copy(
        "mathjax@3.2.2", "es5/tex-mml-chtml.js", copies
    ) == [
        "LICENSE",
        "es5/input/tex/extensions/physics.js",
        "es5/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff",
        "es5/tex-mml-chtml.js",
        "package.json",
    ]
    with pytest.raises(FileNotFoundError):
        book_offline.files_to_copy("mathjax@3.2.2", "es5/tex-svg.js", copies)


def test_copy_package_copies_once(tmp_path):
    copies, static = fake_copies(tmp_path), tmp_path / "_static"
    total = book_offline.copy_package("requirejs@2.3.4", "require.js", static, copies)
    copied = sorted(
        p.relative_to(static).as_posix() for p in static.rglob("*") if p.is_file()
    )
    assert copied == [
        "npm/requirejs@2.3.4/package.json",
        "npm/requirejs@2.3.4/require.js",
    ]
    assert total == sum((static / name).stat().st_size for name in copied)
    # a copy already there, the same size and time, is left alone
    target = static / "npm/requirejs@2.3.4/require.js"
    target.write_text("x" * target.stat().st_size)
    book_offline.shutil.copystat(copies / "requirejs@2.3.4/require.js", target)
    book_offline.copy_package("requirejs@2.3.4", "require.js", static, copies)
    assert set(target.read_text()) == {"x"}


def configure(monkeypatch, copies: Path):
    """Run the extension's config-inited step on the book's URLs with ``copies``."""
    monkeypatch.setattr(
        book_offline,
        "local_file",
        functools.partial(book_offline.local_file, copies=copies),
    )
    config = SimpleNamespace(
        mathjax_path=MATHJAX,
        nb_ipywidgets_js={
            REQUIRE: {"crossorigin": "anonymous"},
            MANAGER: {"data-jupyter-widgets-cdn": "https://cdn.jsdelivr.net/npm/"},
        },
    )
    app = SimpleNamespace()
    book_offline._use_local_copies(app, config)
    return app, config


def test_the_pages_load_the_local_copies(tmp_path, monkeypatch):
    app, config = configure(monkeypatch, fake_copies(tmp_path))
    assert config.mathjax_path == "npm/mathjax@3.2.2/es5/tex-mml-chtml.js"
    # from disk (file://), a script loaded in CORS mode is blocked
    assert config.nb_ipywidgets_js == {
        "npm/requirejs@2.3.4/require.js": {},
        "npm/@jupyter-widgets/html-manager@1.0.6/dist/embed-amd.js": {
            "data-jupyter-widgets-cdn": "https://cdn.jsdelivr.net/npm/"
        },
    }
    assert app.tb_offline_copies == [
        ("@jupyter-widgets/html-manager@1.0.6", "dist/embed-amd.js"),
        ("mathjax@3.2.2", "es5/tex-mml-chtml.js"),
        ("requirejs@2.3.4", "require.js"),
    ]


def test_without_copies_the_pages_keep_the_cdn(tmp_path, monkeypatch):
    app, config = configure(monkeypatch, tmp_path / "nothing fetched")
    assert config.mathjax_path == MATHJAX
    assert list(config.nb_ipywidgets_js) == [REQUIRE, MANAGER]
    assert config.nb_ipywidgets_js[REQUIRE] == {"crossorigin": "anonymous"}
    assert app.tb_offline_copies == []


def test_both_editions_load_the_same_scripts():
    """npm_copies.py fetches the English configuration's packages; the zh-TW build
    reads the same _build/npm, so it must name the same URLs."""
    configs = [
        yaml.safe_load((ROOT / f).read_text())["sphinx"]["config"]
        for f in ["_config.yml", "zh-TW/_config.yml"]
    ]
    scripts = [(c["mathjax_path"], c["nb_ipywidgets_js"]) for c in configs]
    assert scripts[0] == scripts[1]
    assert npm_copies.book_packages() == [
        "@jupyter-widgets/html-manager@1.0.6",
        "mathjax@3.2.2",
        "requirejs@2.3.4",
    ]


def test_without_npm_the_build_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(npm_copies, "NPM_COPIES", tmp_path)
    monkeypatch.setattr(npm_copies.shutil, "which", lambda name: None)
    assert npm_copies.main([]) == 0
    out = capsys.readouterr().out
    assert "npm not found" in out and "mathjax@3.2.2" in out and "CDN" in out
    assert not any(tmp_path.iterdir())


def test_a_failed_fetch_is_reported_and_the_build_goes_on(
    tmp_path, monkeypatch, capsys
):
    fake_npm = tmp_path / "npm"
    fake_npm.write_text("#!/bin/sh\necho 'network unreachable' >&2\nexit 1\n")
    fake_npm.chmod(0o755)
    copies = tmp_path / "copies"
    monkeypatch.setattr(npm_copies, "NPM_COPIES", copies)
    monkeypatch.setattr(npm_copies.shutil, "which", lambda name: str(fake_npm))
    monkeypatch.setattr(
        npm_copies, "fetch", functools.partial(book_offline.fetch, copies=copies)
    )
    assert npm_copies.main(["axe-core@4.14.1"]) == 0
    out = capsys.readouterr().out
    assert out.count("could not fetch") == 4, out
    assert "network unreachable" in out
    assert not copies.exists()
