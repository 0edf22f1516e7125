"""The zh-TW rendering of a finished figure: the same data, numbers and layout, its
words from the figure catalogue (``locale/zh_TW/LC_MESSAGES/figures.po``).

``plot.show`` and ``plot.figure_view`` call :func:`zh_rendering` when a chapter is
executed: every Text artist of the figure (titles, axis and colorbar labels, legend
texts, annotations, ``text()``, categorical tick labels) takes its translation, the
figure is rendered with a Traditional Chinese font (Noto Sans CJK TC, Debian's
``fonts-noto-cjk``), and the English texts are put back exactly. The PNG travels in
the English notebook's output metadata (:data:`META_KEY`), with the translations it
used and the strings the catalogue lacks; ``scripts/i18n.py generate`` puts it in
the zh-TW notebook, ``scripts/i18n.py extract`` adds the lacking strings to the
catalogue with an empty msgstr.

It happens only where ``TRANSFORMER_BOOK_FIGURES_ZH=1``, which ``make execute``
(``scripts/execute.py``) sets when it writes the committed notebooks: a reader's run,
Colab and the test stages that re-execute the chapters (nbval, seeds, colab) draw the
English figure alone and do not pay for a rendering nobody keeps. Nothing happens
either where the catalogue, ``polib`` or the TC font is missing.
"""

from __future__ import annotations

import logging
import os
import re
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

import matplotlib as mpl
from matplotlib import font_manager, ticker
from matplotlib.text import Text

__all__ = [
    "META_KEY",
    "VIEWS_KEY",
    "TC_FONT",
    "figure_catalogue",
    "is_translatable",
    "keep_texts",
    "lookup",
    "template",
    "swapped_texts",
    "tc_font_path",
    "zh_rendering",
]

META_KEY = "figure_zh"  # output metadata of a ``show``: the zh-TW rendering
VIEWS_KEY = "figure_zh_views"  # output metadata of linked views: model id -> rendering
TC_FONT = "Noto Sans CJK TC"
FIGURES_PO = (
    Path(__file__).resolve().parents[2]
    / "locale"
    / "zh_TW"
    / "LC_MESSAGES"
    / "figures.po"
)
# Where Debian's fonts-noto-cjk puts the collection (one face per region; matplotlib
# >= 3.10 registers every face of a .ttc)
_TC_CANDIDATES = (
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
)
_DATA = "_tb_data_texts"  # attribute marking an axis / artist whose texts are data

_MATH = re.compile(r"\$[^$]*\$")
_CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
_LATIN = re.compile(r"[A-Za-z]{2}")  # a word, not a variable such as "T" or "p"
# Model names and identifiers stay: "LSTM", "T5", "GPT-2", "ViT", "d_model"
_NAME = re.compile(
    r"(?:[A-Za-z0-9.+\-/]*[A-Z0-9][A-Za-z0-9.+\-/]*[A-Z0-9][\w.+\-/]*|\w*_\w*)"
)


# A number standing alone ("layer 2", "T = 128", "0.5"), not part of a name ("T5"),
# or a quoted token (the inside of 「餘額」): the reader's data inside a string
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])|(?<=「)[^「」]+(?=」)")


def template(text: str) -> tuple[str, list[str]]:
    """The string with its numbers and quoted tokens as ``{0}``, ``{1}``... and
    those values: the catalogue holds one entry for "layer 0, head 1" and "layer 1,
    head 0", one for 「餘額」 and 「銀行」 attending."""
    numbers = _NUMBER.findall(text)
    if not numbers:
        return text, []
    counter = iter(range(len(numbers)))
    escaped = text.replace("{", "{{").replace("}", "}}")
    return _NUMBER.sub(lambda _: f"{{{next(counter)}}}", escaped), numbers


def lookup(text: str, catalogue: Mapping[str, str]) -> tuple[str | None, str]:
    """The translation of a figure string (None if the catalogue has none) and the
    msgid that gave it: the string itself, or its :func:`template` with the numbers
    put back."""
    if text in catalogue:
        return catalogue[text], text
    pattern, numbers = template(text)
    if numbers and pattern in catalogue:
        try:
            return catalogue[pattern].format(*numbers), pattern
        except (IndexError, KeyError, ValueError):  # a broken msgstr: English
            return None, pattern
    return None, pattern


def is_translatable(text: str) -> bool:
    """Whether a figure string has words to translate: a Latin word outside math
    (two letters or more), and not only a model name or identifier. Numbers,
    Chinese tokens and "LSTM" or "d_model" stay as they are."""
    if not isinstance(text, str):
        return False
    plain = _MATH.sub("", text).strip()
    if not _LATIN.search(plain):
        return False
    return _NAME.fullmatch(plain) is None


def keep_texts(*objects) -> None:
    """Mark texts as the reader's data, never translated: an Axis (its tick labels,
    e.g. the tokens of a heatmap), an Axes (both its axes' tick labels) or a Text."""
    for obj in objects:
        if isinstance(obj, mpl.axes.Axes):
            keep_texts(obj.xaxis, obj.yaxis)
        else:
            setattr(obj, _DATA, True)


def tc_font_path() -> str | None:
    """The file of the Traditional Chinese font, registered with matplotlib, or None
    where it is not installed."""
    override = os.environ.get("TRANSFORMER_BOOK_TC_FONT")
    for path in ([override] if override else []) + list(_TC_CANDIDATES):
        if path and Path(path).exists():
            names = {f.name for f in font_manager.fontManager.ttflist}
            if TC_FONT not in names:
                font_manager.fontManager.addfont(path)
            return path
    if TC_FONT in {f.name for f in font_manager.fontManager.ttflist}:
        return font_manager.findfont(TC_FONT)
    return None


_CATALOGUE: dict[str, object] = {}
rendering_seconds = 0.0  # spent in zh_rendering by this process (execution cost)
SECONDS_VARIABLE = "TRANSFORMER_BOOK_FIGURES_ZH_SECONDS"  # where it is reported


def figure_catalogue(path: Path | None = None) -> dict[str, str] | None:
    """msgid -> msgstr of the figure catalogue's translated, non-fuzzy entries
    (re-read when the file changes), or None without the file or ``polib``."""
    path = Path(path or os.environ.get("TRANSFORMER_BOOK_FIGURES_PO") or FIGURES_PO)
    try:
        import polib

        stamp = path.stat().st_mtime_ns
    except (ImportError, OSError):
        return None
    key = str(path)
    cached = _CATALOGUE.get(key)
    if cached is None or cached[0] != stamp:
        entries = polib.pofile(str(path), wrapwidth=0)
        table = {
            e.msgid: e.msgstr
            for e in entries
            if not e.obsolete and e.msgstr and "fuzzy" not in e.flags
        }
        _CATALOGUE[key] = cached = (stamp, table)
    return cached[1]


def _is_data(text: Text) -> bool:
    return bool(getattr(text, _DATA, False))


def _axes_of(fig) -> list:
    return list(fig.get_axes())


def _label_tables(fig):
    """(get, set) of every categorical tick labelling of the figure (tick labels
    given as strings: a FixedFormatter's list, the location -> label dict that
    ``set_xticks(ticks, labels)`` makes, a bar chart's categories)."""
    import functools

    from matplotlib import category

    for ax in _axes_of(fig):
        for axis in (ax.xaxis, ax.yaxis):
            if getattr(axis, _DATA, False):
                continue
            for formatter in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if isinstance(formatter, ticker.FixedFormatter):
                    yield (
                        lambda f=formatter: list(f.seq),
                        lambda seq, f=formatter: setattr(f, "seq", list(seq)),
                    )
                elif isinstance(formatter, ticker.FuncFormatter):
                    func = formatter.func
                    if (
                        isinstance(func, functools.partial)
                        and func.args
                        and isinstance(func.args[0], dict)
                    ):
                        table = func.args[0]
                        keys = list(table)
                        yield (
                            lambda t=table, k=keys: [t[key] for key in k],
                            lambda seq, t=table, k=keys: t.update(
                                zip(k, seq, strict=True)
                            ),
                        )
                elif isinstance(formatter, category.StrCategoryFormatter):
                    # its _units: the OrderedDict category -> position
                    yield (
                        lambda f=formatter: list(f._units),
                        lambda seq, f=formatter, u=formatter._units: setattr(
                            f,
                            "_units",
                            u
                            if list(seq) == list(u)
                            else dict(zip(seq, u.values(), strict=True)),
                        ),
                    )


def _tick_label_ids(fig, data_only: bool) -> set[int]:
    """ids of the tick label Texts of the figure (of data axes only, or of all)."""
    found = set()
    for ax in _axes_of(fig):
        for axis in (ax.xaxis, ax.yaxis):
            if data_only and not getattr(axis, _DATA, False):
                continue
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                found.update({id(tick.label1), id(tick.label2)})
    return found


class swapped_texts:
    """A context: the figure's texts in their translation (``catalogue``), each
    Text's font family with ``font`` in place of any CJK face, then everything put
    back as it was. ``used`` (msgid -> msgstr) and ``missing`` (msgids the catalogue
    lacks: a string with numbers as its :func:`template`) say what happened."""

    def __init__(self, fig, catalogue: Mapping[str, str], font: str = TC_FONT):
        self.fig, self.catalogue, self.font = fig, catalogue, font
        self.used: dict[str, str] = {}
        self.missing: list[str] = []
        self._undo: list[Callable[[], None]] = []
        self._rc = None

    def _translate(self, text: str) -> str:
        if not is_translatable(text):
            return text
        translated, msgid = lookup(text, self.catalogue)
        if translated is not None:
            self.used[msgid] = self.catalogue[msgid]
            return translated
        if msgid not in self.missing:
            self.missing.append(msgid)
        return text

    def _family(self, family: list[str]) -> list[str]:
        new = [self.font if "CJK" in f else f for f in family]
        return new if self.font in new else [*new, self.font]

    def __enter__(self):
        try:
            self._swap()
        except BaseException:
            self._restore()
            raise
        return self

    def _swap(self) -> None:
        fig = self.fig
        if self.font == TC_FONT:
            tc_font_path()  # registered with matplotlib where it is installed
        for get, put in list(_label_tables(fig)):
            old = get()
            new = [self._translate(s) if isinstance(s, str) else s for s in old]
            if new != old:
                put(new)
                self._undo.append(lambda put=put, old=old: put(old))
        data_ticks = _tick_label_ids(fig, data_only=True)
        all_ticks = _tick_label_ids(fig, data_only=False)
        for text in fig.findobj(Text):
            old_text, props = text.get_text(), text.get_fontproperties()
            old_family = list(props.get_family())
            props.set_family(self._family(old_family))
            self._undo.append(lambda p=props, o=old_family: p.set_family(o))
            # A tick label's text comes from its formatter at draw time
            if id(text) in all_ticks or id(text) in data_ticks or _is_data(text):
                continue
            new = self._translate(old_text)
            if new != old_text:
                text.set_text(new)
                self._undo.append(lambda t=text, o=old_text: t.set_text(o))
            if "$" in new and _CJK.search(new):
                # mathtext draws the words around the math in the family's first
                # font alone, with no fallback: Chinese first there
                rest = [f for f in self._family(old_family) if f != self.font]
                props.set_family([self.font, *rest])
        family = self._family(list(mpl.rcParams["font.family"]))
        self._rc = mpl.rc_context({"font.family": family, "font.sans-serif": family})
        self._rc.__enter__()

    def __exit__(self, *exc) -> None:
        self._restore()

    def _restore(self) -> None:
        if self._rc is not None:
            self._rc.__exit__(None, None, None)
            self._rc = None
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()


def _record_missing(strings: list[str]) -> None:
    """Append strings the catalogue lacks to $TRANSFORMER_BOOK_FIGURE_STRINGS (a
    list a maintainer can feed to the catalogue), when that variable is set."""
    target = os.environ.get("TRANSFORMER_BOOK_FIGURE_STRINGS")
    if target and strings:
        with open(target, "a", encoding="utf-8") as out:
            for s in strings:
                out.write(s.replace("\\", "\\\\").replace("\n", "\\n") + "\n")


class _MathGlyphs(logging.Handler):
    """A context collecting mathtext's warnings (it logs a missing glyph, where the
    rest of matplotlib warns)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self):
        logging.getLogger("matplotlib.mathtext").addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger("matplotlib.mathtext").removeHandler(self)


def zh_rendering(fig, render: Callable[[object], object]) -> dict | None:
    """The zh-TW rendering of ``fig`` as the metadata :data:`META_KEY` holds:
    ``{"image/png": render(fig) with translated texts, "texts": {English:
    translation used}, "missing": [strings figures.po lacks]}``; without
    ``image/png`` when no string was translated. None where the zh-TW rendering is
    off (TRANSFORMER_BOOK_FIGURES_ZH is not 1, no catalogue, or no TC font). The
    figure is left exactly as it was."""
    if os.environ.get("TRANSFORMER_BOOK_FIGURES_ZH") != "1":
        return None
    catalogue = figure_catalogue()
    if catalogue is None or tc_font_path() is None:
        return None
    start = time.perf_counter()
    probe = swapped_texts(fig, catalogue)
    image = None
    try:
        with probe:
            if probe.used:
                with (
                    warnings.catch_warnings(record=True) as caught,
                    _MathGlyphs() as math,
                ):
                    warnings.simplefilter("always")
                    image = render(fig)
                for message in [str(w.message) for w in caught] + math.messages:
                    # a missing glyph is a finding, not noise
                    if "missing from font" in message or "have a glyph" in message:
                        probe.missing.append(f"(missing glyph) {message}")
    except Exception as error:  # noqa: BLE001 - the English figure must still show
        probe.missing.append(f"(error) {type(error).__name__}: {error}")
        image = None
    record: dict = {"texts": dict(sorted(probe.used.items())), "missing": probe.missing}
    if image is not None:
        record["image/png"] = image
    _record_missing([m for m in probe.missing if not m.startswith("(")])
    count_rendering_seconds(time.perf_counter() - start)
    return record


def count_rendering_seconds(seconds: float) -> None:
    """Add ``seconds`` of zh-TW rendering to this process's count, and write the
    count to $TRANSFORMER_BOOK_FIGURES_ZH_SECONDS where it is set:
    scripts/execute.py keeps this cost out of a chapter's time, since a reader does
    not pay it (only the zh-TW edition's build does)."""
    global rendering_seconds
    rendering_seconds += seconds
    if seconds_file := os.environ.get(SECONDS_VARIABLE):
        Path(seconds_file).write_text(f"{rendering_seconds:.3f}\n")
