"""The accessibility fixes that do not need a browser (issue 29): the language of
every part of a page, the themes' HTML fixed for axe-core's WCAG 2.1 rules, the
style's colour-blind-safe cycle, and figures that carry their text alternative.
The browser test (tests/test_book_html.py) checks the built pages themselves."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib as mpl  # noqa: E402
import pytest  # noqa: E402

from transformer_book import plot  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "book" / "_ext"))
from book_html import accessible_page, mark_languages  # noqa: E402

ZH = 'lang="zh-Hant-TW"'


def test_chinese_runs_in_an_english_page_are_marked_chinese():
    page = (
        '<html lang="en"><head><title>注意力</title></head><body>'
        "<p>attention (注意力機制) is <em>the core</em>: 「從 GPT-3 的 175B 參數」</p>"
        '<pre><span class="s2">"銀行"</span></pre>'
        '<span class="math">\\(\\text{中}\\)</span>'
        '<script>var s = "<b>中</b>";</script>'
        '<a lang="zh-TW">閱讀本頁</a></body></html>'
    )
    out = mark_languages(page, "en")
    assert f"(<span {ZH}>注意力機制</span>)" in out
    assert f"<span {ZH}>「從 GPT-3 的 175B 參數」</span>" in out, (
        "one run, Latin inside"
    )
    assert f'"<span {ZH}>銀行</span>"' in out, "a Chinese string in code is Chinese"
    assert "<title>注意力</title>" in out, "the head is left alone"
    assert "\\(\\text{中}\\)" in out, "TeX source is left alone"
    assert 'var s = "<b>中</b>";' in out, "a script is copied as it is"
    assert '<a lang="zh-TW">閱讀本頁</a>' in out, "already marked"
    assert mark_languages(out, "en") == out, "idempotent"


def test_english_text_in_a_zh_tw_page_is_marked_english():
    page = (
        '<html lang="zh-TW"><body><p>注意力機制（attention mechanism）與 GPT、'
        "Transformer 及 softmax</p><pre>for token in tokens</pre></body></html>"
    )
    out = mark_languages(page, "zh-TW")
    assert '（<span lang="en">attention mechanism</span>）' in out
    assert '<span lang="en">softmax</span>' in out
    assert '<span lang="en">GPT</span>' not in out, "a name is not English text"
    assert '<span lang="en">Transformer</span>' not in out
    assert "<pre>for token in tokens</pre>" in out, "code is not English prose"


def test_a_marked_run_never_splits_a_character_reference():
    """``Add &amp; Norm`` once showed as "Add &amp; Norm": the English run started
    inside the reference (``&<span lang="en">amp; Norm</span>``)."""
    page = (
        '<html lang="zh-TW"><body><p>5.3 Add &amp; Norm：殘差、0.5 &lt; 0.75、'
        "T5 的 &lt;extra_id_k&gt;、it &quot;the article&quot;</p></body></html>"
    )
    out = mark_languages(page, "zh-TW")
    assert "Add &amp; Norm" in out and "0.5 &lt; 0.75" in out
    assert '&quot;<span lang="en">the article</span>&quot;' in out
    assert not re.search(r"&<span|&[a-z]*<", out), out
    english = mark_languages("<p>an &amp; 注意力&amp;機制 it&#8217;s</p>", "en")
    assert f"&amp; <span {ZH}>注意力</span>&amp;<span {ZH}>機制</span>" in english


def test_an_unknown_edition_is_refused_by_name():
    with pytest.raises(ValueError, match="edition"):
        mark_languages("<p>x</p>", "fr")


def test_the_themes_html_meets_axe_cores_rules():
    page = (
        '<html lang="en"><body>'
        '<button class="btn search-button-field search-button__button pst-js-only" '
        'title="Search" aria-label="Search" data-bs-toggle="tooltip">'
        '<span class="search-button__default-text">Search</span></button>'
        '<i class="theme-switch fa-solid fa-sun fa-lg" data-mode="light" '
        'title="Light"></i>'
        '<summary aria-label="Toggle hidden content">Show code cell source</summary>'
        '<div role="list" class="citation-list">'
        '<div class="citation" id="id1" role="doc-biblioentry">x</div></div>'
        "</body></html>"
    )
    out = accessible_page(page, "en")
    assert 'aria-label="Search"' not in out, "named by its visible text"
    assert 'title="Light"' not in out and 'aria-hidden="true"' in out
    assert "<summary>Show code cell source</summary>" in out
    assert 'class="citation" role="listitem" id="id1"' in out
    assert "doc-biblioentry" not in out
    assert accessible_page(out, "en") == out, "idempotent"


def test_the_styles_colour_cycle_is_the_okabe_ito_palette():
    plot.use_book_style()
    colors = [c.lower() for c in mpl.rcParams["axes.prop_cycle"].by_key()["color"]]
    okabe_ito = {c.lower() for c in plot.OKABE_ITO.values()}
    assert set(colors) <= okabe_ito and len(set(colors)) == len(colors)
    styles = mpl.rcParams["axes.prop_cycle"].by_key()["linestyle"]
    # two series next to each other differ in line style too, not in colour only
    assert all(a != b for a, b in zip(styles, styles[1:], strict=False))


def test_a_figures_alt_text_carries_the_numbers_it_was_given():
    import matplotlib.pyplot as plt

    steps, loss = 120, 0.25
    fig, ax = plt.subplots()
    ax.plot([0, steps], [3.5, loss])
    view = plot.figure_view(
        fig, alt=f"the loss falls from 3.5 to {loss} by step {steps}", dpi=30
    )
    assert plot._view_alt(view) == "the loss falls from 3.5 to 0.25 by step 120"
