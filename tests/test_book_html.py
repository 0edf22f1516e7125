"""Open every page of the built book in a real headless browser.

Checks, page by page: formulas typeset with no MathJax error, every image loads,
no console error, every relative link resolves (file and anchor), each notebook
page's Colab button points at the notebook on the repository, the widgets
render, and the text a reader sees keeps the rules of tests/rendered_text.py (no
entity or Markdown shown raw, Chinese set as Chinese; the search page and its
result summaries too). The network is blocked: the book must work offline, from
its own copies of MathJax, require.js and the widget manager
(book/_ext/book_offline.py), so any request that leaves 127.0.0.1 fails the test; a
page of each edition is also opened from disk (file://), as a reader of a
downloaded copy opens it.

Needs `make book` first, and Debian's chromium; without chromium the test skips
(except in CI, where it fails).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import sys
import threading
from pathlib import Path
from urllib.parse import unquote

import pytest

from transformer_book.concepts import QUIZ_CLASS, all_checks, concept_check
from transformer_book.plot import LINKED_CLASS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from book_html import A11Y_CSS, PDF_NAMES, SEARCH_JS, UI_ZH_TW, WIDGET_A11Y  # noqa: E402
from book_offline import NPM_COPIES, STATIC_FOLDER  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from toc_notebooks import chapter_number  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from rendered_text import (  # noqa: E402
    PASSAGES_JS,
    UNMARKED_CHINESE_JS,
    entities,
    raw_markup,
    simplified,
    text_problems,
)

HTML = ROOT / "_build" / "html"
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
    only = os.environ.get("BOOK_PAGES", "")  # e.g. BOOK_PAGES=02_attention, to debug
    return sorted(
        p
        for p in HTML.rglob("*.html")
        if p.name not in skip
        and not any(part.startswith("_") for part in p.relative_to(HTML).parts)
        and "http-equiv" not in p.read_text(errors="replace")[:500]
        and only in p.name
    )


def shot_name(page_path: Path) -> str:
    """A page's name for its screenshots and notes: book-02_attention, or
    zh-TW-book-02_attention (the two editions' pages share their file names)."""
    return page_path.relative_to(HTML).with_suffix("").as_posix().replace("/", "-")


def test_the_front_page_redirects_to_the_preface():
    text = (HTML / "index.html").read_text()
    target = re.search(r'url=([^"]+)"', text).group(1)
    assert (HTML / target).is_file(), target


# A script or a style sheet that a page would load from the network
REMOTE_ASSET = re.compile(
    r"<script\b[^>]*\bsrc=\"(?:https?:)?//[^\"]*"
    r"|<link\b(?=[^>]*\brel=\"(?:stylesheet|preload|modulepreload)\")"
    r"[^>]*\bhref=\"(?:https?:)?//[^\"]*",
    re.I,
)
# The scripts the book holds its own copies of, and the folder they must come from
OWN_COPIES = {
    "MathJax": "/mathjax@",
    "require.js": "/requirejs@",
    "widget manager": "/html-manager@",
}


def test_every_page_loads_the_books_own_copies():
    """No page of either edition loads a script or style sheet from the network;
    MathJax, require.js and the widget manager come from the edition's own
    _static/npm/, and the files are there."""
    problems, counts = [], dict.fromkeys(OWN_COPIES, 0)
    for page_path in sorted(HTML.rglob("*.html")):
        text = page_path.read_text(errors="replace")
        name = page_path.relative_to(HTML).as_posix()
        problems += [f"{name}: {t[:160]}" for t in REMOTE_ASSET.findall(text)]
        for src in re.findall(r'<script\b[^>]*\bsrc="([^"?]+)', text):
            for what, marker in OWN_COPIES.items():
                if marker not in src:
                    continue
                counts[what] += 1
                file = (page_path.parent / src).resolve()
                root = HTML / "zh-TW" if name.startswith("zh-TW/") else HTML
                if not file.is_relative_to(root / "_static" / STATIC_FOLDER):
                    problems.append(f"{name}: {what} from {src}, not the edition's")
                elif not file.is_file():
                    problems.append(f"{name}: {what} at {src} is missing")
    assert not problems, "\n".join(problems)
    # both editions have pages with formulas and with widgets
    assert all(n >= 2 for n in counts.values()), counts


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
    if not AXE.exists():
        pytest.fail(f"{AXE} missing: run `make browser` (it fetches axe-core)")
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
                # no network: every host name but 127.0.0.1 fails to resolve
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            ],
        )
        yield browser
        browser.close()


# How long a wait may take before it fails. `make browser` opens two pages at a time,
# and under that load a page once took over Playwright's default 30 s to go quiet on
# the network; a wait ends as soon as what it waits for happens, so only a page that
# is broken waits this long.
WAIT_MS = 90_000


def new_context(browser, **options):
    """A browser context whose waits fail after ``WAIT_MS``, not Playwright's 30 s."""
    context = browser.new_context(**options)
    context.set_default_timeout(WAIT_MS)
    return context


def block_network(context, outside: list[str]) -> None:
    """Abort every request of ``context`` that leaves 127.0.0.1, listing it."""

    def refuse(route) -> None:
        outside.append(route.request.url)
        route.abort("internetdisconnected")

    context.route(re.compile(r"^(?!https?://127\.0\.0\.1[:/]|file:)[a-z]+://"), refuse)


def check_math(page, problems: list[str]) -> None:
    """Every formula is typeset, with no MathJax error."""
    if page.locator(".math, span.math, div.math").count() == 0:
        return
    try:
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
            timeout=WAIT_MS,
        )
    except Exception:
        problems.append("MathJax did not load")
        return
    page.evaluate("() => MathJax.startup.promise")
    if page.locator("mjx-container").count() == 0:
        problems.append("formulas were not typeset")
    if page.locator("mjx-merror, .mjx-merror").count():
        problems.append("MathJax reported an error in a formula")


# The PDFs the download menus offer (book_html.pdf_menu_item), which `make pdf` builds
MENU_PDFS = [
    HTML / "pdf" / PDF_NAMES["en"],
    HTML / "zh-TW" / "pdf" / PDF_NAMES["zh-TW"],
]


def unbuilt_pdf(file: Path) -> bool:
    """``file`` is a PDF of the download menu that is not built, outside CI: its link
    is left to test_the_download_menus_pdfs_are_built, which skips and says so (`make
    browser` run alone after `make book`; `make test` runs `make pdf` first)."""
    return file in MENU_PDFS and not file.exists() and not os.environ.get("CI")


def test_the_download_menus_pdfs_are_built():
    """Each edition's download menu links to its PDF. Outside CI, with no PDF built
    yet, the link checks leave those links out and this test skips, naming them; in
    CI (CI=true) a missing PDF fails here and in every page's link check."""
    missing = [p.relative_to(ROOT).as_posix() for p in MENU_PDFS if not p.is_file()]
    if missing and not os.environ.get("CI"):
        pytest.skip(
            f"{', '.join(missing)} not built, so the download menus' PDF links were "
            "not checked: run `make pdf` (after `make book`) to check them"
        )
    assert not missing, f"{missing}: the download menus link to them; run `make pdf`"


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
        if unbuilt_pdf(file):
            continue
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


def check_widgets(page, page_path: Path, problems: list[str]) -> list[str]:
    """Move every control of every widget: what it shows must change.

    The book's widgets are ``plot.linked_views`` / ``linked_stack``: precomputed
    views switched by jslinks in the browser, so they work without a kernel. A
    widget of any other kind (``interact`` needs a kernel and is dead here) fails.
    Returns one line per widget: its controls, and what moving each one did.
    """
    source = ROOT / page_path.relative_to(HTML).with_suffix(".ipynb")
    if (
        not source.exists()
        or '"application/vnd.jupyter.widget-view+json"' not in source.read_text()
    ):
        return []
    try:
        page.wait_for_selector(f".{LINKED_CLASS}", state="visible", timeout=WAIT_MS)
        page.wait_for_load_state("networkidle")
    except Exception:
        problems.append("no linked widget rendered")
        return []
    controls = page.locator(CONTROLS)
    unlinked = page.eval_on_selector_all(
        CONTROLS,
        f"els => els.filter(e => !e.parentElement.matches('.{LINKED_CLASS}')).length",
    )
    if unlinked or page.locator(".widget-interact").count():
        problems.append(f"{unlinked} control(s) outside a linked widget (dead here)")
    report = []
    boxes = page.locator(f".{LINKED_CLASS}")
    for k in range(boxes.count()):
        box = boxes.nth(k)
        box.scroll_into_view_if_needed()
        n_controls = box.locator(f":scope > :is({CONTROLS})").count()
        moved = []
        for c in range(n_controls):
            control = box.locator(f":scope > :is({CONTROLS})").nth(c)
            before = shown(box)
            unnamed = unnamed_control(control)
            if unnamed:
                problems.append(f"widget {k}: control {c}: {unnamed}")
            how = move(control)
            if how is None:
                problems.append(f"widget {k}: control {c} has nothing to move to")
                continue
            try:
                page.wait_for_function(
                    f"([box, before]) => ({SHOWN_JS})(box) !== before",
                    arg=[box.element_handle(), before],
                    timeout=15000,  # a jslink: at once, unless the CPU is busy
                )
                moved.append(how)
            except Exception:
                problems.append(f"widget {k}: moving {how}, the view did not change")
        report.append(f"widget {k}: {n_controls} control(s), " + "; ".join(moved))
        box.screenshot(path=str(SHOTS / f"{shot_name(page_path)}-widget{k}.png"))
    assert controls.count() >= 1
    return report


def check_text(page, page_path: Path, problems: list[str]) -> None:
    """The text a reader sees (the article, its table of contents, the navigation)
    keeps the rules of tests/rendered_text.py: no entity, Markdown, role or TeX
    shown raw; no Simplified character; in the zh-TW edition, Chinese punctuation
    and emphasis."""
    found = page.evaluate(PASSAGES_JS)
    problems += text_problems(found["passages"], found["italic"], edition(page_path))


# Each concept check's questions, each option as [right?, its feedback shown?, text]
QUIZ_STATE_JS = """quiz => [...document.querySelectorAll("." + quiz + " .tb-question")]
  .map(q => [...q.querySelectorAll("details")].map(d => {
    const p = d.querySelector(":scope > p");
    return [d.classList.contains("tb-right"), !!p && p.checkVisibility(),
            p ? p.innerText : ""];
  }))"""


def check_quizzes(page, page_path: Path, problems: list[str]) -> list[str]:
    """Click every answer of every concept check: each must say right or wrong.

    Every chapter holds 3 to 5 questions; each has exactly one right answer. (The
    appendix is a notebook but not a numbered chapter: it has none.)
    """
    quizzes = page.locator(f".{QUIZ_CLASS}")
    questions = page.locator(f".{QUIZ_CLASS} .tb-question")
    source = ROOT / page_path.relative_to(HTML).with_suffix(".ipynb")
    is_chapter = source.exists() and chapter_number(source) is not None
    if is_chapter and not 3 <= questions.count() <= 5:
        problems.append(f"{questions.count()} concept-check questions, not 3 to 5")
    before = page.evaluate(QUIZ_STATE_JS, QUIZ_CLASS)  # one read of every option
    for q, options in enumerate(before):
        if sum(right for right, _, _ in options) != 1:
            problems.append(f"question {q}: not exactly one right answer")
        problems += [
            f"question {q}, option {o}: open before a click"
            for o, (_, is_open, _) in enumerate(options)
            if is_open
        ]
    summaries = page.locator(f".{QUIZ_CLASS} .tb-question details > summary")
    for k in range(summaries.count()):  # a reader's click on each answer, in turn
        summaries.nth(k).click()
    after = page.evaluate(QUIZ_STATE_JS, QUIZ_CLASS)
    for q, options in enumerate(after):
        for o, (right, is_open, text) in enumerate(options):
            expected = VERDICTS[edition(page_path)][right]
            if not is_open or expected not in text:
                problems.append(f"question {q}, option {o}: no '{expected}' shown")
    if not questions.count():
        return []
    return [f"{quizzes.count()} concept checks, {questions.count()} questions answered"]


def edition(page_path: Path) -> str:
    """The edition a built page belongs to: "zh-TW" under zh-TW/, else "en"."""
    return "zh-TW" if page_path.relative_to(HTML).parts[0] == "zh-TW" else "en"


# What a concept check says when an answer is clicked: {edition: {right: text}}
VERDICTS = {
    "en": {True: "Right.", False: "Not quite."},
    "zh-TW": {True: "答對了。", False: "不太對。"},
}


def check_edition(page, page_path: Path, problems: list[str]) -> None:
    """The page declares its language and links to itself in the other edition;
    a zh-TW page shows none of the themes' English or Simplified labels."""
    lang = edition(page_path)
    declared = page.evaluate("() => document.documentElement.lang")
    if declared != lang:
        problems.append(f'<html lang="{declared}">, not "{lang}"')
    other = page.locator(".tb-edition-link a")
    if other.count() != 1:
        problems.append("no link to the other edition")
    elif other.get_attribute("hreflang") == lang:
        problems.append("the edition link points at its own edition")
    if lang == "zh-TW":
        check_labels(page, problems)
        toggles = page.locator("details.hide > summary").all_inner_texts()
        problems += [f"toggle in English: {t!r}" for t in toggles if "code cell" in t]


def check_labels(page, problems: list[str]) -> None:
    """A zh-TW page's labels outside the article, its attributes' included, are
    neither the themes' English nor Simplified."""
    lines = set(page.evaluate(CHROME_JS).split("\n"))
    for label in [*UI_ZH_TW, "Search this book..."]:
        if label in lines:
            problems.append(f"theme label not translated: {label!r}")
    found = sorted(line for line in lines if simplified(line))
    problems += [f"Simplified characters in a label: {t!r}" for t in found]


# The page's labels outside the article: texts, titles, aria-labels, placeholders
CHROME_JS = r"""() => {
  const copy = document.body.cloneNode(true);
  copy.querySelectorAll("article, script, style").forEach(el => el.remove());
  const attrs = [...copy.querySelectorAll("*")].flatMap(el =>
    ["title", "aria-label", "data-bs-title", "placeholder", "alt"]
      .map(a => el.getAttribute(a)).filter(Boolean));
  return [...attrs, ...copy.textContent.split("\n").map(t => t.trim())].join("\n");
}"""


# The controls that linked widgets use
CONTROLS = ".widget-dropdown, .widget-toggle-buttons, .widget-hslider"
# What a reader sees in a linked widget: the text and images of its visible views
SHOWN_JS = """box => {
  const views = box.lastElementChild;
  const visible = el => el.offsetParent !== null;
  const images = [...views.querySelectorAll("img")].filter(visible);
  return views.innerText + " " + images.map(img => img.src).join(" ");
}"""


def shown(box) -> str:
    return box.evaluate(SHOWN_JS)


def unnamed_control(control) -> str | None:
    """What is wrong with the control's accessible name, if anything: a screen
    reader must say which value it moves (its label, e.g. "number of heads")."""
    label = control.locator(".widget-label").first.inner_text().strip()
    if not label:
        return "no label"
    handle = control.locator(".noUi-handle")
    if handle.count() and handle.get_attribute("aria-label") != label:
        return (
            f"slider handle named {handle.get_attribute('aria-label')!r}, not {label!r}"
        )
    select = control.locator("select")
    if select.count():
        name = select.evaluate(
            "el => el.getAttribute('aria-label') || (el.labels[0] || {}).textContent"
            " || ''"
        )
        if name.strip() != label:
            return f"dropdown named {name!r}, not {label!r}"
    return None


def move(control) -> str | None:
    """Move a control to another option as a reader would; say what was done."""
    label = control.locator(".widget-label").first.inner_text().strip()
    select = control.locator("select")
    if select.count():
        n = select.locator("option").count()
        if n < 2:
            return None
        current = select.evaluate("el => el.selectedIndex")
        select.select_option(index=n - 1 if current != n - 1 else 0)
        return f"{label} dropdown -> {select.evaluate('el => el.value')}"
    buttons = control.locator("button.widget-toggle-button:not(.mod-active)")
    if buttons.count():
        target = buttons.last.inner_text().strip()
        buttons.last.click()
        return f"{label} button -> {target}"
    handle = control.locator(".noUi-handle")
    if handle.count():
        readout = control.locator(".widget-readout")
        before = readout.inner_text()
        handle.focus()
        handle.press("End")
        if readout.inner_text() == before:  # it was at the end already
            handle.press("Home")
        return f"{label} slider {before} -> {readout.inner_text()}"
    return None


def problems_of(browser, server: str, page_path: Path) -> list[str]:
    """Open one page and list everything wrong with it."""
    problems: list[str] = []
    outside: list[str] = []

    def on_console(message) -> None:
        if message.type == "error":
            problems.append(f"console {message.type}: {message.text}")

    def on_response(response) -> None:
        if response.status >= 400:
            problems.append(f"HTTP {response.status}: {response.url}")

    context = new_context(browser, viewport={"width": 1280, "height": 900})
    block_network(context, outside)
    page = context.new_page()
    page.on("console", on_console)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("response", on_response)
    page.goto(f"{server}/{page_path.relative_to(HTML).as_posix()}", wait_until="load")
    check_math(page, problems)
    notes = check_widgets(page, page_path, problems)
    notes += check_quizzes(page, page_path, problems)
    page.wait_for_load_state("networkidle")
    check_text(page, page_path, problems)
    broken = page.eval_on_selector_all(
        "img",
        "els => els.filter(e => !e.complete || !e.naturalWidth).map(e => e.src)",
    )
    problems += [f"image did not load: {src[:80]}" for src in broken]
    check_links(page, page_path, problems)
    check_colab(page, page_path, problems)
    check_edition(page, page_path, problems)
    check_code_width(page, problems)
    check_accessibility(page, page_path, problems)
    problems += [f"request outside the book (offline, it fails): {u}" for u in outside]
    page.screenshot(path=str(SHOTS / f"{shot_name(page_path)}.png"), full_page=False)
    context.close()
    size = page_path.stat().st_size / 1e6
    return problems, [f"{size:.2f} MB", *notes]


AXE = NPM_COPIES / "axe-core@4.14.1" / "axe.min.js"  # make browser fetches it
# The WCAG 2.1 A and AA rules of axe-core
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
# (resultTypes: axe still runs every rule on every node, but details only the
# violations, which is all this test reads: about a sixth faster on a chapter)
AXE_RUN_JS = """async tags => {
  const result = await axe.run(document,
    {runOnly: {type: "tag", values: tags}, resultTypes: ["violations"]});
  return result.violations.map(v => v.id + " (" + v.impact + "): " +
    v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", ") +
    (v.nodes.length > 3 ? " and " + (v.nodes.length - 3) + " more" : ""));
}"""
# Images without a text alternative, or whose alternative is a file name
IMAGES_WITHOUT_ALT_JS = r"""() =>
  [...document.querySelectorAll("main img, article img")].filter(img =>
    !img.hasAttribute("alt") ||
    /(^|\/)[\w.-]*\.(png|jpe?g|gif|svg|webp)$|^[0-9a-f]{16,}/i.test(img.alt.trim()))
  .map(img => (img.getAttribute("alt") === null ? "no alt" : img.alt) + " :: " +
    img.src.slice(0, 60))"""
# Reflow (WCAG 1.4.10): the widest element that is not allowed its own scroll box
TOO_WIDE_JS = """width => {
  const SCROLLS_IN_ITS_BOX =
    "pre, table, .highlight, .math, mjx-container, .MathJax, .table-wrapper";
  return [...document.querySelectorAll("body *")]
  .filter(e => e.getBoundingClientRect().right > width + 1 &&
    !e.closest(SCROLLS_IN_ITS_BOX) &&
    e.offsetParent !== null)
  .slice(0, 3).map(e => e.tagName.toLowerCase() + "." +
    String(e.className).split(" ")[0] + " " +
    Math.round(e.getBoundingClientRect().right));
}"""
PHONE = {"width": 320, "height": 640}
# Text outputs (and listings) that scroll sideways at 1280 px: their longest line
WIDE_CODE_JS = r"""() =>
  [...document.querySelectorAll(
    "div.cell_input div.highlight pre, div.cell_output div.highlight pre")]
  .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
  .map(e => e.textContent.split("\n").reduce((a, b) => b.length > a.length ? b : a))"""


def check_code_width(page, problems: list[str]) -> None:
    """At 1280 px (the page's viewport here), no code cell shown, no text output and
    no listing that a cell prints is wider than the text column: the reader sees
    every line without scrolling it (the book's CSS sets them in 12 px;
    tests/test_output_width.py holds code and text outputs to 90 characters, ruff
    holds the package's source to 88)."""
    wide = page.evaluate(WIDE_CODE_JS)
    if wide:
        problems.append(
            f"{len(wide)} code block(s) scroll sideways at 1280 px, e.g. "
            + "; ".join(repr(line[:70]) for line in wide[:3])
        )


def check_accessibility(page, page_path: Path, problems: list[str]) -> None:
    """WCAG 2.1 AA: axe-core's rules, a text alternative for every image, the
    language of every Chinese passage (formulas included), and reflow at 320 px."""
    page.add_script_tag(path=str(AXE))
    problems += [f"axe: {v}" for v in page.evaluate(AXE_RUN_JS, AXE_TAGS)]
    problems += [f"image without a text alternative: {i}" for i in page.evaluate(
        IMAGES_WITHOUT_ALT_JS)]  # fmt: skip
    check_chinese_marked(page, problems)
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(300)  # the theme lays the page out again
    width = page.evaluate("() => document.documentElement.scrollWidth")
    if width > PHONE["width"]:
        wide = page.evaluate(TOO_WIDE_JS, PHONE["width"])
        problems.append(f"{width} px wide on a {PHONE['width']} px screen: {wide}")


def check_chinese_marked(page, problems: list[str]) -> None:
    """Every passage of Chinese is in an element that declares it Chinese (an
    English page's are in a ``lang="zh-Hant-TW"`` span; a zh-TW page's Chinese in
    none of its ``lang="en"`` ones)."""
    unmarked = page.evaluate(UNMARKED_CHINESE_JS)
    if unmarked:
        problems.append(
            f"{len(unmarked)} Chinese passage(s) not marked lang=zh, e.g. "
            + "; ".join(repr(t) for t in unmarked[:5])
        )


def test_the_book_has_pages_to_check():
    # the next test is one per page, so an unbuilt book would give none
    assert len(pages()) >= 3 or os.environ.get("BOOK_PAGES"), "run `make book` first"


# One test per page (each failure names its page; pytest-xdist could run them side
# by side, a browser per worker); each page's notes (its size, and what moving each
# widget's controls and clicking each concept check's answers did) go to report/
# beside the screenshots.
@pytest.mark.parametrize(
    "page_path", pages(), ids=lambda p: p.relative_to(HTML).with_suffix("").as_posix()
)
def test_every_page_renders_cleanly(server, browser, page_path):
    (SHOTS / "report").mkdir(parents=True, exist_ok=True)
    problems, notes = problems_of(browser, server, page_path)
    name = page_path.relative_to(HTML).as_posix()
    report = SHOTS / "report" / f"{shot_name(page_path)}.txt"
    report.write_text(f"{name}: " + "\n  ".join(notes) + "\n")
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)


def widget_pages() -> list[Path]:
    """The first page with widgets of each edition."""
    found = {}
    for page_path in pages():
        source = ROOT / page_path.relative_to(HTML).with_suffix(".ipynb")
        if (
            source.exists()
            and '"application/vnd.jupyter.widget-view+json"' in source.read_text()
        ):
            found.setdefault(edition(page_path), page_path)
    return list(found.values())


def test_a_downloaded_copy_works_from_disk(browser, tmp_path):
    """A zip of _build/html, unpacked elsewhere: a page with formulas and widgets
    of each edition, opened from disk (file://) as a reader opens a downloaded
    copy, with no network: the formulas are typeset, and every control of every
    widget moves its view."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    archive = shutil.make_archive(str(tmp_path / "book"), "zip", HTML)
    shutil.unpack_archive(archive, tmp_path / "unpacked")
    checked = widget_pages()
    assert {edition(p) for p in checked} == {"en", "zh-TW"}, checked
    failures = {}
    for page_path in checked:
        problems, outside = [], []
        context = new_context(browser, viewport={"width": 1280, "height": 900})
        block_network(context, outside)
        page = context.new_page()
        page.on("console", lambda m, p=problems: m.type == "error" and p.append(
            f"console error: {m.text}"))  # fmt: skip
        page.on("pageerror", lambda e, p=problems: p.append(f"page error: {e}"))
        copy = tmp_path / "unpacked" / page_path.relative_to(HTML)
        page.goto(copy.as_uri(), wait_until="load")
        if page.locator(".math, span.math, div.math").count() == 0:
            problems.append("no formula on the page: pick one with formulas")
        check_math(page, problems)
        notes = check_widgets(page, page_path, problems)
        if not notes:
            problems.append("no widget checked")
        problems += [f"request outside the book: {u}" for u in outside]
        context.close()
        if problems:
            failures[page_path.relative_to(HTML).as_posix()] = problems
    assert not failures, "\n".join(
        f"{k}:\n  " + "\n  ".join(v) for k, v in failures.items()
    )


# A term of each chapter (and of the appendix), as a reader would type it, and the page
# it must find.
# Sphinx's search matches whole index terms, so the zh-TW index must hold the book's
# terms as words (jieba, with the glossary's terms as its user dictionary).
SEARCHES = {
    "zh-TW": {
        "時間反向傳播": "01_rnn_limits",
        "交叉注意力": "02_attention",
        "注意力頭": "03_multi_head",
        "位置編碼": "04_positional_encoding",
        "殘差連接": "05_transformer",
        "位元組對編碼": "06_variants",
        "計算複雜度": "07_complexity",
        "湧現能力": "08_beyond_text",
        "二元模型": "appendix_gpt_text",
    },
    "en": {
        "positional": "04_positional_encoding",
        "FlashAttention": "07_complexity",
        "nanoGPT": "appendix_one_page",
        "bigram": "appendix_gpt_text",
    },
}


def search_results(
    browser, server: str, folder: str, term: str, expected: str
) -> list[str]:
    """The pages the built book's search page lists for ``term``.

    It waits until the page ``expected`` is listed or the search has finished. The
    search lists its results one by one while it fetches each listed page for a
    summary; the chapters are megabytes of HTML each, so on a busy machine the whole
    list can take long after the one result the test looks for.
    """
    from urllib.parse import quote

    context = new_context(browser)
    context.route(re.compile(r"^https?://(?!127\.0\.0\.1)"), lambda r: r.abort())
    page = context.new_page()
    page.goto(f"{server}/{folder}search.html?q={quote(term)}", wait_until="load")
    page.wait_for_function(
        """expected => document.querySelector(
              `#search-results ul.search li a[href*="${expected}"]`)
            || (document.querySelector('#search-results .search-summary')
                && typeof Search !== 'undefined' && Search._pulse_status === -1)""",
        arg=expected,
        timeout=WAIT_MS,
    )
    hrefs = page.eval_on_selector_all(
        "#search-results ul.search li a", "els => els.map(e => e.getAttribute('href'))"
    )
    context.close()
    return hrefs


@pytest.mark.parametrize(
    "lang, term, chapter",
    [(lang, t, c) for lang, terms in SEARCHES.items() for t, c in terms.items()],
)
def test_the_search_finds_each_chapter_by_its_terms(
    server, browser, lang, term, chapter
):
    folder = "zh-TW/" if lang == "zh-TW" else ""
    hrefs = search_results(browser, server, folder, term, chapter)
    assert any(chapter in h for h in hrefs), f"{term!r} in {lang}: {hrefs}"


# A term of each edition whose results' summaries hold formulas, Chinese terms and
# "Add & Norm": the search page and every summary must read as the pages do
SEARCH_PAGE_TERMS = {"en": "softmax", "zh-TW": "殘差連接"}
# Every listed result has its summary (each is fetched from its page)
SUMMARIES_SHOWN_JS = """() => {
  const status = document.querySelector("#search-results .search-summary");
  const items = [...document.querySelectorAll("#search-results ul.search li")];
  return status && status.textContent && items.length &&
    items.every(li => li.querySelector("p.context"));
}"""


@pytest.mark.parametrize("lang", sorted(SEARCH_PAGE_TERMS))
def test_the_search_page_and_its_summaries_read_cleanly(server, browser, lang):
    """The search page (its theme strings, in zh-TW not Simplified) and the
    summaries under its results keep the rules of every page: formulas in plain
    text, no code, no entity, Chinese marked and set as Chinese."""
    from urllib.parse import quote

    folder = "zh-TW/" if lang == "zh-TW" else ""
    problems, outside = [], []
    context = new_context(browser)
    block_network(context, outside)
    page = context.new_page()
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    term = SEARCH_PAGE_TERMS[lang]
    page.goto(f"{server}/{folder}search.html?q={quote(term)}", wait_until="load")
    page.wait_for_function(SUMMARIES_SHOWN_JS, timeout=WAIT_MS)
    summaries = page.locator("#search-results p.context").count()
    found = page.evaluate(PASSAGES_JS)
    problems += text_problems(found["passages"], found["italic"], lang)
    check_chinese_marked(page, problems)
    if lang == "zh-TW":
        check_labels(page, problems)
    problems += [f"request outside the book: {u}" for u in outside]
    context.close()
    assert summaries >= 3, f"{term!r}: {summaries} result(s) with a summary"
    assert not problems, "\n".join(problems)


# -- each text rule, on a page made to break it ------------------------------------

# rule -> (edition, a page's body that breaks it, what the report says). Each is
# one of the defects readers found on the built pages.
BREAKING_PAGES = {
    "entity": ("zh-TW", "<p>5.3 Add &amp;amp; Norm：殘差連接</p>", "HTML entity"),
    "entity-split": (
        "zh-TW",
        '<p>損失 &<span lang="en">lt; 1</span> 個百分點</p>',
        "HTML entity",
    ),
    "raw-emphasis": ("zh-TW", "<p>**學習目標。**讀完本章</p>", "raw Markdown emphasis"),
    "raw-emphasis-star": ("zh-TW", "<p>編碼器*和*解碼器</p>", "raw Markdown emphasis"),
    "stray-backtick": ("en", "<p>call `need_weights=True to see</p>", "stray backtick"),
    "raw-role": ("en", "<p>the lesson {cite} says so</p>", "raw MyST role"),
    "raw-tex": ("en", r"<p>one product \(QK^\top\) of shape</p>", "TeX outside"),
    "raw-dollar-math": ("en", "<p>scores $QK^T$ scaled</p>", "TeX outside"),
    "simplified": ("zh-TW", "<p>這個模型的参数</p>", "Simplified character"),
    "simplified-theme-string": (
        "zh-TW",
        "<noscript><p>请启用 JavaScript 以启用搜索功能。</p></noscript>",
        "Simplified character",
    ),
    "half-width-punctuation": ("zh-TW", "<p>伯特, 羅伯塔, 駱駝</p>", "half-width"),
    "space-after-full-width": (
        "zh-TW",
        "<p>✔ <strong>答對了。</strong> RNN 做 T 步</p>",
        "space after full-width",
    ),
    "unpaired-quotes": ("zh-TW", "<p>需要」O(1) memory per step」</p>", "unpaired"),
    "han-in-italics": (  # a style that slants it (the book's sets <em> upright)
        "zh-TW",
        '<p>一種<span style="font-style: italic">軟性的字典查表</span></p>',
        "italics",
    ),
    "unmarked-chinese": (
        "en",
        "<p>x <mjx-container><mjx-utext>餘額</mjx-utext></mjx-container></p>",
        "not marked lang=zh",
    ),
}
# What none of the rules may take for a defect: code, formulas, an escaped "&"
# shown as "&", quoted tokens, Traditional characters that are also Simplified ones
# (台, 後), English and Chinese each marked, the book's own emphasis style
CLEAN_PAGES = {
    "en": """<p>Add &amp; Norm, and <code>x ** 2</code> or <code>&amp;amp;</code>;
      self-attention (<span lang="zh-Hant-TW">自注意力</span>) in
      <mjx-container><mjx-utext lang="zh-Hant-TW">餘額</mjx-utext>
      <mjx-mi>\\(QK^\\top\\)</mjx-mi></mjx-container>.</p>
      <pre>def f(**kwargs): return `x` + "{cite}" + "$a$"</pre>""",
    "zh-TW": """<p><strong>學習目標。</strong>讀完本章，你能夠：在 GPU 上執行
      Add &amp; Norm、「▁the」與 <code>a, b</code>；臺灣與台灣、之後、一群山峰。</p>
      <p>一種<em>軟性的字典查表</em>（<em><span lang="en">soft lookup</span></em>）"""
    """<mjx-container><mjx-mi>甲, 乙</mjx-mi></mjx-container>。</p>""",
}


def rendered_text_problems(browser, body: str, lang: str) -> list[str]:
    """What the page-by-page check reports on a page with ``body``, in the
    edition ``lang``'s language, with the book's own style sheet."""
    context = new_context(browser)
    page = context.new_page()
    html_lang = "en" if lang == "en" else "zh-TW"
    page.set_content(
        f'<html lang="{html_lang}"><head><style>{A11Y_CSS}</style></head>'
        f'<body><article class="bd-article">{body}</article></body></html>'
    )
    found = page.evaluate(PASSAGES_JS)
    problems = text_problems(found["passages"], found["italic"], lang)
    check_chinese_marked(page, problems)
    context.close()
    return problems


@pytest.mark.parametrize("rule", sorted(BREAKING_PAGES))
def test_each_text_rule_fails_on_a_page_that_breaks_it(browser, rule):
    lang, body, expected = BREAKING_PAGES[rule]
    problems = rendered_text_problems(browser, body, lang)
    assert any(expected in p for p in problems), (rule, problems)


@pytest.mark.parametrize("lang", sorted(CLEAN_PAGES))
def test_the_text_rules_pass_a_clean_page(browser, lang):
    assert rendered_text_problems(browser, CLEAN_PAGES[lang], lang) == []


def test_han_in_italics_is_caught_without_the_books_style_sheet(browser):
    """The browser's own style sets <em> in italics: the book's style sheet is
    what sets Chinese emphasis upright (the clean zh-TW page holds an <em>)."""
    context = new_context(browser)
    page = context.new_page()
    page.set_content('<html lang="zh-TW"><body><p><em>軟性</em></p></body></html>')
    found = page.evaluate(PASSAGES_JS)
    context.close()
    assert text_problems(found["passages"], found["italic"], "zh-TW")


def test_chinese_in_a_typeset_formula_is_marked_chinese(browser):
    """MathJax draws a formula's \\text{餘額} (mjx-utext, and mi in its MathML)
    after the build: the page's script marks it Chinese once it is drawn."""
    context = new_context(browser)
    page = context.new_page()
    page.set_content(
        f'<html lang="en"><head><script>{WIDGET_A11Y}</script></head><body>'
        "<p>x</p></body></html>"
    )
    page.evaluate("""() => document.querySelector("p").insertAdjacentHTML("beforeend",
      "<mjx-container><mjx-utext>餘額</mjx-utext><mjx-assistive-mml><math>" +
      "<mi>帳戶</mi></math></mjx-assistive-mml></mjx-container>")""")
    page.wait_for_function("() => document.querySelector('mjx-utext[lang]')")
    problems: list[str] = []
    check_chinese_marked(page, problems)
    context.close()
    assert problems == []


def test_search_summaries_show_formulas_as_text_and_leave_code_out(browser):
    context = new_context(browser)
    page = context.new_page()
    page.set_content(
        '<html lang="en"><head><script>var Search = {};</script>'
        f"<script>{SEARCH_JS}</script></head><body></body></html>"
    )
    text = page.evaluate(
        """() => Search.htmlToText('<div role="main"><h1>Title</h1><p>one product ' +
          '<span class="math">' +
          '\\\\(\\\\mathrm{softmax}(QK^\\\\top/\\\\sqrt{d_k})\\\\)</span>' +
          ' and <span class="math">\\\\(\\\\tfrac12 I\\\\)</span>.</p>' +
          '<div class="highlight"><pre>x ** 2</pre></div><p>答對了。</p><p>Next</p>' +
          '</div>')"""
    )
    context.close()
    assert "softmax(QKᵀ/√d_k)" in text and "1/2 I" in text, text
    assert "Title one product" in text and "答對了。Next" in text, text
    assert not raw_markup(text) and not entities(text), text


def quiz_problems(browser, html: str) -> list[str]:
    """What check_quizzes reports on a page of Chapter 2 that holds ``html``."""
    context = new_context(browser)
    page = context.new_page()
    page.set_content(f"<html><body>{html}</body></html>")
    problems: list[str] = []
    check_quizzes(page, HTML / "book" / "02_attention.html", problems)
    context.close()
    return problems


def test_the_concept_check_test_clicks_and_reads_every_answer(browser):
    sections = [s for s in all_checks() if s.startswith("2.")]
    html = "".join(concept_check(s).data for s in sections)
    assert not quiz_problems(browser, html)
    breaking = {  # a change to the page -> what the check must say
        "no verdict": (
            html.replace("<strong>Not quite.</strong>", "<strong></strong>", 1),
            "no 'Not quite.' shown",
        ),
        "open": (
            html.replace(
                '<details class="tb-option tb-wrong">',
                '<details open class="tb-option tb-wrong">',
                1,
            ),  # fmt: skip
            "open before a click",
        ),
        "two right": (
            html.replace("tb-option tb-wrong", "tb-option tb-right", 1),
            "not exactly one right answer",
        ),
        "too few": (concept_check(sections[0]).data, "not 3 to 5"),
    }
    for name, (page_html, expected) in breaking.items():
        found = quiz_problems(browser, page_html)
        assert any(expected in p for p in found), (name, found)
