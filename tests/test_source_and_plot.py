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


def test_plot_lines_draws_one_line_per_series():
    ax = plot.plot_lines(
        [1, 2, 3], {"a": [1, 2, 3], "b": [3, 2, 1]}, "x", "y", logy=True
    )
    assert len(ax.get_lines()) == 2 and ax.get_yscale() == "log"
    assert ax.get_legend() is not None
    plt.close("all")
    with pytest.raises(ValueError, match="shape"):
        plot.plot_lines([1, 2], {"a": [1, 2, 3]}, "x", "y")
