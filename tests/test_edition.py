"""The zh-TW edition as committed: every text translated and clean, every page
generated from the English page and its catalogue, and the edition's settings the
English ones (scripts/i18n.py, zh-TW/, book/_ext/book_html.py).

A changed English paragraph fails here until its translation is updated: run
``python scripts/i18n.py extract``, translate the entries it marks (empty or
fuzzy), then ``python scripts/i18n.py generate``.
"""

from __future__ import annotations

import copy
import gettext
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import book_html  # noqa: E402
import i18n  # noqa: E402
from figures_zh import swap_figures  # noqa: E402

CATALOGUES = list(i18n.catalogues())


@pytest.mark.parametrize("name", CATALOGUES)
def test_every_text_is_translated_and_keeps_its_invariants(name):
    report = i18n.catalogue_report(name)
    problems = report.pop("problems")
    assert report["missing"] == report["fuzzy"] == 0, (
        f"{name}: {report}: run `python scripts/i18n.py extract`, translate the "
        "empty and fuzzy entries of its catalogue"
    )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", i18n.pages(), ids=lambda p: p.stem)
def test_the_edition_page_is_generated_from_the_english_and_the_catalogue(page):
    text, missing = i18n.generate_page(
        page, i18n.translations(i18n.load_catalogue(page))
    )
    assert not missing
    committed = i18n.edition_path(page)
    assert committed.exists(), f"{committed}: run `python scripts/i18n.py generate`"
    assert committed.read_text() == text, (
        f"{committed.relative_to(ROOT)} is stale: run `python scripts/i18n.py generate`"
    )


def test_the_edition_has_no_page_the_english_lacks():
    generated = {i18n.edition_path(page) for page in i18n.pages()}
    present = {
        p
        for p in (i18n.EDITION_DIR / "book").iterdir()
        if p.suffix in {".md", ".ipynb"}
    }
    assert present == generated


def test_the_package_reads_the_concept_catalogue_as_committed():
    with i18n.CONCEPTS_PO.with_suffix(".mo").open("rb") as file:
        compiled = gettext.GNUTranslations(file)
    wanted = i18n.translations(i18n._po(i18n.CONCEPTS_PO))
    assert len(wanted) == len(i18n.concepts_units())
    for msgid, msgstr in wanted.items():
        assert compiled.gettext(msgid) == msgstr, "run `python scripts/i18n.py extract`"


def test_the_search_knows_the_glossarys_terms():
    terms = i18n.search_terms()
    assert {"位置編碼", "多頭注意力", "自注意力", "詞元"} <= set(terms)
    assert all(" " not in t for t in terms)  # one word per line for jieba
    assert i18n.SEARCH_TERMS.read_text().split("\n")[:-1] == terms


def _config(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


# The settings in which the editions differ, and nothing else
EDITION_KEYS = {
    ("title",),
    ("exclude_patterns",),
    ("repository", "path_to_book"),
    ("bibtex_bibfiles",),
    ("sphinx", "local_extensions"),
    ("sphinx", "recursive_update"),
    ("sphinx", "config", "language"),
    ("sphinx", "config", "html_search_options"),
    ("sphinx", "config", "html_theme_options"),
    ("sphinx", "config", "tb_edition"),
}


def _flatten(config, prefix=()):
    for key, value in config.items():
        path = (*prefix, key)
        if isinstance(value, dict) and path not in EDITION_KEYS:
            yield from _flatten(value, path)
        elif path not in EDITION_KEYS:
            yield path, value


def test_the_editions_settings_are_the_english_ones():
    english = dict(_flatten(_config(ROOT / "_config.yml")))
    chinese = dict(_flatten(_config(ROOT / "zh-TW" / "_config.yml")))
    assert chinese == english
    zh = _config(ROOT / "zh-TW" / "_config.yml")
    assert zh["repository"]["path_to_book"] == "zh-TW"
    assert zh["sphinx"]["config"]["language"] == "zh_TW"
    assert zh["sphinx"]["config"]["tb_edition"] == "zh-TW"
    assert zh["bibtex_bibfiles"] == [
        "../" + f for f in _config(ROOT / "_config.yml")["bibtex_bibfiles"]
    ]
    search = ROOT / "zh-TW" / zh["sphinx"]["config"]["html_search_options"]["dict"]
    assert search.resolve() == i18n.SEARCH_TERMS


def test_the_editions_contents_are_the_english_ones():
    def files(toc):
        return [toc["root"]] + [
            c["file"] for part in toc["parts"] for c in part["chapters"]
        ]

    english, chinese = (_config(ROOT / p / "_toc.yml") for p in (".", "zh-TW"))
    assert files(chinese) == files(english)
    assert [p["caption"] for p in chinese["parts"]] == ["章節", "附錄", "參考資料"]


def test_each_page_links_to_itself_in_the_other_edition():
    assert book_html.other_edition("en", "book/02_attention") == (
        "zh-TW",
        "../zh-TW/book/02_attention.html",
        "閱讀本頁的正體中文版",
    )
    assert book_html.other_edition("zh-TW", "book/02_attention") == (
        "en",
        "../../book/02_attention.html",
        "Read this page in English",
    )
    assert book_html.other_edition("en", "index")[1] == "zh-TW/index.html"
    with pytest.raises(ValueError, match="tb_edition"):
        book_html.other_edition("zh-CN", "index")


def test_the_theme_labels_are_replaced_outside_the_article_only():
    page = (
        '<nav aria-label="Main"><a title="Launch on Colab">x</a></nav>'
        '<p class="prev"> 上一页 </p>'
        '<article class="bd-article"><span class="n">Main</span>'
        '<a title="Launch on Colab">in the text</a></article>'
        "<footer><span>Repository</span><span>Main text</span></footer>"
    )
    out = book_html.translate_ui(page, book_html.UI_ZH_TW)
    assert out == (
        '<nav aria-label="主要導覽"><a title="在 Colab 上啟動">x</a></nav>'
        '<p class="prev"> 上一頁 </p>'
        '<article class="bd-article"><span class="n">Main</span>'
        '<a title="Launch on Colab">in the text</a></article>'
        "<footer><span>儲存庫</span><span>Main text</span></footer>"
    )
    # the replacements are Taiwan's usage themselves
    for label in book_html.UI_ZH_TW.values():
        assert not i18n.usage_problems(label), label


# A hidden cell as myst-nb 1.x writes it: its toggle's two prompts in the summary
HIDDEN_CELL = (
    '<article class="bd-article"><details class="admonition hide below-input">\n'
    '<summary aria-label="Toggle hidden content">\n'
    '<p class="collapsed admonition-title">Show code cell {type}</p>\n'
    '<p class="expanded admonition-title">Hide code cell {type}</p>\n'
    "</summary>\n<pre>Show code cell output</pre></details></article>"
)


@pytest.mark.parametrize(
    ("part", "show", "hide"),
    [
        ("source", "顯示程式碼", "隱藏程式碼"),
        ("output", "顯示程式碼輸出", "隱藏程式碼輸出"),
        ("outputs", "顯示程式碼輸出", "隱藏程式碼輸出"),
        ("content", "顯示整個儲存格", "隱藏整個儲存格"),
    ],
)
def test_the_hidden_cell_toggles_are_in_zh_tw_in_the_zh_tw_edition_only(
    part, show, hide
):
    page = HIDDEN_CELL.format(type=part)
    out = book_html.accessible_page(page, "zh-TW")
    assert f'<p class="collapsed admonition-title">{show}</p>' in out
    assert f'<p class="expanded admonition-title">{hide}</p>' in out
    assert "code cell " + part + "</p>" not in out, "no prompt left in English"
    assert "<pre>Show code cell output</pre>" in out, "code and outputs are kept"
    assert "<summary>" in out, "named by its visible text"
    assert book_html.accessible_page(out, "zh-TW") == out, "idempotent"
    english = book_html.accessible_page(page, "en")
    assert f"Show code cell {part}</p>" in english and show not in english
    for label in (show, hide):
        assert not i18n.usage_problems(label), label


@pytest.mark.parametrize(
    "page", [p for p in i18n.pages() if p.suffix == ".ipynb"], ids=lambda p: p.stem
)
def test_the_edition_notebook_runs_the_english_code(page):
    """Code cells and outputs are the English notebook's; the changes: a concept
    check takes the edition's language, and its output is the zh-TW rendering; the
    figures' text alternatives, the prose outputs and the widgets' labels are the
    catalogues', and each figure is its zh-TW rendering."""
    import nbformat

    from transformer_book.concepts import concept_check

    english = nbformat.read(page, as_version=4)
    catalogue = i18n.translations(i18n.load_catalogue(page))
    assert not i18n.translate_alts(english, catalogue), "untranslated alt texts"
    outputs = i18n.translations(i18n._po(i18n.OUTPUTS_PO))
    assert not i18n.translate_outputs(english, outputs), "untranslated outputs"
    assert not i18n.translate_widget_labels(english, outputs), "untranslated labels"
    swap_figures(english)  # the figures as rendered with their zh-TW texts
    chinese = nbformat.read(i18n.edition_path(page), as_version=4)
    assert chinese.metadata == english.metadata
    assert len(chinese.cells) == len(english.cells)
    for ours, theirs in zip(chinese.cells, english.cells, strict=True):
        assert ours.cell_type == theirs.cell_type
        if ours.cell_type == "markdown":
            assert ours.source != theirs.source or not i18n.units(theirs.source)
            continue
        if ours.source == theirs.source:
            assert ours.outputs == theirs.outputs
            continue
        section = i18n._concept_section(theirs.source)
        assert ours.source == f'concept_check("{section}", lang="zh-TW")'
        (html,) = [o.data["text/html"] for o in ours.outputs if "data" in o]
        assert html == concept_check(section, lang="zh-TW").data
        assert "檢查你的理解" in html


def test_the_readmes_link_to_each_other_and_the_chinese_one_is_taiwan_usage():
    english = (ROOT / "README.md").read_text()
    chinese = (ROOT / "README.zh-TW.md").read_text()
    assert "(README.zh-TW.md)" in english and "(README.md)" in chinese
    for command in ("make book", "make test"):
        assert command in chinese
    prose = re.sub(r"```.*?```|`[^`]*`", "", chinese, flags=re.S)
    assert not i18n.usage_problems(prose, allowed=i18n.usage_allowlist())


def test_the_figures_text_alternatives_are_translation_units(tmp_path):
    import matplotlib.pyplot as plt
    import nbformat

    from transformer_book.plot import figure_view

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("show(fig, alt=...)")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"image/png": "iVBOR"},
            metadata={"image/png": {"alt": "loss 0.25 at step 120"}},
        )
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("A paragraph."), cell]
    view = figure_view(plt.figure(), alt='head 3 puts 0.9 on "the"')
    state = {"m1": {"state": {"value": view.value}}, "m2": {"state": {"value": 3}}}
    nb.metadata["widgets"] = {i18n.WIDGET_STATE: {"state": state}}
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, path)
    units = i18n.page_units(path)
    assert units == [
        "A paragraph.",
        "loss 0.25 at step 120",
        'head 3 puts 0.9 on "the"',
    ]
    catalogue = {"loss 0.25 at step 120": "損失在第 120 步為 0.25"}
    missing = i18n.translate_alts(copy.deepcopy(nb), catalogue)
    assert missing == ['head 3 puts 0.9 on "the"']
    catalogue['head 3 puts 0.9 on "the"'] = "頭 3 把 0.9 放在「the」上"
    assert not i18n.translate_alts(nb, catalogue)
    assert cell.outputs[0].metadata["image/png"]["alt"] == "損失在第 120 步為 0.25"
    stored = nb.metadata["widgets"][i18n.WIDGET_STATE]["state"]["m1"]["state"]
    assert 'alt="頭 3 把 0.9 放在「the」上"' in stored["value"]


# The labels that stay English on purpose (outputs.po: msgstr == msgid): an
# identifier, and the sentences Chapter 8's BERT reads
KEPT_LABELS = {
    "tanh",
    "every brown quiet child quietly carried the letter during the game.",
    "every student found every house during the meeting.",
}
_HAN = re.compile(r"[\u4e00-\u9fff]")


def edition_notebooks():
    import nbformat

    for page in i18n.pages():
        if page.suffix == ".ipynb":
            yield page, nbformat.read(i18n.edition_path(page), as_version=4)


def test_the_claims_table_and_every_prose_output_are_chinese():
    rows = {}
    for page, nb in edition_notebooks():
        for data, mime in i18n.prose_outputs(nb):
            for line in data[mime].strip().splitlines():
                if not re.fullmatch(r"\|(?:-+\|)+", line):
                    rows.setdefault(page.stem, []).append(line)
    claims = rows.pop("01_rnn_limits")
    assert len(claims) == 9  # the header and 8 claims
    assert claims[0] == "| 說法（課程或文章） | 本章量到的 | 結論 |"
    for row in claims + [row for found in rows.values() for row in found]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert all(_HAN.search(c) for c in cells), row
    assert "4096 個詞元" in claims[1]  # the numbers are the output's own


def _labels(nb) -> dict[tuple[str, str, int], str]:
    """(model id, key, position) -> label, for every stored widget's description and
    options' labels."""
    state = nb.metadata.get("widgets", {}).get(i18n.WIDGET_STATE, {}).get("state", {})
    found = {}
    for model_id, model in state.items():
        values = model.get("state", {})
        found[model_id, "description", 0] = values.get("description") or ""
        for n, label in enumerate(values.get("_options_labels") or []):
            found[model_id, "_options_labels", n] = label
    return found


def test_every_widget_label_that_is_a_word_is_chinese():
    import nbformat

    seen = set()
    for page, nb in edition_notebooks():
        english = _labels(nbformat.read(page, as_version=4))
        chinese = _labels(nb)
        assert chinese.keys() == english.keys()  # the same widgets and options
        for key, label in english.items():
            if re.search(r"[A-Za-z]{3,}", label):  # a word, not "τ" or "T"
                seen.add(chinese[key])
                assert _HAN.search(chinese[key]) or label in KEPT_LABELS, (
                    page.stem,
                    label,
                    chinese[key],
                )
            else:
                assert chinese[key] == label  # numbers and symbols stay
    for label in ("查詢", "層", "頭", "測試列", "取樣", "溫度 1.5，top-p 0.9"):
        assert label in seen
