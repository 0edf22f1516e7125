"""Open every page of the built book in a real headless browser.

Checks, page by page: formulas typeset with no MathJax error, every image loads,
no console error, every relative link resolves (file and anchor), each notebook
page's Colab button points at the notebook on the repository, and the widgets
render. CDN requests are answered from local npm copies (scripts/browser_deps.sh).

Needs `make book` first, and Debian's chromium; without chromium the test skips
(except in CI, where it fails).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
VENDOR = ROOT / "tests" / "browser" / "vendor"
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

pytestmark = pytest.mark.browser


def repository() -> tuple[str, str]:
    config = (ROOT / "_config.yml").read_text()
    url = re.search(r"^repository:\s*\n\s+url:\s*(\S+)", config, re.M).group(1)
    branch = re.search(r"^\s+branch:\s*(\S+)", config, re.M).group(1)
    return url.removeprefix("https://github.com/").rstrip("/"), branch


def pages() -> list[Path]:
    """Every content page (the search, index and redirect pages are left out)."""
    skip = {"genindex.html", "search.html"}
    return sorted(
        p
        for p in HTML.rglob("*.html")
        if p.name not in skip
        and not p.relative_to(HTML).parts[0].startswith("_")
        and "http-equiv" not in p.read_text(errors="replace")[:500]
    )


def test_the_front_page_redirects_to_the_preface():
    text = (HTML / "index.html").read_text()
    target = re.search(r'url=([^"]+)"', text).group(1)
    assert (HTML / target).is_file(), target


@pytest.fixture(scope="module")
def server():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make book` first")
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        message = "Chromium not found: `apt-get install -y chromium` to run this test"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    if not VENDOR.exists():
        pytest.fail("CDN copies missing: run `bash scripts/browser_deps.sh`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


def serve_cdn(route, unexpected: list[str]) -> None:
    """Answer cdn.jsdelivr.net/npm/<package>/<path> from the local npm copies."""
    url = urlparse(route.request.url)
    parts = url.path.removeprefix("/npm/").split("/")
    n = 2 if parts[0].startswith("@") else 1
    path = VENDOR.joinpath(*parts[:n], *parts[n:])
    if not path.exists() and path.name.endswith(".min.js"):
        # jsdelivr minifies any file on request: require.min.js is require.js
        path = path.with_name(path.name.removesuffix(".min.js") + ".js")
    if url.netloc == "cdn.jsdelivr.net" and path.is_file():
        suffix = path.suffix
        types = {
            ".js": "application/javascript",
            ".css": "text/css",
            ".woff": "font/woff",
            ".woff2": "font/woff2",
            ".json": "application/json",
        }
        route.fulfill(
            path=str(path), content_type=types.get(suffix, "application/octet-stream")
        )
    else:
        unexpected.append(route.request.url)
        route.abort()


def check_links(page, page_path: Path, problems: list[str]) -> None:
    for href in page.eval_on_selector_all(
        "a[href]", "els => els.map(e => e.getAttribute('href'))"
    ):
        if re.match(r"^[a-z]+:", href) or href.startswith("//"):
            continue
        target, _, anchor = href.partition("#")
        file = (
            page_path if not target else (page_path.parent / unquote(target)).resolve()
        )
        if file.is_dir():
            file = file / "index.html"
        if not file.exists():
            problems.append(f"broken link {href!r}")
        elif anchor and file.suffix == ".html":
            if f'id="{anchor}"' not in file.read_text(errors="replace"):
                problems.append(f"link {href!r}: no anchor #{anchor}")


def check_colab(page, page_path: Path, problems: list[str]) -> None:
    source = ROOT / page_path.relative_to(HTML).with_suffix(".ipynb")
    colab = page.eval_on_selector_all(
        "a[href*='colab.research.google.com']", "els => els.map(e => e.href)"
    )
    if not source.exists():
        return
    repo, branch = repository()
    expected = (
        f"https://colab.research.google.com/github/{repo}/blob/{branch}/"
        f"{source.relative_to(ROOT).as_posix()}"
    )
    if expected not in colab:
        problems.append(f"Colab button {colab} is not {expected}")


def check_widgets(page, page_path: Path, problems: list[str]) -> None:
    source = ROOT / page_path.relative_to(HTML).with_suffix(".ipynb")
    if (
        not source.exists()
        or '"application/vnd.jupyter.widget-view+json"' not in source.read_text()
    ):
        return
    try:
        page.wait_for_selector(
            ", ".join(
                f".jupyter-widgets {kind}"
                for kind in (".widget-slider", "select", ".widget-toggle-buttons")
            ),
            state="visible",
            timeout=15000,
        )
    except Exception:
        problems.append("no widget rendered")
        return
    check_linked_stacks(page, "linked_stack(" in source.read_text(), problems)


def check_linked_stacks(page, expected: bool, problems: list[str]) -> None:
    """Move the control of every ``plot.linked_stack``: the shown view must change.

    The views are precomputed and switched by a jslink in the browser, so this
    works without a kernel, as in the static book.
    """
    # linked_stack's VBox: a dropdown, then the Stack (interact's boxes excluded)
    stacks = page.locator(".widget-vbox:not(.widget-interact):has(> .widget-dropdown)")
    if expected and not stacks.count():
        problems.append("the linked_stack widget did not render")
    for k in range(stacks.count()):
        box = stacks.nth(k)
        select = box.locator(":scope > .widget-dropdown select")
        n_options = select.locator("option").count()
        if n_options < 2:
            continue
        shown = box.locator(":scope > :nth-child(2)")
        before = shown.inner_text()
        current = select.evaluate("el => el.selectedIndex")
        select.select_option(index=n_options - 1 if current != n_options - 1 else 0)
        try:
            page.wait_for_function(
                "([el, text]) => el.innerText !== text",
                arg=[shown.element_handle(), before],
                timeout=5000,
            )
        except Exception:
            problems.append(f"linked stack {k}: the view did not change")


def problems_of(browser, server: str, page_path: Path) -> list[str]:
    """Open one page and list everything wrong with it."""
    problems: list[str] = []
    unexpected: list[str] = []

    def on_console(message) -> None:
        if message.type == "error":
            problems.append(f"console {message.type}: {message.text}")

    def on_response(response) -> None:
        if response.status >= 400:
            problems.append(f"HTTP {response.status}: {response.url}")

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.route(
        re.compile(r"^https?://(?!127\.0\.0\.1)"), lambda r: serve_cdn(r, unexpected)
    )
    page = context.new_page()
    page.on("console", on_console)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("response", on_response)
    page.goto(f"{server}/{page_path.relative_to(HTML).as_posix()}", wait_until="load")
    if page.locator(".math, span.math, div.math").count() > 0:
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
            timeout=20000,
        )
        page.evaluate("() => MathJax.startup.promise")
        if page.locator("mjx-container").count() == 0:
            problems.append("formulas were not typeset")
        if page.locator("mjx-merror, .mjx-merror").count():
            problems.append("MathJax reported an error in a formula")
    check_widgets(page, page_path, problems)
    page.wait_for_load_state("networkidle")
    broken = page.eval_on_selector_all(
        "img",
        "els => els.filter(e => !e.complete || !e.naturalWidth).map(e => e.src)",
    )
    problems += [f"image did not load: {src[:80]}" for src in broken]
    check_links(page, page_path, problems)
    check_colab(page, page_path, problems)
    problems += [f"request outside the book: {u}" for u in unexpected]
    page.screenshot(path=str(SHOTS / (page_path.stem + ".png")), full_page=False)
    context.close()
    return problems


def test_every_page_renders_cleanly(server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    checked = pages()
    failures = {}
    for page_path in checked:
        problems = problems_of(browser, server, page_path)
        if problems:
            failures[page_path.relative_to(HTML).as_posix()] = problems
    assert len(checked) >= 3
    assert not failures, "\n".join(
        f"{k}:\n  " + "\n  ".join(v) for k, v in failures.items()
    )
