"""A pytest plugin for `make colab`: a notebook cell that writes to stderr fails.

nbval compares a cell's stderr with the committed output, but not in a cell marked
``# NBVAL_IGNORE_OUTPUT``, and a reader sees stderr in red whatever the mark. The
stage copies this file into its clean environment and runs nbval with
``-p nbval_no_stderr``, so every cell, compared or not, must keep stderr empty.
"""

from __future__ import annotations

import pytest


def stderr_text(outputs: list) -> str:
    """What a cell's outputs (as nbval collected them) wrote to stderr."""
    return "".join(
        out.get("text", "")
        for out in outputs
        if out.get("output_type") == "stream" and out.get("name") == "stderr"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    text = stderr_text(getattr(item, "test_outputs", None) or [])
    if text:
        pytest.fail(f"{item.name} wrote to stderr:\n{text}", pytrace=False)
    return result
