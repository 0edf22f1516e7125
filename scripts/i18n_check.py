"""What a translation must keep, and the checks of the catalogues (``i18n.py check``).

A translation is checked against its unit by :func:`invariant_problems`: the same
numbers, inline math, inline code, link targets, roles, HTML tags and Markdown
structure, so that a translation cannot change a figure the prose quotes or break a
formula. A number with a magnitude is compared by value: "67 million" may become
"6,700 萬", "4.4 billion" "44 億" (:func:`numbers`). :func:`usage_problems` holds it to
Taiwan's usage.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections import Counter
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path

from i18n_catalogue import OUTPUTS_PO, ROOT, _po, catalogue_units, pages
from i18n_units import _INLINE_MATH

# -- invariants ----------------------------------------------------------------------

_CODE = re.compile(r"`[^`\n]+`")
_ROLE = re.compile(r"\{(\w+(?::\w+)?)\}`([^`]*)`")
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
    r"|(?P<latin>[kKMB]| M)(?![A-Za-z0-9_]|\.\w)"
    r"|\s?(?P<han>十萬|百萬|千萬|十億|百億|千億|[千萬億兆]))"
)
# "14 to 300 million", "7–224 thousand", "14 到 300 萬": the first end of a range
# has the magnitude written once after the second (when it is the smaller number;
# "from 768 to 1.5 billion" starts at 768)
_RANGE_START = re.compile(r"(\d+(?:[.,]\d+)*)\s?(?:to|–|—|-|→|到|至|～|~)\s?$")


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


# -- checking the catalogues -----------------------------------------------------------

USAGE_ALLOWLIST = ROOT / "locale" / "zh_TW" / "usage.toml"
_NOT_PROSE = re.compile(r"`[^`]*`|\$[^$]*\$|\]\([^)]*\)|\{[\w:-]+\}`[^`]*`")
_HAN = re.compile(r"[\u4e00-\u9fff]")


def usage_allowlist() -> dict[str, str]:
    """word -> why it is right although OpenCC's s2twp would change it."""
    import tomllib

    if not USAGE_ALLOWLIST.exists():
        return {}
    return tomllib.loads(USAGE_ALLOWLIST.read_text())


def entry_problems(
    msgid: str, msgstr: str, allowed: Mapping[str, str], may_keep: bool = False
) -> list[str]:
    """What is wrong with one translation: broken invariants, non-Taiwan usage, an
    English-only text (a translation must hold Chinese). With ``may_keep`` (the
    outputs' catalogue), a msgstr that is its msgid keeps the English on purpose:
    an identifier or the model's input."""
    if may_keep and msgstr == msgid:
        return []
    problems = invariant_problems(msgid, msgstr)
    problems += usage_problems(msgstr, msgid, allowed)
    prose = re.search(r"\b[a-z]{2,} [a-z]{2,} [a-z]{2,}\b", _NOT_PROSE.sub("", msgid))
    if prose and not _HAN.search(msgstr):
        problems.append("no Chinese in the translation")
    return problems


def catalogue_report(name: str) -> dict[str, object]:
    """Counts and problems of one catalogue (``name``: a page's stem, "concepts" or
    "outputs")."""
    path, wanted = catalogue_units(name)
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
            for problem in entry_problems(
                msgid, entry.msgstr, allowed, may_keep=name == "outputs"
            ):
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
            else entry_problems(
                entry.msgid,
                entry.msgstr,
                allowed,
                may_keep=Path(path).name == OUTPUTS_PO.name,
            )
        )
        for problem in problems:
            print(f"{entry.msgid[:60]!r}: {problem}")
        total += len(problems)
    print(f"{path}: {len(entries)} entries, {total} problems")
    return total


def check(names: list[str]) -> int:
    """Print each catalogue's counts and problems; the number of problems and of
    units without a (non-fuzzy) translation: a new output string fails."""
    total = 0
    for name in names or [page.stem for page in pages()] + ["concepts", "outputs"]:
        report = catalogue_report(name)
        problems = report.pop("problems")
        total += len(problems) + report["missing"] + report["fuzzy"]
        print(f"{name:32} {report}")
        for problem in problems:
            print(f"    {problem}")
    return total
