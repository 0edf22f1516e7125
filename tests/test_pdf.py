"""The PDF of each edition (scripts/pdf.py, `make pdf`, issue 45), read back with
poppler's tools (Debian's poppler-utils): its text has every chapter's and section's
title in order, no TeX source or HTML entity; the zh-TW one has no English caption
and no Simplified-only character; it embeds at least one image per figure of the
book and every font it uses; no text runs past the right margin.

Needs `make book` and `make pdf` first (marked browser: the PDFs are printed by
Chromium, so `make unit` leaves these tests out; `make pdf` runs them). Each poppler
tool reads each PDF once for all the tests (the fixture ``poppler``), all of them side
by side, and each edition's built pages are parsed once.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))
sys.path.insert(0, str(ROOT / "tests"))
import pdf  # noqa: E402
from book_html import PDF_NAMES  # noqa: E402
from rendered_text import entities, simplified  # noqa: E402

pytestmark = pytest.mark.browser
EDITIONS = list(pdf.EDITIONS)
MARGIN = 18 / 25.4 * 72  # scripts/pdf.py's 18 mm, in points
CLOSING = set("）」』，。、；：！？")  # full-width, set at a line's end


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: install Debian's poppler-utils (.ci/run)")
    return path


def pdf_path(edition: str) -> Path:
    path = pdf.OUT / PDF_NAMES[edition]
    if not path.is_file():
        pytest.fail(f"{path} missing: run `make pdf`")
    return path


# What the tests read of each PDF: each command's output, "{pdf}" the PDF's path
POPPLER = {
    # the text in the order Chromium drew it (-raw: the document's order; the layout
    # order puts a wrapped title's Chinese after it); a form feed ends each page
    "text": ["pdftotext", "-raw", "-enc", "UTF-8", "{pdf}", "-"],
    "bbox": ["pdftotext", "-bbox", "{pdf}", "-"],  # each word's box
    "info": ["pdfinfo", "{pdf}"],
    "images": ["pdfimages", "-list", "{pdf}"],
    "fonts": ["pdffonts", "{pdf}"],
}


@pytest.fixture(scope="session")
def poppler(tmp_path_factory):
    """``poppler(edition, name)``: the output of POPPLER[name] on the edition's PDF.
    Every command on every PDF that exists starts at once (each one core's work) and
    is read once for all the tests."""
    out = tmp_path_factory.mktemp("poppler")
    runs = {}
    for edition in EDITIONS:
        path = pdf.OUT / PDF_NAMES[edition]
        if not path.is_file():
            continue
        for name, command in POPPLER.items():
            args = [_tool(command[0])] + [
                str(path) if a == "{pdf}" else a for a in command[1:]
            ]
            stdout = (out / f"{edition}-{name}.txt").open("wb")
            runs[edition, name] = (
                subprocess.Popen(args, stdout=stdout, stderr=subprocess.PIPE),
                stdout,
            )

    @functools.cache
    def read(edition: str, name: str) -> str:
        pdf_path(edition)  # fails if the PDF is missing
        run, stdout = runs[edition, name]
        error = run.communicate()[1]
        stdout.close()
        assert run.returncode == 0, f"{run.args}: {error.decode(errors='replace')}"
        return (out / f"{edition}-{name}.txt").read_text(encoding="utf-8")

    yield read
    for run, stdout in runs.values():
        run.kill()
        run.wait()
        stdout.close()


def text(poppler, edition: str, first: int = 1) -> str:
    """The PDF's text from page ``first`` on (pdftotext -raw)."""
    pages = poppler(edition, "text").split("\f")
    return unicodedata.normalize("NFKC", "\f".join(pages[first - 1 :]))


@functools.cache
def first_body_page(edition: str) -> int:
    """The page where the book's first page starts, after the contents."""
    return pdf._outline_pages(pdf_path(edition))[0][2]


def squeeze(value: str) -> str:
    """Letters and digits only: pdftotext joins a word hyphenated at a line's end,
    and a title's punctuation may break a line in either edition."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", value))


@functools.cache
def articles(edition: str) -> list:
    """(page, its article) of every built page in the table of contents' order."""
    html_root, toc, _ = pdf.EDITIONS[edition]
    if missing := pdf.unbuilt(edition):
        pytest.fail(f"{edition}: no built HTML for {missing}: run `make book`")
    found = []
    for _, page in pdf.toc_pages(toc):
        soup = pdf._article((html_root / f"{page}.html").read_text(encoding="utf-8"))
        found.append((page, soup.find("article", class_="bd-article")))
    return found


def headings(edition: str) -> list[tuple[str, list[str]]]:
    """(page, the pieces of its title outside formulas) of every chapter's and
    section's title (h1, h2), in the order of the table of contents."""
    found = []
    for page, article in articles(edition):
        for heading in article.find_all(["h1", "h2"]):
            pieces = []
            for child in heading.descendants:
                if child.find_parent("a", class_="headerlink"):
                    continue
                if isinstance(child, str) and not child.find_parent(class_="math"):
                    pieces.append(child)
            parts = [squeeze(p) for p in re.split(r"\s{2,}|\x00", "\x00".join(pieces))]
            found.append((page, [p for p in parts if p]))
    return found


@pytest.mark.parametrize("edition", EDITIONS)
def test_builds(edition, poppler):
    info = poppler(edition, "info")
    pages = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    assert pages > 50, f"{edition}: {pages} pages"


@pytest.mark.parametrize("edition", EDITIONS)
def test_titles_in_order(edition, poppler):
    """Each title's longest piece outside formulas comes in the contents' order (a
    title's other pieces, such as a Chinese term in parentheses, only somewhere:
    pdftotext may give them after a figure drawn next to the title)."""
    body = squeeze(text(poppler, edition, first_body_page(edition)))
    at, missing = 0, []
    for page, pieces in headings(edition):
        if not pieces:
            continue
        longest = max(pieces, key=len)
        found = body.find(longest, at)
        if found < 0:
            missing.append(f"{page}: {longest!r}")
        else:
            at = found + len(longest)
        missing += [f"{page}: {p!r} (anywhere)" for p in pieces if p not in body]
    assert not missing, f"{edition}: titles missing or out of order: {missing[:10]}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_no_raw_source(edition, poppler):
    content = text(poppler, edition)
    raw = [s for s in (r"\frac", "$$", r"\begin") if s in content]
    assert not raw, f"{edition}: TeX source in the PDF's text: {raw}"
    assert not entities(content), entities(content)[:5]


def test_zh_tw_has_no_english_caption(poppler):
    content = text(poppler, "zh-TW")
    english = [v for v in pdf.LABELS["en"].values() if v in content]
    english += [w for w in ("Contents", "Solution", "Chapters") if w in content]
    assert not english, f"English captions in the zh-TW PDF: {english}"


def test_zh_tw_has_no_simplified_character(poppler):
    found = simplified(text(poppler, "zh-TW"))
    assert not found, found[:10]


def figures(edition: str) -> int:
    return sum(len(article.find_all("img")) for _, article in articles(edition))


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_figure_embedded(edition, poppler):
    listing = poppler(edition, "images").splitlines()[2:]
    images = [line for line in listing if line.split()[2] == "image"]
    assert len(images) >= figures(edition) > 0, (len(images), figures(edition))


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_font_embedded(edition, poppler):
    listing = poppler(edition, "fonts").splitlines()
    header = listing[0]
    emb = header.index(" emb") + 1
    fonts = listing[2:]
    assert fonts, f"{edition}: no fonts"
    not_embedded = [line for line in fonts if line[emb : emb + 3] != "yes"]
    assert not not_embedded, f"{edition}: fonts not embedded: {not_embedded}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_nothing_past_the_right_margin(edition, poppler):
    """No word (of a code listing, an output, a table or the prose) ends to the right
    of the page's right margin: code wraps within the page."""
    page_xml = poppler(edition, "bbox")
    past, number = [], 0
    page_tag = re.compile(r'<page width="([\d.]+)"')
    word = re.compile(r'<word xMin="[\d.]+" yMin="[\d.]+" xMax="([\d.]+)"[^>]*>([^<]*)')
    width = 0.0
    for line in page_xml.splitlines():
        if match := page_tag.search(line):
            number += 1
            width = float(match.group(1))
        elif match := word.search(line):
            right = float(match.group(1))
            if match.group(2)[-1:] in CLOSING:  # the glyph's ink is its left half
                xmin = float(re.search(r'xMin="([\d.]+)"', line).group(1))
                right -= (right - xmin) / len(match.group(2)) / 2
            if right > width - MARGIN + 2:
                past.append(f"page {number}: {match.group(2)!r}")
    assert not past, f"{edition}: {len(past)} words past the margin: {past[:10]}"
