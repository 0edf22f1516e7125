"""Fixtures shared by the test files."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_thread():
    """Run a test on one thread, then restore the count.

    The chapters' models are tiny: a second thread adds only synchronisation, which
    costs minutes when other processes share the cores. Their bounds hold with any
    number of threads.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
