"""Concept checks: quick questions after a chapter's main sections.

``concept_check("2.3")`` shows the questions for section 2.3. Each option opens,
when clicked, to say whether it is right and why, so a reader tests a prediction
before reading the explanation. The output is plain HTML (``<details>`` elements),
with no script: it works in the static HTML book, in Colab and in Jupyter alike,
trusted or not, and it is the same on every run, so nbval compares it.

Questions are written as data in one module per chapter (``ch01.py``...): each
module's ``CHECKS`` maps a section number to its questions. The text is plain, with
`backticks` for code: no TeX (it would show raw in HTML outputs) and no HTML outside
code.

``concept_check("2.3", lang="zh-TW")`` shows them in the zh-TW edition's language.
The translations are a standard gettext catalogue shipped with the package,
``locale/zh_TW/LC_MESSAGES/concepts.po``, compiled to ``concepts.mo`` (read with the
standard library's ``gettext``); a text without a translation shows in English, and
the book's tests fail on any such text.
"""

from __future__ import annotations

import functools
import gettext
import html
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from IPython.display import HTML

__all__ = [
    "Question",
    "concept_check",
    "all_checks",
    "reader_texts",
    "QUIZ_CLASS",
    "LANGUAGES",
]

# The editions' languages: English, and Traditional Chinese as used in Taiwan
LANGUAGES = ("en", "zh-TW")
LOCALE_DIR = Path(__file__).with_name("locale")

# CSS classes, for the book's style sheet and the browser test
QUIZ_CLASS = "tb-quiz"


@dataclass(frozen=True)
class Question:
    """A multiple-choice question: the options, the right one, and why each is so.

    ``why[i]`` explains option ``i``: for the right one, the reason it is right; for
    a wrong one, the misconception that leads to it.
    """

    prompt: str
    options: tuple[str, ...]
    answer: int
    why: tuple[str, ...]

    def __post_init__(self) -> None:
        for name in ("prompt",):
            _check_text(getattr(self, name), name)
        if not isinstance(self.options, tuple) or not 2 <= len(self.options) <= 6:
            raise ValueError("options must be a tuple of 2 to 6 strings")
        if not isinstance(self.why, tuple) or len(self.why) != len(self.options):
            raise ValueError("why must be a tuple with one explanation per option")
        for i, text in enumerate(self.options):
            _check_text(text, f"options[{i}]")
        for i, text in enumerate(self.why):
            _check_text(text, f"why[{i}]")
        if len(set(self.options)) != len(self.options):
            raise ValueError("options must be distinct")
        if (
            isinstance(self.answer, bool)
            or not isinstance(self.answer, int)
            or not 0 <= self.answer < len(self.options)
        ):
            raise ValueError(
                f"answer must be the index of an option (0 to "
                f"{len(self.options) - 1}), got {self.answer!r}"
            )


def _check_text(text, name: str) -> None:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{name} must be a non-empty string")
    if text.count("`") % 2:
        raise ValueError(f"{name} has an unmatched backtick: {text!r}")
    prose = re.sub(r"`[^`]*`", "", text)  # code may hold anything: it is escaped
    if re.search(r"\$|\\[a-zA-Z]+|<[a-zA-Z/]", prose):
        raise ValueError(f"{name} must be plain text (no TeX or HTML): {text!r}")


def _inline(text: str) -> str:
    """Escape the text; `code` becomes <code>code</code>."""
    parts = html.escape(text, quote=False).split("`")
    return "".join(
        f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts)
    )


# The text of the page around the questions, translated like the questions
HEADING = "Check your understanding ({section})"
SEPARATOR = ": "  # between the heading and the instruction (full-width in Chinese)
INSTRUCTION = "predict, then click an answer to see whether it holds and why."
RIGHT, WRONG = "Right.", "Not quite."
PAGE_TEXTS = (HEADING, SEPARATOR, INSTRUCTION, RIGHT, WRONG)


@functools.cache
def _catalogue(lang: str) -> gettext.NullTranslations:
    if lang == "en":
        return gettext.NullTranslations()
    domain_dir = LOCALE_DIR / lang.replace("-", "_") / "LC_MESSAGES"
    path = domain_dir / "concepts.mo"
    if not path.exists():
        return gettext.NullTranslations()
    with path.open("rb") as file:
        return gettext.GNUTranslations(file)


def _translator(lang: str) -> Callable[[str], str]:
    if not isinstance(lang, str):
        raise TypeError(f"lang must be a string, got {type(lang).__name__}")
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {', '.join(LANGUAGES)}, got {lang!r}")
    return _catalogue(lang).gettext


def _render(
    section: str,
    questions: tuple[Question, ...],
    tr: Callable[[str], str] = str,
) -> str:
    letters = "ABCDEF"
    heading = tr(HEADING).replace("{section}", html.escape(section))
    out = [
        f'<div class="{QUIZ_CLASS}" data-section="{html.escape(section)}" '
        'style="border-left:4px solid #4a6fa5;padding:0.2em 1em;margin:1em 0">',
        f"<p><strong>{heading}</strong>{html.escape(tr(SEPARATOR))}"
        f"{html.escape(tr(INSTRUCTION))}</p>",
    ]
    for q_index, q in enumerate(questions, 1):
        out.append('<div class="tb-question">')
        out.append(f"<p>{q_index}. {_inline(tr(q.prompt))}</p>")
        for i, (option, why) in enumerate(zip(q.options, q.why, strict=True)):
            right = i == q.answer
            verdict = html.escape(tr(RIGHT if right else WRONG))
            mark = "✔" if right else "✘"
            # no space after a full-width mark ("答對了。"): it holds its own
            space = "" if unicodedata.east_asian_width(verdict[-1]) in "FW" else " "
            out.append(
                f'<details class="tb-option tb-{"right" if right else "wrong"}">'
                f"<summary>{letters[i]}. {_inline(tr(option))}</summary>"
                f'<p style="margin-left:1.5em">{mark} <strong>{verdict}</strong>'
                f"{space}{_inline(tr(why))}</p></details>"
            )
        out.append("</div>")
    out.append("</div>")
    return "\n".join(out)


def all_checks() -> dict[str, tuple[Question, ...]]:
    """Every chapter's checks, by section number ("1.3", "2.5"...)."""
    from . import ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08

    checks: dict[str, tuple[Question, ...]] = {}
    for module in (ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08):
        checks.update(module.CHECKS)
    return checks


def reader_texts() -> list[str]:
    """Every text a reader of the concept checks sees, each once: the catalogue's
    entries."""
    texts = dict.fromkeys(PAGE_TEXTS)
    for questions in all_checks().values():
        for q in questions:
            texts.update(dict.fromkeys((q.prompt, *q.options, *q.why)))
    return list(texts)


def concept_check(section: str, lang: str = "en") -> HTML:
    """The questions for a section, as HTML that the notebook shows.

    ``lang`` is the edition's language, one of ``LANGUAGES``.
    """
    if not isinstance(section, str):
        raise TypeError(f"section must be a string like '2.3', got {section!r}")
    tr = _translator(lang)
    checks = all_checks()
    if section not in checks:
        raise ValueError(
            f"section {section!r} has no concept check; there are: "
            f"{', '.join(sorted(checks))}"
        )
    return HTML(_render(section, checks[section], tr))


concept_check.__wrapped__ = _render  # the page for given questions (tests)
