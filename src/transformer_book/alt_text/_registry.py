"""The table of figure builders that ``alt_text`` looks names up in.

Each chapter's module (``_ch01.py``...) registers its builders with ``@figure``:
a builder takes the results its figure cell computed, as keyword arguments, and
returns the text alternative. The builders are private: a chapter's cell calls them
through ``alt_text``, which checks the name and the results first.
"""

from __future__ import annotations

from collections.abc import Callable

FIGURES: dict[str, Callable[..., str]] = {}


def figure(name: str) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """Register the decorated builder as the text alternative of figure ``name``."""

    def register(builder: Callable[..., str]) -> Callable[..., str]:
        if name in FIGURES:
            raise RuntimeError(f"two figures are named {name!r}")
        FIGURES[name] = builder
        return builder

    return register
