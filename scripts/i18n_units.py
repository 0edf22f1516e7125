"""Markdown as translation units, and a translation set as Chinese text is set.

The reader text of a page is its Markdown: every Markdown cell of a chapter, and the
whole of a ``.md`` page. Each is cut into *units* (:func:`units`), the blocks between
blank lines, leaving out what is never translated: fenced code, display math, blank
lines, lines that hold only HTML tags or a MyST label. :func:`translate` puts each
unit's translation in its place, set by :func:`typeset_chinese`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

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


# inline math may wrap onto the next line (not across a blank line)
_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)((?:[^$\n]|\n(?!\s*\n))+?)(?<!\\)\$")


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
