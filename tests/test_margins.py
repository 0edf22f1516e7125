"""`make margins` (scripts/margins.py): the asserts it rewrites record both sides of
each comparison and still pass or fail as before; the margin is the share the measured
value may move; the report puts the tightest bound first."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from margins import (  # noqa: E402
    RECORD,
    exemptions,
    make_recorder,
    margin,
    report,
    rewrite,
    too_tight,
)


def run(source: str, tmp_path: Path, **names) -> list[dict]:
    """Execute source with its asserts rewritten; return what they recorded."""
    out = tmp_path / "records.jsonl"
    scope = {RECORD: make_recorder(str(out), "test config"), **names}
    exec(compile(rewrite(source, "snippet"), "snippet", "exec"), scope)
    return (
        [json.loads(line) for line in out.read_text().splitlines()]
        if out.exists()
        else []
    )


def test_both_sides_of_a_comparison_are_recorded(tmp_path):
    records = run("acc = 0.99\nassert acc >= 0.9, acc\n", tmp_path)
    assert len(records) == 1
    r = records[0]
    assert (r["a"], r["op"], r["b"]) == (0.99, ">=", 0.9)
    assert r["key"] == "snippet:2:7" and r["text"] == "acc >= 0.9"
    assert r["margin"] == pytest.approx(0.09 / 0.1)  # errors 0.01 of 0.1 allowed
    assert r["config"] == "test config"


def test_tensors_chains_loops_and_and_are_all_recorded(tmp_path):
    source = (
        "x = torch.tensor(3.0)\n"
        "assert x < 4 and 1 <= x <= 5\n"
        "assert all(v > 0 for v in (1, 2))\n"
    )
    records = run(source, tmp_path, torch=torch)
    pairs = [(r["a"], r["op"], r["b"]) for r in records]
    assert pairs == [(3, "<", 4), (1, "<=", 3), (3, "<=", 5), (1, ">", 0), (2, ">", 0)]


def test_a_rewritten_assert_still_fails(tmp_path):
    with pytest.raises(AssertionError, match="too low"):
        run("assert 0.5 >= 0.9, 'too low'\n", tmp_path)
    with pytest.raises(AssertionError):
        run("assert 1 < 2 < 0\n", tmp_path)  # the chain's second link fails


def test_what_is_not_a_number_is_compared_but_not_recorded(tmp_path):
    source = (
        "assert 'a' < 'b'\n"
        "assert [1] <= [2]\n"
        "assert torch.ones(2).sum() > 1\n"  # a 0-d tensor is a number
        "assert x == 3\n"  # equality: no margin to speak of
    )
    records = run(source, tmp_path, torch=torch, x=3)
    assert [(r["a"], r["b"]) for r in records] == [(2.0, 1.0)]


def test_an_elementwise_comparison_records_its_tightest_elements(tmp_path):
    source = "assert (a < b).all()\nassert (a <= 3.5).all()\n"
    a, b = torch.tensor([1.0, 3.0, 2.0]), torch.tensor([10.0, 4.0, 9.0])
    records = run(source, tmp_path, a=a, b=b)
    assert [(r["a"], r["b"]) for r in records] == [(3.0, 4.0), (3.0, 3.5)]


def test_comparisons_outside_asserts_are_left_alone(tmp_path):
    assert run("ok = 2 > 1\nif 3 < 4:\n    pass\n", tmp_path) == []


def test_a_comparison_the_verdict_does_not_rest_on_is_left_alone(tmp_path):
    source = (
        "assert (3 > 4) == False\n"  # a value compared with what is expected
        "assert not 3 > 4\n"
        "assert sorted([2, 1], key=lambda v: v > 1)\n"
    )
    assert run(source, tmp_path) == []


@pytest.mark.parametrize(
    ("a", "op", "b", "expected"),
    [
        (0.99, ">=", 0.4, 0.59 / 0.99),
        (50.0, "<=", 100.0, 0.5),
        (1e-7, "<", 1e-5, 0.99),
        (0.3, ">=", 0.4, -0.1 / 0.4),  # fails: negative
        (0.5, ">=", 0.9, -0.4 / 0.5),  # fails: the errors are 5 times the bound's
        (0.0, "<=", 0.0, 0.0),
        (0.99, ">=", 0.98, 0.5),  # a share near 1: its errors may double
        (0.9269, "<=", 0.99, (0.99 - 0.9269) / (1 - 0.9269)),
        (1.0, ">=", 0.99, 1.0),
        (1.2, ">=", 0.98, (1.2 - 0.98) / 1.2),  # not a share
        (1.0, "<=", 1.0, 1.0),  # a share's own range: "95%-100%"
        (0.0, ">=", 0.0, 1.0),
    ],
)
def test_the_margin_is_the_share_the_value_may_move(a, op, b, expected):
    assert margin(a, op, b) == pytest.approx(expected)


def test_a_chain_records_its_bounds_not_the_order_of_two_measurements(tmp_path):
    source = "assert 1.4 <= min(a, b) <= max(a, b) <= 1.8\n"
    records = run(source, tmp_path, a=1.5, b=1.6)
    assert [(r["a"], r["op"], r["b"]) for r in records] == [
        (1.4, "<=", 1.5),
        (1.6, "<=", 1.8),
    ]


def record(key, text, config, a, op, b):
    return {
        "key": key,
        "text": text,
        "config": config,
        "a": a,
        "op": op,
        "b": b,
        "margin": margin(a, op, b),
    }


def test_the_report_puts_the_tightest_bound_first_and_names_the_too_tight(tmp_path):
    lines = [
        record("a.ipynb#cell1:2:7", "x > 1", "avx2", 5, ">", 1),
        record("a.ipynb#cell1:2:7", "x > 1", "avx2", 1.05, ">", 1),
        record("b.py:7:11", "y < 4", "default", 3, "<", 4),
        record("b.py:9:11", "n <= 10", "default", 10, "<=", 10),
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    exact = {("b.py", "n <= 10"): "counted from the data"}
    table = report([str(path)], exact).splitlines()
    assert table[0] == "2 bounds, tightest first"
    assert table[2] == "| where | bound | avx2 | default |"
    assert table[4].startswith("| a.ipynb#cell1:2:7 | `x > 1` | 1.05 > 1 (5%) |")
    assert table[5] == "| b.py:7:11 | `y < 4` |  | 3 < 4 (25%) |"
    assert "| b.py:9:11 | `n <= 10` | counted from the data |" in table
    assert too_tight([str(path)], exact) == ["a.ipynb#cell1:2:7 `x > 1`: 5%"]
    assert len(too_tight([str(path)], {})) == 2  # without its reason, 10 <= 10 is tight


def test_every_exact_comparison_gives_its_reason():
    table = exemptions()
    assert table, "tests/margins_exact.toml lists the exact comparisons"
    for (file, text), why in table.items():
        assert file.endswith((".ipynb", ".py")) and text and len(why) > 20, (file, text)
