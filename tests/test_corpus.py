"""The corpus: a fixed copy of pydoc_data.topics, its prose, and its splits."""

from __future__ import annotations

import fnmatch
import hashlib
import sys
from importlib import resources
from pathlib import Path

import pytest
import tomllib

from transformer_book import corpus
from transformer_book.corpus import (
    CLASSIFICATION_TOPICS,
    HELDOUT_TOPICS,
    corpus_text,
    load_topics,
    paragraphs,
    sentences,
    topic_sentences,
)

ROOT = Path(__file__).resolve().parent.parent


def test_the_shipped_copy_is_the_pinned_text():
    topics = load_topics()
    assert len(topics) == 79 and "while" in topics and "specialnames" in topics
    assert all(isinstance(v, str) and v for v in topics.values())
    assert 460_000 < sum(map(len, topics.values())) < 470_000
    assert hashlib.sha256(corpus._raw()).hexdigest() == corpus.TOPICS_SHA256
    topics["while"] = "changed"
    assert load_topics()["while"] != "changed"  # each call gives a fresh dict


@pytest.mark.skipif(
    sys.version_info[:3] != (3, 11, 7), reason="the copy comes from Python 3.11.7"
)
def test_the_copy_equals_this_pythons_topics():
    import pydoc_data.topics

    assert load_topics() == pydoc_data.topics.topics


def test_the_package_data_and_its_licence_go_into_the_wheel():
    texts = resources.files("transformer_book") / "texts"
    names = {p.name for p in texts.iterdir()}
    assert {"pydoc_topics.json.gz", "LICENSE-PSF.txt"} <= names
    licence = (texts / "LICENSE-PSF.txt").read_text()
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in licence
    assert corpus.PYTHON_VERSION in (texts / "README.md").read_text()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["transformer_book"]
    for name in ("pydoc_topics.json.gz", "LICENSE-PSF.txt", "README.md"):
        assert any(fnmatch.fnmatch(f"texts/{name}", p) for p in patterns), name


def test_the_splits_are_disjoint_and_fixed():
    train, held, both = paragraphs("train"), paragraphs("heldout"), paragraphs("all")
    assert {t for t, _ in held} == set(HELDOUT_TOPICS)
    assert not {t for t, _ in train} & set(HELDOUT_TOPICS)
    assert sorted(train + held) == sorted(both)
    texts = [p for _, p in both]
    assert len(texts) == len(set(texts))  # each paragraph once
    share = len(corpus_text("heldout")) / len(corpus_text("all"))
    assert 0.12 < share < 0.20, share
    train_text = corpus_text("train")
    assert not any(p in train_text for _, p in held)  # no leak into training
    assert (len(train), len(held)) == (839, 159)  # the same on every machine
    assert paragraphs("train") == train  # the same on every call


def test_paragraphs_are_prose_on_one_line():
    for _, p in paragraphs("all"):
        assert "\n" not in p and "  " not in p and p == p.strip()
        assert ">>>" not in p and "::=" not in p and len(p.split()) >= 6
        assert not set(p) <= set("*=-~^ ")


def test_sentences_are_cut_at_sentence_ends():
    train = sentences("train")
    assert len(train) == 1622 and len(sentences("heldout")) == 319
    assert all(len(s.split()) >= 6 for s in train)
    assert all(len(s.split()) >= 20 for s in sentences("train", min_words=20))
    assert any("e.g. " in s for s in train)  # "e.g." does not end a sentence
    ends = sum(s.rstrip(')"”').endswith((".", ":", "?", "!")) for s in train)
    assert ends / len(train) > 0.95


def test_topic_sentences_are_a_fixed_labelled_split():
    x_train, y_train = topic_sentences("train")
    x_test, y_test = topic_sentences("test")
    assert len(x_train) == len(y_train) and len(x_test) == len(y_test)
    assert set(y_train) == set(y_test) == set(range(len(CLASSIFICATION_TOPICS)))
    assert not set(x_train) & set(x_test)
    assert 0.2 < len(x_test) / (len(x_train) + len(x_test)) < 0.3
    debugger = " ".join(p for t, p in paragraphs("train") if t == "debugger")
    assert all(x in debugger for x, y in zip(x_test, y_test, strict=True) if y == 1)
    assert not any(x in debugger for x, y in zip(x_test, y_test, strict=True) if y == 0)
    x2, y2 = topic_sentences("test", topics=("debugger", "compound"))
    assert set(y2) == {0, 1} and len(x2) < len(x_test)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: paragraphs("test"), "split"),
        (lambda: corpus_text("valid"), "split"),
        (lambda: sentences("train", min_words=0), "min_words"),
        (lambda: topic_sentences("heldout"), "split"),
        (lambda: topic_sentences("train", topics=("while", "nope")), "topics"),
        (lambda: topic_sentences("train", topics=("debugger",)), "topics"),
    ],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
