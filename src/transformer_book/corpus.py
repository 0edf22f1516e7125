"""Real English text that ships with Python, as a fixed copy (Chapter 6).

The corpus is the help text on the Python language that every CPython carries in
``pydoc_data.topics`` (what ``help("while")`` prints): 79 topics, about 465 KB. The
package ships a copy taken from Python 3.11.7 (``texts/pydoc_topics.json.gz``, with
the PSF licence beside it), so every machine trains on the same bytes.

From the raw topics this module keeps the **prose**: paragraphs of English, each
reflowed onto one line, without the code samples, grammar rules and headings. Many
topics contain others (``compound`` holds ``while``, ``if``, ``try``...), so a
paragraph belongs only to the largest topic that holds it: the held-out topics
share no paragraph with the training text.

=================  ========================================================
function           returns
=================  ========================================================
``load_topics``    the raw topics, ``{name: text}``
``paragraphs``     the prose paragraphs of a split, deduplicated
``corpus_text``    a split as one string, one paragraph per line
``sentences``      a split cut into sentences
``topic_sentences``  sentences labelled by topic, for a small classification
=================  ========================================================
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import re
from collections.abc import Sequence
from importlib import resources

from ._validate import check_int

__all__ = [
    "PYTHON_VERSION",
    "TOPICS_SHA256",
    "HELDOUT_TOPICS",
    "CLASSIFICATION_TOPICS",
    "load_topics",
    "paragraphs",
    "corpus_text",
    "sentences",
    "topic_sentences",
]

PYTHON_VERSION = "3.11.7"  # the Python whose pydoc_data.topics the copy is
TOPICS_SHA256 = "4717ccc51e2e7bd1eed2feddb0bcb5a7da19a1a923fd2f258cf81e4285e31683"
# Held out from training: ten topics of the language reference, about 15% of the prose.
HELDOUT_TOPICS = (
    "binary",
    "booleans",
    "calls",
    "comparisons",
    "dict",
    "global",
    "import",
    "raise",
    "subscriptions",
    "typesmapping",
)
# Four training topics with distinct vocabularies: statements, the debugger, format
# strings, and the special methods of the data model.
CLASSIFICATION_TOPICS = ("compound", "debugger", "formatstrings", "specialnames")
SPLITS = ("train", "heldout", "all")

_UNDERLINE = re.compile(r"^[*=\-~^]+$")  # the lines under a heading
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"“(])")
_PROSE_CHARS = set(" .,;:!?'\"“”‘’()-–—")


@functools.cache
def _raw() -> bytes:
    path = resources.files("transformer_book") / "texts" / "pydoc_topics.json.gz"
    return gzip.decompress(path.read_bytes())


def load_topics() -> dict[str, str]:
    """The 79 raw topics of the shipped copy, ``{name: text}`` (a fresh dict)."""
    raw = _raw()
    if hashlib.sha256(raw).hexdigest() != TOPICS_SHA256:
        raise RuntimeError("the shipped texts/pydoc_topics.json.gz is corrupted")
    return json.loads(raw)


def _is_prose(text: str) -> bool:
    """A paragraph of English: six words or more, mostly letters, no code marks."""
    if ">>>" in text or "::=" in text or len(text.split()) < 6:
        return False
    plain = sum(c.isalnum() or c in _PROSE_CHARS for c in text)
    return plain / len(text) >= 0.97 and text[-1] in ".:?!)"


@functools.cache
def _all_paragraphs() -> tuple[tuple[str, str], ...]:
    """(topic, paragraph) pairs; a paragraph goes to the largest topic holding it."""
    topics = load_topics()
    seen, pairs = set(), []
    for name in sorted(topics, key=lambda n: (-len(topics[n]), n)):
        for block in re.split(r"\n\s*\n", topics[name]):
            lines = [line.strip() for line in block.split("\n")]
            lines = [line for line in lines if line and not _UNDERLINE.match(line)]
            text = " ".join(lines)
            text = re.sub(r"\s+", " ", text)  # (the original wraps lines at 72)
            if text in seen or not _is_prose(text):
                continue
            seen.add(text)
            pairs.append((name, text))
    return tuple(pairs)


def _check_split(split: str) -> None:
    if not isinstance(split, str):
        raise TypeError(f"split must be one of {SPLITS}, got {split!r}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def paragraphs(split: str = "train") -> list[tuple[str, str]]:
    """The prose paragraphs of ``split``, as (topic, paragraph) pairs.

    ``"heldout"`` is the paragraphs of ``HELDOUT_TOPICS``, ``"train"`` all others,
    ``"all"`` both. The order is fixed: largest topic first, then the topic's order.
    """
    _check_split(split)
    pairs = list(_all_paragraphs())
    if split == "all":
        return pairs
    held = split == "heldout"
    return [(t, p) for t, p in pairs if (t in HELDOUT_TOPICS) == held]


def corpus_text(split: str = "train") -> str:
    """The prose of ``split`` as one string, one paragraph per line."""
    return "\n".join(p for _, p in paragraphs(split))


def _split_sentences(paragraph: str, min_words: int) -> list[str]:
    parts = _SENTENCE_END.split(paragraph)
    return [s for s in parts if len(s.split()) >= min_words]


def sentences(split: str = "train", min_words: int = 6) -> list[str]:
    """The sentences of ``split`` with at least ``min_words`` words, in order.

    A sentence ends at ".", "!" or "?" followed by a space and a capital letter or a
    quote, so "e.g. the" does not end one.
    """
    _check_split(split)
    check_int("min_words", min_words, minimum=1)
    return [s for _, p in paragraphs(split) for s in _split_sentences(p, min_words)]


def topic_sentences(
    split: str = "train",
    topics: tuple[str, ...] = CLASSIFICATION_TOPICS,
    min_words: int = 6,
) -> tuple[list[str], list[int]]:
    """Sentences labelled by the topic they come from: a small classification.

    Returns ``(texts, labels)`` with ``labels[i]`` the index in ``topics`` of
    ``texts[i]``'s topic. Every fourth sentence of each topic is in ``"test"``, the
    others in ``"train"``: a fixed split, the same on every machine.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    check_int("min_words", min_words, minimum=1)  # as sentences: 0 is refused
    if isinstance(topics, str) or not isinstance(topics, Sequence):
        raise TypeError(f"topics must be a tuple of topic names, got {topics!r}")
    known = {t for t, _ in _all_paragraphs()}
    for name in topics:
        if name not in known:
            raise ValueError(f"topics: {name!r} has no prose paragraph")
    if len(set(topics)) != len(topics) or len(topics) < 2:
        raise ValueError(f"topics must be two or more distinct names, got {topics}")
    texts, labels = [], []
    for label, name in enumerate(topics):
        own = [
            s
            for t, p in _all_paragraphs()
            if t == name
            for s in _split_sentences(p, min_words)
        ]
        for i, sentence in enumerate(own):
            if (i % 4 == 3) == (split == "test"):
                texts.append(sentence)
                labels.append(label)
    return texts, labels
