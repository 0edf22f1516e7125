"""The zh-TW edition's pages, written from the English pages and the catalogues
(``i18n.py generate``), and the search's word list."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from figures_zh import swap_figures
from i18n_catalogue import (
    OUTPUTS_PO,
    ROOT,
    _po,
    load_catalogue,
    pages,
    translations,
    write_concepts_mo,
)
from i18n_notebook import translate_alts
from i18n_outputs import translate_outputs, translate_widget_labels
from i18n_units import translate

EDITION_DIR = ROOT / "zh-TW"  # the zh-TW edition's pages, generated
LANG = "zh-TW"
_CONCEPT_CALL = re.compile(r'^concept_check\("([\d.]+)"\)$')


def edition_path(page: Path) -> Path:
    return EDITION_DIR / page.relative_to(ROOT)


def _concept_section(source: str) -> str | None:
    """The section of a cell that is only ``concept_check("2.3")``, else None."""
    call = _CONCEPT_CALL.match(source.strip())
    return call.group(1) if call else None


def translated_code(source: str) -> str:
    """A code cell of the zh-TW edition: the English cell, except that a call that
    renders reader text takes the edition's language."""
    section = _concept_section(source)
    if section is None:
        return source
    return f'concept_check("{section}", lang="{LANG}")'


def translate_notebook(
    nb, catalogue: Mapping[str, str], outputs: Mapping[str, str] | None = None
):
    """The zh-TW notebook: Markdown cells and the figures' text alternatives
    translated; code cells and their outputs the English ones, except concept
    checks, rendered by the package in zh-TW, and the outputs that are prose and
    the widgets' labels, translated from ``outputs`` (default: ``outputs.po``).

    Returns the notebook and the units that have no translation.
    """
    if outputs is None:
        outputs = translations(_po(OUTPUTS_PO))
    import copy

    from transformer_book.concepts import concept_check

    nb = copy.deepcopy(nb)
    missing = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source, lost = translate(cell.source, catalogue)
            missing += lost
        elif cell.cell_type == "code":
            section = _concept_section(cell.source)
            if section is None:
                continue
            cell.source = translated_code(cell.source)
            page = concept_check(section, lang=LANG).data
            for output in cell.outputs:
                if "text/html" in output.get("data", {}):
                    output.data["text/html"] = page
    missing += translate_alts(nb, catalogue)
    missing += translate_outputs(nb, outputs)
    missing += translate_widget_labels(nb, outputs)
    swap_figures(nb)  # the figures rendered with their texts in zh-TW (figures_zh)
    return nb, missing


def generate_page(page: Path, catalogue: Mapping[str, str]) -> tuple[str, list[str]]:
    """The text of a page of the zh-TW edition, and its untranslated units."""
    if page.suffix == ".md":
        return translate(page.read_text(), catalogue)
    import nbformat

    nb, missing = translate_notebook(nbformat.read(page, as_version=4), catalogue)
    return nbformat.writes(nb) + "\n", missing


SEARCH_TERMS = ROOT / "locale" / "zh_TW" / "search_terms.txt"


def search_terms() -> list[str]:
    """The book's Chinese terms, for the search's word splitter (jieba's user
    dictionary): every run of Chinese characters in the glossary's 繁體中文 column,
    e.g. 位置編碼, which jieba's own dictionary, Simplified, would cut in two."""
    terms: dict[str, None] = {}
    for line in (ROOT / "book" / "glossary.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and not set(cells[1]) <= set("-: "):
            terms.update(dict.fromkeys(re.findall(r"[\u4e00-\u9fff]{2,}", cells[1])))
    return sorted(terms)


def generate() -> None:
    """Write every page of the zh-TW edition from the English page and its
    catalogue, and the search's word list."""
    SEARCH_TERMS.write_text("".join(f"{term}\n" for term in search_terms()))
    write_concepts_mo()  # the concept checks render from the compiled catalogue
    for page in pages():
        text, missing = generate_page(page, translations(load_catalogue(page)))
        target = edition_path(page)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"{page.name:32} {len(missing)} units untranslated")
