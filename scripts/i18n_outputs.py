"""What a notebook's code shows in words: the outputs that are prose (a Markdown or
HTML sentence, table or verdict, such as Chapter 1's claims table) and the labels of
its widgets that are words ("query", "test row", the sampling options). Their
translations live in one catalogue, ``locale/zh_TW/LC_MESSAGES/outputs.po``.

Their numbers are computed, so a catalogue entry never holds them: its msgid is the
text with each number replaced by a numbered slot, ``⟦0⟧``, ``⟦1⟧``... (a
:func:`template`), and the translation puts the numbers of the output at hand back in
its slots (:func:`fill`). A re-execution that changes a number keeps the translation;
one that changes a word makes a new msgid, which ``i18n.py check`` reports until it
is translated. A slot keeps the invariants of :mod:`i18n_check` (its digit is a
number the translation must keep).

Left as they are: a program's printout (``print``, a ``text/plain`` output), code
listings (``show_source``: a Markdown output that is a fenced block), the concept
checks (the package renders them in zh-TW), labels without a word ("τ", "T",
"ρ(W_hh)") and the widgets' HTML values (figure views, generated text). A label
whose msgstr is its msgid stays English on purpose: an identifier ("tanh") or the
model's input (an English sentence it reads).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from i18n_notebook import WIDGET_STATE
from i18n_units import segments, typeset_chinese

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# A number as an output prints it: 4096, 2.5 (in "2.5x"), 4e-31, 8e+07, 1,040; not
# the digits of a name ("L0H2", "GPT-2" keeps its 2 only after "-": a slot too)
_VALUE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?")
_SLOT = re.compile(r"⟦(\d+)⟧")
_WORD = re.compile(r"[A-Za-z]{3,}")  # a label with a word: "query", "tanh", not "T"
_LABEL_KEYS = ("description", "_options_labels", "tooltips")


def template(text: str) -> tuple[str, list[str]]:
    """The text with its numbers as slots ⟦0⟧, ⟦1⟧..., and those numbers."""
    values = _VALUE.findall(text)
    slots = iter(range(len(values)))
    return _VALUE.sub(lambda _: f"⟦{next(slots)}⟧", text), values


def fill(translation: str, values: list[str]) -> str | None:
    """The translation with the numbers put in its slots (None: a slot the text
    does not have)."""
    try:
        return _SLOT.sub(lambda m: values[int(m.group(1))], translation)
    except IndexError:
        return None


def _translate_text(text: str, catalogue: Mapping[str, str], missing: list[str]) -> str:
    pattern, values = template(text)
    translated = catalogue.get(pattern)
    filled = fill(translated, values) if translated else None
    if filled is None:
        missing.append(pattern)
        return text
    return typeset_chinese(filled) if filled != text else text


# -- outputs that are prose ------------------------------------------------------------


def prose_outputs(nb) -> Iterator[tuple[dict, str]]:
    """(output data, MIME type) of each output that is prose: Markdown that is not a
    code listing, HTML that is not a concept check."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                continue
            markdown = data.get("text/markdown")
            if isinstance(markdown, str) and not markdown.lstrip().startswith("```"):
                yield data, "text/markdown"
            page = data.get("text/html")
            if isinstance(page, str) and 'class="tb-quiz"' not in page:
                yield data, "text/html"


def _pieces(text: str, mime: str) -> list[tuple[bool, str]]:
    """A prose output as (translatable, text) pieces: a Markdown output's units
    (each table row one), an HTML output whole."""
    if mime == "text/markdown":
        return segments(text)
    body = text.strip()
    start = text.index(body) if body else 0
    return [
        (False, text[:start]),
        (bool(body), body),
        (False, text[start + len(body) :]),
    ]


def _unit(piece: str) -> tuple[str, str]:
    unit = piece.rstrip("\n")
    return unit, piece[len(unit) :]


def output_units(nb) -> list[str]:
    """The templates of a notebook's prose outputs, in order, each once."""
    found: dict[str, None] = {}
    for data, mime in prose_outputs(nb):
        for translatable, piece in _pieces(data[mime], mime):
            if translatable:
                found.setdefault(template(_unit(piece)[0])[0], None)
    return list(found)


def translate_outputs(nb, catalogue: Mapping[str, str]) -> list[str]:
    """Translate, in place, the prose outputs of ``nb``; returns the templates that
    have no translation (those pieces stay English)."""
    missing: list[str] = []
    for data, mime in prose_outputs(nb):
        out = []
        for translatable, piece in _pieces(data[mime], mime):
            if not translatable:
                out.append(piece)
                continue
            unit, tail = _unit(piece)
            out.append(_translate_text(unit, catalogue, missing) + tail)
        data[mime] = "".join(out)
    return list(dict.fromkeys(missing))


# -- widget labels ---------------------------------------------------------------------


def _label_states(nb) -> Iterator[dict]:
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for model in state.values():
        values = model.get("state", {})
        if any(values.get(key) for key in _LABEL_KEYS):
            yield values


def _labels(values: dict) -> list[str]:
    found = [values.get("description") or ""]
    for key in _LABEL_KEYS[1:]:
        found += [v for v in values.get(key) or [] if isinstance(v, str)]
    return [label for label in found if _WORD.search(label)]


def widget_labels(nb) -> list[str]:
    """The templates of the labels of a notebook's stored widgets that have a word
    (descriptions, options' labels, tooltips), sorted: the stored widgets' order
    follows their random ids."""
    return sorted(
        {
            template(label)[0]
            for values in _label_states(nb)
            for label in _labels(values)
        }
    )


def translate_widget_labels(nb, catalogue: Mapping[str, str]) -> list[str]:
    """Translate, in place, the labels of ``nb``'s stored widgets; their values
    (``index``, ``value``) stay, so links between widgets and the browser's moves
    are the English ones. Returns the templates that have no translation."""
    missing: list[str] = []

    def swap(label):
        if not isinstance(label, str) or not _WORD.search(label):
            return label
        return _translate_text(label, catalogue, missing)

    for values in _label_states(nb):
        if values.get("description"):
            values["description"] = swap(values["description"])
        for key in _LABEL_KEYS[1:]:
            if values.get(key):
                values[key] = [swap(label) for label in values[key]]
    return list(dict.fromkeys(missing))
