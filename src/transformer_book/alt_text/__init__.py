"""Text alternatives of the book's figures: what a screen reader reads instead.

A figure cell draws its figure and shows it with
``show(fig, alt=alt_text("rnn_forward_times", times=times, ...))``: the cell keeps
the plotting, and the sentence that states the figure's finding with the numbers the
cell computed ("the RNN's gradient falls by x 0.52 a step...") is built here, out of
the reader's way. Each figure has its builder, registered by name in one module per
chapter (``_ch01.py``...); ``alt_text`` checks the name and the results it is given
before it calls the builder.

The texts are the English edition's; the zh-TW edition translates each finished
text with the chapter's catalogue (``scripts/i18n.py``), numbers included.
"""

from __future__ import annotations

import difflib
import inspect

from . import (  # noqa: F401  (each module registers its chapter's figures)
    _appendix,
    _ch01,
    _ch02,
    _ch03,
    _ch04,
    _ch05,
    _ch06,
    _ch07,
    _ch08,
)
from ._registry import FIGURES

__all__ = ["alt_text"]

# What a builder raises when its results are not the ones its figure computed (a
# missing key, a shorter list, a number where a table was expected)
_MISFITS = (
    AttributeError,
    IndexError,
    KeyError,
    TypeError,
    ValueError,
    ZeroDivisionError,
)


def alt_text(figure: str, **results) -> str:
    """The text alternative of the book's figure ``figure``, from the ``results``
    its cell computed (keyword arguments, named as the figure's builder names them).

    Raises ``TypeError`` naming ``figure`` if it is not a str, ``ValueError`` if no
    figure has that name (with the closest names), ``TypeError`` naming the results
    that are missing or not the figure's, and ``ValueError`` naming the results when
    they do not fit the figure (a table without the rows it describes, say).
    """
    if not isinstance(figure, str):
        raise TypeError(f"figure must be a str, got {type(figure).__name__}")
    builder = FIGURES.get(figure)
    if builder is None:
        close = difflib.get_close_matches(figure, FIGURES, n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"figure {figure!r} is not one of the book's figures{hint}")
    wanted = list(inspect.signature(builder).parameters)
    missing = [name for name in wanted if name not in results]
    unknown = [name for name in results if name not in wanted]
    if missing or unknown:
        raise TypeError(
            f"figure {figure!r} takes the results {', '.join(wanted)}"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; not its results: {', '.join(unknown)}" if unknown else "")
        )
    try:
        text = builder(**results)
    except _MISFITS as err:
        raise ValueError(
            f"the results {', '.join(results)} do not fit figure {figure!r} "
            f"({type(err).__name__}: {err})"
        ) from err
    return text
