"""Measure the margin of every bound the book asserts (`make margins`).

Every result the prose states is asserted as a bound (`assert acc >= 0.97`), and a
bound must hold with room to spare on every reader's machine: other kernels (AVX2,
AVX-512, portable) and other seeds move a measured value a little. This script
records, for every comparison inside an `assert` of the chapters, the appendix and
the seeds tests, the two values compared, under the numeric configuration it runs
in, and writes the tightest of each as a table.

    python scripts/margins.py notebooks OUT.jsonl NOTEBOOK...   run the notebooks
    python -m pytest -p margins --assert=plain -m seeds tests   (with PYTHONPATH=scripts
                                                                 and MARGINS_OUT set)
    python scripts/margins.py report OUT.jsonl... > table.md    the table
    python scripts/margins.py all FOLDER NOTEBOOK...              all of it, under every
                                                                 configuration this CPU
                                                                 runs (`make margins`)

How: each `assert` is rewritten before it runs (the abstract syntax tree, not the
text), so that every comparison `a OP b` in its test (<, <=, >, >=) also records
float(a) and float(b); comparisons of non-numbers are left alone, and an elementwise
comparison of tensors records its tightest pair of elements. The margin of one
comparison is |a - b| / max(|a|, |b|): how far the measured value may move, as a
share of itself, before the bound fails; a share held to a bound above one half (an
accuracy >= 0.98) is measured on its complement, its error rate. A comparison that
runs many times (in a loop or a generator) keeps its smallest margin. A failed
comparison has a negative margin.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
RECORD = "__margins_record__"


def _numbers(x):
    """x as a float64 tensor if it is a number, a tensor or an array, else None
    (lists compare lexicographically, so they are not numbers here)."""
    import torch

    if isinstance(x, bool) or not (isinstance(x, int | float) or hasattr(x, "dtype")):
        return None
    try:
        if isinstance(x, int | float):
            t = torch.tensor(float(x), dtype=torch.float64)
        else:
            t = torch.as_tensor(x.detach().cpu() if hasattr(x, "detach") else x)
    except (TypeError, ValueError, RuntimeError):
        return None
    if t.dtype == torch.bool or t.is_complex() or t.numel() == 0:
        return None
    return t.double()


def _tightest(a, op: str, b) -> tuple[float, float] | None:
    """The pair of elements of a and b (broadcast) with the smallest margin, as
    floats; None where either side is not numbers or is not finite."""
    ta, tb = _numbers(a), _numbers(b)
    if ta is None or tb is None:
        return None
    import torch

    try:
        ta, tb = (t.reshape(-1) for t in torch.broadcast_tensors(ta, tb))
    except RuntimeError:
        return None
    finite = ta.isfinite() & tb.isfinite()
    if not finite.any():
        return None
    ta, tb = ta[finite], tb[finite]
    scale = ta.abs().maximum(tb.abs()).clamp_min(1e-300)
    gaps = (tb - ta) if op in ("<", "<=") else (ta - tb)
    i = int((gaps / scale).argmin())
    return float(ta[i]), float(tb[i])


def margin(a: float, op: str, b: float) -> float:
    """How far a may move relative to the larger side before `a op b` fails
    (negative where it already fails).

    A share compared with a bound above one half (an accuracy >= 0.98, a cosine
    <= 0.99) is measured on its complement, the error rate: an accuracy of 0.99
    against 0.98 fails when its errors double, not when it loses 1% of itself, and
    the errors are what moves between kernels and seeds. A share held to its own
    range or beyond it (`<= 1`, `>= 0`) cannot fail there: 100%."""
    if 0 <= a <= 1 and (
        (op in ("<", "<=") and b >= 1) or (op in (">", ">=") and b <= 0)
    ):
        return 1.0  # a share's own range ("95%-100%"), not a bound
    if 0 <= a <= 1 and 0.5 < b <= 1:
        a, b, op = 1 - a, 1 - b, {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
    scale = max(abs(a), abs(b))
    if scale == 0:
        return 0.0
    gap = b - a if op in ("<", "<=") else a - b
    return gap / scale


def _has_number(node: ast.AST) -> bool:
    """Whether an expression holds a numeric literal (a bound, or a bound's factor)."""
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, int | float)
        for n in ast.walk(node)
    )


class _Rewriter(ast.NodeTransformer):
    """Wrap each ordering comparison that an assert's verdict rests on in a
    recording call: the test itself, the operands of `and` and `or`, the body of
    `all(...)` or `any(...)`, and what `.all()` or `.any()` is called on. A
    comparison used otherwise (an argument, `(a > b) == expected`, under `not`) is
    a value, not a bound, and is left alone."""

    def __init__(self, where: str, source: str):
        self.where, self.source = where, source

    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        node.test = self._verdict(node.test)
        return node

    def _verdict(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.Compare) and all(type(op) in OPS for op in node.ops):
            return self._recorded(node)
        if isinstance(node, ast.BoolOp):
            node.values = [self._verdict(v) for v in node.values]
        elif isinstance(node, ast.Call):
            name = node.func
            if isinstance(name, ast.Name) and name.id in ("all", "any") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.GeneratorExp | ast.ListComp):
                    arg.elt = self._verdict(arg.elt)
            elif isinstance(name, ast.Attribute) and name.attr in ("all", "any"):
                name.value = self._verdict(name.value)
        return node

    def _recorded(self, node: ast.Compare) -> ast.AST:
        text = ast.get_source_segment(self.source, node) or ast.unparse(node)
        key = f"{self.where}:{node.lineno}:{node.col_offset}"
        ops = [OPS[type(op)] for op in node.ops]
        # In a chain, a link between two measured values ("lo <= min(a, b) <= max(a,
        # b) <= hi") states an order, not a bound: only links with a number count.
        operands = [node.left, *node.comparators]
        links = "".join(
            "1" if len(ops) == 1 or _has_number(x) or _has_number(y) else "0"
            for x, y in zip(operands, operands[1:], strict=False)
        )
        call = ast.Call(
            func=ast.Name(RECORD, ast.Load()),
            args=[
                ast.Constant(key),
                ast.Constant(" ".join(text.split())),
                ast.List(operands, ast.Load()),
                ast.Constant(" ".join(ops)),
                ast.Constant(links),
            ],
            keywords=[],
        )
        return ast.copy_location(call, node)


def rewrite(source: str, where: str) -> ast.Module:
    """source's syntax tree with its asserts' comparisons recorded."""
    tree = _Rewriter(where, source).visit(ast.parse(source))
    return ast.fix_missing_locations(tree)


def make_recorder(path: str, config: str):
    """The function the rewritten asserts call: it appends one JSON line per
    comparison to path and returns what the comparison returns."""

    def record(key, text, values, ops, links=""):
        ops = ops.split() if isinstance(ops, str) else ops
        result = True
        for i, (a, op, b) in enumerate(zip(values, ops, values[1:], strict=False)):
            result = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
            pair = _tightest(a, op, b) if links[i : i + 1] != "0" else None
            if pair is not None:
                fa, fb = pair
                line = {
                    "key": key,
                    "text": text,
                    "config": config,
                    "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" (")[0],
                    "a": fa,
                    "op": op,
                    "b": fb,
                    "margin": margin(fa, op, fb),
                }
                with open(path, "a") as f:
                    f.write(json.dumps(line) + "\n")
            if i < len(ops) - 1 and not result:  # a chain stops as Python's does
                return result
        return result

    return record


def config_name() -> str:
    """The numeric configuration this process runs under, e.g. 'avx2, 2 threads'."""
    import torch

    level = torch.backends.cpu.get_cpu_capability().lower()
    return f"{level}, {torch.get_num_threads()} thread(s)"


# pytest plugin: `-p margins` (with scripts/ on PYTHONPATH, --assert=plain, MARGINS_OUT)


class _TestLoader(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname):  # never a cached .pyc: always the rewritten source
        source = self.get_data(self.path).decode()
        where = Path(self.path).name
        return compile(rewrite(source, where), self.path, "exec")

    def exec_module(self, module):
        module.__dict__[RECORD] = make_recorder(
            os.environ["MARGINS_OUT"], config_name()
        )
        super().exec_module(module)


class _TestFinder(importlib.abc.MetaPathFinder):
    def __init__(self, folder: Path):
        self.folder = folder

    def find_spec(self, fullname, path=None, target=None):
        name = fullname.rpartition(".")[2]
        file = self.folder / f"{name}.py"
        if not name.startswith("test_") or not file.exists():
            return None
        loader = _TestLoader(fullname, str(file))
        return importlib.util.spec_from_file_location(fullname, file, loader=loader)


def pytest_configure(config):
    if "MARGINS_OUT" not in os.environ:
        raise RuntimeError("-p margins needs MARGINS_OUT, the file to append to")
    sys.meta_path.insert(0, _TestFinder(Path(config.rootpath) / "tests"))


# notebooks


def run_notebooks(out: str, paths: list[str]) -> None:
    """Execute each notebook with its asserts rewritten (cells that do not parse as
    Python, such as the Colab install cell, run as they are)."""
    import nbformat
    from nbclient import NotebookClient

    for path in paths:
        nb = nbformat.read(path, as_version=4)
        name = Path(path).name
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or "assert" not in cell.source:
                continue
            try:
                tree = rewrite(cell.source, f"{name}#cell{i}")
            except SyntaxError:
                continue
            cell.source = ast.unparse(tree)
        setup = nbformat.v4.new_code_cell(
            "import sys\n"
            f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "import margins as _m\n"
            f"{RECORD} = _m.make_recorder({out!r}, _m.config_name())"
        )
        nb.cells.insert(0, setup)
        folder = Path(path).resolve().parent
        client = NotebookClient(
            nb, timeout=900, resources={"metadata": {"path": folder}}
        )
        client.execute()
        print(f"{name}: run", file=sys.stderr, flush=True)


MINIMUM = 0.10  # every bound keeps at least this share of its measured value to spare
EXEMPT = Path(__file__).resolve().parent.parent / "tests" / "margins_exact.toml"


def exemptions(path: Path = EXEMPT) -> dict[tuple[str, str], str]:
    """(file, comparison text) -> why the compared values are exact: the same on
    every machine and seed (counts of the data, sizes of a file, a formula with no
    training), so that no margin is needed (tests/margins_exact.toml)."""
    import tomllib

    table = tomllib.loads(path.read_text()) if path.exists() else {}
    return {(f, t): why for f, texts in table.items() for t, why in texts.items()}


def _rows(paths: list[str]) -> tuple[dict[str, dict], list[str]]:
    rows: dict[str, dict] = {}
    configs: list[str] = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            row = rows.setdefault(
                r["key"], {"text": r["text"], "by": defaultdict(list)}
            )
            row["by"][r["config"]].append(r)
            if r["config"] not in configs:
                configs.append(r["config"])
    return rows, sorted(configs)


def _least(records: list[dict]) -> dict:
    return min(records, key=lambda r: r["margin"])


def _file(key: str) -> str:
    return key.split("#")[0].split(":")[0]


def report(paths: list[str], exempt: dict | None = None) -> str:
    """Markdown: each bound with its tightest margin in each configuration, tightest
    first; then the exact comparisons, with why they need no margin."""
    exempt = exemptions() if exempt is None else exempt
    rows, configs = _rows(paths)

    def overall(row):
        return min(_least(rs)["margin"] for rs in row["by"].values())

    head = [
        "| where | bound | " + " | ".join(configs) + " |",
        "|---|---|" + "---|" * len(configs),
    ]
    bounds, exact = (
        list(head),
        ["| where | comparison | why it is exact |", "|---|---|---|"],
    )
    for key, row in sorted(rows.items(), key=lambda kv: overall(kv[1])):
        text = row["text"].replace("|", "\\|")
        why = exempt.get((_file(key), row["text"]))
        if why is not None:
            exact.append(f"| {key} | `{text}` | {why} |")
            continue
        cells = []
        for c in configs:
            if c not in row["by"]:
                cells.append("")
                continue
            t = _least(row["by"][c])
            cells.append(f"{t['a']:.4g} {t['op']} {t['b']:.4g} ({t['margin']:.0%})")
        bounds.append(f"| {key} | `{text}` | " + " | ".join(cells) + " |")
    parts = [f"{len(bounds) - 2} bounds, tightest first\n", *bounds]
    if len(exact) > 2:
        parts += [
            "",
            f"{len(exact) - 2} exact comparisons (no margin needed)\n",
            *exact,
        ]
    return "\n".join(parts) + "\n"


def too_tight(paths: list[str], exempt: dict | None = None) -> list[str]:
    """The bounds (not exact) whose margin is under MINIMUM in some configuration."""
    exempt = exemptions() if exempt is None else exempt
    rows, _ = _rows(paths)
    least = {
        k: min(_least(rs)["margin"] for rs in r["by"].values()) for k, r in rows.items()
    }
    return [
        f"{key} `{row['text']}`: {least[key]:.0%}"
        for key, row in rows.items()
        if (_file(key), row["text"]) not in exempt and least[key] < MINIMUM
    ]


def run_all(notebooks: list[str], folder: Path) -> tuple[str, list[str]]:
    """Run the notebooks and the seeds tests under every configuration this CPU
    can run; write one .jsonl per configuration and report.md in folder."""
    from numerics import LEVELS, environment, native_level

    folder.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parent.parent
    top = native_level()
    outs = []
    for level in LEVELS[: LEVELS.index(top) + 1]:
        out = folder / f"{level}.jsonl"
        out.unlink(missing_ok=True)
        env = os.environ | environment(level)
        env |= {"MARGINS_OUT": str(out), "PYTHONPATH": str(root / "scripts")}
        py = sys.executable
        subprocess.run(
            [py, __file__, "notebooks", str(out), *notebooks], env=env, check=True
        )
        seeds = ["-q", "-n", "2", "-m", "seeds", "tests"]
        pytest = [py, "-m", "pytest", "-p", "margins", "--assert=plain", *seeds]
        subprocess.run(pytest, env=env, cwd=root, check=True)
        outs.append(str(out))
    table = report(outs)
    (folder / "report.md").write_text(table)
    return table, too_tight(outs)


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "all":
        table, tight = run_all(argv[2:], Path(argv[1]))
    elif len(argv) >= 2 and argv[0] == "report":
        table, tight = report(argv[1:]), too_tight(argv[1:])
    elif len(argv) >= 3 and argv[0] == "notebooks":
        run_notebooks(str(Path(argv[1]).resolve()), argv[2:])
        return 0
    else:
        print(__doc__, file=sys.stderr)
        return 2
    sys.stdout.write(table)
    for line in tight:
        print(f"under {MINIMUM:.0%} to spare: {line}", file=sys.stderr)
    return 1 if tight else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
