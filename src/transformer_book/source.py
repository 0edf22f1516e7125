"""Show the package's own source in a notebook (used by every chapter).

The book never pastes a copy of package code into a chapter: it shows the real
thing, so the text cannot drift from what the tests check.
"""

from __future__ import annotations

import inspect
import textwrap

__all__ = ["source_of", "show_source"]


def source_of(obj: object) -> str:
    """The source code of a package function, class or method, dedented."""
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (TypeError, OSError) as err:
        raise ValueError(f"cannot find the source of {obj!r}: {err}") from None


def show_source(obj: object):
    """Display ``obj``'s source as a highlighted Python block in the notebook.

    Returns an ``IPython.display.Markdown`` object, which Jupyter, Colab and the
    HTML book all render as a code block; outside IPython it prints the source.
    """
    text = source_of(obj)
    try:
        from IPython.display import Markdown
    except ImportError:
        print(text)
        return None
    return Markdown(f"```python\n{text}```")
