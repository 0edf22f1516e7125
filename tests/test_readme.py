"""The README's instructions work, and the facts it states hold.

A reader follows README.md (or README.zh-TW.md, or the preface, book/intro.md) on a
fresh clone: `make book`, then `.venv/bin/jupyter lab book/`. These tests run that
command headless (JupyterLab's server starts on book/ and serves a chapter; a
notebook that imports the book's package executes with `jupyter nbconvert
--execute`), so the instructions cannot rot, and check what a test can check of what
the READMEs, MAINTAINING.md and the contributing guides say: every `make` target they
name exists, every repository file or folder they name exists, every call of a package
function they show binds to its signature, and every pin count they state is the
file's. Part of `make unit` (about 15 s, most of it JupyterLab's start).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "transformer_book"
READMES = [ROOT / "README.md", ROOT / "README.zh-TW.md"]
GUIDES = [
    *READMES,
    ROOT / "MAINTAINING.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "CONTRIBUTING.zh-TW.md",
]
# The local command, as the READMEs and the preface give it (from the repository root)
LOCAL = {
    ROOT / "README.md": ".venv/bin/jupyter lab book/",
    ROOT / "README.zh-TW.md": ".venv/bin/jupyter lab zh-TW/book/",
    ROOT / "book" / "intro.md": ".venv/bin/jupyter lab book/",
}
BIN = Path(sys.executable).parent  # the environment the tests run in: .venv in make


def _ids(paths):
    return [p.name for p in paths]


def _code_spans(text: str) -> list[str]:
    """Inline code spans and the lines of fenced code blocks."""
    spans = re.findall(
        r"(?<!`)`([^`\n]+)`(?!`)", re.sub(r"```.*?```", "", text, flags=re.S)
    )
    for block in re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S):
        spans += block.splitlines()
    return spans


# ---------------------------------------------------------------- the local command


@pytest.mark.parametrize("page", list(LOCAL), ids=_ids(LOCAL))
def test_each_page_gives_the_local_command(page):
    assert LOCAL[page] in page.read_text()


def test_requirements_pin_what_the_local_command_needs():
    pins = _pins(ROOT / "requirements.txt")
    for name in ("jupyterlab", "nbconvert", "ipykernel"):
        assert name in pins, f"requirements.txt does not pin {name}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jupyter_env(tmp_path: Path) -> dict[str, str]:
    """Jupyter's own files (runtime, settings, workspaces) in a temporary folder."""
    env = dict(os.environ)
    for var, sub in [
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("JUPYTERLAB_SETTINGS_DIR", "settings"),
        ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
        ("IPYTHONDIR", "ipython"),
    ]:
        env[var] = str(tmp_path / sub)
    env["TRANSFORMER_BOOK_QUIET"] = "1"
    return env


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`.venv/bin/jupyter lab book/`, headless, from the repository root: the
    server's base URL, its token, the process and its log."""
    tmp = tmp_path_factory.mktemp("lab")
    port, token = _free_port(), "readme-test"
    command = [BIN / "jupyter", "lab", "book/", "--no-browser"]
    command += ["--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}"]
    command += [f"--IdentityProvider.token={token}"]
    command += ["--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI containers run as root
        command.append("--allow-root")
    log = tmp / "lab.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            command, cwd=ROOT, env=_jupyter_env(tmp), stdout=out, stderr=out
        )
    try:
        yield f"http://127.0.0.1:{port}", token, server, log
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_notebook_runs_in_the_environment_the_readme_sets_up(tmp_path, lab):
    """The kernel that Lab starts (ipykernel's python3) runs the book's package:
    `jupyter nbconvert --execute` on a notebook like a chapter's first cells (while
    the `lab` fixture's server starts, so that the two waits overlap)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import torch\n"
            "from transformer_book.attention import scaled_dot_product_attention\n"
            "from transformer_book.device import get_device, set_seed\n"
            "set_seed(0)\n"
            "q = torch.randn(1, 4, 8)\n"
            "out, weights = scaled_dot_product_attention(q, q, q)\n"
            "print(get_device().type, tuple(out.shape), round(float(weights.sum()), 3))"
        )
    ]
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    subprocess.run(
        [BIN / "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace"]
        + ["--ExecutePreprocessor.kernel_name=python3", str(path)],
        cwd=tmp_path,
        env=_jupyter_env(tmp_path),
        check=True,
        capture_output=True,
        timeout=120,
    )
    (output,) = nbformat.read(path, as_version=4).cells[0].outputs
    device, shape = output["text"].split(" ", 1)
    assert device in ("cpu", "cuda", "mps") and shape == "(1, 4, 8) 4.0\n"


def test_the_local_command_starts_jupyterlab_on_the_chapters(lab):
    """The server starts, lists book/'s chapters as its root and serves Lab's page."""
    base, token, server, log = lab
    chapter = f"{base}/api/contents/02_attention.ipynb?content=0&token={token}"
    deadline = time.monotonic() + 90
    while True:
        assert server.poll() is None, f"jupyter lab exited:\n{log.read_text()}"
        try:
            with urllib.request.urlopen(chapter, timeout=5) as r:
                listed = json.load(r)
            break
        except OSError:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.25)
    assert listed["type"] == "notebook"
    with urllib.request.urlopen(f"{base}/lab?token={token}", timeout=10) as r:
        assert r.status == 200 and b"JupyterLab" in r.read()
    with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=10) as r:
        assert r.status == 200


# ---------------------------------------------------------------- launch buttons


@pytest.mark.parametrize("config", ["_config.yml", "zh-TW/_config.yml"])
def test_every_launch_button_leads_somewhere(config):
    """Colab's button opens the notebook and its setup cell installs the package;
    Binder's would open an environment without the package and with a CUDA torch of
    several GB, so it is not offered (issue 46) unless a binder/ folder sets one up."""
    buttons = yaml.safe_load((ROOT / config).read_text())["launch_buttons"]
    urls = {key for key in buttons if key.endswith("_url")}
    assert urls == {"colab_url"} or (ROOT / "binder").is_dir()
    assert buttons["colab_url"] == "https://colab.research.google.com"


# ---------------------------------------------------------------- the facts stated


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[re.sub(r"[-_.]+", "-", name.strip().lower())] = version.strip()
    return pins


# "`tests/colab/requirements.txt` ... (112 pins in all)", "requirements.txt pins 31
# packages", "共 112 個套件版本"
PIN_COUNT = re.compile(
    r"([\d,]+) (?:exact )?(?:pins|pinned packages)|共 ([\d,]+) 個(?:固定)?版本"
)


@pytest.mark.parametrize("guide", GUIDES, ids=_ids(GUIDES))
def test_each_pin_count_is_the_files(guide):
    """A pin count names its file in the same paragraph (the last one named before
    the count)."""
    found = 0
    for paragraph in re.split(r"\n\s*\n", guide.read_text()):
        for match in PIN_COUNT.finditer(paragraph):
            files = re.findall(
                r"`((?:[\w./-]+/)?requirements[\w-]*\.txt)`", paragraph[: match.start()]
            )
            assert files, f"{guide.name}: {match.group(0)!r} names no requirements file"
            stated = int((match.group(1) or match.group(2)).replace(",", ""))
            assert stated == len(_pins(ROOT / files[-1])), f"{guide.name}: {files[-1]}"
            found += 1
    if guide.name in ("README.md", "MAINTAINING.md"):
        assert found, f"{guide.name} states no pin count"


def _makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([\w-]+):", text, flags=re.M))


@pytest.mark.parametrize("guide", GUIDES, ids=_ids(GUIDES))
def test_each_make_target_named_exists(guide):
    targets = _makefile_targets()
    named = set()
    for span in _code_spans(guide.read_text()):
        # `make book`, `make nbval NOTEBOOKS=...`, `BOOK_PAGES=02 make browser`
        named.update(re.findall(r"(?:^|[\s;&|(])make\s+([a-z][\w-]*)", span))
    assert named, f"{guide.name} names no make target"
    assert named <= targets, f"{guide.name}: no such target: {sorted(named - targets)}"


# A path in a code span: a top-level file of the repository, or a path with a slash
# whose first part is a top-level entry. Placeholders (<page>, chNN, *), the virtual
# environment, build outputs and URLs are left out.
_TOP = {p.name for p in ROOT.iterdir()} - {".git", ".venv", "_build"}
_SKIP = re.compile(r"[<>*{}$]|NN|^\.venv|_build|://|^~|\.\.\.")


def _named_paths(text: str) -> set[str]:
    named = set()
    for span in _code_spans(text):
        for word in span.split():
            word = word.strip("()[],;:'\"").rstrip(".")
            if _SKIP.search(word) or not re.fullmatch(r"[\w.][\w./-]*", word):
                continue
            first = word.split("/", 1)[0]
            if first in _TOP and ("/" in word or re.search(r"\.\w+$", word)):
                named.add(word)
    return named


@pytest.mark.parametrize("guide", GUIDES, ids=_ids(GUIDES))
def test_each_file_and_folder_named_exists(guide):
    named = _named_paths(guide.read_text())
    assert named, f"{guide.name} names no file"
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"{guide.name} names files that do not exist: {missing}"


def test_the_layout_lists_every_top_level_entry_and_the_book_folders():
    """The README's layout block (an entry at the start of each line, its
    description after): each entry exists, and every committed top-level file or
    folder is listed, as are book/_ext/ and book/references.md."""
    text = (ROOT / "README.md").read_text()
    (block,) = re.findall(r"## Layout\s+```\n(.*?)```", text, flags=re.S)
    entries = [line.split()[0] for line in block.splitlines() if line[:1].strip()]
    missing = [e for e in entries if not (ROOT / e).exists()]
    assert not missing, f"the layout names what does not exist: {missing}"
    committed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    if committed:  # a git checkout: every top-level entry is listed
        top = {f.split("/", 1)[0] + ("/" if "/" in f else "") for f in committed}
        unlisted = sorted(
            top - {e.split("/", 1)[0] + ("/" if "/" in e else "") for e in entries}
        )
        assert not unlisted, f"the README's layout leaves out {unlisted}"
    for path in ("book/references.md", "book/_ext/"):
        assert path in entries, f"the layout leaves out {path}"


@functools.cache
def _definitions() -> dict[str, list[str]]:
    """name -> the package's modules that define it at their top level."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(p for p in parts if p != "__init__")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.setdefault(node.name, []).append(module)
    return found


def _resolve(dotted: str):
    """`plot.figure_view` -> transformer_book.plot.figure_view; a bare name -> the one
    module of the package that defines it; None where the package has no such name."""
    *prefix, name = dotted.split(".")
    if prefix:
        try:
            module = importlib.import_module("transformer_book." + ".".join(prefix))
        except ImportError:
            return None
        return getattr(module, name, None)
    modules = _definitions().get(name, [])
    if not modules:
        return None
    assert len(modules) == 1, f"{name} is defined in {modules}: name the module"
    return getattr(importlib.import_module(modules[0]), name)


def _calls(text: str) -> list[str]:
    """Every call in a code span: `plot.figure_view(fig, alt, dpi=90)`."""
    calls = []
    for span in _code_spans(text):
        span = re.sub(r"^[\w, ]+=\s*", "", span.strip())  # `device = get_device()`
        if re.fullmatch(r"[A-Za-z_][\w.]*\(.*\)", span):
            calls.append(span)
    return calls


@pytest.mark.parametrize("guide", GUIDES, ids=_ids(GUIDES))
def test_each_package_function_named_is_called_as_its_signature_allows(guide):
    """A call shown in backticks binds to the function's signature (no missing or
    unknown argument: `plot.figure_view(fig)` fails, `plot.figure_view(fig, alt,
    dpi=90)` passes); a positional argument written as a bare name is the parameter
    of that name."""
    checked = 0
    for call in _calls(guide.read_text()):
        node = ast.parse(call, mode="eval").body
        assert isinstance(node, ast.Call)
        function = _resolve(ast.unparse(node.func))
        if function is None:
            continue
        signature = inspect.signature(function, follow_wrapped=False)
        args = [a.id if isinstance(a, ast.Name) else object() for a in node.args]
        kwargs = {k.arg: object() for k in node.keywords}
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            message = f"{guide.name}: `{call}` against {signature}: {error}"
            raise AssertionError(message) from None
        for parameter, value in bound.arguments.items():
            if isinstance(value, str):
                assert value == parameter, f"{guide.name}: `{call}` against {signature}"
        checked += 1
    if guide.name in ("README.md", "MAINTAINING.md", "CONTRIBUTING.md"):
        assert checked, f"{guide.name} shows no call of a package function"


@pytest.mark.parametrize("guide", GUIDES, ids=_ids(GUIDES))
def test_the_guides_are_short_enough_and_link_to_each_other(guide):
    text = guide.read_text()
    if guide in READMES:
        assert len(text.splitlines()) <= 150, f"{guide.name} is over 150 lines"
        for linked in ("MAINTAINING.md", "CONTRIBUTING", "CITATION.cff", "LICENSE"):
            assert linked in text, f"{guide.name} does not link to {linked}"
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (guide.parent / target).exists(), f"{guide.name} links to {target}"


@pytest.mark.parametrize("guide", GUIDES, ids=_ids(GUIDES))
def test_each_guides_anchors_resolve(guide):
    """[text](#anchor) and [text](FILE.md#anchor) name a heading of that file
    (GitHub's slugs: lower case, punctuation dropped, spaces to hyphens)."""

    def slugs(path: Path) -> set[str]:
        found = set()
        for heading in re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M):
            slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            found.add(slug)
        return found

    for target, anchor in re.findall(r"\]\(([^)#:]*)#([^)]+)\)", guide.read_text()):
        assert anchor in slugs(guide.parent / target if target else guide), (
            f"{guide.name}: no heading for #{anchor} in {target or guide.name}"
        )


@pytest.mark.parametrize(
    "guide",
    [ROOT / "README.zh-TW.md", ROOT / "CONTRIBUTING.zh-TW.md"],
    ids=lambda p: p.name,
)
def test_the_chinese_guides_are_taiwan_usage(guide):
    sys.path.insert(0, str(ROOT / "scripts"))
    import i18n

    prose = re.sub(r"```.*?```|`[^`]*`", "", guide.read_text(), flags=re.S)
    assert not i18n.usage_problems(prose, allowed=i18n.usage_allowlist())


def test_the_citation_file_is_cff_1_2_0_and_names_the_site():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):
        assert cff[key], f"CITATION.cff has no {key}"
    for author in cff["authors"]:
        assert author.get("name") or author.get("family-names")
    repository = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    assert cff["repository-code"] == repository
    assert cff["url"] == site_url()
    assert cff["license"] == "MIT" or "MIT" in cff["license"]
    assert site_url() in (ROOT / "README.md").read_text()
    assert site_url() in (ROOT / "README.zh-TW.md").read_text()


def site_url() -> str:
    """GitHub Pages' address of the repository that _config.yml names."""
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    owner, name = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)/?", url).groups()
    return f"https://{owner.lower()}.github.io/{name}/"
