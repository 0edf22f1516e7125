"""One term per concept in the zh-TW edition (issue 42).

The glossary is the authority: its table "One term per concept in the zh-TW edition"
(book/glossary.md) gives, for each concept, the zh-TW term, the variants the edition
does not use and why. An entry "X (except in A, B)" rejects X except inside the words
A and B (注意 is rejected as the verb "attend", but 注意力, 請注意 stay). The test reads
that table, not a list of its own, and fails when a variant appears in a page of the
zh-TW edition (zh-TW/book/*: the Markdown, the figures' text alternatives and the HTML
outputs of the notebooks) or in the concept checks' catalogue.

A variant may appear inside a quotation of a source text's own wording, marked
原文作「…」 (原文作『…』 inside 「」, e.g. 「原文作『幀』」), and in the glossary's
table itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polib
import pytest

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "book" / "glossary.md"
GLOSSARY_PO = ROOT / "locale" / "zh_TW" / "LC_MESSAGES" / "glossary.po"
CONCEPTS_PO = (
    ROOT / "src/transformer_book/concepts/locale/zh_TW/LC_MESSAGES/concepts.po"
)
EDITION = ROOT / "zh-TW" / "book"
SECTION = "## One term per concept in the zh-TW edition"

# A quotation of a source text's wording: 原文作「…」, or 原文作『…』 inside 「」
QUOTATION = re.compile(r"原文作(?:「[^」\n]*」|『[^』\n]*』)")


@dataclass(frozen=True)
class Rule:
    english: str
    term: str
    variant: str
    allowed: tuple[str, ...]  # words that contain the variant and are fine
    why: str


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _items(cell: str) -> list[str]:
    """The comma-separated items of a cell, commas inside parentheses kept."""
    items, depth, current = [], 0, ""
    for char in cell:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
    return [i for i in [*items, current.strip()] if i and i != "—"]


def rules(glossary: str | None = None) -> list[Rule]:
    """The glossary's rejected variants, one Rule each."""
    text = GLOSSARY.read_text() if glossary is None else glossary
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    found = []
    for line in section.splitlines():
        cells = _cells(line)
        if len(cells) != 4 or not line.startswith("|") or set(cells[0]) <= set("-: "):
            continue
        english, term, not_used, why = cells
        if english == "English":
            continue
        for item in _items(not_used):
            match = re.fullmatch(r"(.+?) \(except in (.+)\)", item)
            variant, allowed = (match[1], match[2]) if match else (item, "")
            words = tuple(w.strip() for w in allowed.split(",") if w.strip())
            assert all(variant in w for w in words), item
            found.append(Rule(english, term, variant, words, why))
    return found


def _allowed_here(text: str, i: int, rule: Rule) -> bool:
    for word in rule.allowed:
        k = word.find(rule.variant)
        while k >= 0:
            if text[i - k : i - k + len(word)] == word and i - k >= 0:
                return True
            k = word.find(rule.variant, k + 1)
    return False


def _sentence(text: str, i: int) -> str:
    start = max(text.rfind(c, 0, i) for c in "。！？\n") + 1
    ends = [j for j in (text.find(c, i) for c in "。！？\n") if j >= 0]
    end = min(ends) + 1 if ends else len(text)
    sentence = text[start:end].strip()
    return (
        sentence if len(sentence) <= 160 else "…" + text[max(0, i - 60) : i + 60] + "…"
    )


def violations(text: str, all_rules: list[Rule]) -> list[tuple[Rule, str]]:
    """Each rejected variant in `text`, outside the quotations, with its sentence."""
    masked = QUOTATION.sub(lambda m: "\0" * len(m[0]), text)
    found = []
    for rule in all_rules:
        for match in re.finditer(re.escape(rule.variant), masked):
            if not _allowed_here(masked, match.start(), rule):
                found.append((rule, _sentence(text, match.start())))
    return found


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _glossary_table_translated() -> str:
    """The zh-TW heading of the glossary's table of variants."""
    for entry in polib.pofile(str(GLOSSARY_PO), wrapwidth=0):
        if entry.msgid == SECTION:
            return entry.msgstr
    raise AssertionError(f"glossary.po has no translation of {SECTION!r}")


def page_texts() -> dict[str, str]:
    """Every piece of zh-TW text a reader sees, by page."""
    import html

    import nbformat

    texts: dict[str, str] = {}
    for page in sorted(EDITION.glob("*.md")):
        text = page.read_text()
        if page.name == "glossary.md":  # the table of variants names them
            head, _, rest = text.partition(_glossary_table_translated())
            text = head + (
                "\n## " + rest.split("\n## ", 1)[1] if "\n## " in rest else ""
            )
        texts[f"zh-TW/book/{page.name}"] = text
    for page in sorted(EDITION.glob("*.ipynb")):
        nb = nbformat.read(page, as_version=4)
        parts = [c.source for c in nb.cells if c.cell_type == "markdown"]
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                parts += _strings(output.get("metadata", {}))  # the alt texts
                data = output.get("data", {})
                parts += _strings(
                    [data.get("text/html", ""), data.get("text/markdown", "")]
                )
        parts += [html.unescape(s) for s in _strings(nb.metadata.get("widgets", {}))]
        texts[f"zh-TW/book/{page.name}"] = "\n".join(parts)
    catalogue = polib.pofile(str(CONCEPTS_PO), wrapwidth=0)
    texts[CONCEPTS_PO.relative_to(ROOT).as_posix()] = "\n".join(
        e.msgstr for e in catalogue if not e.obsolete
    )
    return texts


def report(found: dict[str, list[tuple[Rule, str]]]) -> str:
    return "\n".join(
        f"{page}: 「{rule.variant}」 is not used for {rule.english}: "
        f"write 「{rule.term}」 ({rule.why}), in: {sentence}"
        for page, hits in found.items()
        for rule, sentence in hits
    )


# -- the glossary's table, and the matcher ------------------------------------------


def test_the_glossary_gives_each_concept_its_term_and_variants():
    all_rules = rules()
    variants = {r.variant: r for r in all_rules}
    assert len({r.english for r in all_rules}) >= 14
    assert variants["並行"].term == "平行" and variants["幀"].term == "音框"
    assert variants["注意"].term == "關注" and "注意力" in variants["注意"].allowed
    assert variants["提示"].term == "提示詞" and "提示詞" in variants["提示"].allowed
    assert all(r.why and r.term for r in all_rules)
    # no chosen term is itself a rejected variant
    terms = {t.strip() for r in all_rules for t in r.term.split(",")}
    assert not {v for v in variants if v in terms}


def test_the_zh_tw_glossary_shows_each_term_and_why():
    translated = {
        e.msgid: e.msgstr for e in polib.pofile(str(GLOSSARY_PO), wrapwidth=0)
    }
    assert translated.get(SECTION)
    section = GLOSSARY.read_text().split(SECTION, 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    for row in rows[1:]:
        english, term, _, _ = _cells(row)
        zh = _cells(translated[row])
        assert len(zh) == 4 and zh[0].replace("、", ", ") == term and zh[1] == english
        assert re.search(r"[\u4e00-\u9fff]", zh[3]), row  # the reason, in Chinese


SAMPLE = Rule(
    "attend", "關注", "注意", ("注意力", "請注意", "值得注意", "注意到"), "why"
)
PROMPT = Rule("prompt", "提示詞", "提示", ("提示詞", "提示：", "提示與解答"), "why")
FRAME = Rule("frame", "音框", "幀", (), "why")


@pytest.mark.parametrize(
    ("text", "hits"),
    [
        ("查詢 $i$ 可以注意鍵 $j$。", ["查詢 $i$ 可以注意鍵 $j$。"]),
        ("自注意力的注意力權重。請注意這一點，值得注意；我們注意到它。", []),
        ("每一幀是 10 毫秒。", ["每一幀是 10 毫秒。"]),
        ("每個音框是 10 毫秒（原文作『幀』）。", []),
        ("音框（原文作「幀」）。", []),
        ("「幀」是原文的寫法。", ["「幀」是原文的寫法。"]),
        ("模型讀完提示之後。提示詞很長。提示：先算 $T$。", ["模型讀完提示之後。"]),
    ],
)
def test_the_matcher_finds_a_variant_outside_quotations(text, hits):
    assert [s for _, s in violations(text, [SAMPLE, PROMPT, FRAME])] == hits


def test_a_failure_names_the_page_the_variant_the_term_and_the_sentence():
    found = {"zh-TW/book/x.md": violations("查詢彼此注意。", [SAMPLE])}
    assert report(found) == (
        "zh-TW/book/x.md: 「注意」 is not used for attend: write 「關注」 (why), "
        "in: 查詢彼此注意。"
    )


def test_the_quotation_mark_is_original_wording_in_corner_brackets():
    text = "音框（原文作『幀』、原文作「幀」），而『幀』與原文「幀」不算。"
    assert QUOTATION.findall(text) == ["原文作『幀』", "原文作「幀」"]


# -- the edition ---------------------------------------------------------------------


def test_no_rejected_variant_in_the_zh_tw_edition():
    all_rules = rules()
    found = {}
    for page, text in page_texts().items():
        hits = violations(text, all_rules)
        if hits:
            found[page] = hits
    assert not found, f"{sum(map(len, found.values()))} rejected variants:\n" + report(
        found
    )
