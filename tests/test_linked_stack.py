"""plot.linked_stack and linked_views: controls linked to precomputed views."""

from __future__ import annotations

import os
import sys

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pytest

from transformer_book.plot import (
    LINKED_CLASS,
    _view_alt,
    _view_png,
    figure_view,
    linked_stack,
    linked_views,
)


def views(n):
    return [widgets.HTML(f"view {i}") for i in range(n)]


def test_ipywidgets_8_links_the_control_to_a_stack_in_the_browser(monkeypatch):
    made = []
    real_jslink = widgets.jslink
    monkeypatch.setattr(
        widgets, "jslink", lambda a, b: made.append(real_jslink(a, b)) or made[-1]
    )
    control = widgets.Dropdown(options=["a", "b", "c"], index=1)
    children = views(3)
    observers = len(control._trait_notifiers["index"]["change"])
    box = linked_stack(control, children)
    assert isinstance(box, widgets.VBox) and box.children[0] is control
    stack = box.children[1]
    assert isinstance(stack, widgets.Stack)
    assert list(stack.children) == children and stack.selected_index == 1
    assert len(made) == 1, "a jslink, so that no kernel is needed"
    assert made[0].source == (control, "index")
    assert made[0].target == (stack, "selected_index")
    # No kernel callback: the browser alone switches the views.
    assert len(control._trait_notifiers["index"]["change"]) == observers


def test_without_stack_a_kernel_callback_swaps_the_view(monkeypatch):
    monkeypatch.delattr(widgets, "Stack")  # ipywidgets 7.7.1, as in Colab
    control = widgets.Dropdown(options=["a", "b", "c"])
    children = views(3)
    box = linked_stack(control, children)
    shown = box.children[1]
    assert shown.children == (children[0],)
    control.index = 2
    assert shown.children == (children[2],)
    control.index = 1
    assert shown.children == (children[1],)


def test_works_with_a_selection_slider():
    control = widgets.SelectionSlider(options=["low", "high"])
    box = linked_stack(control, views(2))
    assert box.children[1].selected_index == 0


@pytest.mark.parametrize(
    ("control", "children", "error", "match"),
    [
        (widgets.Dropdown(options=["a", "b"]), views(3), ValueError, "2 options"),
        (widgets.Dropdown(options=[]), [], ValueError, "at least one"),
        (widgets.IntSlider(), views(2), TypeError, "selection widget"),
    ],
)
def test_bad_arguments_are_named(control, children, error, match):
    with pytest.raises(error, match=match):
        linked_stack(control, children)


# ------------------------------------------------ linked_views: several controls


def controls_ab():
    return [
        widgets.Dropdown(options=["a", "b"]),
        widgets.SelectionSlider(options=[("one", 1), ("two", 2), ("three", 3)]),
    ]


def label(*values):
    return widgets.HTML(" ".join(map(str, values)))


def shown(box):
    """What a reader sees: follow the selected child down to the view."""
    view = box.children[-1]
    while not isinstance(view, widgets.HTML):
        view = (
            view.children[view.selected_index]
            if hasattr(view, "selected_index")
            else view.children[0]
        )
    return view.value


def test_linked_views_render_every_combination_once_in_order():
    calls = []
    box = linked_views(controls_ab(), lambda *v: calls.append(v) or label(*v))
    assert calls == [(x, n) for x in "ab" for n in (1, 2, 3)]  # option values
    assert box.children[:2] == tuple(box.children[:2]) and LINKED_CLASS in (
        box._dom_classes
    )


def test_linked_views_follow_every_control_through_jslinks(monkeypatch):
    made = []
    real_jslink = widgets.jslink
    monkeypatch.setattr(
        widgets, "jslink", lambda a, b: made.append(real_jslink(a, b)) or made[-1]
    )
    first, second = controls_ab()
    box = linked_views([first, second], label)
    outer = box.children[2]
    assert isinstance(outer, widgets.Stack) and len(outer.children) == 2
    assert all(len(inner.children) == 3 for inner in outer.children)
    # one link for the outer stack, one per inner stack, all from a control's index
    assert len(made) == 3
    assert [m.source[0] for m in made].count(second) == 2
    assert all(m.source[1] == "index" for m in made)
    assert all(m.target[1] == "selected_index" for m in made)
    # The links mirror what the browser does; here, set the stacks by hand as it
    # would and check that the view shown is the chosen combination.
    for i, j in [(0, 0), (1, 2), (0, 1)]:
        outer.selected_index = i
        for inner in outer.children:
            inner.selected_index = j
        assert shown(box) == f"{'ab'[i]} {j + 1}"


def test_linked_views_without_stack_swap_views_in_the_kernel(monkeypatch):
    monkeypatch.delattr(widgets, "Stack")  # ipywidgets 7.7.1, as in Colab
    first, second = controls_ab()
    box = linked_views([first, second], label)
    assert shown(box) == "a 1"
    second.index = 2
    assert shown(box) == "a 3"
    first.index = 1
    assert shown(box) == "b 3"
    second.index = 0
    assert shown(box) == "b 1"


@pytest.mark.parametrize(
    ("controls", "render", "error", "match"),
    [
        ([], label, ValueError, "at least one control"),
        ([widgets.Dropdown(options=["a"])], "draw", TypeError, "render must be"),
        ([widgets.IntSlider()], label, TypeError, "selection widget"),
    ],
)
def test_linked_views_bad_arguments_are_named(controls, render, error, match):
    with pytest.raises(error, match=match):
        linked_views(controls, render)


def test_figure_view_is_a_png_of_the_figure_with_its_alt_and_closes_it():
    def draw():
        fig, ax = plt.subplots(figsize=(2, 1))
        ax.plot([0, 1], [1, 0])
        return fig

    fig = draw()
    view = figure_view(fig, alt='loss falls from 1.0 to 0.0 "fast" <&>', dpi=50)
    assert isinstance(view, widgets.HTML)
    png = _view_png(view)
    assert png.startswith(b"\x89PNG")
    assert _view_alt(view) == 'loss falls from 1.0 to 0.0 "fast" <&>'
    assert '"fast"' not in view.value, "the alt text is escaped inside the attribute"
    assert not plt.fignum_exists(fig.number), "the figure is closed"
    assert _view_png(figure_view(draw(), alt="", dpi=50)) == png, "same bytes"
    assert len(_view_png(figure_view(draw(), alt="", dpi=100))) > len(png)


@pytest.mark.parametrize(
    ("fig", "alt", "dpi", "error", "match"),
    [
        ("figure", "a", 72, TypeError, "fig must be"),
        (None, "a", 0, ValueError, "dpi must be"),
        (None, "a", 7.5, ValueError, "dpi must be"),
        (None, "a", True, ValueError, "dpi must be"),
        (None, None, 72, TypeError, "alt must be a str"),
        (None, 3.5, 72, TypeError, "alt must be a str"),
    ],
)
def test_figure_view_bad_arguments_are_named(fig, alt, dpi, error, match):
    if fig is None:
        fig = plt.figure()
    try:
        with pytest.raises(error, match=match):
            figure_view(fig, alt=alt, dpi=dpi)
    finally:
        plt.close("all")


# ------------------------------------- linked_views: figure views drawn side by side


def leaves(box):
    """Every view of a linked box, in the order of the combinations."""
    found, stack = [], [box.children[-1]]
    while stack:
        widget = stack.pop()
        if isinstance(widget, widgets.HTML):
            found.append(widget)
        else:
            stack.extend(reversed(widget.children))
    return found


def figure_of(x, n):
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, n], [0, n * n])
    ax.set_title(f"{x} {n}")
    return figure_view(fig, alt=f"{x}: {n} squared")


def test_figure_views_drawn_side_by_side_equal_them_drawn_in_turn(monkeypatch):
    import transformer_book.plot as plot

    forked = []

    def spy(*args, **kwargs):
        forked.append(plot_map_forked(*args, **kwargs))
        return forked[-1]

    plot_map_forked = plot.map_forked
    monkeypatch.setattr(plot, "map_forked", spy)
    side_by_side = [
        view.value for view in leaves(linked_views(controls_ab(), figure_of))
    ]
    monkeypatch.setattr(plot, "map_forked", lambda *args, **kwargs: None)
    in_turn = [view.value for view in leaves(linked_views(controls_ab(), figure_of))]
    assert side_by_side == in_turn  # the same PNGs, in the same order
    combinations = [(x, n) for x in "ab" for n in (1, 2, 3)]
    for (x, n), value in zip(combinations, in_turn, strict=True):
        assert f'alt="{x}: {n} squared"' in value
    if sys.platform.startswith("linux") and (os.cpu_count() or 1) > 1:
        assert forked[0] is not None, "drawn in forked workers"
    assert not plt.get_fignums()  # every figure closed


def test_renders_that_make_other_widgets_or_fail_run_here(monkeypatch):
    box = linked_views(controls_ab(), label)  # a widget a worker cannot make
    assert [view.value for view in leaves(box)] == [
        f"{x} {n}" for x in "ab" for n in (1, 2, 3)
    ]

    def fails(x, n):
        if (x, n) == ("b", 2):
            raise ValueError("no view for b 2")
        return figure_of(x, n)

    with pytest.raises(ValueError, match="no view for b 2"):
        linked_views(controls_ab(), fails)
