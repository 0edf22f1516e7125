"""The package's promise, held generically: every public function and class, every
argument, the bad values its annotation and documented domain imply.

The names come from each module's ``__all__`` (functions and classes defined in
the package; re-exports count once); every one must have an entry in
``public_api_table.TABLE``, and so must every public method of a public class. An
entry gives one valid call. For each argument of that call, bad values are derived
from the annotation (``bad_values``): a bool or a float for an int, a str for a
number or a sequence, NaN and ±inf for a float, zero and negative sizes, None where
None is not allowed, a tensor of the wrong dtype, rank or device, an empty tensor;
for a tokenizer (``tok``, ``tokenizer``) a str, a number, an object without
``encode`` and a tokenizer of the other kind (the book's or Hugging Face's).
Each must give a ``ValueError`` or ``TypeError`` whose message names the argument,
within ``TIME_LIMIT`` seconds, unless the entry lists it in ``accepts`` with the
reason (then the call must succeed). So a new public function fails here until it
has an entry, and a new entry fails until its function validates its arguments.

Two lists in the table record what is known not to hold yet, each in one place:
``DECODE_REWRITE_XFAIL``, the failing cases of the decode path that issue 28
rewrites (``OWNED_BY_DECODE_REWRITE``), and ``GAPS``, known gaps with their
reasons (empty since issue 44). Both are expected failures that must stay failures: once
one passes, the test says to remove it, so neither list can hide a regression.

The dtype policy of every model and attention entry point (``DTYPE_POLICY``) is
checked here too: float16, bfloat16 and float64 inputs on float32 weights.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import math
import pkgutil
import re
import signal
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from public_api_table import (
    DECODE_REWRITE_XFAIL,
    DTYPE_POLICY,
    GAPS,
    OWNED_BY_DECODE_REWRITE,
    RECORDS,
    TABLE,
)
from public_api_table import minilm as _minilm
from public_api_table import tiny_gpt as _tiny_gpt

import transformer_book
from transformer_book import checkpoints

# Imported lazily by torch on a first optimizer step; an alarm in the middle of that
# import would leave torch half-imported, so it happens here, untimed.
torch.optim.AdamW(torch.nn.Linear(1, 1).parameters()).step()

TIME_LIMIT = 5.0  # seconds for one bad call: a check is immediate, a hang is not
# A function that trains (an entry whose valid call is slow) refuses a bad argument
# before its first step: well under a second, on a loaded machine too
REFUSAL_LIMIT = 1.0


# The appendix's one-page listings check no input by design: they are the models
# with nothing but the computation, for a reader to paste into an empty notebook.
# tests/test_listings.py holds them equal to the package's GPT and EncoderDecoder,
# which are the validated versions and are in this table.
EXEMPT_PACKAGE = "transformer_book.listings"


def test_the_exemption_is_the_listings_only():
    names = [
        info.name
        for info in pkgutil.walk_packages(
            transformer_book.__path__, "transformer_book."
        )
        if info.name.startswith(EXEMPT_PACKAGE)
    ]
    assert sorted(names) == [EXEMPT_PACKAGE + s for s in ("", ".gpt", ".transformer")]


def public_names() -> dict[str, object]:
    """``module.qualname`` -> object, for every public function, class and method."""
    found = {}
    for info in pkgutil.walk_packages(transformer_book.__path__, "transformer_book."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue  # a private module (exercises._checking)
        if info.name.startswith(EXEMPT_PACKAGE):
            continue  # the appendix's listings (EXEMPT_PACKAGE)
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue  # constants and type aliases
            if not getattr(obj, "__module__", "").startswith("transformer_book"):
                continue
            key = short(f"{obj.__module__}.{obj.__qualname__}")
            found[key] = obj
            if inspect.isclass(obj):
                for attr, value in vars(obj).items():
                    if attr.startswith("_"):
                        continue
                    if isinstance(value, classmethod | staticmethod) or (
                        inspect.isfunction(value)
                    ):
                        found[f"{key}.{attr}"] = value
    return found


def short(key: str) -> str:
    return key.removeprefix("transformer_book.")


PUBLIC = public_names()


def test_every_public_name_has_an_entry():
    missing = sorted(k for k in PUBLIC if k not in TABLE and k not in RECORDS)
    assert not missing, f"public names without an entry in the table: {missing}"


def test_every_entry_is_a_public_name():
    stale = sorted(k for k in list(TABLE) + list(RECORDS) if k not in PUBLIC)
    assert not stale, f"table entries that are not public names: {stale}"


# ---------------------------------------------------------------- bad values


def _words(annotation: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_.]+", annotation))


def _wrong_dtype(x: torch.Tensor) -> torch.Tensor:
    if x.is_floating_point():
        return x.long()
    return x.float()


def bad_values(
    name: str, annotation: str, value: object, optional: bool = False
) -> list[tuple[str, object]]:
    """(label, bad value) pairs for an argument annotated ``annotation``; None is
    a bad value unless the annotation or the default allows it."""
    words = _words(annotation)
    optional = optional or "None" in words
    out: list[tuple[str, object]] = []
    if name in TOKENIZER_NAMES:  # duck-typed: what a reader may pass instead
        out += [("str", "abc"), ("int", 3), ("no encode", _NoEncode())]
        out += [("other kind", _other_tokenizer(value))]
    elif isinstance(value, torch.Tensor) or "Tensor" in words:
        if isinstance(value, torch.Tensor):
            out.append(("list", value.tolist()))
            out.append((f"dtype {_wrong_dtype(value).dtype}", _wrong_dtype(value)))
            out.append(("rank+1", value[None]))
            if value.dim() > 0:
                out.append(("rank-1", value[0]))
                out.append(("empty", value[..., :0]))
            out.append(("meta device", value.to("meta")))
    elif words & {"int"} and not words & {"float", "Sequence", "tuple", "list"}:
        out += [("bool", True), ("float", 2.5), ("str", "2"), ("zero", 0)]
        out += [("negative", -1)]
        if "seed" in name:  # torch's generators take 64 bits, with offsets added
            out += [("huge", 2**64 - 1), ("2**63", 2**63)]
    elif words & {"float"} and not words & {"Sequence", "tuple", "list"}:
        out += [("bool", True), ("str", "0.5"), ("nan", math.nan)]
        out += [("inf", math.inf), ("-inf", -math.inf)]
    elif words & {"str"} and not words & {"Sequence", "tuple", "list", "device"}:
        out += [("int", 3), ("unknown str", "no-such-value")]
    elif words & {"Sequence", "tuple", "list", "Iterable"}:
        out += [("str", "abc"), ("int", 3)]
    elif words & {"Mapping", "dict"}:
        out += [("list", [1, 2]), ("int", 3)]
    elif "torch.device" in words or "device" in words:
        out += [("float", 3.5), ("unknown device", "no-such-device")]
        out += [("absent device", "cuda:7")]  # a device this machine does not have
        if "device" in name:
            out += [("meta", "meta")]  # a device that holds no values
    elif "Path" in words:
        out += [(label, make) for label, make in PATHS.items()]
    elif words & {"Generator", "torch.Generator"}:
        out += [("int", 0)]
    elif words & {"Callable"}:
        out += [("int", 3)]
    elif annotation and annotation[0].isupper() and "bool" not in words:
        out += [("str", "abc"), ("int", 3)]  # an object of a package class
    if not optional and "bool" not in words:
        out.append(("None", None))
    return out


# Tokenizer arguments: a string (whose str.encode reads text as a codec's name),
# a number, an object with a tokenizer's ids but no encode, and a tokenizer of the
# other kind (the book's BPE where a Hugging Face tokenizer is read, and back)
TOKENIZER_NAMES = ("tok", "tokenizer")


class _NoEncode:
    """Has a tokenizer's special ids and batch method, but no ``encode``."""

    vocab_size, pad_id, eos_id = 11, 0, 1

    def encode_batch(self, texts):
        return []


def _other_tokenizer(value: object) -> object:
    from transformer_book.tokenizer import Tokenizer, get_tokenizer

    if isinstance(value, Tokenizer):
        return _minilm()[1]
    return get_tokenizer()


# Seeds past 2**63: refused (naming the argument) or used as they are, never a
# crash after the work has started; a slow entry (one that trains) must refuse them
HUGE_SEEDS = ("huge", "2**63")


def _written(data: bytes) -> Path:
    path = Path(tempfile.mkdtemp()) / "bad.safetensors"
    path.write_bytes(data)
    return path


def _truncated() -> Path:
    whole = _written(b"")  # a real checkpoint of the table's tiny GPT, cut short
    checkpoints.save_checkpoint(_tiny_gpt(), whole)
    return _written(whole.read_bytes()[:100])


# Paths a reader can pass by mistake: each must be refused with a message naming
# the argument (a file that is not a checkpoint is never read as one)
PATHS = {
    "a directory": lambda: Path(tempfile.mkdtemp()),
    "an empty file": lambda: _written(b""),
    "a truncated file": _truncated,
    "a crafted header": lambda: _written(
        (2**40).to_bytes(8, "little") + b'{"w": {"dtype": "F32"}}'
    ),
}


class _TimeUp(BaseException):
    pass


@contextlib.contextmanager
def time_limit(seconds: float):
    def handler(signum, frame):
        raise _TimeUp()

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def names_argument(message: str, arg: str) -> bool:
    return (
        re.search(rf"(?<![A-Za-z_]){re.escape(arg)}(?![A-Za-z_])", message) is not None
    )


def run_case(entry, arg: str, label: str, value: object) -> str | None:
    """None if the case behaves as promised, else what went wrong."""
    kwargs = dict(entry.args())
    kwargs[arg] = value() if label in PATHS else value
    accepted = (arg, label) in entry.accepts or (arg, "*") in entry.accepts
    if accepted and entry.slow:
        return None  # a valid value of a slow call: its seeds test runs it
    start = time.perf_counter()
    try:
        with time_limit(max(TIME_LIMIT, entry.time) if accepted else TIME_LIMIT):
            entry.call(**kwargs)
    except _TimeUp:
        return f"no answer within {TIME_LIMIT} s"
    except (ValueError, TypeError) as err:
        if accepted:
            return f"listed as accepted, but raised {type(err).__name__}: {err}"
        if not names_argument(str(err), arg):
            return f"{type(err).__name__} does not name {arg!r}: {err}"
        took = time.perf_counter() - start
        if entry.slow is not None and took > REFUSAL_LIMIT:
            return f"refused after {took:.2f} s: validate before the first step"
        return None
    except Exception as err:  # noqa: BLE001 - any other exception breaks the promise
        return f"{type(err).__name__} (not ValueError/TypeError): {err}"[:300]
    finally:
        plt.close("all")
    if accepted or (label in HUGE_SEEDS and entry.slow is None):
        return None  # a huge seed may seed a generator as it is (no offset added)
    return f"accepted silently ({time.perf_counter() - start:.2f} s)"


def cases_of(key: str):
    entry = TABLE[key]
    if entry.valid_call_only:
        return []
    out = []
    hints = entry.hints()
    for arg, value in entry.args().items():
        if arg in entry.skip:
            continue
        optional = arg in entry.none_default()
        for label, bad in bad_values(arg, hints.get(arg, ""), value, optional):
            out.append((arg, label, bad))
    return out


@pytest.mark.parametrize("key", sorted(TABLE))
def test_contract(key):
    entry = TABLE[key]
    if entry.slow is None:
        with time_limit(max(TIME_LIMIT, entry.time)):
            entry.call(**entry.args())  # the valid call
        plt.close("all")
    failures, expected = [], []
    for arg, label, bad in cases_of(key):
        problem = run_case(entry, arg, label, bad)
        if problem is None:
            continue
        reason = DECODE_REWRITE_XFAIL.get((key, arg, label))
        (expected if reason else failures).append(f"{arg}={label}: {problem}")
        if key in GAPS:
            break  # a known gap: one failing case shows it is still open
    if key in GAPS:
        assert failures, f"{key} now keeps the promise: remove it from GAPS"
        pytest.xfail(f"{GAPS[key]}: {failures[0]}")
    assert not failures, f"{key}: " + "\n  ".join(failures)
    if expected:
        assert key in OWNED_BY_DECODE_REWRITE
        pytest.xfail("fixed by the decode rewrite (issue 28): " + "; ".join(expected))


def test_decode_rewrite_expectations_are_current():
    """Each recorded expected failure is still a failure (else drop the entry)."""
    for key, arg, label in DECODE_REWRITE_XFAIL:
        entry = TABLE[key]
        values = dict((lab, v) for a, lab, v in cases_of(key) if a == arg)
        assert label in values, (key, arg, label)
        assert run_case(entry, arg, label, values[label]) is not None, (key, arg)


# ---------------------------------------------------------------- dtypes

DTYPES = (torch.float16, torch.bfloat16, torch.float64)


@pytest.mark.parametrize("key", sorted(DTYPE_POLICY))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dtype_policy(key, dtype):
    """Float32 weights, an input of another dtype: the entry's policy holds.

    "refuse": TypeError naming the input and its dtype; "cast": the input is cast
    to the weights' dtype, so the output is float32 and equals the float32 call on
    the cast input; "follow": a function without weights computes in the input's
    dtype (its output has it).
    """
    policy, make = DTYPE_POLICY[key]
    call, arg, x = make()
    y = x.to(dtype)
    if policy == "refuse":
        with pytest.raises(TypeError, match=rf"{arg}.*{dtype}|{dtype}.*{arg}"):
            call(y)
        return
    out = call(y)
    out = out[0] if isinstance(out, tuple) else out
    if policy == "cast":
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, call(y.float()))
    else:
        assert policy == "follow", policy
        assert out.dtype == dtype
        assert torch.isfinite(out.float()).all()
