"""``measure.peak_memory``: exact byte counts of known allocations, the peak of an
allocate/free schedule (Hypothesis), attention's T^2 against the fused kernel's T,
a quiet stderr, and bad input."""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_book.attention import scaled_dot_product_attention
from transformer_book.measure import _PROFILER_NOISE, peak_memory

FEW = settings(max_examples=15, deadline=None, derandomize=True, database=None)
MB = 1_000_000  # float32 elements in 4 MB


def test_one_tensor_counts_its_exact_bytes():
    assert peak_memory(lambda: torch.empty(MB)) == 4 * MB
    assert peak_memory(lambda: torch.empty(3, 5, dtype=torch.float64)) == 120
    assert peak_memory(lambda: None) == 0


def test_freed_in_sequence_peaks_at_one_kept_together_at_two():
    def in_sequence():
        a = torch.ones(MB)
        del a
        b = torch.ones(MB)
        del b

    def together():
        a = torch.ones(MB)
        b = torch.ones(MB)
        return a, b

    assert peak_memory(in_sequence) == 4 * MB
    assert peak_memory(together) == 8 * MB


def test_arguments_and_keywords_reach_fn():
    assert peak_memory(torch.zeros, 10, dtype=torch.float64) == 80


def test_an_operator_counts_its_output_and_temporaries():
    a, b = torch.randn(64, 32), torch.randn(32, 48)
    assert peak_memory(torch.add, a, a) == a.nbytes
    assert peak_memory(torch.matmul, a, b) == 64 * 48 * 4
    # the copy is alive while neg writes its output; a Python number would count too
    # (it becomes a small tensor: ``b + 1`` allocates b.nbytes + 12)
    assert peak_memory(lambda: b.t().contiguous().neg()) == 2 * b.nbytes


def test_memory_from_before_the_call_is_not_counted():
    big = [torch.ones(2 * MB)]

    def frees_then_allocates():
        big.pop()  # frees 8 MB made before the call: not ours, not subtracted
        return torch.ones(MB)

    assert peak_memory(frees_then_allocates) == 4 * MB
    kept = torch.ones(2 * MB)
    assert peak_memory(kept.clone) == kept.nbytes  # only the new tensor
    assert kept.sum() == 2 * MB


def test_the_backward_pass_counts():
    x = torch.ones(MB, requires_grad=True)
    loss = (x * 2).sum()  # the graph exists before the call
    peak = peak_memory(loss.backward)
    assert 4 * MB <= peak < 4 * MB + 100  # x.grad, and a few scalars
    assert x.grad.nbytes == 4 * MB


@FEW
@given(
    st.lists(st.tuples(st.integers(1, 50_000), st.booleans()), min_size=1, max_size=12)
)
def test_peak_of_an_allocate_free_schedule(steps):
    """Allocate each size in turn; free it at once or keep it to the end."""
    expected = current = 0
    for numel, keep in steps:
        current += 4 * numel
        expected = max(expected, current)
        if not keep:
            current -= 4 * numel

    def schedule():
        kept = []
        for numel, keep in steps:
            t = torch.empty(numel)
            if keep:
                kept.append(t)
            del t
        return kept

    assert peak_memory(schedule) == expected


def test_readable_attention_grows_as_t_squared_and_fused_as_t():
    peaks = {}
    for t in (1024, 2048):
        q, k, v = torch.randn(3, 1, 1, t, 64).unbind(0)  # each (B=1, H=1, T, Dh)
        peaks["readable", t] = peak_memory(scaled_dot_product_attention, q, k, v)
        peaks["fused", t] = peak_memory(F.scaled_dot_product_attention, q, k, v)
    t = 2048
    assert peaks["readable", t] > 4 * t * t  # at least one float32 (T, T) matrix
    assert peaks["fused", t] < 4 * t * t / 8  # far below one
    assert peaks["fused", t] >= 4 * t * 64  # but at least its (T, Dh) output
    assert 3.5 < peaks["readable", 2048] / peaks["readable", 1024] < 4.5
    assert peaks["fused", 2048] / peaks["fused", 1024] < 2.5


def test_stderr_keeps_fns_lines_and_drops_the_profilers(capfd):
    before = [torch.ones(10)]

    def noisy():
        before.pop()  # makes c10 warn about a block of unknown size
        os.write(2, b"fn's own line\n")
        return torch.ones(10)

    assert peak_memory(noisy) == 40
    err = capfd.readouterr().err
    assert "fn's own line" in err
    assert "USDT" not in err and "Memory block of unknown size" not in err


# Log lines of PyTorch's native code, as it writes them to stderr: the one a CUDA build
# of torch without a GPU (Colab's set, issue 27) printed under Chapter 7's cell, the
# profiler's start line, and c10's warning (its own format, and glog's)
NATIVE_LOG_LINES = [
    "ERROR:2026-12-05 07:54:22 17452:17452 DeviceProperties.cpp:48] "
    "gpuGetDeviceCount failed with code 35",
    "WARNING:2026-08-19 12:00:00 4242:4243 CuptiActivityProfiler.cpp:1033] any text",
    "USDT:2026-12-05 07:54:18 17425:17425 SyncActivityProfilerHandler.cpp:52] "
    "profiler_start",
    "[W1205 07:54:18.835237317 CPUAllocator.cpp:245] Memory block of unknown size was "
    "allocated before the profiling started",
    "[E605 07:54:18.835237317 anything.cpp:1] one digit for the month",
    "W1205 07:54:18.835237 17425 logging.cc:12] glog's format",
]
# Lines that are not such logs, and must show
OTHER_LINES = [
    "/content/x.py:12: UserWarning: a genuine warning",
    "  warnings.warn('a genuine warning')",
    "ERROR: fn's own message",
    "WARNING:2026 is not a timestamp",
    "[W] a bracket and a letter",
]


@pytest.mark.parametrize("line", NATIVE_LOG_LINES)
def test_native_log_lines_are_recognised_by_their_level_and_timestamp(line):
    assert _PROFILER_NOISE.search(line + "\n")


@pytest.mark.parametrize("line", OTHER_LINES)
def test_other_lines_are_not_taken_for_logs(line):
    assert not _PROFILER_NOISE.search(line + "\n")


def test_kinetos_error_is_hidden_and_a_python_warning_shows():
    """In a plain process, where Python's own stderr is file descriptor 2 as well."""
    script = (
        "import os, warnings\n"
        "from transformer_book.measure import _PROFILER_NOISE, peak_memory\n"
        "def fn():\n"
        f"    os.write(2, {NATIVE_LOG_LINES[0] + chr(10)!r}.encode())\n"
        "    warnings.warn('a genuine warning')\n"
        "peak_memory(fn)\n"
    )
    err = subprocess.run(
        [sys.executable, "-W", "always", "-c", script],
        check=True,
        capture_output=True,
        text=True,
    ).stderr
    assert "UserWarning: a genuine warning" in err
    assert "gpuGetDeviceCount" not in err and "USDT" not in err


def test_an_error_in_fn_propagates_and_leaves_things_as_they_were(capfd):
    def fails():
        torch.ones(10)
        raise KeyError("inside fn")

    with pytest.raises(KeyError, match="inside fn"):
        peak_memory(fails)
    os.write(2, b"after\n")
    assert "after" in capfd.readouterr().err  # fd 2 is back
    assert peak_memory(lambda: torch.ones(10)) == 40  # and the profiler is off


@pytest.mark.parametrize("fn", [None, 3, "torch.ones"])
def test_fn_must_be_callable(fn):
    with pytest.raises(TypeError, match="fn must be callable"):
        peak_memory(fn)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_memory_counts_on_a_gpu():
    x = torch.ones(10, device="cuda")  # CUDA in use
    # the caching allocator rounds blocks up to 512 bytes
    assert 4 * MB <= peak_memory(lambda: torch.empty(MB, device="cuda")) < 4 * MB + 512
    q, k, v = torch.randn(3, 1, 1, 2048, 64, device="cuda").unbind(0)
    assert peak_memory(scaled_dot_product_attention, q, k, v) > 4 * 2048**2
    assert x.sum().item() == 10
