"""Translation units, gettext catalogues and their invariants, for the zh-TW edition.

The reader text of a page is its Markdown: every Markdown cell of a chapter, and the
whole of a ``.md`` page. Each is cut into *units*, the blocks between blank lines,
leaving out what is never translated: fenced code, display math, blank lines, lines
that hold only HTML tags or a MyST label. A unit's translation lives in a standard
gettext catalogue, ``locale/zh_TW/LC_MESSAGES/<page>.po`` (msgid: the English unit;
msgstr: its zh-TW text), which Poedit, Weblate or any text editor can edit.

``python scripts/i18n.py extract`` brings every catalogue up to date with the English
pages: a new unit gets an empty entry; a changed unit keeps its old translation
marked fuzzy, with the old English beside it (``#| msgid``), as ``msgmerge`` does; a
unit that is gone becomes obsolete. A translation is checked against its unit by
:func:`invariant_problems`: the same numbers, inline math, inline code, link targets,
roles, HTML tags and Markdown structure, so that a translation cannot change a figure
the prose quotes or break a formula. A number with a magnitude is compared by value:
"67 million" may become "6,700 萬", "4.4 billion" "44 億" (:func:`numbers`).
"""

from __future__ import annotations

import difflib
import functools
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCALE_DIR = ROOT / "locale" / "zh_TW" / "LC_MESSAGES"

_FENCE = re.compile(r"^\s*(```|~~~)")
_TAGS_ONLY = re.compile(r"^\s*(?:<[^<>]+>\s*)+$")
_LABEL = re.compile(r"^\s*\([\w.:-]+\)=\s*$")
_ROW = re.compile(r"^\s*\|")
_TABLE_RULE = re.compile(r"^\s*\|(?:\s*:?-+:?\s*\|)+\s*$")


def segments(markdown: str) -> list[tuple[bool, str]]:
    """The Markdown as (translatable, text) pieces whose concatenation is the input.

    Consecutive prose lines form one translatable piece (a paragraph, a list, a
    heading), and so does each row of a table. Fenced code, a table's rule line,
    display math ($$ ... $$), blank lines, and lines that hold only HTML tags or a
    MyST label are kept verbatim.
    """
    if not isinstance(markdown, str):
        raise TypeError(f"markdown must be a string, got {type(markdown).__name__}")
    lines = markdown.splitlines(keepends=True)
    pieces: list[tuple[bool, str]] = []

    def add(translatable: bool, text: str, alone: bool = False) -> None:
        joins = pieces and pieces[-1][0] == translatable and not alone
        if joins and not (translatable and _ROW.match(pieces[-1][1])):
            pieces[-1] = (translatable, pieces[-1][1] + text)
        else:
            pieces.append((translatable, text))

    i = 0
    while i < len(lines):
        line, stripped = lines[i], lines[i].strip()
        fence = _FENCE.match(line)
        if fence:
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(
                fence.group(1)
            ):
                end += 1
            add(False, "".join(lines[i : end + 1]))
            i = end + 1
        elif stripped.startswith("$$"):
            end = i
            one_line = len(stripped) > 2 and stripped.endswith("$$")
            if not one_line:
                end = i + 1
                while end < len(lines) and not lines[end].strip().endswith("$$"):
                    end += 1
            add(False, "".join(lines[i : end + 1]))
            i = end + 1
        elif (
            not stripped
            or _TAGS_ONLY.match(line)
            or _LABEL.match(line)
            or _TABLE_RULE.match(line)
        ):
            add(False, line)
            i += 1
        elif _ROW.match(line):  # a table row is a unit of its own
            add(True, line, alone=True)
            i += 1
        else:
            add(True, line)
            i += 1
    return pieces


def _split_unit(piece: str) -> tuple[str, str]:
    """A translatable piece as (the unit, its trailing line break)."""
    unit = piece.rstrip("\n")
    return unit, piece[len(unit) :]


def units(markdown: str) -> list[str]:
    """The translatable units of a piece of Markdown, in order."""
    return [_split_unit(text)[0] for ok, text in segments(markdown) if ok]


def translate(markdown: str, catalogue: Mapping[str, str]) -> tuple[str, list[str]]:
    """The Markdown with every unit replaced by its translation.

    Returns the translated text and the units that have no translation (they are
    left in English).
    """
    out, missing = [], []
    for translatable, text in segments(markdown):
        if not translatable:
            out.append(text)
            continue
        unit, tail = _split_unit(text)
        translated = catalogue.get(unit) or ""
        if translated:
            translated = typeset_chinese(translated)
        else:
            missing.append(unit)
            translated = unit
        out.append(translated + tail)
    return "".join(out), missing


# -- invariants ----------------------------------------------------------------------

_CODE = re.compile(r"`[^`\n]+`")
_ROLE = re.compile(r"\{(\w+(?::\w+)?)\}`([^`]*)`")
# inline math may wrap onto the next line (not across a blank line)
_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)((?:[^$\n]|\n(?!\s*\n))+?)(?<!\\)\$")
_LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
_TAG = re.compile(r"<[^<>]+>")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# A magnitude after a number: the number is compared by value, so that the zh-TW
# "約 6,700 萬次" keeps the English "67 million" and "44 億" keeps "4.4 billion". The
# Latin suffixes are the book's own ("22.6M parameters", "65 M", "8k tokens", "175B").
MAGNITUDES = {
    "thousand": 3, "million": 6, "billion": 9, "trillion": 12,
    "k": 3, "K": 3, "M": 6, "B": 9,
    "千": 3, "萬": 4, "十萬": 5, "百萬": 6, "千萬": 7,
    "億": 8, "十億": 9, "百億": 10, "千億": 11, "兆": 12,
}  # fmt: skip
_MAGNITUDE = re.compile(
    r"(?P<number>\d+(?:[.,]\d+)*)"
    r"(?:(?:\s+|-)?(?P<word>thousand|million|billion|trillion)\b"
    r"|(?P<latin>[kKMB]| [MB])(?![A-Za-z0-9_]|\.\w)"
    r"|\s?(?P<han>十萬|百萬|千萬|十億|百億|千億|[千萬億兆]))"
)
# "14 to 300 million", "7–224 thousand", "14 到 300 萬": the first end of a range
# has the magnitude written once after the second (when it is the smaller number;
# "from 768 to 1.5 billion" starts at 768)
_RANGE_START = re.compile(r"(\d+(?:[.,]\d+)*)\s?(?:to|–|—|-|到|至|～|~)\s?$")


@functools.total_ordering
class Number:
    """A number of a text as the invariant compares it: the digits as written (no
    thousands separators), or, with a magnitude, its value ("67 million" ==
    "6,700 萬"). ``form`` is what the text says, for the message."""

    __slots__ = ("key", "form")

    def __init__(self, key: str, form: str | None = None) -> None:
        self.key, self.form = key, form or key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Number) and self.key == other.key

    def __lt__(self, other: Number) -> bool:
        return self.key < other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        if self.form == self.key:
            return repr(self.key)
        value = Decimal(self.key)
        return repr(f"{self.form} = {value:,f}")


def _value(number: str, exponent: int) -> str | None:
    try:
        value = Decimal(number.replace(",", "")).scaleb(exponent)
    except InvalidOperation:
        return None
    return format(value.normalize(), "f")


def numbers(text: str) -> Counter:
    """The numbers of a text (code and math taken out), as :class:`Number`: with a
    magnitude by value, the others as written."""
    found: Counter = Counter()
    taken = []
    for m in _MAGNITUDE.finditer(text):
        name = (m.group("word") or m.group("latin") or m.group("han")).strip()
        exponent = MAGNITUDES[name]
        key = _value(m.group("number"), exponent)
        if key is None:
            continue  # "1.2.3 million": not a number, kept as written below
        form = " ".join(m.group(0).split())
        found[Number(key, form)] += 1
        taken.append(m.start())
        start = _RANGE_START.search(text, 0, m.start())
        if start and Decimal(_value(start.group(1), 0) or "Infinity") < Decimal(
            _value(m.group("number"), 0)
        ):
            range_form = re.sub(r"\s+", " ", start.group(0)) + form
            found[
                Number(
                    _value(start.group(1), exponent),
                    f"{start.group(1)} of {range_form}",
                )
            ] += 1
            taken.append(start.start(1))
    for m in _NUMBER.finditer(text):
        if m.start() not in taken:
            found[Number(m.group(0).replace(",", ""))] += 1
    return found


def _role_key(name: str, body: str) -> str:
    # {ref}`shown text <target>`: the shown text is prose, the target is not
    target = re.search(r"<([^<>]+)>\s*$", body)
    return f"{{{name}}}{target.group(1) if target else body}"


def _structure(text: str) -> list[str]:
    """Each line's Markdown role: heading level, list item, table row shape."""
    shape = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            shape.append("#" * (len(s) - len(s.lstrip("#"))))
        elif re.match(r"^([-*+]|\d+\.)\s", s):
            shape.append(f"item{len(line) - len(line.lstrip())}")
        elif s.startswith("|"):
            shape.append(f"row{s.count('|') - s.count(chr(92) + '|')}")
    return shape


def features(text: str) -> dict[str, Counter]:
    """What a translation must keep from its unit, each as a multiset."""
    roles = Counter(_role_key(n, b) for n, b in _ROLE.findall(text))
    rest = _ROLE.sub(" ", text)
    code = Counter(_CODE.findall(rest))
    rest = _CODE.sub(" ", rest)
    math = Counter(" ".join(m.split()) for m in _INLINE_MATH.findall(rest))
    rest = _INLINE_MATH.sub(" ", rest)
    links = Counter(_LINK_TARGET.findall(rest))
    rest = _LINK_TARGET.sub("]", rest)
    tags = Counter(t for t in _TAG.findall(rest) if not t.startswith("<summary"))
    rest = _TAG.sub(" ", rest)
    return {
        "roles and citations": roles,
        "inline code": code,
        "inline math": math,
        "link targets": links,
        "HTML tags": tags,
        "numbers": numbers(rest),
        "Markdown structure": Counter(_structure(text)),
    }


def invariant_problems(unit: str, translation: str) -> list[str]:
    """How a translation differs from its unit in what it must keep (empty: none)."""
    problems = []
    source, target = features(unit), features(translation)
    for what, wanted in source.items():
        got = target[what]
        if wanted != got:
            lost = sorted((wanted - got).elements())
            added = sorted((got - wanted).elements())
            detail = "; ".join(
                part
                for part in (
                    f"missing {lost}" if lost else "",
                    f"not in the English {added}" if added else "",
                )
                if part
            )
            problems.append(f"{what}: {detail}")
    return problems


# -- Chinese typesetting of a translation --------------------------------------------

# Full-width punctuation (the CJK symbols' block and the full-width forms), and Han
_FULL_WIDTH = "\u3001-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"
_HAN_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# What the typesetting leaves alone: code, roles, math, link targets, HTML tags
_KEPT = re.compile(
    r"\{\w+(?::\w+)?\}`[^`]*`|`[^`\n]+`|"
    + _INLINE_MATH.pattern
    + r"|\]\([^)\s]+\)|<[^<>]+>"
)
_PLACEHOLDER_BASE = 0xF0000  # private-use characters stand for the kept pieces
# A line break after full-width punctuation (an emphasis may close after it), or
# between two Han characters, where the next line goes on with the paragraph
_SOFT_BREAK = re.compile(
    rf"(?:(?<=[{_FULL_WIDTH}])(\*{{0,2}})"
    rf"|(?<=[{_HAN_CHARS}])()(?=[ \t]*\n[ \t]*[{_HAN_CHARS}]))"
    r"[ \t]*\n[ \t]*(?![-*+] |\d+[.)] |#|\||>|<|\$\$|\n|$)"
)
# (a table cell keeps the space before its closing "|")
_SPACE_AFTER_FULL_WIDTH = re.compile(
    rf"(?<=[{_FULL_WIDTH}])(\*{{0,2}})[ \t]+(?=[^\s|])"
)
_EMPHASIS_RUN = re.compile(r"(?<![*\\])\*{1,2}(?!\*)")


def typeset_chinese(text: str) -> str:
    """A translation's Markdown, set as Chinese text is set.

    - No space after full-width punctuation, where a reader would see one: a space
      typed after it, or a line break inside a paragraph (HTML shows one as a
      space), also between two Han characters.
    - Emphasis that CommonMark would not see: its ``**`` must have a letter or a
      space on the outer side when punctuation is on the inner one, a rule made
      for English (``**學習目標。**讀完`` stays raw). Such a pair becomes
      ``<strong>...</strong>`` (``<em>`` for ``*``), which renders wherever the
      page is read (the book, Colab, GitHub).

    Code, math, roles, link targets and HTML tags are left as they are.
    """
    kept: list[str] = []

    def keep(match: re.Match) -> str:
        kept.append(match.group(0))
        return chr(_PLACEHOLDER_BASE + len(kept) - 1)

    masked = _KEPT.sub(keep, text)
    masked = _SOFT_BREAK.sub(lambda m: m.group(1) or "", masked)
    masked = _SPACE_AFTER_FULL_WIDTH.sub(r"\1", masked)
    masked = _visible_emphasis(masked)
    return re.sub(
        "[\U000f0000-\U000ffffd]",
        lambda m: kept[ord(m.group(0)) - _PLACEHOLDER_BASE],
        masked,
    )


def _flanking(before: str, after: str) -> tuple[bool, bool]:
    """(left-flanking, right-flanking) of a ``*`` run between two characters, as
    CommonMark (markdown-it) decides; a kept piece (code, math, a tag) stands for
    its first or last character, which is ASCII punctuation."""
    from markdown_it.common.utils import isPunctChar, isWhiteSpace

    def punct(c: str) -> bool:
        return ord(c) >= _PLACEHOLDER_BASE or isPunctChar(c)

    last_space, next_space = isWhiteSpace(ord(before)), isWhiteSpace(ord(after))
    last_punct, next_punct = punct(before), punct(after)
    left = not next_space and (not next_punct or last_space or last_punct)
    right = not last_space and (not last_punct or next_space or next_punct)
    return left, right


def _visible_emphasis(text: str) -> str:
    """``text`` with each emphasis pair that CommonMark would leave raw as HTML."""
    runs: dict[int, list[re.Match]] = {1: [], 2: []}
    for run in _EMPHASIS_RUN.finditer(text):
        before, after = _around(text, run)  # a line's start is a space
        if before.isspace() and after.isspace():
            continue  # a list marker or a product ("2 * 3"), not emphasis
        runs[len(run.group(0))].append(run)
    swaps = []
    for size, tag in ((1, "em"), (2, "strong")):
        found = runs[size]
        for opening, closing in zip(found[::2], found[1::2], strict=False):
            can_open = _flanking(*_around(text, opening))[0]
            can_close = _flanking(*_around(text, closing))[1]
            if not (can_open and can_close):
                swaps += [(opening.span(), f"<{tag}>"), (closing.span(), f"</{tag}>")]
    for (start, end), tag in sorted(swaps, reverse=True):
        text = text[:start] + tag + text[end:]
    return text


def _around(text: str, run: re.Match) -> tuple[str, str]:
    """The characters before and after a run (a space at either end)."""
    before = text[run.start() - 1] if run.start() else " "
    after = text[run.end()] if run.end() < len(text) else " "
    return before, after


# -- Taiwan usage --------------------------------------------------------------------

# The source texts' machine translation garbled these terms; the edition uses the
# right one (a unit may quote a garbled term only where its English quotes it too,
# as the glossary's table of them does).
GARBLED = {
    "變壓器": "Transformer",
    "伯特": "BERT",
    "羅伯塔": "RoBERTa",
    "駱駝": "LLaMA",
    "自註意力": "自注意力",
    "職位": "位置",
    "新增與規格": "Add & Norm",
    "建築": "架構",
}
_PLACEHOLDER = "\ue000"  # a private-use character, which OpenCC leaves alone


@functools.cache
def _to_taiwan():
    import opencc

    return opencc.OpenCC("s2twp")


def usage_problems(
    translation: str, english: str = "", allowed: Mapping[str, str] | None = None
) -> list[str]:
    """Where a translation departs from Taiwan's usage (empty: nowhere).

    OpenCC's ``s2twp`` converter (Simplified to Taiwan's Traditional, with Taiwan's
    vocabulary: 程式 for 程序, 資料 for 數據, 記憶體 for 內存...) must leave the text
    unchanged, except for the words of ``allowed`` (word -> why it is right here).
    A garbled term of the source texts (``GARBLED``) is reported unless the English
    unit quotes it too.
    """
    allowed = dict(allowed or {})
    masked = translation
    for word in sorted(allowed, key=len, reverse=True):
        masked = masked.replace(word, _PLACEHOLDER * len(word))
    converted = _to_taiwan().convert(masked)
    problems = []
    matcher = difflib.SequenceMatcher(None, masked, converted, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            continue
        # one character either side: the change is usually part of a word
        a0, b0, a1, b1 = max(a0 - 1, 0), max(b0 - 1, 0), a1 + 1, b1 + 1
        context = translation[max(0, a0 - 6) : a1 + 6].replace("\n", " ")
        problems.append(
            f"{translation[a0:a1]!r} is not Taiwan's usage: {converted[b0:b1]!r}, "
            f"in: {context}"
        )
    for term, right in GARBLED.items():
        if term in translation and term not in english:
            problems.append(f"{term!r} is a garbled term: write {right!r}")
    return problems


# -- catalogues ----------------------------------------------------------------------


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


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_IMG_ALT = re.compile(r'(<img [^>]*\balt=")([^"]*)(")')


def _widget_values(nb) -> list[dict]:
    """The states of the notebook's stored widgets that hold HTML (figure views)."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return [
        model["state"]
        for model in state.values()
        if isinstance(model.get("state", {}).get("value"), str)
    ]


def figure_alts(nb) -> list[str]:
    """The text alternatives of a notebook's figures, each once: those of its image
    outputs (``plot.show``) in order, then those of its widgets' views
    (``plot.figure_view``) sorted, since the stored widgets' order follows their
    random ids. Empty ones (decorative figures) are left out."""
    import html

    found: dict[str, None] = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            alt = output.get("metadata", {}).get("image/png", {}).get("alt")
            if alt:
                found.setdefault(alt, None)
    views = set()  # the widgets' models are stored by random id: sort their views
    for state in _widget_values(nb):
        for match in _IMG_ALT.finditer(state["value"]):
            if match.group(2):
                views.add(html.unescape(match.group(2)))
    for alt in sorted(views):
        found.setdefault(alt, None)
    return list(found)


def translate_alts(nb, catalogue: Mapping[str, str]) -> list[str]:
    """Translate, in place, the text alternatives of ``nb``'s figures; returns those
    that have no translation."""
    import html

    missing = []

    def swap(alt: str) -> str:
        if alt and alt not in catalogue:
            missing.append(alt)
        return catalogue.get(alt, alt)

    for cell in nb.cells:
        for output in cell.get("outputs", []):
            image = output.get("metadata", {}).get("image/png", {})
            if image.get("alt"):
                image["alt"] = swap(image["alt"])
    for state in _widget_values(nb):
        state["value"] = _IMG_ALT.sub(
            lambda m: (
                m.group(1) + html.escape(swap(html.unescape(m.group(2)))) + m.group(3)
            ),
            state["value"],
        )
    return list(dict.fromkeys(missing))


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


def translate_notebook(nb, catalogue: Mapping[str, str]):
    """The zh-TW notebook: Markdown cells and the figures' text alternatives
    translated; code cells and their outputs the English ones, except concept
    checks, rendered by the package in zh-TW.

    Returns the notebook and the units that have no translation.
    """
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


# -- the concept checks' catalogue (shipped with the package) ----------------------

CONCEPTS_PO = (
    ROOT / "src/transformer_book/concepts/locale/zh_TW/LC_MESSAGES/concepts.po"
)
USAGE_ALLOWLIST = ROOT / "locale" / "zh_TW" / "usage.toml"
_NOT_PROSE = re.compile(r"`[^`]*`|\$[^$]*\$|\]\([^)]*\)|\{[\w:-]+\}`[^`]*`")
_HAN = re.compile(r"[\u4e00-\u9fff]")


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


def usage_allowlist() -> dict[str, str]:
    """word -> why it is right although OpenCC's s2twp would change it."""
    import tomllib

    if not USAGE_ALLOWLIST.exists():
        return {}
    return tomllib.loads(USAGE_ALLOWLIST.read_text())


def catalogues() -> dict[str, tuple[Path, list[str]]]:
    """name -> (catalogue path, the units it must translate), for every page and
    the concept checks."""
    found = {page.stem: (catalogue_path(page), page_units(page)) for page in pages()}
    found["concepts"] = (CONCEPTS_PO, concepts_units())
    return found


def entry_problems(msgid: str, msgstr: str, allowed: Mapping[str, str]) -> list[str]:
    """What is wrong with one translation: broken invariants, non-Taiwan usage, an
    English-only text (a translation must hold Chinese)."""
    problems = invariant_problems(msgid, msgstr)
    problems += usage_problems(msgstr, msgid, allowed)
    prose = re.search(r"\b[a-z]{2,} [a-z]{2,} [a-z]{2,}\b", _NOT_PROSE.sub("", msgid))
    if prose and not _HAN.search(msgstr):
        problems.append("no Chinese in the translation")
    return problems


def catalogue_report(name: str) -> dict[str, object]:
    """Counts and problems of one catalogue (``name``: a page's stem or
    "concepts")."""
    path, wanted = catalogues()[name]
    catalogue = _po(path)
    by_id = {e.msgid: e for e in catalogue if not e.obsolete}
    allowed = usage_allowlist()
    report = {"units": len(wanted), "translated": 0, "fuzzy": 0, "missing": 0}
    problems = []
    for msgid in wanted:
        entry = by_id.get(msgid)
        if entry is None or not entry.msgstr:
            report["missing"] += 1
        elif "fuzzy" in entry.flags:
            report["fuzzy"] += 1
        else:
            report["translated"] += 1
            for problem in entry_problems(msgid, entry.msgstr, allowed):
                problems.append(f"{msgid[:60]!r}: {problem}")
    report["problems"] = problems
    return report


def check_file(path: str) -> int:
    """Check every entry of one ``.po`` file (a translator's own file)."""
    allowed, total = usage_allowlist(), 0
    entries = [e for e in _po(Path(path)) if not e.obsolete]
    for entry in entries:
        problems = (
            ["untranslated"]
            if not entry.msgstr
            else entry_problems(entry.msgid, entry.msgstr, allowed)
        )
        for problem in problems:
            print(f"{entry.msgid[:60]!r}: {problem}")
        total += len(problems)
    print(f"{path}: {len(entries)} entries, {total} problems")
    return total


def check(names: list[str]) -> int:
    """Print each catalogue's counts and problems; the number of problems."""
    total = 0
    for name in names or list(catalogues()):
        report = catalogue_report(name)
        problems = report.pop("problems")
        total += len(problems)
        print(f"{name:32} {report}")
        for problem in problems:
            print(f"    {problem}")
    return total


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
    write_concepts_mo()


def write_concepts_mo() -> None:
    CONCEPTS_PO.with_suffix(".mo").write_bytes(compile_concepts(_po(CONCEPTS_PO)))


if __name__ == "__main__":
    commands = {"extract": extract, "generate": generate}
    if sys.argv[1:2] == ["extract"]:
        sys.exit(extract(sys.argv[2:]))
    if sys.argv[1:2] == ["check"]:
        sys.exit(1 if check(sys.argv[2:]) else 0)
    if sys.argv[1:2] == ["check-file"] and len(sys.argv) == 3:
        sys.exit(1 if check_file(sys.argv[2]) else 0)
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(
            "usage: python scripts/i18n.py extract [catalogue...] | generate"
            " | check [catalogue...]"
            " | check-file PATH.po"
        )
    commands[sys.argv[1]]()
