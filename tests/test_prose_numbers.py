"""Every number the prose quotes is one the chapter's cells show (prose_numbers.py).

The prose of a chapter is re-read whenever its outputs change: a number written in a
Markdown cell, the intro or a concept check that no code or output of the chapter
shows fails here, unless the document's allowlist names it with a reason.
"""

from decimal import Decimal

import pytest
from prose_numbers import (
    Document,
    allowlist_problems,
    book_documents,
    counts,
    load_allowlist,
    matches,
    prose_numbers,
    unmatched,
)

DOCUMENTS = book_documents()
ALLOWLIST = load_allowlist()


def written(markdown):
    return [(n.text, n.kind) for n in prose_numbers(markdown)]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_every_number_in_the_prose_is_shown(document):
    misses = unmatched(document, ALLOWLIST)
    assert not misses, "numbers the chapter's cells do not show:\n" + "\n".join(
        f"{where}: {number.text!r} in: {number.context[:160]}"
        for where, number in misses
    )


def test_the_allowlists_are_reasoned_used_and_right():
    assert not allowlist_problems(DOCUMENTS, ALLOWLIST)
    totals = counts(DOCUMENTS, ALLOWLIST)
    # the check reads the whole book: hundreds of numbers, few exempted by a reason
    # alone (an {expr, why} entry is arithmetic the test verifies)
    assert totals["checked"] > 500
    assert totals["excused"] < totals["checked"] / 20
    assert totals["unmatched"] == 0


def test_the_numbers_a_reader_takes_for_measurements():
    assert written(
        "Loss 0.42, accuracy 82–84%, 43,648 weights, 2.3× faster, within 1e-5, "
        "and $0.06$."
    ) == [
        ("0.42", "decimal"),
        ("82", "percent"),
        ("84%", "percent"),
        ("43,648", "thousands"),
        ("2.3×", "multiplier"),
        ("1e-5", "scientific"),
        ("0.06", "decimal"),
    ]
    assert written("a share of 4.1\\% and 0.18 to 0.42") == [
        ("4.1%", "percent"),
        ("0.18", "decimal"),
        ("0.42", "decimal"),
    ]


def test_what_is_not_a_measurement_is_skipped():
    # counts and constants, places in a text, versions, shapes, code
    assert not written("8 heads, T = 128, in 2017, d_model = 512")
    assert not written("§5.6, Exercise 8.6, concept check 1.5, Chapter 1.2")
    assert not written("torch 2.13.0 and ipywidgets 7.7.1")
    assert not written("a 3 × 6 matrix of 32 × 32 images")
    assert not written("`lr = 0.001` and\n```python\nx = 0.5\n```\n")
    assert not written("[a link](01_rnn_limits.ipynb#a-1.5)")  # the target
    assert not written("### 5.3 Training")


def test_a_number_matches_at_the_precision_written():
    (rounded,) = prose_numbers("about 9.3")
    assert matches(rounded, {Decimal("9.29")})
    assert matches(rounded, {Decimal("9.25")})
    assert not matches(rounded, {Decimal("9.24"), Decimal("9.36")})
    (percent,) = prose_numbers("4.1%")
    assert matches(percent, {Decimal("0.041")})  # a fraction printed as such
    assert not matches(percent, {Decimal("0.042")})
    (thousands,) = prose_numbers("43,648 weights")
    assert matches(thousands, {Decimal("43648")})
    assert not matches(thousands, {Decimal("169728")})
    (small,) = prose_numbers("within 3e-6")
    assert matches(small, {Decimal("0.0000031")})
    assert not matches(small, {Decimal("0.00001")})


def _one_document(markdown, shown):
    return Document("toy", [("toy cell 0", markdown)], shown)


def test_a_number_no_cell_shows_is_caught():
    # the defect the test exists for: the prose says 38.0 ms, the output 38.4
    document = _one_document("it took 18.2 ms, then 38.0 ms", {Decimal("18.2")})
    assert [n.text for _, n in unmatched(document, {})] == ["38.0"]
    assert not unmatched(document, {"toy": {"38.0": "the paper's own figure, quoted"}})


def test_allowlist_entries_that_would_hide_defects_are_reported():
    document = _one_document("0.46 and 2.1%", set())
    good = {
        "0.46": {"expr": "0.953 ** 16", "why": "the forget gate over 16 steps"},
        "2.1%": "a constant of the paper",
    }
    assert not allowlist_problems([document], {"toy": good})
    bad = {
        "0.46": {"expr": "0.953 ** 8", "why": "wrong arithmetic"},
        "2.1%": "constant",  # no reason
        "7.5": "a number the prose no longer has",  # stale
    }
    problems = "\n".join(allowlist_problems([document], {"toy": bad}))
    assert "0.953 ** 8" in problems
    assert "'2.1%' needs a reason" in problems
    assert "'7.5' is not in the prose (stale)" in problems
    assert allowlist_problems([document], {"nothing": {}}) == [
        "nothing.toml: no document of that name"
    ]
