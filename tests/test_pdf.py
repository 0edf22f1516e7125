"""The PDF of each edition (scripts/pdf.py, `make pdf`, issue 45), read back with
poppler's tools (Debian's poppler-utils): its text has every chapter's and section's
title in order, no TeX source or HTML entity; the zh-TW one has no English caption
and no Simplified-only character; it embeds at least one image per figure of the
book and every font it uses; no text runs past the right margin.

Needs `make book` and `make pdf` first (marked browser: the PDFs are printed by
Chromium, so `make unit` leaves these tests out; `make pdf` runs them).
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
from bs4 import BeautifulSoup

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


@functools.cache
def text(edition: str, first: int = 1) -> str:
    """The PDF's text from page ``first``, in the order Chromium drew it (-raw: the
    document's order; the layout order puts a wrapped title's Chinese after it)."""
    command = [_tool("pdftotext"), "-raw", "-f", str(first), "-enc", "UTF-8"]
    out = subprocess.run(
        [*command, str(pdf_path(edition)), "-"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return unicodedata.normalize("NFKC", out)


@functools.cache
def first_body_page(edition: str) -> int:
    """The page where the book's first page starts, after the contents."""
    return pdf._outline_pages(pdf_path(edition))[0][2]


def squeeze(value: str) -> str:
    """Letters and digits only: pdftotext joins a word hyphenated at a line's end,
    and a title's punctuation may break a line in either edition."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", value))


def headings(edition: str) -> list[tuple[str, list[str]]]:
    """(page, the pieces of its title outside formulas) of every chapter's and
    section's title (h1, h2), in the order of the table of contents."""
    html_root, toc, _ = pdf.EDITIONS[edition]
    found = []
    for _, page in pdf.toc_pages(toc):
        soup = BeautifulSoup((html_root / f"{page}.html").read_text(), "html.parser")
        article = soup.find("article", class_="bd-article")
        for heading in article.find_all(["h1", "h2"]):
            for tag in heading.select("a.headerlink"):
                tag.decompose()
            pieces = []
            for child in heading.descendants:
                if isinstance(child, str) and not child.find_parent(class_="math"):
                    pieces.append(child)
            parts = [squeeze(p) for p in re.split(r"\s{2,}|\x00", "\x00".join(pieces))]
            found.append((page, [p for p in parts if p]))
    return found


@pytest.mark.parametrize("edition", EDITIONS)
def test_builds(edition):
    info = subprocess.run(
        [_tool("pdfinfo"), str(pdf_path(edition))], capture_output=True, text=True
    )
    assert info.returncode == 0, info.stderr
    pages = int(re.search(r"^Pages:\s+(\d+)", info.stdout, re.M).group(1))
    assert pages > 50, f"{edition}: {pages} pages"


@pytest.mark.parametrize("edition", EDITIONS)
def test_titles_in_order(edition):
    """Each title's longest piece outside formulas comes in the contents' order (a
    title's other pieces, such as a Chinese term in parentheses, only somewhere:
    pdftotext may give them after a figure drawn next to the title)."""
    body = squeeze(text(edition, first_body_page(edition)))
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
def test_no_raw_source(edition):
    content = text(edition)
    raw = [s for s in (r"\frac", "$$", r"\begin") if s in content]
    assert not raw, f"{edition}: TeX source in the PDF's text: {raw}"
    assert not entities(content), entities(content)[:5]


def test_zh_tw_has_no_english_caption():
    content = text("zh-TW")
    english = [v for v in pdf.LABELS["en"].values() if v in content]
    english += [w for w in ("Contents", "Solution", "Chapters") if w in content]
    assert not english, f"English captions in the zh-TW PDF: {english}"


def test_zh_tw_has_no_simplified_character():
    found = simplified(text("zh-TW"))
    assert not found, found[:10]


def figures(edition: str) -> int:
    html_root, toc, _ = pdf.EDITIONS[edition]
    count = 0
    for _, page in pdf.toc_pages(toc):
        soup = BeautifulSoup((html_root / f"{page}.html").read_text(), "html.parser")
        count += len(soup.find("article", class_="bd-article").find_all("img"))
    return count


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_figure_embedded(edition):
    listing = subprocess.run(
        [_tool("pdfimages"), "-list", str(pdf_path(edition))],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()[2:]  # fmt: skip
    images = [line for line in listing if line.split()[2] == "image"]
    assert len(images) >= figures(edition) > 0, (len(images), figures(edition))


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_font_embedded(edition):
    listing = subprocess.run(
        [_tool("pdffonts"), str(pdf_path(edition))],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    header = listing[0]
    emb = header.index(" emb") + 1
    fonts = listing[2:]
    assert fonts, f"{edition}: no fonts"
    not_embedded = [line for line in fonts if line[emb : emb + 3] != "yes"]
    assert not not_embedded, f"{edition}: fonts not embedded: {not_embedded}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_nothing_past_the_right_margin(edition):
    """No word (of a code listing, an output, a table or the prose) ends to the right
    of the page's right margin: code wraps within the page."""
    page_xml = subprocess.run(
        [_tool("pdftotext"), "-bbox", str(pdf_path(edition)), "-"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
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
