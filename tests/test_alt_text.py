"""The figures' text alternatives: every figure cell leaves its text to a builder
in ``transformer_book.alt_text``, every builder has its figure, and ``alt_text``
refuses a bad call by name.

What a builder writes is held by the chapters themselves: ``make execute`` stores
each text in the figure's output, the zh-TW catalogue translates it by exact match
(``tests/test_i18n.py`` fails on a text without its translation), and nbval runs
every builder again on the chapter's own results.
"""

from __future__ import annotations

import ast
import inspect
import re

import pytest
from test_notebooks import NOTEBOOKS, _python_of, code_cells, load

from transformer_book.alt_text import alt_text
from transformer_book.alt_text._registry import FIGURES

SHOWN_BY = ("show", "figure_view")  # plot's two ways to put a figure on the page


def _name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _is_alt_text_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and _name(node.func) == "alt_text"


def _bindings(tree: ast.AST) -> dict[str, list[ast.expr]]:
    """name -> the values assigned to it; a name unpacked from a call's tuple (as
    ``fig, alt = head_score_maps(...)``) maps to that call."""
    found: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name):
                found.setdefault(target.id, []).append(node.value)
            elif isinstance(target, ast.Tuple):
                for element in target.elts:
                    if isinstance(element, ast.Name):
                        found.setdefault(element.id, []).append(node.value)
    return found


def alt_problems(code: str) -> list[str]:
    """What is wrong with the text alternatives of one cell's figures: each must be
    an ``alt_text(...)`` call, an empty string (a decorative figure), or a name the
    cell binds to one of those or unpacks from a plotting function's result."""
    tree = ast.parse(code)
    bound = _bindings(tree)
    problems = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node.func) in SHOWN_BY):
            continue
        given = [k.value for k in node.keywords if k.arg == "alt"] or node.args[1:2]
        if not given:
            problems.append(f"line {node.lineno}: a figure without a text alternative")
            continue
        alt = given[0]
        values = bound.get(alt.id, []) if isinstance(alt, ast.Name) else [alt]
        if not values:
            problems.append(f"line {node.lineno}: alt {ast.unparse(alt)} is not bound")
        for value in values:
            decorative = isinstance(value, ast.Constant) and value.value == ""
            unpacked = isinstance(value, ast.Call) and any(
                isinstance(target, ast.Tuple) for target in _targets_of(tree, value)
            )
            if not (decorative or _is_alt_text_call(value) or unpacked):
                problems.append(
                    f"line {node.lineno}: the text alternative is built in the cell "
                    f"({ast.unparse(value)[:60]}...): give it a builder in "
                    f"transformer_book.alt_text"
                )
    return problems


def _targets_of(tree: ast.AST, value: ast.expr) -> list[ast.expr]:
    return [
        target
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and node.value is value
        for target in node.targets
    ]


def figures_named(code: str) -> list[str]:
    """The figure names a cell passes to ``alt_text``."""
    return [
        node.args[0].value
        for node in ast.walk(ast.parse(code))
        if _is_alt_text_call(node)
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_figure_cell_leaves_its_text_alternative_to_a_builder(path):
    problems = [
        f"cell {i}, {problem}"
        for i, cell in enumerate(load(path).cells)
        if cell.cell_type == "code"
        for problem in alt_problems(_python_of(cell.source))
    ]
    assert not problems, "\n".join(problems)


def test_the_rule_tells_a_builder_from_an_inline_text():
    assert not alt_problems('show(fig, alt=alt_text("x", a=a))')
    assert not alt_problems('alt = alt_text("x", a=a)\nshow(fig, alt=alt)')
    assert not alt_problems("fig, alt = head_score_maps(s)\nshow(fig, alt=alt)")
    assert not alt_problems('show(fig, alt="")')
    assert not alt_problems('figure_view(fig, alt=alt_text("x"))')
    for inline in (
        'show(fig, alt=f"loss {x:.2f}")',
        'alt = (f"loss {x:.2f}, " f"more")\nshow(fig, alt=alt)',
        'show(fig, "the loss falls")',
        'alt = "a" + b\nfigure_view(fig, alt=alt)',
        "show(fig)",
    ):
        assert alt_problems(inline), inline


def test_every_builder_has_its_figure_and_every_figure_its_builder():
    used: dict[str, list[str]] = {}
    for path in NOTEBOOKS:
        for i, cell in enumerate(code_cells(load(path))):
            for name in figures_named(_python_of(cell.source)):
                used.setdefault(name, []).append(f"{path.stem} code cell {i}")
    unknown = sorted(set(used) - set(FIGURES))
    unused = sorted(set(FIGURES) - set(used))
    shared = {name: where for name, where in used.items() if len(where) > 1}
    assert not unknown, f"figures without a builder: {unknown}"
    assert not unused, f"builders no chapter calls: {unused}"
    assert not shared, f"one builder called from two cells: {shared}"


def test_builders_are_named_by_their_chapter():
    prefixes = {
        "_ch01": "rnn_",
        "_ch02": "attention_",
        "_ch03": "heads_",
        "_ch04": "position_",
        "_ch05": "transformer_",
        "_ch06": "variants_",
        "_ch07": "efficiency_",
        "_ch08": "beyond_",
        "_appendix": "appendix_",
    }
    for name, builder in FIGURES.items():
        module = builder.__module__.rsplit(".", 1)[-1]
        assert name.startswith(prefixes[module]), (name, module)
        assert re.fullmatch(r"[a-z0-9_]+", name), name
        assert builder.__doc__ and builder.__doc__.startswith("§"), name


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_a_builder_refuses_results_that_are_not_its_figures(name):
    """None for every result: a builder must fail (and alt_text name the results),
    never write "None" into a sentence."""
    params = list(inspect.signature(FIGURES[name]).parameters)
    with pytest.raises(ValueError, match="do not fit figure") as err:
        alt_text(name, **dict.fromkeys(params))
    assert all(p in str(err.value) for p in params)


def test_alt_text_refuses_a_bad_call_by_name():
    with pytest.raises(TypeError, match="figure must be a str"):
        alt_text(3)
    with pytest.raises(ValueError, match="did you mean 'rnn_recall'"):
        alt_text("rnn_recal")
    with pytest.raises(ValueError, match="not one of the book's figures"):
        alt_text("no_such_figure")
    with pytest.raises(TypeError, match="missing: n_symbols"):
        alt_text("rnn_recall", distances=[1], attention={}, lstm={}, opened={})
    with pytest.raises(TypeError, match="not its results: color"):
        alt_text("rnn_radius_sweep", sweep={}, color="red")


def test_alt_text_gives_the_builders_text():
    import torch

    norms = torch.tensor([1.0, 0.5, 0.25, 0.125])
    text = alt_text(
        "rnn_radius_view",
        radius=0.5,
        nonlinearity="tanh",
        norms=norms,
        linear=torch.tensor([1.0, 0.5, 0.25, 0.0625]),
    )
    assert text == (
        "Left: the eigenvalues of W_hh, the largest of modulus 0.5, inside the unit "
        "circle. Right: the tanh RNN's gradient norm against the distance back, log "
        "scale, goes from 5.0e-01 at distance 1 to 1.2e-01 at distance 3, where the "
        "linear rule ρ^k gives 6.2e-02."
    )
