"""The rules the text a reader sees on a built page must keep (issue 41).

The browser stage (tests/test_book_html.py) reads each page's visible text with
``PASSAGES_JS``: one passage per block (a paragraph, a list item, a table cell, a
heading, a link of the navigation), in document order, with code, typeset formulas
and scripts each left out as one ``OBJECT`` character, so what is left is prose.
:func:`text_problems` applies the rules to those passages. Each rule is a function
of one passage's text (or, for italics, of the Chinese runs the page sets in
italics); tests/test_rendered_text.py shows each one failing on a page that breaks
it and passing on a clean one.

Rules for every page:
  - no HTML entity shown as text (``&amp;``, ``&lt;``, ``&quot;`` ...);
  - no raw Markdown (``**``, ``__``, a stray backtick, a ``*`` against Chinese
    text), no raw MyST role or directive, no TeX outside typeset math;
  - no Simplified-only character in Chinese text (the themes' strings included);
  - no Chinese passage whose language is not marked as Chinese (an English page's
    Chinese, formulas included, is in a ``lang="zh-Hant-TW"`` element:
    ``UNMARKED_CHINESE_JS``).
Rules for the zh-TW edition's pages (passages in Chinese):
  - no half-width ``, ; : ? !`` between two Han characters;
  - no space after a full-width punctuation mark;
  - 「」 and 『』 paired;
  - no Han text in italics (Chinese emphasis is bold, or emphasis dots).
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

OBJECT = "\ufffc"  # stands for a piece of code or a typeset formula in a passage
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# Full-width punctuation: the CJK symbols' block (no ideographic space) and the
# full-width forms' punctuation
FULL_WIDTH_PUNCTUATION = (
    "、。〃〈〉《》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟！＂（），．：；？［］｛｝～｟｠"
)

# Block elements: a passage is the text of one, up to the next block inside it
_BLOCKS = (
    "p, li, dt, dd, td, th, caption, figcaption, summary, h1, h2, h3, h4, h5, h6,"
    " blockquote, div, nav, section, article, aside, header, footer, main, form,"
    " label, button, ul, ol, table, tr, dl, details, body"
)
# What is not prose: code, formulas, scripts; the headings' "#" links
_NOT_PROSE = (
    "script, style, template, textarea, svg, pre, code, kbd, samp, .highlight,"
    " mjx-container, .headerlink"
)
# Where a passage is, for the report
_REGIONS = [
    ("#search-results", "search results"),
    ("article, .bd-article", "article"),
    (".bd-sidebar-secondary, .bd-toc", "table of contents"),
    (".bd-sidebar-primary, .bd-header, .prev-next-area, footer", "navigation"),
]

PASSAGES_JS = r"""() => {
  const BLOCKS = "$BLOCKS", NOT_PROSE = "$NOT_PROSE", REGIONS = $REGIONS;
  const OBJECT = "$OBJECT", han = /[$HAN]/;
  const passages = new Map(), italic = [];
  const lang = el => {
    const declared = el.closest("[lang]");
    return declared ? declared.getAttribute("lang") : "";
  };
  const region = el => {
    for (const [selector, name] of REGIONS) if (el.closest(selector)) return name;
    return "page";
  };
  const add = (el, text) => {
    const block = el.closest(BLOCKS) || document.body;
    if (!passages.has(block)) {
      passages.set(block, {text: "", region: region(block), lang: lang(block)});
    }
    passages.get(block).text += text;
  };
  const walker = document.createTreeWalker(document.body,
    NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT, {acceptNode: node => {
      if (node.nodeType === 1 && node.matches(NOT_PROSE)) {
        add(node.parentElement || node, OBJECT);
        return NodeFilter.FILTER_REJECT;
      }
      return NodeFilter.FILTER_ACCEPT;
    }});
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.nodeType === 1) {
      if (node.tagName === "NOSCRIPT") {  // its text is HTML source while JS runs
        const text = new DOMParser().parseFromString(node.textContent, "text/html")
          .body.textContent;
        passages.set(document.createElement("p"),
                     {text, region: region(node), lang: lang(node)});
      }
      continue;
    }
    if (node.parentElement.closest("noscript")) continue;
    add(node.parentElement, node.data);
    if (han.test(node.data) &&
        getComputedStyle(node.parentElement).fontStyle !== "normal")
      italic.push({text: node.data.trim().slice(0, 40),
                   region: region(node.parentElement),
                   lang: lang(node.parentElement)});
  }
  const out = [...passages.values()].map(p =>
    ({...p, text: p.text.replace(/\s+/g, " ").trim()})).filter(p => p.text);
  return {passages: out, italic};
}"""
PASSAGES_JS = (
    PASSAGES_JS.replace("$BLOCKS", _BLOCKS)
    .replace("$NOT_PROSE", _NOT_PROSE)
    .replace("$REGIONS", json.dumps(_REGIONS))
    .replace("$OBJECT", OBJECT)
    .replace("$HAN", HAN)
)

# Text with Chinese characters outside an element in Chinese: every text node of
# the body, typeset formulas included (MathJax's mjx-utext, mi, mtext ...)
UNMARKED_CHINESE_JS = r"""() => {
  const han = /[$HAN]/;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!han.test(node.data)) continue;
    if (parent.closest("script, style, template, noscript")) continue;
    const declared = parent.closest("[lang]");
    const lang = declared ? declared.getAttribute("lang").toLowerCase() : "";
    if (!lang.startsWith("zh"))
      found.push(node.data.trim().slice(0, 40) + " in <" +
                 parent.tagName.toLowerCase() + ">");
  }
  return found;
}""".replace("$HAN", HAN)


def _context(text: str, match: re.Match, width: int = 20) -> str:
    return text[max(match.start() - width, 0) : match.end() + width]


def _hits(pattern: re.Pattern, text: str, what: str) -> list[str]:
    return [f"{what}: {_context(text, m)!r}" for m in pattern.finditer(text)]


# -- every page ---------------------------------------------------------------------

ENTITY = re.compile(
    r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});"
)


def entities(text: str) -> list[str]:
    """An HTML entity shown as text: the page escaped its text twice."""
    return _hits(ENTITY, text, "HTML entity shown as text")


_CJK = HAN + FULL_WIDTH_PUNCTUATION
RAW_MARKDOWN = [
    (re.compile(r"\*\*|__"), "raw Markdown emphasis"),
    (  # a lone "*" against Chinese text (a "**" is caught above)
        re.compile(rf"(?<!\*)\*(?=[{_CJK}])|(?<=[{_CJK}])\*(?!\*)"),
        "raw Markdown emphasis",
    ),
    (re.compile(r"`"), "stray backtick"),
    (re.compile(r"\{[a-z][\w-]*(?::[\w-]+)*\}(?=`|\s|$)"), "raw MyST role"),
    (re.compile(r"^(?::::|```)\s*\{?\w"), "raw MyST directive"),
    (re.compile(r"^\|.*\||\|\s*:?-{3,}:?\s*\|"), "raw Markdown table row"),
    (re.compile(r"\]\([^)\s]+\)"), "raw Markdown link"),
]
RAW_TEX = [
    (re.compile(r"(?<![\w$])\$[^$\s][^$]*\$|\$\$"), "TeX outside typeset math"),
    (re.compile(r"\\(?:[A-Za-z]{2,}|[()\[\]{}])"), "TeX outside typeset math"),
    (re.compile(r"(?<![\w\\])[_^]\{"), "TeX outside typeset math"),
]


def raw_markup(text: str) -> list[str]:
    """Markdown, MyST or TeX that was not rendered."""
    found = []
    for pattern, what in RAW_MARKDOWN + RAW_TEX:
        found += _hits(pattern, text, what)
    return found


_OPENCC_DATA = Path("opencc/clib/share/opencc/STCharacters.ocd2")


@functools.cache
def simplified_only() -> frozenset[str]:
    """The characters that only Simplified Chinese writes: OpenCC's table of
    Simplified characters and their Traditional forms (STCharacters, from the
    installed OpenCC package), less those that are their own Traditional form too
    (台, 后, 干, 里 ...) and those that Taiwan's standard writes (群, 峰: the table
    maps them to the older 羣, 峯)."""
    import opencc

    package = Path(opencc.__file__).resolve().parent
    table = package.parent / _OPENCC_DATA
    tool = package / "clib" / "bin" / "opencc_dict"
    text = subprocess.run(
        [str(tool), "-i", str(table), "-o", "/dev/stdout", "-f", "ocd2", "-t", "text"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    to_taiwan = opencc.OpenCC("s2tw")  # Taiwan's standard forms: 群, not 羣
    found = set()
    for line in text.splitlines():
        simplified, _, traditional = line.partition("\t")
        if len(simplified) == 1 and simplified not in traditional.split():
            if to_taiwan.convert(simplified) != simplified:
                found.add(simplified)
    if len(found) < 2000:
        raise RuntimeError(f"OpenCC's table gave {len(found)} characters: {table}")
    return frozenset(found)


def simplified(text: str) -> list[str]:
    """Simplified-only characters (the edition is Traditional, as is every Chinese
    term of the English edition)."""
    chars = simplified_only()
    return [
        f"Simplified character {c!r}: {text[max(i - 10, 0) : i + 10]!r}"
        for i, c in enumerate(text)
        if c in chars
    ]


# -- the zh-TW edition ----------------------------------------------------------------

HALF_WIDTH_BETWEEN_HAN = re.compile(rf"(?<=[{HAN}]) ?[,;:?!] ?(?=[{HAN}])")
SPACE_AFTER_FULL_WIDTH = re.compile(rf"[{FULL_WIDTH_PUNCTUATION}] +(?=\S)")


def half_width_punctuation(text: str) -> list[str]:
    """A half-width , ; : ? ! between two Han characters (Chinese text uses ，；：？！
    or the enumeration comma 、)."""
    return _hits(HALF_WIDTH_BETWEEN_HAN, text, "half-width punctuation in Chinese")


def space_after_full_width(text: str) -> list[str]:
    """A space after a full-width punctuation mark: the mark holds its own space."""
    return _hits(SPACE_AFTER_FULL_WIDTH, text, "space after full-width punctuation")


_PAIRS = {"「": "」", "『": "』"}


def unpaired_quotes(text: str) -> list[str]:
    """「」 and 『』 open and close in pairs, nested properly."""
    stack: list[tuple[str, int]] = []
    for i, c in enumerate(text):
        if c in _PAIRS:
            stack.append((c, i))
        elif c in _PAIRS.values():
            if not stack or _PAIRS[stack[-1][0]] != c:
                return [f"unpaired {c}: {text[max(i - 20, 0) : i + 20]!r}"]
            stack.pop()
    return [f"unpaired {c}: {text[i : i + 40]!r}" for c, i in stack[:1]]


ALL_PAGES = (entities, raw_markup, simplified)
CHINESE_PAGES = (half_width_punctuation, space_after_full_width, unpaired_quotes)


def passage_problems(text: str, chinese: bool) -> list[str]:
    """What is wrong with one passage's text (``chinese``: a zh-TW page's text in
    Chinese)."""
    rules = ALL_PAGES + (CHINESE_PAGES if chinese else ())
    return [problem for rule in rules for problem in rule(text)]


def is_chinese(lang: str) -> bool:
    return lang.lower().startswith("zh")


def text_problems(
    passages: Iterable[dict], italic: Iterable[dict] = (), edition: str = "en"
) -> list[str]:
    """Every problem of a page's visible text: ``passages`` and ``italic`` are what
    ``PASSAGES_JS`` returns; ``edition`` is "en" or "zh-TW"."""
    problems = []
    for passage in passages:
        chinese = edition == "zh-TW" and is_chinese(passage["lang"])
        for problem in passage_problems(passage["text"], chinese):
            problems.append(f"{passage['region']}: {problem}")
    if edition == "zh-TW":
        problems += [
            f"{run['region']}: Han text in italics: {run['text']!r}" for run in italic
        ]
    return problems
