"""The figures of the zh-TW edition (issue 42, part 3): the same figure with its
texts from locale/zh_TW/LC_MESSAGES/figures.po, in a Traditional Chinese font."""

from __future__ import annotations

import base64
import io
import re
import sys
import warnings
from pathlib import Path

import matplotlib
import nbformat
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.ft2font import FT2Font  # noqa: E402

from transformer_book import _figure_text as figure_text  # noqa: E402
from transformer_book import plot  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import figures_zh  # noqa: E402

CATALOGUE = {
    "loss": "損失",
    "training step": "訓練步數",
    "Loss by step": "各步的損失",
    "key (attended to)": "鍵（被關注者）",
    "query (attending)": "查詢（關注者）",
    "weight": "權重",
    "layer {0}, head {1}": "第 {0} 層、第 {1} 個頭",
    "chance": "隨機猜測",
    "attention": "注意力",
}


@pytest.fixture
def catalogue(tmp_path, monkeypatch):
    """figures.po holding CATALOGUE, as the package reads it."""
    import polib

    po = polib.POFile(wrapwidth=0)
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for msgid, msgstr in CATALOGUE.items():
        po.append(polib.POEntry(msgid=msgid, msgstr=msgstr))
    path = tmp_path / "figures.po"
    po.save(str(path))
    monkeypatch.setenv("TRANSFORMER_BOOK_FIGURES_PO", str(path))
    monkeypatch.setenv("TRANSFORMER_BOOK_FIGURES_ZH", "1")
    return CATALOGUE


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def _texts(fig) -> list[tuple[str, tuple]]:
    from matplotlib.text import Text

    return [
        (t.get_text(), tuple(t.get_fontproperties().get_family()))
        for t in fig.findobj(Text)
    ]


def _lines_figure():
    ax = plot.plot_lines(
        [1, 2, 3],
        {"LSTM": [3, 2, 1], "attention": [2, 1, 0.5]},
        "training step",
        "loss",
        title="Loss by step",
    )
    ax.axhline(1.5, label="chance")
    ax.legend()
    ax.text(1.5, 2.5, "layer 2, head 0")
    ax.set_xticks([1, 2, 3], ["LSTM", "chance", "3"])
    return ax.figure


def test_template_puts_the_numbers_back():
    assert figure_text.template("layer 2, head 0") == (
        "layer {0}, head {1}",
        ["2", "0"],
    )
    assert figure_text.template("T5 at 1,024") == ("T5 at {0}", ["1,024"])
    found = figure_text.lookup("layer 3, head 1", CATALOGUE)
    assert found == ("第 3 層、第 1 個頭", "layer {0}, head {1}")
    assert figure_text.lookup("no such", CATALOGUE) == (None, "no such")


@pytest.mark.parametrize(
    "text,words",
    [
        ("loss", True),
        ("Re λ", True),
        ("LSTM", False),
        ("GPT-2", False),
        ("d_model", False),
        ("T = 4", False),
        ("0.25", False),
        ("$d_k$", False),
        ("餘額", False),
    ],
)
def test_numbers_names_and_tokens_are_not_words(text, words):
    assert figure_text.is_translatable(text) is words


def test_swapping_restores_the_english_exactly(catalogue):
    fig = _lines_figure()
    before, texts = _png(fig), _texts(fig)
    with figure_text.swapped_texts(fig, catalogue) as swap:
        during = _png(fig)
    assert _png(fig) == before
    assert _texts(fig) == texts
    assert during != before
    assert swap.used["loss"] == "損失"
    assert swap.used["layer {0}, head {1}"] == "第 {0} 層、第 {1} 個頭"
    assert swap.used["chance"] == "隨機猜測"  # a legend text and a categorical tick
    plt.close(fig)


def test_swapping_leaves_numbers_model_names_and_data_labels(catalogue):
    ax = plot.attention_heatmap(
        [[0.5, 0.5], [0.2, 0.8]], ["loss", "weight"], ["attention", "chance"]
    )
    fig = ax.figure
    with figure_text.swapped_texts(fig, catalogue) as swap:
        fig.canvas.draw()
        ticks = [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
        cells = sorted(t.get_text() for t in ax.texts)
        labels = ax.get_xlabel(), ax.get_ylabel()
    assert ticks == ["attention", "chance", "loss", "weight"]  # tokens are data
    assert cells == ["0.20", "0.50", "0.50", "0.80"]
    assert labels == ("鍵（被關注者）", "查詢（關注者）")
    assert swap.missing == []
    plt.close(fig)

    fig = _lines_figure()
    with figure_text.swapped_texts(fig, catalogue) as swap:
        fig.canvas.draw()
        ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert ticks == ["LSTM", "隨機猜測", "3"]
    assert legend == ["LSTM", "注意力", "隨機猜測"]
    plt.close(fig)


def test_bar_categories_are_translated_and_restored(catalogue):
    fig, ax = plt.subplots()
    ax.bar(["attention", "LSTM", "chance"], [1, 2, 3])
    before = _png(fig)
    with figure_text.swapped_texts(fig, catalogue):
        fig.canvas.draw()
        ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["注意力", "LSTM", "隨機猜測"]
    assert _png(fig) == before
    plt.close(fig)


def test_a_failing_rendering_leaves_the_english_figure(catalogue):
    fig = _lines_figure()
    before = _png(fig)

    def broken(fig):
        raise RuntimeError("no renderer")

    record = figure_text.zh_rendering(fig, broken)
    if record is not None:  # None where the TC font is not installed
        assert "image/png" not in record
        assert record["missing"][-1] == "(error) RuntimeError: no renderer"
    assert _png(fig) == before
    plt.close(fig)


def test_nothing_is_rendered_unless_make_execute_asks(catalogue, monkeypatch):
    """A reader's run, Colab and the stages that re-execute the chapters draw the
    English figure alone: only TRANSFORMER_BOOK_FIGURES_ZH=1 (scripts/execute.py,
    when it writes the notebooks) renders the zh-TW figure."""
    fig = _lines_figure()
    for value in (None, "0", "yes"):
        if value is None:
            monkeypatch.delenv("TRANSFORMER_BOOK_FIGURES_ZH")
        else:
            monkeypatch.setenv("TRANSFORMER_BOOK_FIGURES_ZH", value)
        assert figure_text.zh_rendering(fig, _png) is None, value
    plt.close(fig)


def test_a_lacking_string_is_reported_by_its_template(catalogue):
    fig, ax = plt.subplots()
    ax.set_title("step 40 of 100")
    with figure_text.swapped_texts(fig, catalogue) as swap:
        pass
    assert swap.missing == ["step {0} of {1}"]
    assert ax.get_title() == "step 40 of 100"
    plt.close(fig)


needs_tc = pytest.mark.skipif(
    figure_text.tc_font_path() is None,
    reason="Noto Sans CJK TC is not installed (Debian's fonts-noto-cjk; .ci/run "
    "installs it)",
)


@needs_tc
def test_the_traditional_chinese_face_is_the_one_used(catalogue):
    fig = _lines_figure()
    record = figure_text.zh_rendering(fig, _png)
    assert record["texts"]["loss"] == "損失" and record["image/png"] != _png(fig)
    with figure_text.swapped_texts(fig, catalogue):
        props = fig.axes[0].xaxis.label.get_fontproperties()
        assert figure_text.TC_FONT in props.get_family()
        assert not any("SC" in f or "JP" in f for f in props.get_family())
        tc = props.copy()
        tc.set_family(figure_text.TC_FONT)
        found = font_manager.findfont(tc, fallback_to_default=False)
    path, index = (
        (found.path, found.face_index) if hasattr(found, "path") else (found, 0)
    )
    assert FT2Font(str(path), face_index=index).family_name == figure_text.TC_FONT
    plt.close(fig)


@needs_tc
def test_every_translation_renders_with_no_missing_glyph():
    """Every msgstr of figures.po drawn in a figure: matplotlib warns of a glyph no
    font of the family has."""
    translated = figures_zh.translations()
    assert translated, "figures.po has no translation"
    fig, ax = plt.subplots(figsize=(2, 2), dpi=10)  # glyphs, not pixels, matter
    for i, msgstr in enumerate(translated.values()):
        ax.text(0, i, msgstr)  # math included: mathtext logs its missing glyphs
    catalogue = {text: text for text in translated.values()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with figure_text._MathGlyphs() as math:
            with figure_text.swapped_texts(fig, catalogue):
                fig.canvas.draw()
    messages = [str(w.message) for w in caught] + math.messages
    missing = [m for m in messages if "missing from font" in m or "have a glyph" in m]
    assert missing == []
    plt.close(fig)


@needs_tc
def test_chinese_around_math_has_its_glyphs(catalogue, tmp_path, monkeypatch):
    import polib

    po = polib.pofile(str(tmp_path / "figures.po"))
    po.append(polib.POEntry(msgid="Scores grow with $d_k$", msgstr="分數隨 $d_k$ 變大"))
    po.save()
    fig, ax = plt.subplots()
    ax.set_title("Scores grow with $d_k$")
    record = figure_text.zh_rendering(fig, _png)
    assert record["texts"] == {"Scores grow with $d_k$": "分數隨 $d_k$ 變大"}
    assert record["missing"] == []
    assert ax.get_title() == "Scores grow with $d_k$"
    plt.close(fig)

    fig, ax = plt.subplots()
    ax.set_title("分數 $d_k$")  # what the check reports when a glyph is missing
    with figure_text._MathGlyphs() as math:
        _png(fig)
    assert any("have a glyph" in m for m in math.messages)
    plt.close(fig)


@needs_tc
def test_linked_views_carry_their_zh_renderings(catalogue):
    import ipywidgets as widgets

    control = widgets.Dropdown(options=[1, 2])

    def render(layer):
        fig, ax = plt.subplots(figsize=(2, 2))
        ax.set_title(f"layer {layer}, head 0")
        return plot.figure_view(fig, alt=f"layer {layer}")

    box = plot.linked_views([control], render)
    data, metadata = box._repr_mimebundle_()
    assert data["text/plain"].startswith("VBox(")
    views = metadata[figure_text.VIEWS_KEY]
    assert len(views) == 2
    assert {v["texts"]["layer {0}, head {1}"] for v in views.values()} == {
        "第 {0} 層、第 {1} 個頭"
    }
    # generate swaps each into its view's widget state
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {
        figures_zh.WIDGET_STATE: {
            "state": {
                model_id: {"state": {"value": '<img src="data:image/png;base64,EN">'}}
                for model_id in views
            }
        }
    }
    state = nb.metadata["widgets"][figures_zh.WIDGET_STATE]["state"]
    cell = nbformat.v4.new_code_cell()
    cell.outputs = [
        nbformat.v4.new_output("display_data", data=data, metadata=dict(metadata))
    ]
    nb.cells = [cell]
    assert figures_zh.swap_figures(nb) == 2
    for model_id, view in views.items():
        assert view["image/png"] in state[model_id]["state"]["value"]
    assert figures_zh.VIEWS_KEY not in cell.outputs[0].metadata


def test_swap_figures_puts_the_zh_png_in_place():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell()
    record = {"image/png": "WkgK", "texts": {"loss": "損失"}, "missing": []}
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"image/png": "RU4K", "text/plain": "<Figure>"},
            metadata={"image/png": {"alt": "a"}, figures_zh.META_KEY: record},
        )
    ]
    nb.cells = [cell]
    assert figures_zh.problems(nb, {"loss": "損失"}) == []
    assert "old translation" in figures_zh.problems(nb, {"loss": "損耗"})[0]
    assert figures_zh.swap_figures(nb) == 1
    assert cell.outputs[0].data["image/png"] == "WkgK"
    assert cell.outputs[0].metadata == {"image/png": {"alt": "a"}}


# -- the committed chapters (after their execution) ------------------------------

CHAPTERS = figures_zh.chapters()


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_figure_with_text_has_a_current_zh_rendering(path):
    nb = nbformat.read(path, as_version=4)
    renderings = dict(figures_zh.renderings(nb))
    english = dict(figures_zh.english_figures(nb))
    shown = [w for w in english if " view " not in w]
    lacking = [w for w in shown if w not in renderings]
    assert not lacking, (
        f"{path.name}: figures with no zh-TW rendering at {lacking[:5]}: re-execute "
        "the chapter where Noto Sans CJK TC and figures.po are (make execute)"
    )
    assert figures_zh.problems(nb, figures_zh.translations(), path.name) == []
    for where, record in renderings.items():
        if record.get("texts"):
            assert record.get("image/png"), f"{path.name} {where}: no zh-TW image"
            zh = base64.b64decode(record["image/png"])
            assert zh != base64.b64decode(english[where]), f"{where}: same as English"


def test_the_figure_catalogue_is_complete():
    import polib

    entries = [e for e in polib.pofile(str(figures_zh.FIGURES_PO)) if not e.obsolete]
    assert entries, "figures.po is empty"
    empty = [e.msgid for e in entries if not e.msgstr or "fuzzy" in e.flags]
    assert empty == [], f"figures.po: untranslated {empty[:10]}"
    for e in entries:  # the numbers of a template all go back in
        fields = sorted(re.findall(r"\{\d+\}", e.msgid))
        assert sorted(re.findall(r"\{\d+\}", e.msgstr)) == fields, e.msgid


def test_the_figure_texts_use_the_glossarys_terms():
    """figures.po's msgstrs are part of the zh-TW edition: no rejected variant."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_terms import rules, violations

    text = "\n".join(figures_zh.translations().values())
    found = [(r.variant, r.term, sentence) for r, sentence in violations(text, rules())]
    assert found == []


@needs_tc
def test_the_rendering_time_is_reported_for_execute(catalogue, tmp_path, monkeypatch):
    """scripts/execute.py keeps the zh-TW rendering out of a chapter's time."""
    seconds = tmp_path / "seconds"
    monkeypatch.setenv("TRANSFORMER_BOOK_FIGURES_ZH_SECONDS", str(seconds))
    fig = _lines_figure()
    figure_text.zh_rendering(fig, _png)
    written = float(seconds.read_text())  # the process's total, to the millisecond
    assert 0 < written == pytest.approx(figure_text.rendering_seconds, abs=5e-4)
    plt.close(fig)
