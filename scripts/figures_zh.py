"""The figures of the zh-TW edition, and their catalogue ``figures.po``.

When a chapter is executed, ``plot.show`` and ``plot.figure_view`` render each
finished figure a second time with its texts from ``figures.po``
(``transformer_book._figure_text``) and keep that PNG in the output's metadata:
``figure_zh`` on a ``show``'s output, ``figure_zh_views`` (widget model id ->
rendering) on a linked widget's output. Each rendering records the translations it
used (``texts``) and the strings the catalogue lacked (``missing``).

* :func:`swap_figures` (called by ``i18n.py generate``) puts the zh-TW PNGs in the
  zh-TW notebook in place of the English ones and drops the metadata there;
* :func:`extract` (``i18n.py extract``) adds every lacking string to ``figures.po``
  with an empty msgstr (never removes an entry: only an executed notebook knows
  its figures' strings);
* :func:`problems` says what a test reports: a lacking string, a rendering made with
  an old translation (re-execute the chapter), a missing glyph.

    python scripts/figures_zh.py            # the problems of every chapter
    python scripts/figures_zh.py extract    # add the lacking strings to figures.po
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES_PO = ROOT / "locale" / "zh_TW" / "LC_MESSAGES" / "figures.po"
META_KEY = "figure_zh"  # as in transformer_book._figure_text
VIEWS_KEY = "figure_zh_views"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_IMG_SRC = re.compile(r'(<img src="data:image/png;base64,)([^"]+)(")')


def renderings(nb) -> Iterator[tuple[str, dict]]:
    """(where, rendering) for every zh-TW rendering an executed notebook holds;
    ``where`` names the cell (and the view's model id)."""
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {})
            if META_KEY in meta:
                yield f"cell {index}", meta[META_KEY]
            for model_id, record in meta.get(VIEWS_KEY, {}).items():
                yield f"cell {index} view {model_id}", record


def english_figures(nb) -> Iterator[tuple[str, str]]:
    """(where, base64 PNG) of every English figure: ``show`` outputs that carry an
    alt text, and the views of linked widgets that carry a rendering."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {})
            if "alt" in meta.get("image/png", {}) and "image/png" in output.get(
                "data", {}
            ):
                yield f"cell {index}", output["data"]["image/png"]
            for model_id in meta.get(VIEWS_KEY, {}):
                value = state.get(model_id, {}).get("state", {}).get("value", "")
                found = _IMG_SRC.search(value)
                if found:
                    yield f"cell {index} view {model_id}", found.group(2)


def swap_figures(nb) -> int:
    """Put, in place, every zh-TW rendering of ``nb`` where its English figure is,
    and drop the renderings' metadata (the zh-TW page carries one image per
    figure). Returns how many figures were swapped."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    swapped = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {})
            record = meta.pop(META_KEY, None)
            if (
                record
                and record.get("image/png")
                and "image/png" in output.get("data", {})
            ):
                output["data"]["image/png"] = record["image/png"]
                swapped += 1
            for model_id, view in meta.pop(VIEWS_KEY, {}).items():
                model = state.get(model_id, {}).get("state", {})
                if view.get("image/png") and isinstance(model.get("value"), str):
                    png = view["image/png"]
                    model["value"] = _IMG_SRC.sub(
                        lambda m, png=png: m.group(1) + png + m.group(3),
                        model["value"],
                        count=1,
                    )
                    swapped += 1
    return swapped


def translations(path: Path = FIGURES_PO) -> dict[str, str]:
    """msgid -> msgstr of figures.po's translated, non-fuzzy entries."""
    import polib

    if not path.exists():
        return {}
    return {
        e.msgid: e.msgstr
        for e in polib.pofile(str(path), wrapwidth=0)
        if not e.obsolete and e.msgstr and "fuzzy" not in e.flags
    }


def problems(nb, catalogue: Mapping[str, str], name: str = "") -> list[str]:
    """What is wrong with a notebook's zh-TW figures against the catalogue now."""
    found = []
    for where, record in renderings(nb):
        for text in record.get("missing", []):
            if text.startswith(("(missing glyph)", "(error)")):
                found.append(f"{name} {where}: {text}")
            elif text in catalogue:
                found.append(
                    f"{name} {where}: rendered before figures.po translated "
                    f"{text!r}: re-execute the chapter"
                )
            else:
                found.append(f"{name} {where}: figures.po lacks {text!r}")
        for text, used in record.get("texts", {}).items():
            if catalogue.get(text) != used:
                found.append(
                    f"{name} {where}: rendered with an old translation of "
                    f"{text!r} ({used!r}, now {catalogue.get(text)!r}): re-execute "
                    "the chapter"
                )
    return found


def lacking(notebooks) -> list[str]:
    """The strings the notebooks' figures lacked in the catalogue, each once."""
    seen: dict[str, None] = {}
    for nb in notebooks:
        for _, record in renderings(nb):
            for text in record.get("missing", []):
                if not text.startswith("("):
                    seen.setdefault(text, None)
    return list(seen)


def add_strings(strings, path: Path = FIGURES_PO) -> int:
    """Add each string that figures.po has no entry for, with an empty msgstr;
    returns how many were added."""
    import polib
    from i18n_catalogue import _po  # scripts/ is on sys.path, as for every script

    catalogue = _po(path)
    have = {e.msgid for e in catalogue}
    added = 0
    for text in strings:
        if text and text not in have:
            catalogue.append(polib.POEntry(msgid=text, msgstr=""))
            have.add(text)
            added += 1
    if added or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        catalogue.save(str(path))
    return added


def chapters() -> list[Path]:
    return sorted((ROOT / "book").glob("*.ipynb"))


def extract() -> int:
    """Add the strings the committed chapters' figures lacked to figures.po."""
    import nbformat

    notebooks = [nbformat.read(p, as_version=4) for p in chapters()]
    added = add_strings(lacking(notebooks))
    print(f"figures.po: {added} strings added with an empty msgstr")
    return added


def main(args: list[str]) -> int:
    import nbformat

    if args == ["extract"]:
        extract()
        return 0
    if args:
        sys.exit("usage: python scripts/figures_zh.py [extract]")
    catalogue = translations()
    total = 0
    for path in chapters():
        nb = nbformat.read(path, as_version=4)
        found = problems(nb, catalogue, path.name)
        rendered = dict(renderings(nb))
        unrendered = [w for w, _ in english_figures(nb) if w not in rendered]
        if unrendered:
            found.append(
                f"{path.name}: {len(unrendered)} figures with no zh-TW rendering: "
                "execute the chapter where Noto Sans CJK TC is installed"
            )
        total += len(found)
        print("\n".join(found) or f"{path.name}: ok")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
