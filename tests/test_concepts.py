"""The concept checks: their rendering, and every chapter's questions as data."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from transformer_book.concepts import QUIZ_CLASS, Question, all_checks, concept_check

GOOD = dict(
    prompt="What shape does `q @ k.mT` have for q, k of shape (2, 5, 8)?",
    options=("(2, 5, 5)", "(2, 8, 8)", "(5, 5)"),
    answer=0,
    why=("One score per query-key pair.", "That is kᵀq: d × d.", "The batch stays."),
)


class Outline(HTMLParser):
    """The question texts, and each option's class, summary and feedback."""

    def __init__(self):
        super().__init__()
        self.stack, self.options, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.stack.append(tag)
        if tag == "details":
            self.options.append({"class": dict(attrs)["class"], "summary": ""})
            self.options[-1]["feedback"] = ""

    def handle_endtag(self, tag):
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)
        if "details" in self.stack:
            key = "summary" if "summary" in self.stack else "feedback"
            self.options[-1][key] += data


def outline(html: str) -> Outline:
    parser = Outline()
    parser.feed(html)
    assert not parser.stack, "every tag is closed"
    return parser


def test_each_option_opens_to_say_right_or_wrong_and_why():
    question = Question(**GOOD)
    html = concept_check.__wrapped__("9.9", (question,))
    assert html.startswith(f'<div class="{QUIZ_CLASS}"')
    parsed = outline(html)
    classes = [o["class"] for o in parsed.options]
    assert classes == ["tb-option tb-right", "tb-option tb-wrong", "tb-option tb-wrong"]
    for option, text, why in zip(
        parsed.options, GOOD["options"], GOOD["why"], strict=True
    ):
        assert text in option["summary"] and why in option["feedback"]
    assert "Right." in parsed.options[0]["feedback"]
    assert all("Not quite." in o["feedback"] for o in parsed.options[1:])
    assert "<code>q @ k.mT</code>" in html, "backticks become code"
    assert "<script" not in html, "no script: it works in untrusted notebooks too"


def test_text_is_escaped():
    question = Question(**{**GOOD, "prompt": "Is `a < b & c` true when a < b?"})
    html = concept_check.__wrapped__("9.9", (question,))
    assert "<code>a &lt; b &amp; c</code>" in html and "when a &lt; b?" in html


def test_the_output_is_the_same_on_every_run():
    key = next(iter(all_checks()))
    assert concept_check(key).data == concept_check(key).data


def test_every_chapter_has_3_to_5_questions_that_are_plain_text():
    checks = all_checks()
    for chapter in range(1, 9):
        keys = [k for k in checks if k.split(".")[0] == str(chapter)]
        n = sum(len(checks[k]) for k in keys)
        assert 3 <= n <= 5, f"chapter {chapter}: {n} questions"
    for key, questions in checks.items():
        assert re.fullmatch(r"\d+\.\d+", key), key
        for q in questions:
            assert isinstance(q, Question)
            parsed = outline(concept_check.__wrapped__(key, (q,)))
            assert sum("tb-right" in o["class"] for o in parsed.options) == 1


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (dict(prompt=""), "prompt must be"),
        (dict(prompt=3), "prompt must be"),
        (dict(prompt="What is $x$?"), "plain text"),
        (dict(prompt=r"What is \frac{1}{2}?"), "plain text"),
        (dict(prompt="What is <b>x</b>?"), "plain text"),
        (dict(prompt="An `odd backtick"), "unmatched backtick"),
        (dict(options=("one",), why=("w",)), "options must be"),
        (dict(options=["a", "b", "c"]), "options must be a tuple"),
        (dict(options=("a", "a", "b")), "distinct"),
        (dict(options=("a", "", "b")), r"options\[1\]"),
        (dict(why=("a", "b")), "one explanation per option"),
        (dict(why=("a", "b", "$c$")), r"why\[2\]"),
        (dict(answer=3), "answer must be"),
        (dict(answer=-1), "answer must be"),
        (dict(answer=True), "answer must be"),
        (dict(answer="0"), "answer must be"),
    ],
)
def test_bad_questions_are_named(change, match):
    with pytest.raises(ValueError, match=match):
        Question(**{**GOOD, **change})


def test_unknown_sections_are_named():
    with pytest.raises(ValueError, match="no concept check; there are: 1"):
        concept_check("9.9")
    with pytest.raises(TypeError, match="section must be a string"):
        concept_check(2.3)


def test_a_concept_check_renders_in_the_zh_tw_edition(tmp_path, monkeypatch):
    import polib

    import transformer_book.concepts as concepts

    section = "2.3"
    question = concepts.all_checks()[section][0]
    catalogue = polib.POFile()
    catalogue.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for english, chinese in (
        (concepts.HEADING, "檢查你的理解（{section}）"),
        (concepts.RIGHT, "正確。"),
        (question.prompt, "翻譯後的問題"),
        (question.options[0], "翻譯後的選項 `code`"),
    ):
        catalogue.append(polib.POEntry(msgid=english, msgstr=chinese))
    domain = tmp_path / "zh_TW" / "LC_MESSAGES"
    domain.mkdir(parents=True)
    catalogue.save_as_mofile(str(domain / "concepts.mo"))
    monkeypatch.setattr(concepts, "LOCALE_DIR", tmp_path)
    concepts._catalogue.cache_clear()
    try:
        page = concepts.concept_check(section, lang="zh-TW").data
    finally:
        concepts._catalogue.cache_clear()
    assert "<strong>檢查你的理解（2.3）</strong>" in page
    assert "1. 翻譯後的問題</p>" in page
    assert "A. 翻譯後的選項 <code>code</code></summary>" in page
    # a text without a translation shows in English (the edition's tests catch it)
    assert concepts.INSTRUCTION in page
    assert concepts.concept_check(section).data != page
    assert concepts.concept_check(section, lang="en").data == (
        concepts.concept_check(section).data
    )


def test_concept_check_refuses_an_unknown_language():
    with pytest.raises(ValueError, match="lang"):
        concept_check("2.3", lang="zh-CN")
    with pytest.raises(TypeError, match="lang"):
        concept_check("2.3", lang=None)


def test_reader_texts_hold_every_text_once():
    import transformer_book.concepts as concepts

    texts = concepts.reader_texts()
    assert len(texts) == len(set(texts))
    assert set(concepts.PAGE_TEXTS) <= set(texts)
    for questions in concepts.all_checks().values():
        for q in questions:
            assert {q.prompt, *q.options, *q.why} <= set(texts)
