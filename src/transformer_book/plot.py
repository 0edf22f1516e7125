"""Figures in one style for every chapter (introduced in Chapter 2).

Chinese tokens render as characters, not boxes: the CJK font shipped by the
``mplfonts`` package (Noto Sans CJK) is registered with matplotlib as a fallback
behind DejaVu Sans, which works the same locally and in Colab.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import cycler, font_manager

from . import _figure_text
from ._figure_text import META_KEY, VIEWS_KEY, keep_texts, zh_rendering
from ._parallel import map_forked
from ._validate import check_real

__all__ = [
    "use_book_style",
    "attention_heatmap",
    "head_score_maps",
    "plot_lines",
    "series_style",
    "MODEL_STYLES",
    "OKABE_ITO",
    "linked_stack",
    "linked_views",
    "figure_view",
    "show",
    "LINKED_CLASS",
    "CJK_FONT",
]

CJK_FONT = "Noto Sans CJK SC"
# The CSS class of linked widgets: the browser test moves every control in one
LINKED_CLASS = "tb-linked"
_STYLE_APPLIED = False

# The Okabe-Ito palette (Okabe & Ito, 2008), distinguishable with every common form
# of colour blindness; yellow is left out (too pale on white).
OKABE_ITO = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "bluish green": "#009E73",
    "vermillion": "#D55E00",
    "reddish purple": "#CC79A7",
    "sky blue": "#56B4E9",
    "black": "#000000",
}
_CYCLE_COLORS = list(OKABE_ITO.values())
_CYCLE_LINESTYLES = ["-", "--", "-.", ":", "-", "--", "-."]
_CYCLE_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]

# One style per model, the same in every chapter: a reader who learnt that the LSTM
# is the orange dashed line in Chapter 1 finds it so everywhere. Colour, line style
# and marker all differ, so no series depends on colour alone.
MODEL_STYLES = {
    "vanilla RNN": {"color": OKABE_ITO["blue"], "linestyle": "-", "marker": "o"},
    "LSTM": {"color": OKABE_ITO["orange"], "linestyle": "--", "marker": "s"},
    "LSTM, forget bias 3": {
        "color": OKABE_ITO["black"],
        "linestyle": ":",
        "marker": "D",
    },
    "attention": {"color": OKABE_ITO["vermillion"], "linestyle": "-", "marker": "^"},
    "BERT": {"color": OKABE_ITO["bluish green"], "linestyle": "-", "marker": "v"},
    "GPT": {"color": OKABE_ITO["sky blue"], "linestyle": "--", "marker": "P"},
    "T5": {"color": OKABE_ITO["reddish purple"], "linestyle": "-.", "marker": "X"},
    "unigram": {"color": "#7F7F7F", "linestyle": ":", "marker": "."},
}
# Other names of the same models (lower case)
_ALIASES = {
    "rnn": "vanilla RNN",
    "nn.rnn": "vanilla RNN",
    "tanh rnn": "vanilla RNN",
    "nn.lstm": "LSTM",
    "self-attention": "attention",
}


def _register_cjk_font() -> bool:
    try:
        import mplfonts
    except ImportError:  # the book still plots, Chinese labels show as boxes
        return False
    path = Path(mplfonts.__file__).parent / "fonts" / "NotoSansCJKsc-Regular.otf"
    if not path.exists():
        return False
    if CJK_FONT not in {f.name for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(path))
    return True


def use_book_style() -> None:
    """Apply the book's matplotlib style (idempotent; every plot helper calls it)."""
    global _STYLE_APPLIED
    if _STYLE_APPLIED:
        return
    families = ["DejaVu Sans", CJK_FONT] if _register_cjk_font() else ["DejaVu Sans"]
    mpl.rcParams.update(
        {
            # Concrete families, not "sans-serif": matplotlib falls back glyph by
            # glyph only across the entries of font.family.
            "font.family": families,
            "font.sans-serif": families,
            "axes.unicode_minus": False,
            "figure.figsize": (6.0, 3.6),
            "figure.dpi": 100,
            "savefig.dpi": 100,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.titlesize": 11,
            "axes.labelsize": 10,
            "legend.fontsize": 9,
            "legend.frameon": False,
            # Series that are not one of the book's models: colour-blind-safe
            # colours, each with its own line style
            "axes.prop_cycle": cycler(color=_CYCLE_COLORS)
            + cycler(linestyle=_CYCLE_LINESTYLES),
        }
    )
    _STYLE_APPLIED = True


def _to_numpy(x, name: str) -> np.ndarray:
    """``x`` (a tensor, an array or a list of numbers) as a float array."""
    if isinstance(x, torch.Tensor):
        if x.is_complex():
            raise TypeError(f"{name} must hold real numbers, got dtype {x.dtype}")
        if x.is_meta:
            raise ValueError(f"{name} is on the meta device, which holds no values")
        return x.detach().float().cpu().numpy()
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a tensor, an array or a list of numbers, got "
            f"{type(x).__name__}"
        ) from None


def attention_heatmap(
    weights,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    ax: plt.Axes | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
) -> plt.Axes:
    """Draw a (Tq, Tk) attention matrix: queries down the rows, keys across.

    ``annotate`` writes each weight in its cell (default: when the matrix is at
    most 12 x 12). Returns the axes.
    """
    use_book_style()
    w = _to_numpy(weights, "weights")
    if w.ndim != 2 or w.size == 0:
        raise ValueError(
            f"weights must be a non-empty (Tq, Tk) matrix, got shape {w.shape}"
        )
    if not np.isfinite(w).all():
        raise ValueError("weights holds NaN or inf, which a heatmap cannot show")
    if vmax is not None:
        check_real("vmax", vmax, low=0.0, low_open=True)
    n_q, n_k = w.shape
    for name, toks, n in (
        ("query_tokens", query_tokens, n_q),
        ("key_tokens", key_tokens, n_k),
    ):
        _check_labels(name, toks)
        if toks is not None and len(toks) != n:
            raise ValueError(f"{name} has {len(toks)} labels for {n} rows/columns")
    if ax is None:
        size = (min(1.0 + 0.55 * n_k, 9.0), min(0.8 + 0.45 * n_q, 8.0))
        _, ax = plt.subplots(figsize=size)
    image = ax.imshow(w, cmap="Blues", vmin=0.0, vmax=vmax or max(float(w.max()), 1e-9))
    ax.grid(False)
    ax.set_xticks(
        range(n_k), list(key_tokens) if key_tokens is not None else range(n_k)
    )
    ax.set_yticks(
        range(n_q), list(query_tokens) if query_tokens is not None else range(n_q)
    )
    # The tokens are the reader's data: the zh-TW figure keeps them
    keep_texts(*([ax.xaxis] if key_tokens is not None else []))
    keep_texts(*([ax.yaxis] if query_tokens is not None else []))
    ax.tick_params(axis="x", labelrotation=90 if n_k > 8 else 0)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if annotate is None:
        annotate = n_q <= 12 and n_k <= 12
    if annotate:
        threshold = 0.6 * image.get_clim()[1]
        for i in range(n_q):
            for j in range(n_k):
                color = "white" if w[i, j] > threshold else "black"
                ax.text(
                    j,
                    i,
                    f"{w[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color=color,
                )
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="weight")
    return ax


def _check_labels(name: str, labels: object) -> None:
    """None, or a sized collection of labels (a list, a tuple, an array); a str is
    one label, not a sequence of them."""
    if labels is not None and (
        isinstance(labels, str | bytes) or not hasattr(labels, "__len__")
    ):
        raise TypeError(
            f"{name} must be a sequence of labels (a list of str), got "
            f"{type(labels).__name__}"
        )


def _model_of(label: str) -> str | None:
    """The model a series label names: the name alone, or followed by " (" or ","."""
    lowered = label.lower()
    names = {name.lower(): name for name in MODEL_STYLES}
    names.update(_ALIASES)
    # Longest name first: "LSTM, forget bias 3" before "LSTM"
    for key in sorted(names, key=len, reverse=True):
        if lowered == key or lowered.startswith((key + " (", key + ",")):
            return names[key]
    return None


def series_style(label: str, index: int = 0) -> dict:
    """Colour, line style and marker of a plotted series, fixed book-wide per model.

    A label that names one of the book's models (``MODEL_STYLES``: "vanilla RNN" or
    "RNN", "LSTM", "LSTM, forget bias 3", "attention" or "self-attention", "BERT",
    "GPT", "T5", "unigram"; alone, or followed by " (" or "," as in "BERT (masked
    LM)") gets that model's style. Any other label gets entry ``index`` of the
    book's colour-blind-safe cycle. Pass the result to ``ax.plot(..., **style)``.
    """
    if not isinstance(label, str):
        raise TypeError(f"label must be a string, got {type(label).__name__}")
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"index must be an integer, got {type(index).__name__}")
    if index < 0:
        raise ValueError(f"index must be non-negative, got {index}")
    model = _model_of(label)
    if model is not None:
        return dict(MODEL_STYLES[model])
    i = index % len(_CYCLE_COLORS)
    return {
        "color": _CYCLE_COLORS[i],
        "linestyle": _CYCLE_LINESTYLES[i],
        "marker": _CYCLE_MARKERS[i],
    }


def plot_lines(
    x,
    ys: Mapping[str, object],
    xlabel: str,
    ylabel: str,
    title: str | None = None,
    ax: plt.Axes | None = None,
    logx: bool = False,
    logy: bool = False,
    marker: str | None = "auto",
) -> plt.Axes:
    """One line per entry of ``ys`` (label -> values over ``x``), with a legend.

    Each series is drawn in its ``series_style``: a model has the same colour, line
    style and marker in every figure of the book. ``marker="auto"`` uses the style's
    marker, ``None`` draws no markers, any other matplotlib marker is used for all.
    Two series that would look the same (two labels of one model) get different
    line styles.
    """
    use_book_style()
    if not isinstance(ys, Mapping):
        raise TypeError(f"ys must map labels to values, got {type(ys).__name__}")
    if marker is not None and not isinstance(marker, str):
        raise TypeError(f"marker must be a string or None, got {type(marker).__name__}")
    x = _to_numpy(x, "x")
    if ax is None:
        _, ax = plt.subplots()
    used = set()
    others = 0
    for label, y in ys.items():
        if not isinstance(label, str):
            raise TypeError(f"ys's labels must be strings, got {type(label).__name__}")
        y = _to_numpy(y, f"ys[{label!r}]")
        if y.shape != x.shape:
            raise ValueError(f"{label!r} has shape {y.shape}, x has shape {x.shape}")
        is_model = _model_of(label) is not None
        style = series_style(label, others)
        others += not is_model
        if (style["color"], style["linestyle"]) in used:
            free = [
                ls for ls in ("-", "--", "-.", ":") if (style["color"], ls) not in used
            ]
            style["linestyle"] = free[0] if free else style["linestyle"]
        used.add((style["color"], style["linestyle"]))
        if marker is None:
            style["marker"] = ""
        elif marker != "auto":
            style["marker"] = marker
        ax.plot(x, y, markersize=4, label=label, **style)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    if len(ys) > 1:
        ax.legend()
    return ax


def linked_stack(control, children: Sequence):
    """A control above precomputed views: choosing option i shows ``children[i]``.

    Widgets that work without a kernel. ``control`` is any widget with an ``index``
    trait (``Dropdown``, ``SelectionSlider``, ``ToggleButtons``...), one option per
    child. With ipywidgets 8 the children go into an ``ipywidgets.Stack`` whose
    ``selected_index`` is ``jslink``-ed to the control's ``index``: the browser
    switches views by itself, so the widget lives in the static HTML book, where no
    kernel runs. ipywidgets 7 (Colab's) has no ``Stack``: there a kernel callback
    swaps the shown child (Colab always has a kernel). Returns the ``VBox`` holding
    the control and the views; it carries the CSS class ``LINKED_CLASS``.
    """
    _check_widgets("children", children)
    return _linked_box([control, _switch(control, list(children))])


def linked_views(controls: Sequence, render: Callable):
    """Controls above one precomputed view per combination of their options.

    ``render(*values)`` is called once for every combination of the controls'
    option values (the first control varies slowest) and returns the widget to show
    for it, e.g. ``figure_view(fig, alt)``. The views are nested ``linked_stack``s, one
    level per control, so moving any control switches the view in the browser,
    without a kernel. The number of views is the product of the option counts: keep
    it small (each figure weighs its PNG in the page). Returns the ``VBox`` of the
    controls and the views.

    Where every render returns a ``figure_view``, the renders run side by side in
    forked workers (``_render_views``), so a render should compute its view and
    nothing else: what it changes (a list it appends to, the random state it draws
    from without seeding) stays in its worker. A render that returns any other
    widget, or fails, runs again here with all the others, once each, in order.
    """
    _check_widgets("controls", controls)
    controls = list(controls)
    if not controls:
        raise ValueError("controls must hold at least one control")
    if not callable(render):
        raise TypeError(f"render must be callable, got {type(render).__name__}")
    for i, control in enumerate(controls):
        _check_control(control, f"controls[{i}]")

    combinations = list(itertools.product(*map(_option_values, controls)))
    views = iter(_render_views(render, combinations))

    def nest(level: int):
        if level == len(controls):
            return next(views)
        control = controls[level]
        return _switch(control, [nest(level + 1) for _ in _option_values(control)])

    return _linked_box([*controls, nest(0)])


class _ViewData(NamedTuple):
    """A figure view as a forked render sends it back: the HTML widget's value, its
    zh-TW rendering, and the seconds the render took, zh-TW rendering included."""

    value: str
    zh: dict | None
    seconds: float = 0.0
    zh_seconds: float = 0.0


_DEFER_VIEWS = False  # in a render worker: figure_view returns a _ViewData


def _render_views(render: Callable, combinations: list[tuple]) -> list:
    """``[render(*values) for values in combinations]``; where every render returns a
    ``figure_view``, in forked workers side by side (``_parallel.map_forked``).

    Drawing a figure is Python work that holds one core, and a chapter's widget
    draws tens of them. A worker cannot make a widget (its messages would go out on
    the kernel's connection, which belongs to this process), so there figure_view
    gives back the view's data, and the widget is made here. A render that makes any
    other widget, displays something or fails sends its worker's exception back, and
    all the renders then run here, in turn, as they would without workers.
    """

    def draw(index: int) -> _ViewData:
        start, zh_before = time.perf_counter(), _figure_text.rendering_seconds
        view = render(*combinations[index])
        if not isinstance(view, _ViewData):
            raise TypeError(f"render returned a {type(view).__name__}")
        zh_seconds = _figure_text.rendering_seconds - zh_before
        return view._replace(seconds=time.perf_counter() - start, zh_seconds=zh_seconds)

    start = time.perf_counter()
    try:
        drawn = map_forked(draw, len(combinations), _render_worker_init)
    except Exception:  # noqa: BLE001 - the renders run again here, and raise here
        drawn = None
    if drawn is None:
        return [render(*values) for values in combinations]
    # what the workers spent on zh-TW renderings, as a share of the wall time
    busy = sum(view.seconds for view in drawn)
    zh_share = sum(view.zh_seconds for view in drawn) / busy if busy > 0 else 0.0
    _figure_text.count_rendering_seconds(zh_share * (time.perf_counter() - start))
    return [_view_widget(view.value, view.zh) for view in drawn]


def _render_worker_init() -> None:
    """A render worker: figure views as data; no widget, display or output."""
    import os
    import sys

    import ipywidgets as widgets
    from IPython import get_ipython

    global _DEFER_VIEWS
    _DEFER_VIEWS = True
    os.environ.pop(_figure_text.SECONDS_VARIABLE, None)  # this process reports them

    def refuse(*args, **kwargs):
        raise RuntimeError("a render worker makes no widget and displays nothing")

    widgets.Widget.open = refuse  # a widget's comm would use the kernel's sockets
    shell = get_ipython()
    if shell is not None:
        shell.display_pub.publish = refuse
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for its life


def _view_widget(value: str, zh: dict | None):
    """The HTML widget of a figure view, its zh-TW rendering noted for its box."""
    import ipywidgets as widgets

    view = widgets.HTML(value=value)
    if zh is not None:
        _ZH_VIEWS[view.model_id] = zh
    return view


def _check_alt(alt) -> str:
    if not isinstance(alt, str):
        raise TypeError(
            f"alt must be a str (the figure's finding), got {type(alt).__name__}"
        )
    return alt


def show(fig, alt: str) -> None:
    """Show ``fig`` below the cell with ``alt`` as its text alternative, and close it.

    The text alternative is what a screen reader reads instead of the figure, so it
    states the figure's finding with the numbers the cell computed ("the Transformer
    falls below 0.1 by step 120, the RNN stays above 1.5"), not "a plot of the loss".
    An empty ``alt`` marks a decorative figure. The PNG is IPython's, as for
    ``plt.show()``; the text travels in the output's metadata (``image/png``:
    ``alt``), where the HTML book's build (``book/_ext``) puts it on the ``<img>``.
    Where the zh-TW edition is built, the metadata also carries the figure rendered
    with its texts in Chinese (``_figure_text.zh_rendering``).
    """
    from IPython import get_ipython
    from IPython.display import display

    if not isinstance(fig, mpl.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    metadata = {"image/png": {"alt": _check_alt(alt)}}
    shell = get_ipython()
    if shell is None:  # plain Python: IPython prints the figure's repr
        display(fig, metadata=metadata)
        plt.close(fig)
        return
    formatter = shell.display_formatter
    data, _ = formatter.format(fig)  # the English bundle, as display(fig) makes it
    if "image/png" in data:
        zh = zh_rendering(fig, formatter.formatters["image/png"])
        if zh is not None:
            metadata[META_KEY] = zh
    display(data, raw=True, metadata=metadata)
    plt.close(fig)


def figure_view(fig, alt: str, dpi: int = 90):
    """A matplotlib figure as a PNG ``<img>`` with its text alternative ``alt``, in
    an ``ipywidgets.HTML``, for ``linked_views``.

    The figure is closed, so that the notebook does not also draw it. Every view is
    stored in the page, so the PNG is kept light: its colours are reduced to a
    palette of 128 (a third of the bytes of a full-colour PNG, with no visible
    difference on the book's figures). ``alt`` says what this view shows (see
    ``show``); an HTML widget carries it, since ``ipywidgets.Image`` has no ``alt``.
    """
    import html

    if not isinstance(fig, mpl.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    _check_alt(alt)
    if isinstance(dpi, bool) or not isinstance(dpi, int) or dpi <= 0:
        raise ValueError(f"dpi must be a positive integer, got {dpi!r}")
    value = (
        f'<img src="data:image/png;base64,{_view_data(fig, dpi)}"'
        f' alt="{html.escape(alt)}" style="max-width:100%;height:auto">'
    )
    zh = zh_rendering(fig, lambda f: _view_data(f, dpi))
    plt.close(fig)
    if _DEFER_VIEWS:  # in a render worker (_render_views): the kernel makes the widget
        return _ViewData(value, zh)
    return _view_widget(value, zh)


# The zh-TW renderings of figure views, by the view's widget model id, until the
# linked box that holds the view is displayed (``_LinkedBox`` puts them in the
# output's metadata: the English page's widget state stays as light as it was)
_ZH_VIEWS: dict[str, dict] = {}


def _view_data(fig, dpi: int) -> str:
    """The figure as a light PNG (a palette of 128 colours), base64-encoded."""
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    # A tight box: the axis labels of a figure made without tight_layout are kept
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", pad_inches=0.05)
    image = Image.open(buffer).convert("RGB")
    palette = image.quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    buffer = io.BytesIO()
    palette.save(buffer, format="png", optimize=True)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _linked_box(children):
    """A ``VBox`` whose display carries the zh-TW renderings of its figure views in
    the output's metadata (``VIEWS_KEY``: model id -> rendering)."""
    import ipywidgets as widgets

    class LinkedBox(widgets.VBox):
        def _repr_mimebundle_(self, **kwargs):
            data = super()._repr_mimebundle_(**kwargs)
            found = {}
            stack = [self]
            while stack:
                widget = stack.pop()
                if widget.model_id in _ZH_VIEWS:
                    found[widget.model_id] = _ZH_VIEWS[widget.model_id]
                stack.extend(getattr(widget, "children", ()))
            if not found or data is None:
                return data
            return data, {VIEWS_KEY: dict(sorted(found.items()))}

    LinkedBox.__name__ = LinkedBox.__qualname__ = "VBox"  # its repr stays "VBox(...)"
    box = LinkedBox(children)
    box.add_class(LINKED_CLASS)
    return box


def _view_png(view) -> bytes:
    """The PNG bytes of a ``figure_view``."""
    import base64
    import re

    match = re.search(r'src="data:image/png;base64,([^"]+)"', view.value)
    if match is None:
        raise ValueError("view holds no PNG image")
    return base64.b64decode(match.group(1))


def _view_alt(view) -> str:
    """The text alternative of a ``figure_view``."""
    import html
    import re

    match = re.search(r'alt="([^"]*)"', view.value)
    if match is None:
        raise ValueError("view holds no alt text")
    return html.unescape(match.group(1))


def _check_widgets(name: str, widgets: object) -> None:
    """A list or tuple of widgets (a str, a number or None is not)."""
    if isinstance(widgets, str | bytes) or not isinstance(widgets, Sequence):
        raise TypeError(
            f"{name} must be a list of widgets, got {type(widgets).__name__}"
        )


def _check_control(control, name: str = "control") -> None:
    if not hasattr(control, "index") or getattr(control, "options", None) is None:
        raise TypeError(
            f"{name} must be a selection widget with an index, got "
            f"{type(control).__name__}"
        )


def _option_values(control) -> list:
    return list(control._options_values)  # options given as labels or (label, value)


def _switch(control, children: list):
    """The widget that shows ``children[control.index]`` (see ``linked_stack``)."""
    import ipywidgets as widgets

    _check_control(control)
    if not children:
        raise ValueError("children must hold at least one widget")
    if len(control.options) != len(children):
        raise ValueError(
            f"control has {len(control.options)} options for {len(children)} children"
        )
    if control.index is None:
        control.index = 0
    if hasattr(widgets, "Stack"):  # ipywidgets >= 8: linked in the browser
        views = widgets.Stack(children, selected_index=control.index)
        widgets.jslink((control, "index"), (views, "selected_index"))
        return views
    views = widgets.Box([children[control.index]])  # ipywidgets 7: the kernel swaps

    def show(change) -> None:
        if change["new"] is not None:
            views.children = (children[change["new"]],)

    control.observe(show, names="index")
    return views


def head_score_maps(
    scores: Mapping[str, object], title: str = "{}", columns: int = 2
) -> tuple[mpl.figure.Figure, str]:
    """One heatmap per score of every attention head: layers down, heads across.

    ``scores`` maps a name to an (L, H) table of scores in [0, 1] (a tensor, an
    array or nested lists; every table the same shape), for example each head's mean
    weight on a target. Each panel is titled ``title.format(name)`` and writes each
    head's score in its cell; ``columns`` panels a row share one colour scale.
    Returns ``(fig, alt)``, ``alt`` the text alternative for ``show``: for each
    panel its highest score, the head that has it, and each layer's mean.
    """
    use_book_style()
    if not isinstance(scores, Mapping):
        raise TypeError(
            f"scores must be a mapping of names to (L, H) tables, got "
            f"{type(scores).__name__}"
        )
    if not scores:
        raise ValueError("scores must hold at least one table")
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {type(title).__name__}")
    if isinstance(columns, bool) or not isinstance(columns, int) or columns < 1:
        raise ValueError(f"columns must be a positive integer, got {columns!r}")
    tables = {}
    for name, table in scores.items():
        if not isinstance(name, str):
            raise TypeError(f"scores' names must be str, got {type(name).__name__}")
        w = _to_numpy(table, f"scores[{name!r}]")
        if w.ndim != 2 or w.size == 0:
            raise ValueError(
                f"scores[{name!r}] must be a non-empty (L, H) table, got shape "
                f"{w.shape}"
            )
        if not np.isfinite(w).all():
            raise ValueError(f"scores[{name!r}] holds NaN or inf")
        if tables and w.shape != next(iter(tables.values())).shape:
            raise ValueError(
                f"scores[{name!r}] has shape {w.shape}, the first table "
                f"{next(iter(tables.values())).shape}: every table must have one shape"
            )
        tables[name] = w
    n_layers, n_heads = next(iter(tables.values())).shape
    cols = min(columns, len(tables))
    rows = -(-len(tables) // cols)
    size = (cols * (0.33 * n_heads + 0.8) + 0.9, rows * (0.33 * n_layers + 0.9))
    fig, axes = plt.subplots(
        rows, cols, figsize=size, squeeze=False, layout="constrained"
    )
    for ax in axes.flat[len(tables) :]:
        ax.set_visible(False)
    findings = []
    for ax, (name, w) in zip(axes.flat[: len(tables)], tables.items(), strict=True):
        image = ax.imshow(w, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
        ax.grid(False)
        ax.set_xticks(range(n_heads))
        ax.set_yticks(range(n_layers))
        ax.set(xlabel="head", ylabel="layer", title=title.format(name))
        for (i, j), v in np.ndenumerate(w):
            text = f"{v:.2f}".removeprefix("0")  # .42: short enough for its cell
            color = "white" if v > 0.6 else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color=color)
        layer, head = np.unravel_index(int(w.argmax()), w.shape)
        means = ", ".join(f"{m:.2f}" for m in w.mean(axis=1))
        findings.append(
            f"{title.format(name)}: highest {w.max():.2f} at L{layer}H{head}, "
            f"layer means {means}"
        )
    fig.colorbar(image, ax=axes, shrink=0.8, label="score")
    alt = (
        f"{len(tables)} heatmaps of {n_layers} layers (rows, 0 to {n_layers - 1}) "
        f"by {n_heads} heads (columns, 0 to {n_heads - 1}), each head's score "
        f"written in its cell. " + "; ".join(findings) + "."
    )
    return fig, alt
