"""Every text output a reader sees, and every line of code, fits the text column.

At 1280 CSS pixels the book's text column, 656 px inside a cell's padding, holds 90
characters of its monospaced font (set in 12 px by ``book/_ext/book_html.py``'s CSS:
0.6 em, 7.2 px a character; at 14 px it held 77), so no line of a committed text
output (a stream, or the ``text/plain`` of a result shown as text) may be longer.
The browser test (``check_code_width``) measures it on every page: no code cell or
text output scrolls sideways at 1280 px. A result that also has a
richer form (an image, HTML, Markdown, a widget) is shown in that form, so its
``text/plain`` is not read. HTML tables are not text: they scroll in their own box
(the rule is in ``book/_ext/book_html.py``'s CSS, checked below). Wide characters
(Chinese) count twice, as they take two columns of a monospaced font. Reads the
committed notebooks of both editions; runs no kernel. Code cells are set in the same
font in the same column, so no line of a cell's code is longer either (ruff formats
code to 88 characters, but leaves long strings and comments as they are).
"""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from book_html import A11Y_CSS  # noqa: E402
from toc_notebooks import toc_notebooks  # noqa: E402

COLUMN = 90  # characters of 12 px code font in the text column at 1280 px
ENGLISH = toc_notebooks()
ZH_TW = [ROOT / "zh-TW" / p.relative_to(ROOT) for p in ENGLISH]
NOTEBOOKS = ENGLISH + [p for p in ZH_TW if p.exists()]
IDS = [str(p.relative_to(ROOT).with_suffix("")) for p in NOTEBOOKS]
_RICHER = ("image/", "text/html", "text/markdown", "application/vnd.jupyter.widget")


def width(line: str) -> int:
    """Columns ``line`` takes in a monospaced font: wide characters count two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def shown_text(output) -> str:
    """The text of ``output`` a reader sees as text ("" if it is shown otherwise)."""
    if output.output_type == "stream":
        return output.text
    data = output.get("data", {})
    if any(key.startswith(_RICHER) for key in data):
        return ""
    return data.get("text/plain", "")


def wide_lines(path: Path, code: bool = False) -> list[tuple[int, int, str]]:
    """(cell index, width, line) for each line wider than the column: of the shown
    text outputs, or with ``code`` of the code cells' source."""
    nb = nbformat.read(path, as_version=4)
    found = []
    for index, cell in enumerate(nb.cells):
        if code:
            texts = [cell.source] if cell.cell_type == "code" else []
        else:
            texts = [shown_text(output) for output in cell.get("outputs", [])]
        for text in texts:
            for line in text.splitlines():
                if width(line.rstrip()) > COLUMN:
                    found.append((index, width(line.rstrip()), line))
    return found


def assert_none_wide(found: list[tuple[int, int, str]], what: str) -> None:
    report = "\n".join(
        f"  cell {i}: {w} columns: {line[:70]}..." for i, w, line in found
    )
    assert not found, f"{len(found)} {what} wider than {COLUMN}:\n{report}"


def test_width_counts_wide_characters_twice():
    assert width("ab") == 2 and width("注意") == 4 and width("注a") == 3


def test_html_tables_scroll_in_their_own_box():
    assert "table" in A11Y_CSS and "overflow-x: auto" in A11Y_CSS
    rule = next(r for r in A11Y_CSS.split("}") if ".cell_output table" in r)
    assert "overflow-x: auto" in rule and "display: block" in rule


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_text_output_fits_the_column(path):
    assert_none_wide(wide_lines(path), "output lines")


@pytest.mark.parametrize("path", ENGLISH, ids=[p.stem for p in ENGLISH])
def test_every_line_of_code_fits_the_column(path):
    assert_none_wide(wide_lines(path, code=True), "code lines")
