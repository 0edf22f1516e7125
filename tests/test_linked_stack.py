"""plot.linked_stack: a control linked to precomputed views, with and without Stack."""

from __future__ import annotations

import ipywidgets as widgets
import pytest

from transformer_book.plot import linked_stack


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
