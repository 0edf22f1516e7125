"""Fixtures shared by the test files."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread_for_seeds(request):
    """Run each ``seeds`` test on one thread, then restore the count.

    The chapters' models are tiny: a second thread adds only synchronisation, and
    `make seeds` runs two tests side by side (pytest-xdist), one per core. The
    chapters' bounds hold with any number of threads (the colab stage checks the
    notebooks with one).
    """
    if request.node.get_closest_marker("seeds") is None:
        yield
        return
    yield from _on_one_thread()


@pytest.fixture
def one_thread():
    """One thread for a test, then the count restored: for tiny models, whose second
    thread only waits, and for what must run from a one-thread caller (a module
    uses it with ``pytestmark = pytest.mark.usefixtures("one_thread")``)."""
    yield from _on_one_thread()


def _on_one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``heavy`` (a few minutes each) are collected first.

    `make seeds` runs two workers (pytest-xdist), which take the tests in their
    collection order: a test of several minutes found last would run alone at the
    end while the other worker waits. Put first, it starts at once and the short
    tests fill in around it. The order is otherwise kept.
    """
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)
