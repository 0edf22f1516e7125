"""Show the package's own source in a notebook (used by every chapter).

The book never pastes a copy of package code into a chapter: it shows the real
thing, so the text cannot drift from what the tests check.
"""

from __future__ import annotations

import inspect
import textwrap

__all__ = ["Source", "source_of", "show_source"]


def source_of(obj: object) -> str:
    """The source code of a package function, class or method, dedented."""
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (TypeError, OSError) as err:
        raise ValueError(f"obj: cannot find the source of {obj!r}: {err}") from None


class Source:
    """A package object's source, shown as a highlighted Python block.

    Jupyter, Colab and the HTML book render the Markdown form; the plain-text
    form is the source itself, so nbval, which compares text, notices when a
    committed notebook shows code that the package no longer has.
    """

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self.text = text

    def _repr_markdown_(self) -> str:
        return f"```python\n{self.text}```"

    def __repr__(self) -> str:
        return self.text


def show_source(obj: object) -> Source:
    """The source of a package function, class or method, for display in a notebook.

    >>> show_source(causal_mask)  # the last line of a cell: rendered as code
    """
    return Source(source_of(obj))
