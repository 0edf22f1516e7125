"""The zh-TW edition's command: translation units, gettext catalogues, their checks.

    python scripts/i18n.py extract [catalogue...]   # bring the catalogues up to date
    python scripts/i18n.py check [catalogue...]     # counts, and every problem
    python scripts/i18n.py check-file PATH.po       # one translator's file
    python scripts/i18n.py generate                 # write zh-TW/ from the catalogues

Each job has its module; this one gathers their names, which the tests use as
``i18n.<name>``:

- ``i18n_units``: Markdown cut into translation units, a translation put in place
  and set as Chinese text is set;
- ``i18n_notebook``: the reader text of a notebook besides its Markdown (the text
  alternatives of its figures);
- ``i18n_outputs``: the words a notebook's code shows (prose outputs such as
  Chapter 1's claims table, widget labels), with their numbers as slots
  (``outputs.po``);
- ``i18n_catalogue``: the pages' units and the gettext catalogues (``extract``);
- ``i18n_check``: what a translation must keep (numbers, math, code, links,
  structure) and Taiwan's usage (``check``);
- ``i18n_generate``: the zh-TW edition's pages and the search's word list
  (``generate``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from i18n_catalogue import (  # noqa: E402
    CONCEPTS_PO,
    LOCALE_DIR,
    OUTPUTS_PO,
    ROOT,
    _po,
    catalogue_path,
    catalogue_units,
    catalogues,
    compile_concepts,
    concepts_units,
    extract,
    load_catalogue,
    outputs_units,
    page_markdown,
    page_units,
    pages,
    translations,
    update_catalogue,
    write_concepts_mo,
)
from i18n_check import (  # noqa: E402
    GARBLED,
    MAGNITUDES,
    USAGE_ALLOWLIST,
    Number,
    catalogue_report,
    check,
    check_file,
    entry_problems,
    features,
    invariant_problems,
    numbers,
    usage_allowlist,
    usage_problems,
)
from i18n_generate import (  # noqa: E402
    EDITION_DIR,
    LANG,
    SEARCH_TERMS,
    _concept_section,
    edition_path,
    generate,
    generate_page,
    search_terms,
    translate_notebook,
    translated_code,
)
from i18n_notebook import (  # noqa: E402
    WIDGET_STATE,
    figure_alts,
    translate_alts,
)
from i18n_outputs import (  # noqa: E402
    output_units,
    prose_outputs,
    translate_outputs,
    translate_widget_labels,
    widget_labels,
)
from i18n_units import (  # noqa: E402
    _KEPT,
    segments,
    translate,
    typeset_chinese,
    units,
)

__all__ = [
    "widget_labels",
    "translate_widget_labels",
    "translate_outputs",
    "prose_outputs",
    "output_units",
    "outputs_units",
    "catalogue_units",
    "OUTPUTS_PO",
    "CONCEPTS_PO",
    "EDITION_DIR",
    "GARBLED",
    "LANG",
    "LOCALE_DIR",
    "MAGNITUDES",
    "ROOT",
    "SEARCH_TERMS",
    "USAGE_ALLOWLIST",
    "WIDGET_STATE",
    "Number",
    "_KEPT",
    "_concept_section",
    "_po",
    "catalogue_path",
    "catalogue_report",
    "catalogues",
    "check",
    "check_file",
    "compile_concepts",
    "concepts_units",
    "edition_path",
    "entry_problems",
    "extract",
    "features",
    "figure_alts",
    "generate",
    "generate_page",
    "invariant_problems",
    "load_catalogue",
    "numbers",
    "page_markdown",
    "page_units",
    "pages",
    "search_terms",
    "segments",
    "translate",
    "translate_alts",
    "translate_notebook",
    "translated_code",
    "translations",
    "typeset_chinese",
    "units",
    "update_catalogue",
    "usage_allowlist",
    "usage_problems",
    "write_concepts_mo",
]


def main(argv: list[str]) -> int | str | None:
    if argv[:1] == ["extract"]:
        return extract(argv[1:])
    if argv[:1] == ["check"]:
        return 1 if check(argv[1:]) else 0
    if argv[:1] == ["check-file"] and len(argv) == 2:
        return 1 if check_file(argv[1]) else 0
    if argv == ["generate"]:
        return generate()
    return (
        "usage: python scripts/i18n.py extract [catalogue...] | generate"
        " | check [catalogue...] | check-file PATH.po"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
