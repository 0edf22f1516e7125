"""The reader text of a notebook besides its Markdown: the text alternatives of its
figures (image outputs and the stored widgets' views), found for the catalogue and
translated in the zh-TW notebook."""

from __future__ import annotations

import re
from collections.abc import Mapping

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_IMG_ALT = re.compile(r'(<img [^>]*\balt=")([^"]*)(")')


def _widget_values(nb) -> list[dict]:
    """The states of the notebook's stored widgets that hold HTML (figure views)."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return [
        model["state"]
        for model in state.values()
        if isinstance(model.get("state", {}).get("value"), str)
    ]


def figure_alts(nb) -> list[str]:
    """The text alternatives of a notebook's figures, each once: those of its image
    outputs (``plot.show``) in order, then those of its widgets' views
    (``plot.figure_view``) sorted, since the stored widgets' order follows their
    random ids. Empty ones (decorative figures) are left out."""
    import html

    found: dict[str, None] = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            alt = output.get("metadata", {}).get("image/png", {}).get("alt")
            if alt:
                found.setdefault(alt, None)
    views = set()  # the widgets' models are stored by random id: sort their views
    for state in _widget_values(nb):
        for match in _IMG_ALT.finditer(state["value"]):
            if match.group(2):
                views.add(html.unescape(match.group(2)))
    for alt in sorted(views):
        found.setdefault(alt, None)
    return list(found)


def translate_alts(nb, catalogue: Mapping[str, str]) -> list[str]:
    """Translate, in place, the text alternatives of ``nb``'s figures; returns those
    that have no translation."""
    import html

    missing = []

    def swap(alt: str) -> str:
        if alt and alt not in catalogue:
            missing.append(alt)
        return catalogue.get(alt, alt)

    for cell in nb.cells:
        for output in cell.get("outputs", []):
            image = output.get("metadata", {}).get("image/png", {})
            if image.get("alt"):
                image["alt"] = swap(image["alt"])
    for state in _widget_values(nb):
        state["value"] = _IMG_ALT.sub(
            lambda m: (
                m.group(1) + html.escape(swap(html.unescape(m.group(2)))) + m.group(3)
            ),
            state["value"],
        )
    return list(dict.fromkeys(missing))
