"""The rules of the rendered text (tests/rendered_text.py), without a browser: each
rule fails on text that breaks it and passes on text that keeps it; the list of
Simplified-only characters holds none of the book's Traditional ones; and the zh-TW
edition's Markdown is set so that CommonMark shows every emphasis and no space
follows full-width punctuation (scripts/i18n.py's ``typeset_chinese``). The browser
stage shows the same rules failing on whole pages (tests/test_book_html.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import rendered_text as rt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import i18n  # noqa: E402
from book_html import UI_ZH_TW  # noqa: E402

# rule -> (text that breaks it, text that keeps it); each breaking text is a defect
# that readers found on the built pages
CASES = {
    rt.entities: ("5.3 Add &amp; Norm：殘差連接", "5.3 Add & Norm：殘差連接"),
    rt.raw_markup: ("**學習目標。**讀完本章", "學習目標。讀完本章"),
    rt.simplified: ("请启用 JavaScript 以启用搜索功能。", "請啟用 JavaScript。"),
    rt.half_width_punctuation: ("伯特, 羅伯塔, 駱駝", "伯特、羅伯塔、駱駝；a, b"),
    rt.space_after_full_width: ("✔ 答對了。 RNN 做", "✔ 答對了。RNN 做"),
    rt.unpaired_quotes: ("需要」O(1) memory per step」", "需要「每步『O(1)』記憶體」"),
}


@pytest.mark.parametrize("rule", list(CASES), ids=lambda r: r.__name__)
def test_each_rule_fails_on_text_that_breaks_it(rule):
    broken, clean = CASES[rule]
    assert rule(broken), broken
    assert rule(clean) == [], clean


@pytest.mark.parametrize(
    "text",
    [
        "T5 的 &lt;extra_id_k&gt;",
        "0.5 &lt; 0.75",
        "it &quot;the article&quot;",
        "x &#8217; y",
    ],
)
def test_every_kind_of_entity_is_caught(text):
    assert rt.entities(text)


@pytest.mark.parametrize(
    "text",
    [
        "__init__ shown",
        "編碼器*和*解碼器",
        "a stray `backtick",
        "see {cite}`lesson9`",
        "{numref} Figure",
        "| a | b |",
        "| --- | --- |",
        "[Chapter 7](07_complexity.ipynb)",
        r"a product \(QK^\top\)",
        r"a \frac{1}{2}",
        "scores $QK^T$ scaled",
        "x_{ij}",
    ],
)
def test_every_kind_of_raw_markup_is_caught(text):
    assert rt.raw_markup(text), text


@pytest.mark.parametrize(
    "text",
    [
        "2 × 3 and 5% of 10 (a, b) — fine; 4 * 3 is 12",
        "Add & Norm: a residual path, then LayerNorm.",
        "「▁the」、「▁statements」",
        "臺灣、台灣、之後、一群山峰、干擾、里程",
    ],
)
def test_prose_is_not_taken_for_raw_markup_or_simplified(text):
    assert rt.passage_problems(text, chinese=True) == [], text


def test_rules_for_chinese_apply_to_chinese_passages_only():
    problems = rt.text_problems(
        [
            {"text": "伯特, 羅伯塔。 x", "lang": "en", "region": "article"},
            {"text": "伯特, 羅伯塔。 x", "lang": "zh-TW", "region": "article"},
        ],
        [{"text": "軟性", "lang": "zh-TW", "region": "article"}],
        edition="zh-TW",
    )
    assert len(problems) == 3, problems
    assert all(p.startswith("article: ") for p in problems)
    english = rt.text_problems(
        [{"text": "伯特, 羅伯塔", "lang": "en", "region": "article"}],
        [{"text": "軟性", "lang": "en", "region": "article"}],
        edition="en",
    )
    assert english == []


def _book_chinese() -> str:
    """Every Traditional character the book writes: its translations, the
    concept checks', the themes' labels, the glossary."""
    import polib

    catalogues = [*sorted(i18n.LOCALE_DIR.glob("*.po")), i18n.CONCEPTS_PO]
    texts = [e.msgstr for path in catalogues for e in polib.pofile(str(path))]
    texts += list(UI_ZH_TW.values())
    texts.append((ROOT / "book" / "glossary.md").read_text())
    return "".join(texts)


def test_the_simplified_only_characters_are_none_of_the_books():
    chars = rt.simplified_only()
    used = set(re.findall(f"[{rt.HAN}]", _book_chinese()))
    assert len(used) > 1000, len(used)
    assert not used & chars, sorted(used & chars)
    # the theme's Simplified strings that reached the pages, and common ones
    assert set("请启页当网导转这为们说个") <= chars
    # Traditional characters that are also Simplified ones are not on the list
    assert not set("台后干里于云范系群峰面只") & chars


@pytest.mark.parametrize(
    "translation, typeset",
    [
        # a bold lead-in that ends in full-width punctuation: CommonMark leaves
        # "**" raw when a letter follows, and the space after "。" is one too many
        (
            "**學習目標。** 讀完本章，你能夠：",
            "<strong>學習目標。</strong>讀完本章，你能夠：",
        ),
        (
            "**步驟 4：拼接，再用 $W^O$ 混合。**撤銷拆分",
            "<strong>步驟 4：拼接，再用 $W^O$ 混合。</strong>撤銷拆分",
        ),
        ("編碼器*和*解碼器", "編碼器*和*解碼器"),  # CommonMark shows this one
        ("**Add & Norm**：殘差", "**Add & Norm**：殘差"),
        # a line break inside a paragraph shows as a space
        ("保護措施）。\n不存在舒適的中間地帶", "保護措施）。不存在舒適的中間地帶"),
        ("用數值檢驗：\n   在下方", "用數值檢驗：在下方"),
        ("原因。\n(b) 小了", "原因。(b) 小了"),
        ("注意力\n機制", "注意力機制"),
        ("使用\nPyTorch 的", "使用\nPyTorch 的"),
        ("- 第一項。\n- 第二項", "- 第一項。\n- 第二項"),
        ("第一段。\n\n第二段", "第一段。\n\n第二段"),
        # code and math keep their spaces
        ("`a。 b` 與 $x。 y$。 下一句", "`a。 b` 與 $x。 y$。下一句"),
        ("2 * 3 與 **粗體**。", "2 * 3 與 **粗體**。"),
        ("| 例如「x」 | 下一格 |", "| 例如「x」 | 下一格 |"),
    ],
)
def test_a_translation_is_set_as_chinese_text(translation, typeset):
    assert i18n.typeset_chinese(translation) == typeset


def _raw_emphasis(markdown: str) -> list[str]:
    """The text runs in which CommonMark (markdown-it, as MyST) left ``*``."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    parser = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin)
    found = []
    for token in parser.parse(markdown):
        for child in token.children or []:
            if child.type == "text" and re.search(
                rf"\*\*|(?<=[{rt.HAN}{rt.FULL_WIDTH_PUNCTUATION}])\*"
                rf"|\*(?=[{rt.HAN}{rt.FULL_WIDTH_PUNCTUATION}])",
                child.content,
            ):
                found.append(child.content[:60])
    return found


def test_every_emphasis_of_the_zh_tw_edition_renders():
    """No translation, as the edition is generated, leaves a raw ``**`` or ``*``
    (so a translator cannot bring the defect back), and no space follows a
    full-width punctuation mark in its prose."""
    problems = []
    for page in i18n.pages():
        catalogue = i18n.translations(i18n.load_catalogue(page))
        for markdown in i18n.page_markdown(page):
            text, _ = i18n.translate(markdown, catalogue)
            problems += [f"{page.name}: {t!r}" for t in _raw_emphasis(text)]
            prose = i18n._KEPT.sub(rt.OBJECT, text)
            problems += [
                f"{page.name}: {m!r}"
                for m in re.findall(
                    rf"[{rt.FULL_WIDTH_PUNCTUATION}]\**[ \t]+[^\s|].{{0,10}}", prose
                )
            ]
    assert not problems, "\n".join(problems)
