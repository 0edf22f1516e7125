"""Every number the prose quotes is one its own section's cells show (prose_numbers.py).

The prose of a chapter is re-read whenever its outputs change: a number written in a
Markdown cell, the intro or a concept check that no code or output of its own ``##``
section shows, nor of a section its paragraph names ("§7.4 measured 8.4×"), fails here,
unless the document's allowlist names it with a reason.
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
    assert totals["checked"] > 800
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


def test_an_integer_with_a_unit_is_a_measurement():
    assert written("the loop took 91 ms and the kernel 53 ms, 12 MiB, 400 steps") == [
        ("91", "unit"),
        ("53", "unit"),
        ("12", "unit"),
        ("400", "unit"),
    ]
    assert written("in 25 s, at 971 tokens/s") == [("25", "unit"), ("971", "unit")]
    assert not written("8 heads of 64 units, Apache-2.0, GPT-2")


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
    return Document("toy", [("toy cell 0", "1.1", markdown)], {"1.1": shown})


def test_a_number_no_cell_shows_is_caught():
    # the defect the test exists for: the prose says 38.0 ms, the output 38.4
    document = _one_document("it took 18.2 ms, then 38.0 ms", {Decimal("18.2")})
    assert [n.text for _, n in unmatched(document, {})] == ["38.0"]
    assert not unmatched(document, {"toy": {"38.0": "the paper's own figure, quoted"}})


def _two_sections(prose_in_1_2):
    """Section 1.1 prints 8.4; the prose of section 1.2 quotes a number."""
    return Document(
        "01_toy",
        [("01_toy cell 5", "1.2", prose_in_1_2)],
        {"1.1": {Decimal("8.4")}, "1.2": {Decimal("2.5")}, "2.1": {Decimal("8.1")}},
        {"01": ["1.1", "1.2"], "02": ["2.1"]},
    )


def test_a_number_is_matched_in_its_own_section_only():
    # Chapter 7's "8.1 times" passed because 8.1 appeared elsewhere in the chapter
    assert [n.text for _, n in unmatched(_two_sections("it was 8.4× faster"), {})] == [
        "8.4×"
    ]
    assert not unmatched(_two_sections("it was 2.5× faster"), {})


def test_a_number_from_elsewhere_names_its_section():
    assert not unmatched(_two_sections("§1.1 measured 8.4×; here 2.5×"), {})
    assert not unmatched(_two_sections("8.4× (Section 1.1)"), {})
    # the name covers its own paragraph or table row, not the next
    misses = unmatched(_two_sections("§1.1 measured it.\n\nIt was 8.4×."), {})
    assert [n.text for _, n in misses] == ["8.4×"]
    rows = "| a | 8.4× (§1.1) |\n|---|---|\n| b | 8.4× |"
    assert [n.text for _, n in unmatched(_two_sections(rows), {})] == ["8.4×"]
    # the source documents' sections are not the book's
    assert unmatched(_two_sections("the article's §1.1 says 8.4×"), {})
    assert unmatched(_two_sections("article §1.1: 8.4×"), {})
    # another chapter, by its name or a link to its notebook
    assert not unmatched(_two_sections("Chapter 2 measured 8.1×"), {})
    assert not unmatched(_two_sections("[the GPT](02_toy.ipynb): 8.1×"), {})
    assert unmatched(_two_sections("Chapter 1 measured 8.1×"), {})


def test_a_concept_check_may_restate_what_its_question_gives():
    givens = {"check 1.2 question 1": {Decimal("0.3")}}
    document = Document(
        "concepts-ch01",
        [
            ("check 1.2 question 1 (prompt)", "1.2", "p = 0.3: how many?"),
            ("check 1.2 question 1", "1.2", "0.3 alone"),
        ],
        {"1.2": set()},
        {},
        givens,
    )
    # the prompt's own number is a given of the question: it needs the allowlist
    assert [(w, n.text) for w, n in unmatched(document, {})] == [
        ("check 1.2 question 1 (prompt)", "0.3")
    ]


def test_the_book_is_cut_into_its_sections():
    by_name = {d.name: d for d in DOCUMENTS}
    chapter = by_name["07_complexity"]
    assert {"7.1", "7.4", "07_complexity Summary", "07_complexity Exercises"} <= set(
        chapter.chapters["07"]
    )
    sections = {section for _, section, _ in chapter.prose}
    assert "7.4" in sections and "07_complexity opening" in sections
    concept = by_name["concepts-ch07"]
    assert {section for _, section, _ in concept.prose} <= set(chapter.chapters["07"])


def test_allowlist_entries_that_would_hide_defects_are_reported():
    document = _one_document("0.46, 2.1% and 0.5", {Decimal("0.5")})
    good = {
        "0.46": {"expr": "0.953 ** 16", "why": "the forget gate over 16 steps"},
        "2.1%": "a constant of the paper",
    }
    assert not allowlist_problems([document], {"toy": good})
    bad = {
        "0.46": {"expr": "0.953 ** 8", "why": "wrong arithmetic"},
        "2.1%": "constant",  # no reason
        "7.5": "a number the prose no longer has",  # stale
        "0.5": "a number its section shows anyway",  # unneeded
    }
    problems = "\n".join(allowlist_problems([document], {"toy": bad}))
    assert "0.953 ** 8" in problems
    assert "'2.1%' needs a reason" in problems
    assert "'7.5' is not in the prose (stale)" in problems
    assert "'0.5' matches its section's outputs wherever it is written" in problems
    assert allowlist_problems([document], {"nothing": {}}) == [
        "nothing.toml: no document of that name"
    ]
