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
