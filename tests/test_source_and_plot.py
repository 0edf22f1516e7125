import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib import font_manager  # noqa: E402

from transformer_book import plot  # noqa: E402
from transformer_book.attention import causal_mask  # noqa: E402
from transformer_book.source import show_source, source_of  # noqa: E402


def test_source_of_returns_the_real_code():
    text = source_of(causal_mask)
    assert text.startswith("def causal_mask(")
    assert "tril()" in text
    shown = show_source(causal_mask)
    assert shown._repr_markdown_().startswith("```python\ndef causal_mask(")
    assert repr(shown) == text  # what nbval compares: the code itself
    with pytest.raises(ValueError):
        source_of(len)


def test_cjk_font_is_registered_and_covers_the_seed_sentence():
    plot.use_book_style()
    assert plot.CJK_FONT in matplotlib.rcParams["font.sans-serif"]
    path = font_manager.findfont(
        font_manager.FontProperties(family=plot.CJK_FONT), fallback_to_default=False
    )
    font = matplotlib.ft2font.FT2Font(path)
    charmap = font.get_charmap()
    assert all(ord(c) in charmap for c in "銀行帳戶裡的餘額不足我愛你")


def test_chinese_labels_render_without_missing_glyphs():
    import warnings

    plot.use_book_style()
    fig, ax = plt.subplots()
    ax.set_title("銀行帳戶裡的餘額不足 attention")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" is a warning
        fig.canvas.draw()
    plt.close(fig)


def test_attention_heatmap_labels_both_axes():
    weights = torch.softmax(torch.randn(3, 4), -1)
    ax = plot.attention_heatmap(
        weights, ["a", "b", "c"], ["w", "x", "y", "z"], title="t"
    )
    assert [t.get_text() for t in ax.get_xticklabels()] == ["w", "x", "y", "z"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert len(ax.texts) == 12  # annotated
    plt.close("all")
    with pytest.raises(ValueError, match="labels"):
        plot.attention_heatmap(weights, ["a"], None)
    with pytest.raises(ValueError, match="matrix"):
        plot.attention_heatmap(torch.ones(2, 2, 2))


def test_head_score_maps_draws_one_readable_panel_per_score():
    scores = {"previous": torch.zeros(2, 3), "[CLS]": torch.eye(2, 3)}
    fig, alt = plot.head_score_maps(scores, title="weight on {}")
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == [
        "weight on previous",
        "weight on [CLS]",
    ]
    assert all(len(ax.texts) == 6 for ax in panels)  # each head's score written
    assert fig.get_size_inches()[1] >= 0.33 * 2  # a row of cells per layer
    assert "weight on [CLS]: highest 1.00 at L0H0, layer means 0.33, 0.33" in alt
    plt.close("all")
    with pytest.raises(ValueError, match="one shape"):
        plot.head_score_maps({"a": torch.zeros(2, 3), "b": torch.zeros(3, 2)})
    with pytest.raises(TypeError, match="scores"):
        plot.head_score_maps([torch.zeros(2, 3)])
    with pytest.raises(ValueError, match="columns"):
        plot.head_score_maps(scores, columns=0)


def test_plot_lines_draws_one_line_per_series():
    ax = plot.plot_lines(
        [1, 2, 3], {"a": [1, 2, 3], "b": [3, 2, 1]}, "x", "y", logy=True
    )
    assert len(ax.get_lines()) == 2 and ax.get_yscale() == "log"
    assert ax.get_legend() is not None
    plt.close("all")
    with pytest.raises(ValueError, match="shape"):
        plot.plot_lines([1, 2], {"a": [1, 2, 3]}, "x", "y")


def _line_style(line):
    return (
        matplotlib.colors.to_hex(line.get_color()),
        line.get_linestyle(),
        line.get_marker(),
    )


def test_a_model_has_one_style_in_every_figure():
    # The same model in two figures with different companions (the Chapter 1 defect:
    # attention red in one plot, green in the next)
    first = plot.plot_lines(
        [1, 2], {"vanilla RNN": [1, 2], "attention": [2, 1]}, "x", "y"
    )
    plt.close("all")
    second = plot.plot_lines(
        [1, 2],
        {"LSTM": [1, 2], "LSTM, forget bias 3": [2, 2], "self-attention": [2, 1]},
        "x",
        "y",
    )
    plt.close("all")
    attention = _line_style(first.get_lines()[1])
    assert _line_style(second.get_lines()[2]) == attention
    assert attention == (
        plot.MODEL_STYLES["attention"]["color"].lower(),
        plot.MODEL_STYLES["attention"]["linestyle"],
        plot.MODEL_STYLES["attention"]["marker"],
    )
    # "LSTM, forget bias 3" is its own model, not the LSTM
    assert _line_style(second.get_lines()[0]) != _line_style(second.get_lines()[1])
    # every model differs from every other in colour, and in line style or marker
    styles = list(plot.MODEL_STYLES.values())
    assert len({s["color"] for s in styles}) == len(styles)
    assert len({(s["linestyle"], s["marker"]) for s in styles}) == len(styles)


def test_series_style_matches_names_and_variants():
    bert = plot.series_style("BERT")
    assert plot.series_style("BERT (masked LM)") == bert
    assert plot.series_style("bert, 4 layers") == bert
    assert plot.series_style("RNN") == plot.series_style("nn.RNN")
    fused = plot.series_style("attention (fused kernel)")
    assert fused == plot.MODEL_STYLES["attention"]
    # a name inside another word is not that model
    assert plot.series_style("GPTQ") != plot.MODEL_STYLES["GPT"]
    assert plot.series_style("BERTology") != bert
    # other labels follow the colour-blind-safe cycle by index
    assert plot.series_style("scaled", 0)["color"] == plot.OKABE_ITO["blue"]
    assert plot.series_style("scaled", 1) != plot.series_style("scaled", 0)
    assert plot.series_style("x", 7) == plot.series_style("x", 0)
    # the returned dict is a copy: changing it changes no later figure
    bert["color"] = "red"
    assert plot.series_style("BERT") != bert
    with pytest.raises(TypeError, match="label"):
        plot.series_style(3)
    with pytest.raises(TypeError, match="index"):
        plot.series_style("a", 1.0)
    with pytest.raises(ValueError, match="index"):
        plot.series_style("a", -1)


def test_plot_lines_markers_and_distinct_series():
    ax = plot.plot_lines([1, 2], {"a": [1, 2], "b": [2, 1]}, "x", "y")
    a, b = ax.get_lines()
    assert a.get_marker() == "o" and b.get_marker() == "s"
    assert _line_style(a) != _line_style(b)
    plt.close("all")
    ax = plot.plot_lines([1, 2], {"a": [1, 2]}, "x", "y", marker=None)
    assert ax.get_lines()[0].get_marker() in ("", "None", None)
    plt.close("all")
    # two labels of one model still look different (line style)
    ax = plot.plot_lines(
        [1, 2], {"attention (readable)": [1, 2], "attention (fused)": [2, 1]}, "x", "y"
    )
    first, second = ax.get_lines()
    assert first.get_color() == second.get_color()
    assert first.get_linestyle() != second.get_linestyle()
    plt.close("all")
    with pytest.raises(TypeError, match="marker"):
        plot.plot_lines([1, 2], {"a": [1, 2]}, "x", "y", marker=3)
    with pytest.raises(TypeError, match="labels"):
        plot.plot_lines([1, 2], {1: [1, 2]}, "x", "y")


def test_figure_view_keeps_the_axis_labels():
    import io

    from PIL import Image

    def view_height(xlabel):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot([0, 1], [0, 1])
        ax.set_xlabel(xlabel)
        fig.set_dpi(90)
        fig.canvas.draw()
        below = ax.xaxis.label.get_window_extent().y0 < 0
        png = plot._view_png(plot.figure_view(fig, alt=xlabel))
        return Image.open(io.BytesIO(png)).size[1], below

    with_label, cut_off = view_height("a label that a plain savefig cuts off")
    without_label, _ = view_height("")
    assert cut_off  # the label lies below the figure's edge
    # the image grows by the label's height: the label is in it
    assert with_label >= without_label + 8


def test_show_puts_the_alt_text_in_the_outputs_metadata(monkeypatch):
    shown = []
    monkeypatch.setattr(
        "IPython.display.display",
        lambda obj, metadata=None: shown.append((obj, metadata)),
    )
    fig, ax = plt.subplots()
    ax.plot([0, 1], [3.5, 0.25])
    plot.show(fig, alt="the loss falls from 3.5 to 0.25")
    assert shown == [(fig, {"image/png": {"alt": "the loss falls from 3.5 to 0.25"}})]
    assert not plt.fignum_exists(fig.number), "the figure is closed: drawn once"


@pytest.mark.parametrize(
    ("fig", "alt", "match"),
    [
        (None, 3, "alt must be a str"),
        ("figure", "a", "fig must be"),
        (None, None, "alt"),
    ],
)
def test_show_bad_arguments_are_named(fig, alt, match):
    fig = plt.figure() if fig is None else fig
    try:
        with pytest.raises(TypeError, match=match):
            plot.show(fig, alt)
    finally:
        plt.close("all")
