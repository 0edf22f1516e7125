"""Argument checks shared by every module (no chapter teaches them).

Each public function and class checks its arguments where the reader calls it, so
that a bad call fails at once with a ``TypeError`` (wrong type or dtype) or a
``ValueError`` (wrong value or shape) whose message names the argument as the
caller wrote it, says what it got and what was expected: STYLE.md's "clear errors
at the edges". The checks read shapes, dtypes and Python numbers only, so none of
them waits for a GPU; the one check that reads tensor values (token ids) says how
it stays cheap.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence

import torch
from torch import Tensor

_SIZE_WORDS = {1: "positive", 0: "non-negative"}


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape ``shapes`` broadcast to, as ``torch.broadcast_shapes`` gives it.

    The checks run on every forward of every attention layer; PyTorch's own
    function goes through its reference implementation, about ten times as slow
    as this loop over a few short tuples. Raises RuntimeError where the shapes do
    not broadcast (as PyTorch's does), so a caller catches one exception for both.
    """
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape, start=ndim - len(shape)):
            if size < 0:
                raise RuntimeError(f"a shape holds a negative size: {tuple(shape)}")
            if size != 1:
                if out[i] not in (1, size):
                    raise RuntimeError(
                        f"shapes {[tuple(s) for s in shapes]} do not broadcast"
                    )
                out[i] = size
    return tuple(out)


def check_int(name: str, value: object, minimum: int | None = None) -> int:
    """``value`` as a Python int: TypeError unless it is an integer (bools are not),
    ValueError below ``minimum``."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got the bool {value}")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an int, got {value!r} of type {type(value).__name__}"
        ) from None
    if minimum is not None and value < minimum:
        words = _SIZE_WORDS.get(minimum, f">= {minimum}")
        raise ValueError(f"{name} must be {words}, got {value}")
    return value


# Seeds feed torch.Generator.manual_seed, which takes 64 bits, often with an
# offset added (seed + 1, TEST_SEED + seed): below 2**63 every such sum fits
SEED_LIMIT = 2**63


def check_seed(name: str, seed: object) -> int:
    """``seed`` as an int in [0, 2**63): TypeError for a bool or a non-int."""
    seed = check_int(name, seed, minimum=0)
    if seed >= SEED_LIMIT:
        raise ValueError(f"{name} must be below 2**63, got {seed}")
    return seed


def check_real(
    name: str,
    value: object,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a finite float in the interval from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number, got {value!r} of type "
            f"{type(value).__name__}"
        )
    value = float(value)
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if not math.isfinite(value) or too_low or too_high:
        if (low, low_open, high) == (0.0, True, math.inf):
            words = "positive and finite"
        elif (low, low_open, high) == (0.0, False, math.inf):
            words = "non-negative and finite"
        elif math.isinf(low) and math.isinf(high):
            words = "finite"
        else:
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            words = f"in {left}{low:g}, {high:g}{right}"
        raise ValueError(f"{name} must be {words}, got {value}")
    return value


def check_probability(name: str, p: object) -> float:
    """A dropout probability in [0, 1] (1 drops everything, as in ``nn.Dropout``)."""
    return check_real(name, p, 0.0, 1.0)


def check_tensor(name: str, x: object, kind: str | None = None) -> None:
    """``x`` is a tensor; ``kind`` "float", "int" or "bool" also checks its dtype."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if kind == "float" and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if kind == "int" and (
        x.is_floating_point() or x.is_complex() or x.dtype == torch.bool
    ):
        raise TypeError(f"{name} must be an integer tensor, got dtype {x.dtype}")
    if kind == "bool" and x.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a bool tensor (True = may attend), got dtype {x.dtype}"
        )


def check_instance(name: str, value: object, kind: type | tuple[type, ...]) -> None:
    """TypeError naming ``name`` unless ``value`` is a ``kind``."""
    if not isinstance(value, kind):
        names = " or ".join(
            k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,))
        )
        raise TypeError(f"{name} must be a {names}, got {type(value).__name__}")


def check_on(name: str, x: Tensor, weight: Tensor) -> None:
    """``x`` is on the device of a module's parameters ``weight`` (not meta)."""
    if x.device != weight.device:
        raise ValueError(
            f"{name} is on {x.device} but the module's parameters are on "
            f"{weight.device}: move one, e.g. module.to({str(x.device)!r})"
        )


def check_has_values(name: str, x: Tensor) -> None:
    """A tensor whose values are read must not be on the meta device."""
    if x.is_meta:
        raise ValueError(f"{name} is on the meta device, which holds no values")


def check_id_list(name: str, ids: object, vocab_size: int | None = None) -> list[int]:
    """A sequence of int token ids (each in [0, vocab_size) if given), as a list."""
    if isinstance(ids, str | bytes | Tensor) or not isinstance(ids, Sequence):
        raise TypeError(f"{name} must be a sequence of ints, got {type(ids).__name__}")
    out = [check_int(f"{name}[{i}]", x, minimum=0) for i, x in enumerate(ids)]
    if vocab_size is not None and any(x >= vocab_size for x in out):
        raise ValueError(
            f"{name} holds ids outside [0, vocab_size={vocab_size}): {out[:8]}"
        )
    return out


def check_float_input(name: str, x: object, shape: str, dim: int | None = None):
    """A floating-point tensor of ``dim`` dimensions (at least 1 if None)."""
    check_tensor(name, x, "float")
    if (dim is not None and x.dim() != dim) or x.dim() < 1:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(x.shape)}")


def autocast_enabled(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` (then dtypes may legally mix)."""
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4 takes no argument
        if device_type == "cpu":
            return torch.is_autocast_cpu_enabled()
        return torch.is_autocast_enabled()


def check_like_module(name: str, x: Tensor, weight: Tensor) -> None:
    """``x`` has the device and dtype of a module's parameters (or autocast is on)."""
    if x.device != weight.device:
        raise ValueError(
            f"{name} is on {x.device} but the module's parameters are on "
            f"{weight.device}: move one, e.g. module.to({str(x.device)!r})"
        )
    if x.dtype != weight.dtype and not autocast_enabled(x.device.type):
        raise TypeError(
            f"{name} has dtype {x.dtype} but the module's parameters are "
            f"{weight.dtype}: convert one, e.g. module.to({x.dtype})"
        )


def check_same_batch(names: tuple[str, str], a: Tensor, b: Tensor) -> None:
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"{names[0]} {tuple(a.shape)} and {names[1]} {tuple(b.shape)} have "
            "different batch sizes"
        )


def check_broadcasts(name: str, x: Tensor, expected: tuple[int, ...], letters: str):
    """``x`` broadcasts to ``expected`` without enlarging it.

    ``letters`` names the expected axes for the message, e.g. "(B, H, T, S)".
    """
    try:
        fits = broadcast_shape(x.shape, expected) == tuple(expected)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"{name} of shape {tuple(x.shape)} does not broadcast to "
            f"{letters} = {tuple(expected)}"
        )


def check_mask(name: str, mask: object, expected: tuple[int, ...], letters: str):
    """A bool mask that broadcasts to ``expected`` without enlarging it."""
    check_tensor(name, mask, "bool")
    check_broadcasts(name, mask, expected, letters)


def check_token_ids(
    name: str, ids: object, vocab_size: int, shape: str = "(B, T)"
) -> None:
    """Integer ids of shape (B, T), each in [0, vocab_size).

    Cheap by design: the range check reads the smallest and largest id back, which
    on the CPU costs one pass over B·T integers next to a whole model. On a GPU the
    same read would stall the device on every forward (every step of a generation
    loop), so there the embedding's own device-side check is left to catch it.
    """
    check_tensor(name, ids, "int")
    check_has_values(name, ids)
    if ids.dim() != 2:
        raise ValueError(
            f"{name} must have shape {shape} of token ids, got {tuple(ids.shape)}"
        )
    if ids.device.type == "cpu" and ids.numel() > 0:
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= vocab_size:
            raise ValueError(
                f"{name} holds token ids outside [0, vocab_size={vocab_size}): "
                f"smallest {low}, largest {high}"
            )


def check_device(name: str, device: object) -> None:
    """None, or anything ``torch.device`` accepts."""
    if device is None:
        return
    if not isinstance(device, (str, int, torch.device)) or isinstance(device, bool):
        raise TypeError(
            f"{name} must be a torch.device, a string such as 'cpu', or None, got "
            f"{type(device).__name__}"
        )
    try:
        torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"{name}={device!r} is not a device: {err}") from None
    try:  # a device this machine has (an int means an accelerator's index)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as err:
        raise ValueError(f"{name}={device!r} is not available here: {err}") from None


def check_compute_device(name: str, device: object) -> None:
    """None or a device of this machine that holds values (not meta): where a
    model trains or a measurement runs."""
    check_device(name, device)
    if device is not None and torch.device(device).type == "meta":
        raise ValueError(
            f"{name}={device!r} holds no values: training and measuring need a "
            "real device, such as 'cpu'"
        )


def check_generator(name: str, generator: object) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"{name} must be a torch.Generator or None, got {type(generator).__name__}"
        )


# What the package's functions read from a tokenizer, by kind: the book's own
# (tokenizer.get_tokenizer(), char_tokenizer(): ids of the special tokens) and a
# Hugging Face ``tokenizers.Tokenizer`` (pretrained.load_minilm()'s: batches of
# Encodings, truncation). Duck-typed: any object with these attributes will do.
TOKENIZER_KINDS = {
    "book": (
        "one of the book's tokenizers, such as tokenizer.get_tokenizer()",
        tuple(
            "encode decode vocab_size pad_id mask_id cls_id sep_id bos_id eos_id "
            "sentinel_ids special_ids".split()
        ),
    ),
    "hf": (
        "a Hugging Face tokenizers.Tokenizer, such as pretrained.load_minilm()'s",
        ("encode", "encode_batch", "token_to_id", "enable_truncation"),
    ),
}


def check_tokenizer(name: str, tok: object, kind: str = "book") -> None:
    """``tok`` has what a tokenizer of ``kind`` ("book" or "hf") is read for.

    Checked before any work: a None, a string (whose ``str.encode`` would read a
    label as a codec's name) or a tokenizer of the other kind is named at once,
    not met as an AttributeError or a LookupError halfway through.
    """
    expected, needed = TOKENIZER_KINDS[kind]
    if tok is None or isinstance(tok, str | bytes | numbers.Number):
        raise TypeError(f"{name} must be {expected}, got {type(tok).__name__}")
    missing = [a for a in needed if not hasattr(tok, a)]
    if not missing and not callable(tok.encode):
        missing = ["a callable encode"]
    if missing:
        raise TypeError(
            f"{name} must be {expected}, got {type(tok).__name__}, which has no "
            + ", ".join(missing)
        )


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, x, "float")
        if x.dim() < 2:
            raise ValueError(
                f"{name} must have shape (..., T, D), got {tuple(x.shape)}"
            )
    if not q.dtype == k.dtype == v.dtype and not autocast_enabled(q.device.type):
        raise TypeError(
            f"q, k and v must have one dtype, got {q.dtype}, {k.dtype} and {v.dtype}"
        )
    if not q.device == k.device == v.device:
        raise ValueError(
            f"q, k and v must be on one device, got {q.device}, {k.device} and "
            f"{v.device}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension d_k: q has shape "
            f"{tuple(q.shape)}, k has shape {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions: k has shape "
            f"{tuple(k.shape)}, v has shape {tuple(v.shape)}"
        )
    try:
        broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the batch dimensions of q {tuple(q.shape)}, k {tuple(k.shape)} and "
            f"v {tuple(v.shape)} do not broadcast"
        ) from None


def _check_extra(name: str, x: Tensor, q: Tensor, scores_shape: torch.Size) -> None:
    """A mask or bias must broadcast to the scores without enlarging them."""
    check_tensor(name, x, "bool" if name == "mask" else "float")
    try:
        fits = broadcast_shape(x.shape, scores_shape) == tuple(scores_shape)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"{name} of shape {tuple(x.shape)} does not broadcast to the attention "
            f"scores of shape {tuple(scores_shape)} (..., Tq, Tk)"
        )
    if x.device != q.device and x.dim() > 0:
        raise ValueError(f"{name} is on {x.device} but q is on {q.device}")


def check_attention(q, k, v, mask, bias, dropout_p) -> None:
    """The arguments of the attention functions, named as their callers write them."""
    _check_qkv(q, k, v)
    scores_shape = torch.Size(
        broadcast_shape(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2])
    )
    if mask is not None:
        _check_extra("mask", mask, q, scores_shape)
    if bias is not None:
        _check_extra("bias", bias, q, scores_shape)
    check_probability("dropout_p", dropout_p)
