"""The gettext catalogues: which units each page has, and bringing a catalogue up to
date with the English (``i18n.py extract``).

A unit's translation lives in a standard gettext catalogue,
``locale/zh_TW/LC_MESSAGES/<page>.po`` (msgid: the English unit; msgstr: its zh-TW
text), which Poedit, Weblate or any text editor can edit. :func:`update_catalogue`
works as ``msgmerge`` does: a new unit gets an empty entry; a changed unit keeps its
old translation marked fuzzy, with the old English beside it (``#| msgid``); a unit
that is gone becomes obsolete.
"""

from __future__ import annotations

import difflib
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from i18n_notebook import figure_alts
from i18n_outputs import output_units, widget_labels
from i18n_units import units

ROOT = Path(__file__).resolve().parent.parent
LOCALE_DIR = ROOT / "locale" / "zh_TW" / "LC_MESSAGES"


def page_markdown(path: Path) -> list[str]:
    """The Markdown of a page: a notebook's Markdown cells, or a .md file."""
    if path.suffix == ".md":
        return [path.read_text()]
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return [cell.source for cell in nb.cells if cell.cell_type == "markdown"]


def page_units(path: Path) -> list[str]:
    """Every unit of a page, in order, each once: its Markdown's, then the text
    alternatives of its figures."""
    seen: dict[str, None] = {}
    for markdown in page_markdown(path):
        for unit in units(markdown):
            seen.setdefault(unit, None)
    if path.suffix == ".ipynb":
        import nbformat

        for alt in figure_alts(nbformat.read(path, as_version=4)):
            seen.setdefault(alt, None)
    return list(seen)


def update_catalogue(catalogue, wanted: Iterable[str]) -> dict[str, int]:
    """Bring a ``polib.POFile`` up to date with the units a page has now.

    Kept units keep their entries; a new unit whose English is close to a unit that
    is gone inherits that translation, marked fuzzy with the old English in
    ``previous_msgid``; other new units get empty entries; units that are gone
    become obsolete. Returns how many entries were kept, added, made fuzzy and
    made obsolete.
    """
    import polib

    wanted = list(dict.fromkeys(wanted))
    current = {e.msgid: e for e in catalogue if not e.obsolete}
    gone = [e for msgid, e in current.items() if msgid not in set(wanted)]
    counts = Counter()
    entries = []
    for msgid in wanted:
        if msgid in current:
            entries.append(current[msgid])
            counts["kept"] += 1
            continue
        entry = polib.POEntry(msgid=msgid, msgstr="")
        close = difflib.get_close_matches(
            msgid, [e.msgid for e in gone if e.msgstr], n=1, cutoff=0.75
        )
        if close:
            old = next(e for e in gone if e.msgid == close[0])
            entry.msgstr = old.msgstr
            entry.flags.append("fuzzy")
            entry.previous_msgid = old.msgid
            counts["fuzzy"] += 1
        else:
            counts["added"] += 1
        entries.append(entry)
    kept_obsolete = [e for e in catalogue if e.obsolete]
    for entry in gone:
        entry.obsolete = True
        counts["obsolete"] += 1
    catalogue[:] = entries + kept_obsolete + gone
    return dict(counts)


def catalogue_path(page: Path) -> Path:
    return LOCALE_DIR / f"{page.stem}.po"


def load_catalogue(page: Path):
    return _po(catalogue_path(page))


def translations(catalogue) -> dict[str, str]:
    """msgid -> msgstr for the entries that are translated and not fuzzy."""
    return {
        e.msgid: e.msgstr
        for e in catalogue
        if not e.obsolete and e.msgstr and "fuzzy" not in e.flags
    }


def pages() -> list[Path]:
    """The pages of the book, in the order of its table of contents."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from toc_notebooks import toc_notebooks

    book = ROOT / "book"
    return [book / "intro.md", *toc_notebooks(), book / "glossary.md"] + [
        book / "references.md"
    ]


CONCEPTS_PO = (
    ROOT / "src/transformer_book/concepts/locale/zh_TW/LC_MESSAGES/concepts.po"
)


def _po(path: Path):
    import polib

    if path.exists():
        return polib.pofile(str(path), wrapwidth=0)
    catalogue = polib.POFile(wrapwidth=0)
    catalogue.metadata = {
        "Project-Id-Version": "transformer-book",
        "Language": "zh_TW",
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
    }
    return catalogue


def concepts_units() -> list[str]:
    from transformer_book.concepts import reader_texts

    return reader_texts()


def compile_concepts(catalogue) -> bytes:
    """The ``.mo`` the package reads: translated, non-fuzzy entries only."""
    import polib

    mo = polib.MOFile()
    mo.metadata = dict(catalogue.metadata)
    for msgid, msgstr in translations(catalogue).items():
        mo.append(polib.MOEntry(msgid=msgid, msgstr=msgstr))
    return mo.to_binary()


# the words a notebook's code shows: prose outputs, widget labels (i18n_outputs)
OUTPUTS_PO = LOCALE_DIR / "outputs.po"


def outputs_units() -> list[str]:
    """The templates of every notebook's prose outputs, then of its widget labels,
    in the order of the pages, each once."""
    import nbformat

    found: dict[str, None] = {}
    for page in pages():
        if page.suffix == ".ipynb":
            nb = nbformat.read(page, as_version=4)
            found.update(dict.fromkeys(output_units(nb) + widget_labels(nb)))
    return list(found)


def catalogues() -> dict[str, tuple[Path, list[str]]]:
    """name -> (catalogue path, the units it must translate), for every page, the
    concept checks and the notebooks' outputs."""
    found = {page.stem: (catalogue_path(page), page_units(page)) for page in pages()}
    found["concepts"] = (CONCEPTS_PO, concepts_units())
    found["outputs"] = (OUTPUTS_PO, outputs_units())
    return found


def catalogue_units(name: str) -> tuple[Path, list[str]]:
    """One entry of :func:`catalogues`, without computing the others."""
    if name == "concepts":
        return CONCEPTS_PO, concepts_units()
    if name == "outputs":
        return OUTPUTS_PO, outputs_units()
    (page,) = [page for page in pages() if page.stem == name]
    return catalogue_path(page), page_units(page)


def extract(names: list[str] | None = None) -> None:
    """Bring the catalogues (default: every one) up to date with the English, and
    compile the concept checks' catalogue for the package."""
    LOCALE_DIR.mkdir(parents=True, exist_ok=True)
    for name, (path, wanted) in catalogues().items():
        if names and name not in names:
            continue
        catalogue = _po(path)
        counts = update_catalogue(catalogue, wanted)
        path.parent.mkdir(parents=True, exist_ok=True)
        catalogue.save(str(path))
        print(f"{name:32} {counts}")
    if not names or "figures" in names:  # the strings executed figures lacked
        from figures_zh import extract as extract_figures

        extract_figures()
    write_concepts_mo()


def write_concepts_mo() -> None:
    CONCEPTS_PO.with_suffix(".mo").write_bytes(compile_concepts(_po(CONCEPTS_PO)))
