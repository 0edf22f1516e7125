"""Sphinx extension: the Chinese search indexes every term of the book's glossary.

Sphinx's Chinese search cuts a page's text into words with jieba
(``jieba.cut_for_search``) and indexes the words; the search page looks a query up
among the indexed words, and looks for it inside longer words only when no indexed
word equals it. jieba, given the glossary's terms as its user dictionary
(``html_search_options["dict"]``, locale/zh_TW/search_terms.txt), keeps a compound
such as 正弦餘弦位置編碼 one word and, for a word that long, adds only its two- and
three-character parts. So 位置編碼, indexed as a word of Chapter 4, would not find
Chapter 6, where it occurs only inside 正弦餘弦位置編碼.

This language adds, to jieba's words of every piece of text, each term of the
dictionary that occurs in it, so a page is indexed under every glossary term its
text contains (tests/test_search.py checks it on the built index).
"""

from __future__ import annotations

from pathlib import Path

from sphinx.search.zh import SearchChinese


def dictionary_terms(path: str | Path | None) -> list[str]:
    """The words of a jieba user dictionary (one per line, then its optional
    frequency and part of speech), longest first."""
    if not path or not Path(path).is_file():
        return []
    words = {
        line.split()[0] for line in Path(path).read_text().splitlines() if line.split()
    }
    return sorted(words, key=lambda w: (-len(w), w))


class BookChinese(SearchChinese):
    """Sphinx's Chinese search, plus the dictionary's terms found in the text."""

    lang = "zh"

    def init(self, options: dict[str, str]) -> None:
        super().init(options)
        self.book_terms = dictionary_terms(options.get("dict"))

    def split(self, input: str) -> list[str]:
        words = super().split(input)
        return words + [term for term in self.book_terms if term in input]


def setup(app):
    app.add_search_language(BookChinese)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
