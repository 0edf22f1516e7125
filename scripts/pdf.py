"""A PDF of each edition (issue 45): ``make pdf`` writes _build/pdf/<name>.pdf.

The route: the HTML that ``make book`` built, printed by the headless Chromium the
browser tests use (Debian's, driven by Playwright). The PDF thus has the web's own
MathJax formulas, figures and fonts, and no second toolchain (TeX Live) is needed.

For each edition, the pages of the table of contents are joined into one print
document (_build/pdf/html/<edition>.html) that is the HTML of the pages' articles,
changed for paper:
- a title page, and a contents list whose page numbers come from a first print
  (Chromium's PDF outline gives each heading's page), filled in for the second;
- each page of the book starts on a new sheet; ids are prefixed with the page's name
  and links between pages point within the document, so cross-references and
  citations link within the PDF; each chapter names its Colab notebook's address;
- widgets are left out (each chapter draws the widget's default figure in a plain
  cell before it); a concept check prints its question and choices, and its answers
  with their explanations go to the chapter's end matter; an exercise's solution
  goes there too, after the answers; hidden code cells print open;
- code wraps within the page (book/_ext/print.css); the zh-TW edition is set in
  Noto Sans/Serif CJK TC (Debian's fonts-noto-cjk), never a Simplified face.

Usage: python scripts/pdf.py [en] [zh-TW]   (both by default)
"""

from __future__ import annotations

import html
import io
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urljoin, urlparse
from urllib.request import pathname2url

import yaml
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "_build" / "pdf"
CSS = ROOT / "book" / "_ext" / "print.css"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

# edition -> (the built HTML, its table of contents, the PDF's file name, and where
# the site's download menu finds it: book/_ext/book_html.py's PDF_NAMES)
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from book_html import PDF_NAMES  # noqa: E402

EDITIONS = {
    "en": (ROOT / "_build" / "html", ROOT / "_toc.yml", ROOT / "_config.yml"),
    "zh-TW": (
        ROOT / "zh-TW" / "_build" / "html",
        ROOT / "zh-TW" / "_toc.yml",
        ROOT / "zh-TW" / "_config.yml",
    ),
}
# The captions the print form adds, in each edition's language
LABELS = {
    "en": {
        "contents": "Contents",
        "answers": "Answers to the concept checks",
        "solutions": "Solutions to the exercises",
        "solution_link": "Solution: at the end of the chapter",
        "answers_link": "Answers: at the end of the chapter",
        "colab": "Run this chapter's notebook on Colab:",
        "solution_of": "Solution",
        "edition": "English edition",
        "web": "The web edition:",
    },
    "zh-TW": {
        "contents": "目錄",
        "answers": "概念檢查的答案",
        "solutions": "習題解答",
        "solution_link": "解答：見本章末",
        "answers_link": "答案：見本章末",
        "colab": "在 Colab 上執行本章的筆記本：",
        "solution_of": "解答",
        "edition": "臺灣正體中文版",
        "web": "網頁版：",
    },
}
WEB = "https://transformer-book.github.io/transformer-book/"


def toc_pages(toc: Path) -> list[tuple[str | None, str]]:
    """(part caption or None, page path without suffix) in the book's order."""
    data = yaml.safe_load(toc.read_text(encoding="utf-8"))
    pages = [(None, data["root"])]
    for part in data.get("parts", []):
        for chapter in part["chapters"]:
            pages.append((part.get("caption"), chapter["file"]))
    return pages


def _anchor(page: str, ident: str = "") -> str:
    base = page.replace("/", "-")
    return f"{base}--{ident}" if ident else base


def _file_uri(path: Path) -> str:
    return "file://" + pathname2url(str(path.resolve()))


def _rewrite_links(article, page: str, html_root: Path, known: set[str]) -> None:
    """Ids prefixed with the page; links between pages within the document; the
    sources of images and other files as absolute file URIs."""
    page_url = _file_uri(html_root / f"{page}.html")
    root_url = _file_uri(html_root) + "/"
    for tag in article.find_all(id=True):
        tag["id"] = _anchor(page, tag["id"])
    for tag in article.find_all(["a", "img", "source"]):
        attr = "href" if tag.name == "a" else "src"
        url = tag.get(attr)
        if not url or re.match(r"^[a-z][a-z0-9+.-]*:", url) or url.startswith("//"):
            continue
        if url.startswith("#"):
            tag[attr] = "#" + _anchor(page, url[1:])
            continue
        absolute = urljoin(page_url, url)
        parsed = urlparse(absolute)
        target = parsed.path[len(urlparse(root_url).path) :].removesuffix(".html")
        if tag.name == "a" and target in known:
            tag[attr] = "#" + _anchor(target, parsed.fragment)
        else:
            tag[attr] = absolute


def _colab_url(source: str) -> str | None:
    link = re.search(r'href="(https://colab\.research\.google\.com[^"]*)"', source)
    return html.unescape(link.group(1)) if link else None


def _article(source: str):
    """The soup of a built page's article alone (the rest of the page, its widgets'
    state above all, is as long again and need not be parsed)."""
    start = source.find('<article class="bd-article"')
    end = source.find("</article>", start)
    if start < 0 or end < 0:
        return BeautifulSoup(source, "html.parser")
    return BeautifulSoup(source[start : end + len("</article>")], "html.parser")


def _see(soup, target: str, label: str):
    """The note left where an answer or a solution was: a link to it in the end
    matter."""
    link = soup.new_tag("a", href="#" + target)
    link.string = label
    note = soup.new_tag("p", attrs={"class": "tb-see"})
    note.append(link)
    return note


def _end_matter(soup, article, page: str, labels: dict) -> list:
    """Take the concept checks' answers and the exercises' solutions out of the
    text; return the chapter's end matter (headings and blocks) in their order."""
    answers, solutions = [], []
    for number, quiz in enumerate(article.find_all("div", class_="tb-quiz"), 1):
        copy = BeautifulSoup(str(quiz), "html.parser").div
        copy["id"] = _anchor(page, f"tb-answers-{number}")
        copy["class"] = ["tb-quiz", "tb-quiz-answers"]
        for option in copy.select("details.tb-option"):
            option["open"] = ""
        answers.append(copy)
        for option in quiz.select("details.tb-option"):
            choice = soup.new_tag("p", attrs={"class": "tb-choice"})
            for child in list(option.summary.contents):
                choice.append(child)
            option.replace_with(choice)
        quiz.append(_see(soup, copy["id"], labels["answers_link"]))
    number = 0
    for details in article.find_all("details"):
        summary = details.find("summary", recursive=False)
        if summary is None or "tb-option" in (details.get("class") or []):
            continue
        if summary.get_text(strip=True) not in {"Solution", "解答"}:
            continue
        number += 1
        section = details.find_parent("section")
        heading = section.find(["h2", "h3", "h4"]) if section else None
        target = section.get("id", "") if section else ""
        block = soup.new_tag("div", attrs={"class": "tb-solution"})
        block["id"] = _anchor(page, f"tb-solution-{number}")
        title = soup.new_tag("p", attrs={"class": "tb-solution-title"})
        if heading is not None:
            back = soup.new_tag("a", href="#" + target)
            back.string = heading.get_text(" ", strip=True)
            title.append(back)
        block.append(title)
        summary.decompose()
        for child in list(details.contents):
            block.append(child)
        solutions.append(block)
        details.replace_with(_see(soup, block["id"], labels["solution_link"]))
    out = []
    for key, blocks in (("answers", answers), ("solutions", solutions)):
        if blocks:
            heading = soup.new_tag("h2", attrs={"class": "tb-end-matter"})
            heading["id"] = _anchor(page, f"tb-{key}")
            heading.string = labels[key]
            out += [heading, *blocks]
    return out


def _web_only(tag) -> bool:
    """What the print form leaves out: the edition link, the headings' link marks,
    scripts, styles and the widgets' notes for screen readers (find_all with this is
    several times faster than the CSS selector)."""
    classes = tag.get("class") or []
    return (
        tag.name in {"script", "style"}
        or "tb-edition-link" in classes
        or "tb-widget-a11y" in classes
        or (tag.name == "a" and "headerlink" in classes)
    )


def print_page(edition: str, page: str, html_root: Path, known: set[str]):
    """The print form of one built page: its article (a div.tb-page)."""
    labels = LABELS[edition]
    source = (html_root / f"{page}.html").read_text(encoding="utf-8")
    soup = _article(source)
    article = soup.find("article", class_="bd-article")
    for tag in article.find_all(_web_only):
        tag.decompose()
    for output in article.find_all(class_="cell_output"):
        # a widget's output holds only its view's <script>, removed above
        if not output.get_text(strip=True) and not output.find(["img", "svg"]):
            output.decompose()
    end = _end_matter(soup, article, page, labels)
    for details in article.find_all("details"):  # hidden cells print open
        details["open"] = ""
    colab = _colab_url(source)
    h1 = article.find("h1")
    if colab and h1 is not None:
        note = soup.new_tag("p", attrs={"class": "tb-colab"})
        note.append(labels["colab"] + " ")
        link = soup.new_tag("a", href=colab)
        link.string = colab
        note.append(link)
        h1.insert_after(note)
    wrapper = soup.new_tag("div", attrs={"class": "tb-page", "id": _anchor(page)})
    for child in list(article.contents):
        wrapper.append(child)
    for block in end:
        wrapper.append(block)
    _rewrite_links(wrapper, page, html_root, known)
    return wrapper


def _head(html_root: Path, page: str) -> str:
    """The style sheets and MathJax of a built page, with absolute URLs."""
    soup = BeautifulSoup(
        (html_root / f"{page}.html").read_text(encoding="utf-8"), "html.parser"
    )
    page_url = _file_uri(html_root / f"{page}.html")
    out = []
    for link in soup.head.find_all("link", rel="stylesheet"):
        out.append(f'<link rel="stylesheet" href="{urljoin(page_url, link["href"])}">')
    for script in soup.head.find_all("script"):
        src = script.get("src", "")
        text = script.string or ""
        if "mathjax" in src.lower():
            out.append(f'<script defer src="{urljoin(page_url, src)}"></script>')
        elif text.startswith("window.MathJax"):
            out.append(f"<script>{text}</script>")
    return "\n".join(out)


def document(edition: str, pages: dict[str, str] | None = None) -> tuple[str, list]:
    """The print document of an edition and its contents entries (anchor, level,
    title). ``pages``: page number of each anchor, from a first print."""
    html_root, toc, config = EDITIONS[edition]
    labels = LABELS[edition]
    title = yaml.safe_load(config.read_text(encoding="utf-8"))["title"]
    order = toc_pages(toc)
    known = {page for _, page in order}
    bodies, entries, last_part = [], [], None
    for part, page in order:
        body = print_page(edition, page, html_root, known)
        if part and part != last_part:
            entries.append((None, 0, part))
            last_part = part
        for heading in body.find_all(["h1", "h2"]):
            level = 1 if heading.name == "h1" else 2
            anchor = heading.get("id") or heading.parent.get("id")
            entries.append((anchor if level == 2 else _anchor(page), level, heading))
        bodies.append(str(body))
    rows = []
    for anchor, level, heading in entries:
        if anchor is None:
            rows.append(f'<li class="tb-toc-part">{html.escape(heading)}</li>')
            continue
        text = "".join(
            str(c) for c in heading.contents if getattr(c, "name", None) != "a"
        )
        number = (pages or {}).get(anchor, "")
        rows.append(
            f'<li class="tb-toc-{level}"><a href="#{anchor}"><span class="tb-toc-text">'
            f'{text}</span><span class="tb-toc-page">{number}</span></a></li>'
        )
    lang = "zh-Hant-TW" if edition == "zh-TW" else "en"
    doc = f"""<!DOCTYPE html>
<html lang="{lang}" data-mode="light" data-theme="light">
<head><meta charset="utf-8"><title>{html.escape(title)}</title>
{_head(html_root, order[0][1])}
<link rel="stylesheet" href="{_file_uri(CSS)}">
</head>
<body class="tb-print tb-print-{edition}">
<div class="bd-article-container"><article class="bd-article" role="main">
<section class="tb-title-page">
<p class="tb-title">{html.escape(title)}</p>
<p class="tb-edition">{labels["edition"]}</p>
<p class="tb-web">{labels["web"]} <a href="{WEB}">{WEB}</a></p>
</section>
<nav class="tb-toc" aria-label="{labels["contents"]}">
<p class="tb-toc-title">{labels["contents"]}</p>
<ul>{"".join(rows)}</ul>
</nav>
{"".join(bodies)}
</article></div>
</body></html>
"""
    return doc, entries


def _outline_pages(pdf: Path) -> list[tuple[int, str, int]]:
    """(depth, title, 1-based page) of every bookmark, in document order."""
    import logging

    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # Chromium's trailer size
    reader = PdfReader(pdf)
    found = []

    def walk(items, depth):
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            else:
                page = reader.get_destination_page_number(item) + 1
                found.append((depth, item.title, page))

    walk(reader.outline, 0)
    return found


def _open(browser, source: Path):
    """The print document in a page, formulas typeset, fonts and images loaded."""
    # the width of A4 less the margins (174 mm), so that what is measured below is
    # what is printed
    page = browser.new_page(viewport={"width": 657, "height": 900})
    page.goto(_file_uri(source), wait_until="load", timeout=300_000)
    page.emulate_media(media="print")
    page.evaluate(
        """async () => {
          if (window.MathJax && MathJax.startup) await MathJax.startup.promise;
          // a display formula wider than the text is scaled down to fit
          document.querySelectorAll('mjx-container[display="true"]').forEach(c => {
            const math = c.firstElementChild;
            const wide = math && math.getBoundingClientRect().width;
            const room = c.parentElement.getBoundingClientRect().width;
            if (wide > room) c.style.zoom = (0.98 * room / wide).toFixed(3);
          });
          await document.fonts.ready;
          await Promise.all([...document.images].map(img => img.complete ? null :
            new Promise(done => { img.onload = img.onerror = done; })));
        }"""
    )
    return page


def _print(page, target: Path, tagged: bool = True) -> None:
    """Print; ``tagged=False``: the overlay of the contents' page numbers, with no
    background, footer or bookmarks, to lay over a tagged print."""
    page.pdf(
        path=str(target),
        format="A4",
        margin={"top": "18mm", "bottom": "18mm", "left": "18mm", "right": "18mm"},
        print_background=tagged,
        display_header_footer=tagged,
        header_template="<span></span>",
        footer_template=(
            '<div style="font-size:8pt;width:100%;text-align:center;color:#555">'
            '<span class="pageNumber"></span></div>'
        ),
        outline=tagged,  # the bookmarks: Chromium's, from the headings (needs tagged)
        tagged=tagged,
    )


def _overlay(target: Path, numbers: Path) -> None:
    """Lay each page of ``numbers`` over the page of ``target`` with its number, as
    an incremental update: the changed pages and the overlay's objects are appended
    to the file, and pypdf reads only the objects they need (a rewrite of the whole
    file, or pypdf's own incremental mode, which loads every object, took a minute)."""
    import logging

    from pypdf import PdfReader
    from pypdf.generic import (
        ArrayObject,
        DictionaryObject,
        IndirectObject,
        NameObject,
        NumberObject,
        StreamObject,
    )

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    base, over = PdfReader(target), PdfReader(numbers)
    size = int(base.trailer["/Size"])
    added: dict[int, tuple[int, object]] = {}  # number -> (generation, object)
    copies: dict[int, IndirectObject] = {}  # an overlay's object -> its copy

    def add(obj, ref: IndirectObject | None = None) -> IndirectObject:
        nonlocal size
        if ref is None:
            ref, size = IndirectObject(size, 0, None), size + 1
        added[ref.idnum] = (ref.generation, obj)
        return ref

    def stream(data: bytes, **keys) -> StreamObject:
        out = StreamObject()
        out.update({NameObject(k): v for k, v in keys.items()})
        out.set_data(data)
        return out

    def copy(obj):
        """An object of the overlay, its references renumbered into the target."""
        if isinstance(obj, IndirectObject):
            if obj.idnum not in copies:
                copies[obj.idnum] = add(None)
                add(copy(obj.get_object()), copies[obj.idnum])
            return copies[obj.idnum]
        if isinstance(obj, StreamObject):
            skip = {"/Filter", "/DecodeParms", "/Length"}
            keys = {k: copy(obj.raw_get(k)) for k in obj if k not in skip}
            return stream(obj.get_data(), **keys)
        if isinstance(obj, DictionaryObject):
            return DictionaryObject({k: copy(obj.raw_get(k)) for k in obj})
        if isinstance(obj, ArrayObject):
            return ArrayObject(copy(v) for v in obj)
        return obj

    for i, sheet in enumerate(over.pages):
        form = add(
            stream(
                sheet.get_contents().get_data(),
                **{
                    "/Type": NameObject("/XObject"),
                    "/Subtype": NameObject("/Form"),
                    "/BBox": ArrayObject(sheet.mediabox),
                    "/Resources": copy(sheet.raw_get("/Resources")),
                },
            )
        )
        page = base.pages[i]
        new = DictionaryObject({k: page.raw_get(k) for k in page})
        contents = page.raw_get("/Contents")
        parts = contents.get_object()
        parts = list(parts) if isinstance(parts, ArrayObject) else [contents]
        new[NameObject("/Contents")] = ArrayObject(
            [add(stream(b"q\n")), *parts, add(stream(b"\nQ q /TbNumbers Do Q\n"))]
        )
        resources = page["/Resources"].get_object()
        resources = DictionaryObject({k: resources.raw_get(k) for k in resources})
        forms = resources.get("/XObject", DictionaryObject()).get_object()
        forms = DictionaryObject({k: forms.raw_get(k) for k in forms})
        forms[NameObject("/TbNumbers")] = form
        resources[NameObject("/XObject")] = forms
        new[NameObject("/Resources")] = resources
        add(new, page.indirect_reference)

    data = target.read_bytes()
    previous = int(data[data.rindex(b"startxref") + 9 :].split()[0])
    out = io.BytesIO()
    out.write(b"\n")
    offsets = {}
    for number in sorted(added):
        generation, obj = added[number]
        offsets[number] = len(data) + out.tell()
        out.write(f"{number} {generation} obj\n".encode())
        obj.write_to_stream(out)
        out.write(b"\nendobj\n")
    xref = len(data) + out.tell()
    out.write(b"xref\n")
    order = sorted(added)
    runs, start = [], 0
    for j in range(1, len(order) + 1):
        if j == len(order) or order[j] != order[j - 1] + 1:
            runs.append(order[start:j])
            start = j
    for run in runs:
        out.write(f"{run[0]} {len(run)}\n".encode())
        for number in run:
            out.write(f"{offsets[number]:010d} {added[number][0]:05d} n \n".encode())
    trailer = DictionaryObject(
        {
            NameObject("/Size"): NumberObject(size),
            NameObject("/Prev"): NumberObject(previous),
        }
    )
    for key in ("/Root", "/Info", "/ID"):
        if key in base.trailer:
            trailer[NameObject(key)] = base.trailer.raw_get(key)
    out.write(b"trailer\n")
    trailer.write_to_stream(out)
    out.write(f"\nstartxref\n{xref}\n%%EOF\n".encode())
    with open(target, "ab") as file:
        file.write(out.getvalue())


def _heading_pages(edition: str, pdf: Path, entries: list) -> dict[str, int]:
    """The page of each contents entry (a chapter, depth 0, or a section, depth 1)
    from the first print's bookmarks, which are the document's headings in order."""
    outline = [(d + 1, p) for d, _, p in _outline_pages(pdf) if d <= 1]
    wanted = [(a, level) for a, level, _ in entries if a is not None]
    if [level for _, level in wanted] != [level for level, _ in outline]:
        raise RuntimeError(
            f"{edition}: {len(outline)} bookmarks of chapters and sections for "
            f"{len(wanted)} contents entries"
        )
    return {a: p for (a, _), (_, p) in zip(wanted, outline, strict=True)}


def build(edition: str, browser) -> Path:
    start = time.monotonic()
    times = {}

    def lap(name: str) -> None:
        times[name] = time.monotonic() - start - sum(times.values())

    work = OUT / "html"
    work.mkdir(parents=True, exist_ok=True)
    source = work / f"{edition}.html"
    target = OUT / PDF_NAMES[edition]
    doc, entries = document(edition)
    lap("document")
    # The contents' page numbers come from the bookmarks of the print; a second
    # print of the title page and the contents alone, showing only the numbers, is
    # laid over the first (the same layout: the chapters come after them).
    source.write_text(doc.replace('"tb-toc-page"></span>', '"tb-toc-page">000</span>'))
    page = _open(browser, source)
    lap("load and typeset")
    page.add_style_tag(content=".tb-toc-page { visibility: hidden; }")
    _print(page, target)
    lap("print")
    pages = _heading_pages(edition, target, entries)
    lap("bookmarks")
    page.evaluate(
        """pages => {
          document.querySelectorAll(".tb-toc a").forEach(a => {
            a.querySelector(".tb-toc-page").textContent =
              pages[a.getAttribute("href").slice(1)] || "";
          });
          document.querySelectorAll(".tb-page").forEach(p => p.remove());
        }""",
        pages,
    )
    page.add_style_tag(
        content="html, body { background: transparent !important; } "
        "body * { visibility: hidden; } .tb-toc-page { visibility: visible; }"
    )
    numbers = OUT / "html" / f"{edition}-numbers.pdf"
    _print(page, numbers, tagged=False)
    page.close()
    lap("contents' numbers")
    _overlay(target, numbers)
    site = EDITIONS[edition][0] / "pdf"  # where the download menu points
    site.mkdir(exist_ok=True)
    shutil.copy2(target, site / target.name)
    if edition == "zh-TW" and (ROOT / "_build" / "html" / "zh-TW").is_dir():
        copy = ROOT / "_build" / "html" / "zh-TW" / "pdf"
        copy.mkdir(exist_ok=True)
        shutil.copy2(target, copy / target.name)
    lap("overlay and copies")
    print(
        f"{target.relative_to(ROOT)}: {_page_count(target)} pages, "
        f"{target.stat().st_size / 1e6:.1f} MB, {time.monotonic() - start:.0f} s ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
        + ")",
        flush=True,
    )
    return target


def _page_count(pdf: Path) -> int:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True)
    match = re.search(r"^Pages:\s+(\d+)", info.stdout, re.M)
    return int(match.group(1)) if match else -1


def unbuilt(edition: str) -> list[str]:
    """The pages of the edition's table of contents that have no built HTML."""
    html_root, toc, _ = EDITIONS[edition]
    return [
        page for _, page in toc_pages(toc) if not (html_root / f"{page}.html").is_file()
    ]


def main(argv: list[str]) -> int:
    editions = argv or list(EDITIONS)
    for edition in editions:
        if edition not in EDITIONS:
            raise SystemExit(f"unknown edition {edition!r}: one of {list(EDITIONS)}")
        if missing := unbuilt(edition):
            raise SystemExit(
                f"{edition}: no built HTML for {', '.join(missing)} (in "
                f"{EDITIONS[edition][1].relative_to(ROOT)}): run `make book` first"
            )
    if len(editions) > 1:
        # Each edition in its own process and browser, side by side: a print is
        # mostly one Chromium renderer's work on one core, and each edition waits in
        # turn on its own (the bookmarks, the overlay)
        runs = [subprocess.Popen([sys.executable, __file__, e]) for e in editions]
        codes = [run.wait() for run in runs]
        return max(codes)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        build(editions[0], browser)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
