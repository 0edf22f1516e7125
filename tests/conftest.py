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
    """Tests held in one process by an ``xdist_group`` mark run first.

    `make seeds` hands each group to one worker as a single unit, in the order the
    tests were collected; two groups of several minutes each (Chapter 8's MiniLM,
    Chapter 7's KV-sharing runs) collected late could land on one worker at the end
    while the other waits. Put first, they start at once, one on each worker, and
    the single tests fill in around them. The order within each part is kept.
    """
    items.sort(key=lambda item: item.get_closest_marker("xdist_group") is None)
