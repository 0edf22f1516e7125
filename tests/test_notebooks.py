"""The chapters follow the book's conventions, and every published solution works.

nbval (``make nbval``) re-executes the notebooks and compares their outputs; these
tests read the committed files without running a kernel.
"""

from __future__ import annotations

import builtins
import importlib
import re
import symtable
import sys
from pathlib import Path

import nbformat
import pytest

import transformer_book.exercises as exercises
from transformer_book.concepts import concept_check

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from execute import (  # noqa: E402
    LOADED_CALIBRATION_S,
    REFERENCE_CALIBRATION_S,
    budget_seconds,
    execution_record,
)
from toc_notebooks import chapter_notebooks, toc_notebooks  # noqa: E402

NOTEBOOKS = toc_notebooks()  # the chapters and the appendix
IDS = [p.stem for p in NOTEBOOKS]
CHAPTERS = chapter_notebooks()  # the numbered chapters only
CHAPTER_IDS = [p.stem for p in CHAPTERS]
APPENDIX = [p for p in NOTEBOOKS if p not in CHAPTERS]


def repository_url() -> str:
    match = re.search(
        r"^repository:\s*\n\s+url:\s*(\S+)", (ROOT / "_config.yml").read_text(), re.M
    )
    assert match, "_config.yml has no repository.url"
    return match.group(1)


def setup_cell(url: str) -> str:
    return (
        "import sys\n\n"
        'if "google.colab" in sys.modules:\n'
        f"    %pip install -q git+{url}"
    )


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def load(path: Path):
    return nbformat.read(path, as_version=4)


def test_every_toc_entry_exists_and_every_chapter_is_in_the_toc():
    entries = re.findall(r"(?:file|root):\s*(\S+)", (ROOT / "_toc.yml").read_text())
    for entry in entries:
        assert any((ROOT / f"{entry}{ext}").exists() for ext in (".md", ".ipynb")), (
            entry
        )
    listed = {ROOT / f"{e}.ipynb" for e in entries}
    for path in (ROOT / "book").glob("*.ipynb"):
        assert path in listed, f"{path.name} is not in _toc.yml"
    assert NOTEBOOKS, "no notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_first_code_cell_is_the_colab_setup_cell(path):
    first = code_cells(load(path))[0]
    assert first.source.strip() == setup_cell(repository_url())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_committed_executed_top_to_bottom_without_errors(path):
    nb = load(path)
    counts = [c.execution_count for c in code_cells(nb)]
    assert counts == list(range(1, len(counts) + 1)), "run `make execute` and commit"
    for cell in code_cells(nb):
        for out in cell.outputs:
            assert out.output_type != "error", cell.source[:80]
            assert not (out.output_type == "stream" and out.name == "stderr"), (
                f"stderr output (warnings, progress bars) in: {cell.source[:80]}"
            )
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_committed_run_kept_within_its_budget(path):
    """The timings a chapter prints come from a run within its budget: a run that
    took longer was slowed by other work (or the chapter grew), and its printed
    timings would mislead the reader."""
    record = load(path).metadata.get("transformer_book", {}).get("execution")
    assert record, "no recorded execution: run `make execute` and commit"
    assert record["budget_seconds"] == budget_seconds(path)
    assert record.get("calibration_seconds"), "no calibration: run `make execute`"
    assert record["calibration_seconds"] <= LOADED_CALIBRATION_S, (
        f"the calibration took {record['calibration_seconds']} s: the machine was "
        "loaded, so the run cannot be scaled; execute it again on an idle machine"
    )
    assert record["reference_seconds"] <= budget_seconds(path), (
        f"the committed run took {record['seconds']} s on {record['cpu']} "
        f"({record['date']}), {record['reference_seconds']} s on the reference "
        f"machine by its calibration, over the {budget_seconds(path):.0f} s budget: "
        "execute it again on an idle machine (make execute NOTEBOOKS=...), or make "
        "it faster"
    )


def test_the_execution_record_says_how_long_and_on_what():
    record = execution_record(ROOT / "book" / "07_complexity.ipynb", 41.26)
    assert record["seconds"] == 41.3 and record["budget_seconds"] == 60
    assert "reference_seconds" not in record  # no calibration, nothing scaled
    scaled = execution_record(
        ROOT / "book" / "07_complexity.ipynb", 41.26, 2 * REFERENCE_CALIBRATION_S
    )
    assert scaled["reference_seconds"] == 20.6, "a host twice as slow: half the time"
    with pytest.raises(ValueError, match="calibration"):
        execution_record(ROOT / "book" / "07_complexity.ipynb", 41.26, 0.0)
    assert record["cpu"] and record["cores"] >= 1 and record["threads"] >= 1
    assert isinstance(record["kernels"], str) and record["kernels"]
    assert budget_seconds(ROOT / "book" / "08_beyond_text.ipynb") == 90
    assert budget_seconds(ROOT / "book" / "appendix_one_page.ipynb") == 30
    assert budget_seconds(ROOT / "book" / "appendix_gpt_text.ipynb") == 60


@pytest.mark.parametrize("path", CHAPTERS, ids=CHAPTER_IDS)
def test_widgets_work_without_a_kernel(path):
    """Every widget is a linked one (precomputed views switched in the browser).

    ``interact`` redraws through the kernel, so in the HTML book it would show a
    control that moves and a figure that does not: the book does not use it.
    """
    nb = load(path)
    cells = code_cells(nb)
    assert not any(re.search(r"\binteract(ive)?\(", c.source) for c in cells)
    widget_cells = [
        c for c in cells if re.search(r"\blinked_(views|stack)\(", c.source)
    ]
    assert widget_cells, "every chapter has at least one interactive widget"
    for cell in widget_cells:
        assert cell.source.startswith("# NBVAL_IGNORE_OUTPUT"), cell.source[:80]
        assert any(
            "application/vnd.jupyter.widget-view+json" in o.get("data", {})
            for o in cell.outputs
        ), "the widget cell shows no widget: execute with make execute"
    assert "widgets" in nb.metadata, "widget state missing: execute with make execute"


@pytest.mark.parametrize("path", CHAPTERS, ids=CHAPTER_IDS)
def test_concept_checks_close_their_sections(path):
    """Each chapter shows every one of its concept checks once, at the end of the
    section it is for, with the input hidden in the HTML and the committed output
    equal to what the package renders today."""
    nb = load(path)
    chapter = int(path.name[:2])
    module = importlib.import_module(f"transformer_book.concepts.ch{chapter:02d}")
    shown = []
    section = None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for heading in re.finditer(r"^## (?:(\d+\.\d+) )?", cell.source, re.M):
                section = heading.group(1)  # None after Summary, Exercises...
            continue
        call = re.fullmatch(r'concept_check\("(\d+\.\d+)"\)', cell.source.strip())
        if "concept_check(" not in cell.source or "import" in cell.source:
            continue
        assert call, f"a concept-check cell holds only the call: {cell.source!r}"
        key = call.group(1)
        assert key == section, f"concept_check({key!r}) is in section {section}"
        assert "remove-input" in cell.metadata.get("tags", []), key
        html = [o["data"]["text/html"] for o in cell.outputs if "data" in o]
        assert html == [concept_check(key).data], f"re-execute: {key} changed"
        shown.append(key)
    assert sorted(shown) == sorted(module.CHECKS), (shown, list(module.CHECKS))
    n = sum(len(questions) for questions in module.CHECKS.values())
    assert 3 <= n <= 5, f"{n} questions in chapter {chapter}"


@pytest.mark.parametrize("path", CHAPTERS, ids=CHAPTER_IDS)
def test_chapter_structure(path):
    nb = load(path)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    assert re.search(r"learning goals", text, re.I)
    exercises_found = re.findall(r"^### Exercise (\d+)\.(\d+) · (★+) · ", text, re.M)
    assert 4 <= len(exercises_found) <= 6, f"{len(exercises_found)} exercises"
    assert text.count("<summary>Solution</summary>") == len(exercises_found)
    assert "## References" in text
    assert not re.search(r"\bTODO\b|\bTBD\b|\bFIXME\b", text)


def test_the_toc_has_the_chapters_then_the_appendix():
    assert [p.name[:3] for p in CHAPTERS] == [f"{n:02d}_" for n in range(1, 9)]
    assert [p.name for p in APPENDIX] == [
        "appendix_one_page.ipynb",
        "appendix_gpt_text.ipynb",
    ]
    assert NOTEBOOKS == CHAPTERS + APPENDIX, "the appendix comes after the chapters"


@pytest.mark.parametrize("path", APPENDIX, ids=[p.stem for p in APPENDIX])
def test_appendix_structure(path):
    """An appendix page is not a chapter (no exercises, concept checks or widget),
    but it has a title, a summary and references like one."""
    nb = load(path)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    assert "## Summary" in text and "## References" in text
    assert not re.search(r"\bTODO\b|\bTBD\b|\bFIXME\b", text)
    assert not re.search(r"^### Exercise", text, re.M), "exercises belong to chapters"


def test_the_appendix_shows_each_listing_whole_as_the_file_holds_it():
    """The listings are read from the repository (``show_source`` of the module),
    never pasted: each one's shown text is its file, byte for byte."""
    nb = load(ROOT / "book" / "appendix_one_page.ipynb")
    shown = {
        c.source.strip(): c.outputs[0]["data"]["text/plain"]
        for c in code_cells(nb)
        if c.source.strip().startswith("show_source(")
    }
    listings = ROOT / "src" / "transformer_book" / "listings"
    for module in ("gpt", "transformer"):
        text = (listings / f"{module}.py").read_text().rstrip("\n")  # as Jupyter
        assert shown.get(f"show_source({module})") == text, f"{module}.py not shown"


def test_every_cited_key_is_in_the_bibliography():
    bib = (ROOT / "book" / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,]+),", bib))
    for path in NOTEBOOKS + list((ROOT / "book").glob("*.md")):
        text = path.read_text()
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", text):
            for key in group.split(","):
                assert key.strip() in keys, f"{path.name} cites unknown {key}"


# A stub cell: the reader's function still raising NotImplementedError, or answers
# still `...` (`name = ...`), and a last line calling the exercise's checker.
_STUB = re.compile(r"raise NotImplementedError|^\w+ = \.\.\.", re.M)
_CHECK_CALL = re.compile(r"^(check_\w+)\((.*)\)\s*\Z", re.M | re.S)


def is_stub(source: str) -> bool:
    return bool(_STUB.search(source))


def exercise_pairs(path: Path):
    """(solution code, stub cell, checker name, check call) for every checked
    exercise: the call is the stub cell's last statement, ``check_…(…)``."""
    nb = load(path)
    pairs = []
    last_solution = None
    for cell in nb.cells:
        if (
            cell.cell_type == "markdown"
            and "<summary>Solution</summary>" in cell.source
        ):
            blocks = re.findall(r"```python\n(.*?)```", cell.source, re.S)
            last_solution = blocks[-1] if blocks else None
        elif cell.cell_type == "code" and is_stub(cell.source):
            last = cell.source.strip().split("\n\n")[-1].splitlines()
            call = _CHECK_CALL.search("\n".join(x for x in last if "..." not in x))
            assert call, (
                f"a stub without a checker call in {path.name}: {cell.source[:80]}"
            )
            assert last_solution, (
                f"no solution code before {call.group(0)} in {path.name}"
            )
            pairs.append((last_solution, cell.source, call.group(1), call.group(0)))
            last_solution = None
    return pairs


ALL_PAIRS = [(p, *pair) for p in NOTEBOOKS for pair in exercise_pairs(p)]
PAIR_IDS = [f"{p.stem}-{c}" for p, _, _, c, _ in ALL_PAIRS]


def checkers() -> dict:
    """The namespace a chapter gives its stub cells: every exported checker."""
    return {name: getattr(exercises, name) for name in exercises.__all__}


def test_exercise_pairs_reads_both_kinds_of_stub():
    assert is_stub("def f(x):\n    raise NotImplementedError\n\n\ncheck_f(f)")
    assert is_stub("a = ...  # bytes\nb = ...\ncheck_ab(a, b)")
    assert not is_stub("a = 3\ncheck_ab(a, ...)")
    call = _CHECK_CALL.search("check_ab(a, b)")
    assert call and call.group(1) == "check_ab"


@pytest.mark.parametrize("path", CHAPTERS, ids=CHAPTER_IDS)
def test_at_least_two_coding_exercises_are_checked(path):
    assert len(exercise_pairs(path)) >= 2


@pytest.mark.parametrize(
    ("path", "solution", "stub", "check_name", "check_call"), ALL_PAIRS, ids=PAIR_IDS
)
def test_published_solution_passes_its_checker(
    path, solution, stub, check_name, check_call, capsys
):
    """The solution, pasted into the stub cell in place of the stub, with nothing
    else imported, passes the cell's own check call."""
    assert check_name in exercises.__all__, f"{check_name} is not exported"
    namespace: dict = {}
    exec(compile(solution, f"<solution {check_name}>", "exec"), namespace)
    namespace[check_name] = getattr(exercises, check_name)
    exec(compile(check_call, f"<check {check_name}>", "exec"), namespace)
    assert "all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("path", "solution", "stub", "check_name", "check_call"), ALL_PAIRS, ids=PAIR_IDS
)
def test_stub_reports_not_attempted(
    path, solution, stub, check_name, check_call, capsys
):
    exec(compile(stub, f"<stub {check_name}>", "exec"), checkers())
    assert "not attempted yet" in capsys.readouterr().out


def _python_of(cell_source: str) -> str:
    """A code cell's Python: IPython's %magic and !shell lines become ``pass``."""
    return "\n".join(
        re.sub(r"^(\s*)[%!].*$", r"\1pass", line) for line in cell_source.splitlines()
    )


def _bound_names(code: str) -> set[str]:
    """Names that running ``code`` at a notebook's top level defines."""
    table = symtable.symtable(code, "<cell>", "exec")
    return {
        s.get_name()
        for s in table.get_symbols()
        if s.is_assigned() or s.is_imported() or s.is_namespace()
    }


def _free_names(code: str) -> set[str]:
    """Names ``code`` reads that neither it nor Python's builtins define."""
    top = symtable.symtable(code, "<solution>", "exec")
    bound = _bound_names(code)
    free = set()

    def visit(table):
        for s in table.get_symbols():
            name = s.get_name()
            if not s.is_referenced() or name in bound:
                continue
            if table is top or (s.is_global() and not s.is_local()):
                free.add(name)
        for child in table.get_children():
            visit(child)

    visit(top)
    return free - set(dir(builtins)) - {"display", "get_ipython", "__file__"}


def solutions_with_context(path: Path):
    """(exercise heading, solution code, names the earlier code cells define)."""
    nb = load(path)
    defined: set[str] = set()
    heading = None
    found = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            if not is_stub(cell.source):  # a stub is replaced
                defined |= _bound_names(_python_of(cell.source))
            continue
        # the exercise a solution answers: the last heading above it
        marks = re.finditer(
            r"^### (Exercise \d+\.\d+)|<summary>Solution</summary>(.*?)</details>",
            cell.source,
            re.S | re.M,
        )
        for mark in marks:
            if mark.group(1):
                heading = mark.group(1)
                continue
            for block in re.findall(r"```python\n(.*?)```", mark.group(2), re.S):
                found.append((heading, block, set(defined)))
    return found


def test_free_names_sees_what_a_pasted_solution_lacks():
    code = (
        "import math\n"
        "def f(x):\n"
        "    y = ablated(x)\n"
        "    return [rank_correlation(a, y) for a in x] + [math.pi, len(x)]\n"
        "z = f(data)\n"
    )
    assert _free_names(code) == {"ablated", "rank_correlation", "data"}
    assert "data" in _bound_names("data = load()\nfor row in data:\n    pass\n")
    assert _python_of("%pip install x\nimport y") == "pass\nimport y"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_solution_runs_when_pasted_into_its_chapter(path):
    """Every name a solution uses is its own or defined by an earlier code cell, so
    the solution runs when pasted into the stub cell (the checked ones are run by
    test_published_solution_passes_its_checker)."""
    missing = [
        f"{heading}: {sorted(_free_names(code) - defined)}"
        for heading, code, defined in solutions_with_context(path)
        if _free_names(code) - defined
    ]
    assert not missing, "solutions that use names the chapter never defines: " + (
        "; ".join(missing)
    )


def _markdown_of(path: Path) -> str:
    if path.suffix == ".md":
        return path.read_text()
    return "\n".join(c.source for c in load(path).cells if c.cell_type == "markdown")


PAGES = NOTEBOOKS + sorted((ROOT / "book").glob("*.md"))


@pytest.mark.parametrize("path", PAGES, ids=[p.stem for p in PAGES])
def test_a_page_that_quotes_a_source_text_cites_it(path):
    text = _markdown_of(path)
    cited = {
        key.strip()
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", text)
        for key in group.split(",")
    }
    for name, key in (("lesson", "lesson9"), ("article", "engine_article")):
        if re.search(rf"\bthe {name}\b", text, re.I) and path.stem != "references":
            assert key in cited, f"{path.name} quotes the {name} without citing {key}"
