"""The translation units of the zh-TW edition (scripts/i18n.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import i18n  # noqa: E402
import i18n_outputs  # noqa: E402
import nbformat  # noqa: E402
import polib  # noqa: E402

CELL = """### Exercise 2.1 · ★ · Scale

Compute $QK^\\top/\\sqrt{d_k}$ for `d_k = 64`: the variance drops to 1.0
(see [Chapter 3](03_multi_head.ipynb), {cite}`vaswani2017attention`).

$$
\\mathrm{softmax}(x)_i = e^{x_i} / \\sum_j e^{x_j}
$$

| model | accuracy |
|---|---|
| LSTM | 0.42 |

<details><summary>Solution</summary>

Divide by the square root.

```python
scores = q @ k.T / d_k**0.5
```

</details>
"""


def test_units_leave_out_code_math_and_markup():
    assert i18n.units(CELL) == [
        "### Exercise 2.1 · ★ · Scale",
        "Compute $QK^\\top/\\sqrt{d_k}$ for `d_k = 64`: the variance drops to 1.0\n"
        "(see [Chapter 3](03_multi_head.ipynb), {cite}`vaswani2017attention`).",
        "| model | accuracy |",
        "| LSTM | 0.42 |",
        "<details><summary>Solution</summary>",
        "Divide by the square root.",
    ]


MARKDOWN_LINES = st.lists(
    st.sampled_from(
        [
            "",
            "text with $x$ and `code`",
            "```python",
            "x = 1",
            "```",
            "$$",
            "a = b",
            "$$",
            "$$ y $$",
            "| a | b |",
            "|---|---|",
            "</details>",
            "(label)=",
            "- item",
            "# Heading",
        ]
    ),
    max_size=30,
)


@given(MARKDOWN_LINES, st.booleans())
def test_segments_put_the_text_back_together(lines, final_newline):
    markdown = "\n".join(lines) + ("\n" if final_newline and lines else "")
    pieces = i18n.segments(markdown)
    assert "".join(text for _, text in pieces) == markdown
    # translating every unit to itself changes nothing
    same = {unit: unit for unit in i18n.units(markdown)}
    assert i18n.translate(markdown, same) == (markdown, [])


def test_translate_replaces_units_and_names_the_missing_ones():
    catalogue = {
        "### Exercise 2.1 · ★ · Scale": "### 習題 2.1 · ★ · 縮放",
        "Divide by the square root.": "除以平方根。",
    }
    text, missing = i18n.translate(CELL, catalogue)
    assert "### 習題 2.1 · ★ · 縮放\n\nCompute" in text
    assert "除以平方根。\n\n```python\nscores = q @ k.T / d_k**0.5\n```" in text
    assert len(missing) == 4 and missing[0].startswith("Compute")
    with pytest.raises(TypeError, match="markdown"):
        i18n.segments(None)


def test_a_faithful_translation_keeps_every_invariant():
    unit = i18n.units(CELL)[1]
    good = (
        "對 `d_k = 64` 計算 $QK^\\top/\\sqrt{d_k}$：變異數降到 1.0"
        "（見[第 3 章](03_multi_head.ipynb)，{cite}`vaswani2017attention`）。"
    )
    assert i18n.invariant_problems(unit, good) == []
    ref = "see {ref}`the tests <how-this-book-is-tested>`"
    assert i18n.invariant_problems(ref, "見{ref}`測試 <how-this-book-is-tested>`") == []


@pytest.mark.parametrize(
    ("broken", "what"),
    [
        (
            "對 `d_k = 64` 計算 $QK^\\top/\\sqrt{d_k}$：變異數降到 1.1（見[第 3 章]"
            "(03_multi_head.ipynb)，{cite}`vaswani2017attention`）。",
            "numbers",
        ),
        (
            "對 `d_k = 64` 計算 $QK^\\top/d_k$：變異數降到 1.0（見[第 3 章]"
            "(03_multi_head.ipynb)，{cite}`vaswani2017attention`）。",
            "inline math",
        ),
        (
            "對 `d_k=64` 計算 $QK^\\top/\\sqrt{d_k}$：變異數降到 1.0（見[第 3 章]"
            "(03_multi_head.ipynb)，{cite}`vaswani2017attention`）。",
            "inline code",
        ),
        (
            "對 `d_k = 64` 計算 $QK^\\top/\\sqrt{d_k}$：變異數降到 1.0（見[第 3 章]"
            "(03_attention.ipynb)，{cite}`vaswani2017attention`）。",
            "link targets",
        ),
        (
            "對 `d_k = 64` 計算 $QK^\\top/\\sqrt{d_k}$：變異數降到 1.0（見[第 3 章]"
            "(03_multi_head.ipynb)）。",
            "roles and citations",
        ),
    ],
)
def test_a_translation_that_changes_what_it_must_keep_is_caught(broken, what):
    unit = i18n.units(CELL)[1]
    problems = i18n.invariant_problems(unit, broken)
    assert len(problems) == 1 and problems[0].startswith(what), problems


def test_structure_and_tags_are_invariants():
    assert i18n.invariant_problems("## A title", "### 標題")[0].startswith(
        "Markdown structure"
    )
    assert i18n.invariant_problems("| a | b |", "| 甲 | 乙 | 丙 |")
    assert i18n.invariant_problems("- one\n- two", "- 一")
    assert (
        i18n.invariant_problems(
            "<details><summary>Solution</summary>", "<details><summary>解答</summary>"
        )
        == []
    )
    assert i18n.invariant_problems("a <b>bold</b> word", "一個粗體字")


def test_the_catalogue_follows_the_english():
    catalogue = polib.POFile()
    counts = i18n.update_catalogue(catalogue, ["One sentence.", "Another one here."])
    assert counts == {"added": 2}
    catalogue[0].msgstr = "一個句子。"
    catalogue[1].msgstr = "這裡還有一個。"
    assert i18n.translations(catalogue) == {
        "One sentence.": "一個句子。",
        "Another one here.": "這裡還有一個。",
    }
    # the English of the second unit changes a little, the first is deleted
    counts = i18n.update_catalogue(catalogue, ["Another one is here."])
    assert counts == {"fuzzy": 1, "obsolete": 2}
    (entry,) = [e for e in catalogue if not e.obsolete]
    assert entry.msgid == "Another one is here." and "fuzzy" in entry.flags
    assert entry.previous_msgid == "Another one here."
    assert entry.msgstr == "這裡還有一個。"
    assert i18n.translations(catalogue) == {}  # fuzzy is not translated
    # a unit unlike any old one starts empty
    counts = i18n.update_catalogue(catalogue, ["Another one is here.", "Unrelated."])
    assert counts == {"kept": 1, "added": 1}


def test_every_page_comes_apart_and_back_together():
    for page in i18n.pages():
        for markdown in i18n.page_markdown(page):
            assert "".join(text for _, text in i18n.segments(markdown)) == markdown
        assert i18n.page_units(page), page


def test_a_generated_notebook_keeps_the_code_and_outputs():
    import nbformat

    page = ROOT / "book" / "02_attention.ipynb"
    english = nbformat.read(page, as_version=4)
    first = i18n.units(english.cells[0].source)[0]
    same = i18n.output_units(english) + i18n.widget_labels(english)
    nb, missing = i18n.translate_notebook(
        english, {first: "# 2 · 查詢、鍵、值"}, outputs={u: u for u in same}
    )
    assert nb.cells[0].source.startswith("# 2 · 查詢、鍵、值\n")
    assert first not in missing
    assert len(set(missing)) == len(i18n.page_units(page)) - 1
    from figures_zh import swap_figures

    assert swap_figures(english) > 0, "the figures are their zh-TW renderings"
    changed = 0
    for ours, theirs in zip(nb.cells, english.cells, strict=True):
        assert ours.cell_type == theirs.cell_type
        if ours.cell_type != "code":
            continue
        if ours.source == theirs.source:
            assert ours.outputs == theirs.outputs
            continue
        # the one kind of change: a concept check takes the edition's language
        assert ours.source == theirs.source[:-1] + ', lang="zh-TW")'
        changed += 1
    assert changed == english_concept_checks(english) > 0
    assert nb.metadata == english.metadata  # widget state, kernel


def english_concept_checks(nb) -> int:
    return sum(
        c.cell_type == "code" and c.source.strip().startswith('concept_check("')
        for c in nb.cells
    )


def test_translated_code_changes_only_concept_checks():
    assert (
        i18n.translated_code('concept_check("2.3")')
        == 'concept_check("2.3", lang="zh-TW")'
    )
    for source in ("x = 1", 'print("concept_check(\\"2.3\\")")', "concept_check(s)"):
        assert i18n.translated_code(source) == source


def test_a_generated_md_page_is_its_translation():
    page = ROOT / "book" / "references.md"
    (unit,) = i18n.page_units(page)
    text, missing = i18n.generate_page(page, {unit: "# 參考文獻"})
    assert missing == [] and text.startswith("# 參考文獻")


def test_taiwan_usage_passes_and_mainland_forms_fail():
    good = "這個函式把資料載入記憶體，預設以批次呼叫演算法，程式碼在網路上。"
    assert i18n.usage_problems(good) == []
    for mainland, taiwan in (
        ("程序", "程式"),
        ("代碼", "程式碼"),
        ("數據", "資料"),
        ("內存", "記憶體"),
        ("默認", "預設"),
        ("網絡", "網路"),
        ("優化", "最佳化"),
        ("調用", "呼叫"),
        ("變量", "變數"),
        ("接口", "介面"),
        ("批量", "批次"),
        ("这个", "這個"),  # Simplified characters
    ):
        (problem,) = i18n.usage_problems(f"我們的{mainland}很好。")
        assert taiwan in problem.split(":")[1], problem


def test_usage_allowlist_and_garbled_terms():
    # 參數 (a model's parameters) is Taiwan's ML usage; s2twp would make it 引數
    text = "模型有 43,648 個參數。"
    assert i18n.usage_problems(text)
    assert i18n.usage_problems(text, allowed={"參數": "a model's parameters"}) == []
    (problem,) = i18n.usage_problems("變壓器模型")
    assert "'Transformer'" in problem
    # the glossary quotes the lesson's garbled term: allowed where the English has it
    quoted = i18n.usage_problems("課文寫「變壓器」", english="the lesson writes 變壓器")
    assert quoted == []


def test_an_entry_is_faulted_for_english_left_in_place_and_for_mainland_usage():
    unit = "The model learns the alignment from the loss alone."
    assert i18n.entry_problems(unit, "模型只從損失中學會對齊。", {}) == []
    assert i18n.entry_problems(unit, unit, {}) == ["no Chinese in the translation"]
    (problem,) = i18n.entry_problems(unit, "模型只從損失中學會對齊的算法。", {})
    assert "Taiwan" in problem
    # a unit that is only code and names needs no Chinese
    assert i18n.entry_problems("`x = 1` and BERT", "`x = 1` and BERT", {}) == []


def test_extract_leaves_a_clean_checkout_clean(tmp_path):
    """Every catalogue is byte for byte what `i18n.py extract` writes for it: a
    translator's first extract shows no change they did not make (the widgets'
    figure views, stored under random ids, come sorted)."""
    for name, (path, wanted) in i18n.catalogues().items():
        catalogue = i18n._po(path)
        i18n.update_catalogue(catalogue, wanted)
        again = tmp_path / f"{name}.po"
        catalogue.save(str(again))
        assert again.read_bytes() == path.read_bytes(), f"{name}: run i18n.py extract"
    nb = nbformat.from_dict(
        {
            "cells": [],
            "metadata": {
                "widgets": {
                    i18n.WIDGET_STATE: {
                        "state": {
                            "b-id": {"state": {"value": '<img src="x" alt="zebra">'}},
                            "a-id": {"state": {"value": '<img src="y" alt="apple">'}},
                        }
                    }
                }
            },
        }
    )
    assert i18n.figure_alts(nb) == ["apple", "zebra"]


@pytest.mark.parametrize(
    ("english", "chinese"),
    [
        ("67 million operations", "約 6,700 萬次運算"),
        ("67 million operations", "67 百萬次運算"),
        ("4.4 billion for attention", "注意力是 44 億次"),
        ("4.4 billion for attention", "注意力是 4.4 十億次"),
        ("0.30 billion", "3 億"),
        ("2.4 million per token", "每個詞元約 240 萬個數"),
        ("224 thousand parameters", "22.4 萬個參數"),
        ("from GPT-3's 175 billion parameters", "從 GPT-3 的 1,750 億個參數"),
        ("22.6M parameters", "2,260 萬個參數"),
        ("pretrained on 14 to 300 million images", "預訓練 1,400 萬到 3 億張影像"),
        ("pretrained on 14–300 million images", "預訓練 14M–300M 張影像"),
        ("34 → 67 million operations", "從 3,400 萬增加到 6,700 萬次"),
        ("from 768 to 1.5 billion parameters", "從 768 到 15 億個參數"),
        ("1 trillion", "1 兆"),
        ("a variance of 1.0 over 64 rows", "64 列的變異數是 1.0"),
        ("256 B/token, 12 MiB", "每個詞元 256 位元組，12 MiB"),  # bytes, not billions
        ("65 M of LLaMA-7B", "LLaMA-7B 的 6,500 萬"),
    ],
)
def test_numbers_with_a_magnitude_are_compared_by_value(english, chinese):
    assert i18n.invariant_problems(english, chinese) == []


@pytest.mark.parametrize(
    ("english", "chinese"),
    [
        ("2.4 million per token", "每個詞元 24 萬個數"),
        ("67 operations", "67 萬次運算"),
        ("4.4 billion", "4.4 億"),
        ("from 768 to 1.5 billion parameters", "從 768 億到 15 億個參數"),
        ("a variance of 1.0", "變異數是 1"),  # plain numbers: the digits as written
        ("65 M parameters", "65 個參數"),
    ],
)
def test_a_magnitude_that_changes_the_value_is_caught(english, chinese):
    problems = i18n.invariant_problems(english, chinese)
    assert len(problems) == 1 and problems[0].startswith("numbers"), problems


def test_a_wrong_magnitude_names_both_forms():
    (problem,) = i18n.invariant_problems("2.4 million per token", "每個詞元 24 萬個數")
    assert "2.4 million = 2,400,000" in problem and "24 萬 = 240,000" in problem
    (problem,) = i18n.invariant_problems("67 operations", "67 萬次運算")
    assert "missing ['67']" in problem and "67 萬 = 670,000" in problem


def test_an_output_template_holds_slots_for_its_numbers():
    text = "| RNN | 4096 steps, 2.5x at T = 256, norm 4e-31, 100% / 22% | L0H2 holds |"
    pattern, values = i18n_outputs.template(text)
    assert pattern == (
        "| RNN | ⟦0⟧ steps, ⟦1⟧x at T = ⟦2⟧, norm ⟦3⟧, ⟦4⟧% / ⟦5⟧% | L0H2 holds |"
    )
    assert values == ["4096", "2.5", "256", "4e-31", "100", "22"]
    assert (
        i18n_outputs.fill("T = ⟦2⟧ 時 ⟦1⟧x；⟦0⟧ 步", values)
        == "T = 256 時 2.5x；4096 步"
    )
    assert i18n_outputs.fill("⟦9⟧", values) is None


def _notebook_with(markdown: str, labels: list[str]):
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("display(Markdown(table))")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data", data={"text/markdown": markdown, "text/plain": "<Md>"}
        ),
        nbformat.v4.new_output(
            "execute_result", data={"text/markdown": "```python\nx = 1\n```"}
        ),
    ]
    nb.cells = [cell]
    state = {
        "m1": {
            "model_name": "DropdownModel",
            "state": {"description": "sampling", "_options_labels": labels, "index": 1},
        },
        "m2": {"model_name": "SelectionSliderModel", "state": {"description": "τ"}},
    }
    nb.metadata["widgets"] = {i18n.WIDGET_STATE: {"state": state}}
    return nb


OUTPUTS = {
    "| Claim | Measured | Verdict |": "| 說法 | 量到的 | 結論 |",
    "| fast | ⟦0⟧x at T = ⟦1⟧ | holds |": "| 快 | T = ⟦1⟧ 時 ⟦0⟧x | 成立 |",
    "sampling": "取樣",
    "temperature ⟦0⟧": "溫度 ⟦0⟧",
    "greedy (temperature ⟦0⟧)": "貪婪（溫度 ⟦0⟧）",
}


def test_prose_outputs_and_widget_labels_are_translated_with_their_numbers():
    table = "\n| Claim | Measured | Verdict |\n|---|---|---|\n"
    table += "| fast | 2.5x at T = 256 | holds |\n"
    nb = _notebook_with(table, ["greedy (temperature 0)", "temperature 0.5"])
    assert i18n.output_units(nb) == [
        "| Claim | Measured | Verdict |",
        "| fast | ⟦0⟧x at T = ⟦1⟧ | holds |",
    ]
    assert i18n.widget_labels(nb) == [
        "greedy (temperature ⟦0⟧)",
        "sampling",
        "temperature ⟦0⟧",
    ]
    assert not i18n.translate_outputs(nb, OUTPUTS)
    assert not i18n.translate_widget_labels(nb, OUTPUTS)
    first, listing = nb.cells[0].outputs
    assert first.data["text/markdown"] == (
        "\n| 說法 | 量到的 | 結論 |\n|---|---|---|\n| 快 | T = 256 時 2.5x | 成立 |\n"
    )
    assert listing.data["text/markdown"] == "```python\nx = 1\n```"  # code stays
    state = nb.metadata["widgets"][i18n.WIDGET_STATE]["state"]
    assert state["m1"]["state"] == {
        "description": "取樣",
        "_options_labels": ["貪婪（溫度 0）", "溫度 0.5"],
        "index": 1,  # the value a link or the browser moves: unchanged
    }
    assert state["m2"]["state"] == {"description": "τ"}  # no word: kept


def test_a_re_executed_number_keeps_the_translation_and_a_new_word_is_missing():
    again = _notebook_with("| fast | 0.3x at T = 4096 | holds |\n", ["temperature 1.5"])
    assert not i18n.translate_outputs(again, OUTPUTS)
    assert not i18n.translate_widget_labels(again, OUTPUTS)
    assert again.cells[0].outputs[0].data["text/markdown"] == (
        "| 快 | T = 4096 時 0.3x | 成立 |\n"
    )
    changed = _notebook_with("| slow | 0.3x at T = 4096 | fails |\n", ["top-k 5"])
    assert i18n.translate_outputs(changed, OUTPUTS) == [
        "| slow | ⟦0⟧x at T = ⟦1⟧ | fails |"
    ]
    assert i18n.translate_widget_labels(changed, OUTPUTS) == ["top-k ⟦0⟧"]
    text = changed.cells[0].outputs[0].data["text/markdown"]
    assert text == "| slow | 0.3x at T = 4096 | fails |\n"  # English, not a wrong cell


def test_an_unknown_output_string_fails_check(tmp_path, monkeypatch, capsys):
    import i18n_catalogue
    import nbformat

    page = tmp_path / "99_new.ipynb"
    nbformat.write(_notebook_with("| a new verdict | 3 of 4 | holds |\n", []), page)
    monkeypatch.setattr(i18n_catalogue, "pages", lambda: [page])
    report = i18n.catalogue_report("outputs")
    assert report["missing"] == 1  # the row; "sampling" is in the catalogue
    assert i18n.check(["outputs"]) == 1
    assert "'missing': 1" in capsys.readouterr().out


def test_the_outputs_catalogue_keeps_english_only_where_it_says_so():
    import polib

    kept = {
        e.msgid
        for e in polib.pofile(str(i18n.OUTPUTS_PO))
        if not e.obsolete and e.msgstr == e.msgid
    }
    # an identifier, and the English sentences the model reads (Chapter 8)
    assert kept == {
        "tanh",
        "every brown quiet child quietly carried the letter during the game.",
        "every student found every house during the meeting.",
    }
    assert i18n.entry_problems("tanh", "tanh", {}, may_keep=True) == []
    assert i18n.entry_problems("test row", "test row", {}) == []  # no 3 words
    long = "every student found every house"
    assert i18n.entry_problems(long, long, {}) == ["no Chinese in the translation"]
