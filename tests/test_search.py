"""The built book's search finds every glossary term on every page that contains it.

For each edition, the test reads the search index Sphinx wrote
(_build/html/searchindex.js, _build/html/zh-TW/searchindex.js), looks each glossary
term up the way the search page does (searchtools.js: the query split into words,
stop words and numbers dropped, each word stemmed, the pages holding each word, or,
when no indexed word equals it and it is longer than two characters, a word that
contains it; the pages that hold every word), and compares the pages found with the
pages whose text contains the term. English terms are the glossary's English column
(without a parenthesis); Chinese terms are the words of the Chinese search's
dictionary (scripts/i18n.py search_terms(): every run of two or more Chinese
characters in the 繁體中文 column; one character is too short to be indexed).

Needs `make book` first (it runs in `make browser`, with the other tests of the built
book); without a built book it skips, except in CI, where it fails.
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
from pathlib import Path

import pytest
import snowballstemmer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import i18n  # noqa: E402

HTML = ROOT / "_build" / "html"
pytestmark = pytest.mark.browser


def load_index(path: Path) -> dict:
    text = path.read_text()
    return json.loads(text[text.index("(") + 1 : text.rindex(")")])


# the stop words of language_data.js (English's for
# both editions: Sphinx's Chinese search uses the English stop words)
_STEMMER = snowballstemmer.stemmer("porter")


def _stopwords() -> set[str]:
    from sphinx.search.en import english_stopwords

    return set(english_stopwords)


def split_query(query: str) -> list[str]:
    """searchtools.js's splitQuery: split on what is not a letter, digit or _."""
    return [w for w in re.split(r"[^\w]+", query) if w]


def query_words(query: str, chinese: bool) -> set[str]:
    stop = _stopwords()
    words = set()
    for word in split_query(query.strip()):
        lower = word.lower()
        if lower in stop or re.fullmatch(r"\d+", word):
            continue
        han = re.search(r"[\u4e00-\u9fff]", lower)
        words.add(lower if han else _STEMMER.stemWord(lower))
    return words


def search(index: dict, query: str, chinese: bool = False) -> set[str]:
    """The docnames searchtools.js's performTermsSearch returns for `query`."""
    terms, titles = index["terms"], index["titleterms"]
    words = query_words(query, chinese)
    found: dict[int, set[str]] = {}
    for word in words:
        files: list[int] = []
        for table in (terms, titles):
            entry = table.get(word)
            if entry is not None:
                files += entry if isinstance(entry, list) else [entry]
            if len(word) > 2 and word not in table:
                for term, entry in table.items():
                    if word in term:
                        files += entry if isinstance(entry, list) else [entry]
        for f in files:
            found.setdefault(f, set()).add(word)
    long_words = len([w for w in words if len(w) > 2])
    return {
        index["docnames"][f]
        for f, hit in found.items()
        if len(hit) == len(words) or len(hit) == long_words
    }


def page_text(page: Path) -> str:
    """The text of a built page's article, as the search indexes it: no scripts,
    styles or tags (an image's alt text is not indexed)."""
    text = page.read_text()
    start = text.find('<article class="bd-article"')
    end = text.rfind("</article>")
    text = text[start:end] if start >= 0 and end > start else text
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


def english_terms() -> list[str]:
    terms = []
    for line in (ROOT / "book" / "glossary.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[2].startswith("[") and cells[0] != "English":
            terms.append(re.sub(r"\s*\([^)]*\)", "", cells[0]).strip())
    return terms


def _contains(text: str, term: str, chinese: bool) -> bool:
    if chinese:
        return term in text
    words = [re.escape(w) for w in split_query(term)]
    return re.search(r"\b" + r"\W+".join(words) + r"\b", text, re.I) is not None


def missing_pages(root: Path, terms: list[str], chinese: bool) -> list[str]:
    index = load_index(root / "searchindex.js")
    texts = {
        doc: page_text(root / f"{doc}.html")
        for doc in index["docnames"]
        if (root / f"{doc}.html").exists()
    }
    problems = []
    for term in terms:
        holding = {doc for doc, text in texts.items() if _contains(text, term, chinese)}
        lost = sorted(holding - search(index, term, chinese))
        if lost:
            problems.append(f"{term!r} is on {', '.join(lost)} but search misses it")
    return problems


def _built(root: Path) -> None:
    if not (root / "searchindex.js").exists():
        message = f"no built book at {root} (make book first)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def test_the_search_emulation_finds_whole_and_partial_words():
    index = {
        "docnames": ["a", "b", "c"],
        "terms": {"位置編碼": [0], "正弦餘弦位置編碼": 1, "posit": [0, 2], "encod": 2},
        "titleterms": {},
    }
    # an indexed word equal to the query: no partial matches (the bug of issue 42)
    assert search(index, "位置編碼", chinese=True) == {"a"}
    assert search(index, "正弦餘弦", chinese=True) == {"b"}  # inside a longer word
    assert search(index, "positional encoding") == {"c"}  # every word, stemmed
    assert search(index, "the positional") == {"a", "c"}  # a stop word is dropped


def test_the_chinese_splitter_adds_every_dictionary_term(tmp_path):
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from book_search import BookChinese

    words = tmp_path / "dict.txt"
    words.write_text("位置編碼\n正弦餘弦位置編碼\n")
    words = BookChinese({"dict": str(words)}).split("使用正弦餘弦位置編碼。")
    assert {"位置編碼", "正弦餘弦位置編碼"} <= set(words)


@pytest.mark.parametrize("edition", ["en", "zh-TW"])
def test_search_finds_every_glossary_term_on_every_page_holding_it(edition):
    root = HTML if edition == "en" else HTML / "zh-TW"
    _built(root)
    chinese = edition == "zh-TW"
    terms = i18n.search_terms() if chinese else english_terms()
    assert len(terms) > 100
    problems = missing_pages(root, terms, chinese)
    assert not problems, "\n".join(problems)
