"""Save a model to one safetensors file and load it back (Chapter 6, §6.5).

A checkpoint holds the weights and, in the file's metadata, what is needed to
rebuild the model: its class name ("GPT", "BERT", "T5" or "EncoderDecoder") and
its config as JSON, plus any text the writer adds (steps, seed...). Loading builds
the model from that config and copies the weights in, checking every name and
shape, so a file can never be loaded into the wrong model by accident.

The weights may be stored in a smaller dtype (float16 or bfloat16 halve the file);
they are loaded back as float32. A table shared by two layers (the tied token and
output tables) is stored once.

Chapter 6 loads the long-trained BERT, GPT and T5 that ship with the package
(``shipped_checkpoint``) with the same ``load_checkpoint`` a reader would use for
a model of their own.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from pathlib import Path

import torch
from torch import nn

from .models import (
    BERT,
    GPT,
    T5,
    BERTConfig,
    EncoderDecoder,
    EncoderDecoderConfig,
    GPTConfig,
    T5Config,
)

__all__ = [
    "MODEL_CLASSES",
    "save_checkpoint",
    "load_checkpoint",
    "shipped_checkpoint",
    "shipped_record",
]

# class name -> (model class, config class); T5 before EncoderDecoder, its parent
MODEL_CLASSES = {
    "GPT": (GPT, GPTConfig),
    "BERT": (BERT, BERTConfig),
    "T5": (T5, T5Config),
    "EncoderDecoder": (EncoderDecoder, EncoderDecoderConfig),
}
STORAGE_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
_RESERVED = ("model", "config", "dtype")  # metadata keys save_checkpoint writes
SHIPPED = ("BERT", "GPT", "T5")  # the long-trained models of Chapter 6


def _kind(model: object) -> str:
    for kind, (cls, _) in MODEL_CLASSES.items():
        if type(model) is cls:
            return kind
    names = ", ".join(MODEL_CLASSES)
    raise TypeError(f"model must be one of {names}, got {type(model).__name__}")


def _stored_names(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict less the names that alias a tensor already listed (ties).

    A tie is one parameter under two names, so the test is identity: it holds on
    the meta device too, where every tensor has the same (null) data pointer.
    """
    seen, out = set(), {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        out[name] = tensor.detach()
    return out


def _stored(name: str, tensor: torch.Tensor, dtype: str) -> torch.Tensor:
    """``tensor`` as written to the file: floats in ``dtype``, which must hold them."""
    if tensor.is_floating_point():
        cast = tensor.to(STORAGE_DTYPES[dtype])
        if (torch.isinf(cast) & torch.isfinite(tensor)).any():
            raise ValueError(
                f"dtype={dtype!r} cannot hold {name}: its largest magnitude, "
                f"{tensor.abs().max().item():.4g}, is above "
                f"{torch.finfo(cast.dtype).max:.4g}; save it as float32"
            )
        tensor = cast
    return tensor.detach().cpu().contiguous().clone()


# What a config may ask to allocate besides the weights the file holds (the
# sinusoidal table of max_len x d_model): beyond it, the config is not believed
_UNSTORED_LIMIT = 2**28  # elements, 1 GiB of float32


def _check_unstored(path: Path, skeleton: nn.Module) -> None:
    """The buffers that are not in the file (built from the config) stay small."""
    stored = skeleton.state_dict(keep_vars=True)
    unstored = sum(b.numel() for n, b in skeleton.named_buffers() if n not in stored)
    if unstored > _UNSTORED_LIMIT:
        raise ValueError(
            f"path: the config in {str(path)!r} asks for {unstored:,} numbers of "
            f"tables that are not in the file (more than {_UNSTORED_LIMIT:,}): a "
            "max_len or d_model far beyond its weights"
        )


def _check_path(name: str, path: object) -> Path:
    if not isinstance(path, (str, Path)):
        raise TypeError(
            f"{name} must be a str or pathlib.Path, got {type(path).__name__}"
        )
    return Path(path)


def save_checkpoint(
    model: nn.Module, path: str | Path, dtype: str = "float32", **meta: object
) -> Path:
    """Write ``model``'s weights, class and config to the safetensors file ``path``.

    ``dtype`` ("float32", "float16" or "bfloat16") is the storage type of the
    floating-point weights. ``meta`` adds JSON-serialisable facts (steps, seed...)
    to the file's metadata. Returns the path written.
    """
    from safetensors.torch import save_file

    kind = _kind(model)
    path = _check_path("path", path)
    if path.suffix != ".safetensors":
        raise ValueError(f"path must end in .safetensors, got {str(path)!r}")
    if not isinstance(dtype, str) or dtype not in STORAGE_DTYPES:
        raise ValueError(f"dtype must be one of {list(STORAGE_DTYPES)}, got {dtype!r}")
    if not path.parent.is_dir():
        raise ValueError(f"path: folder {str(path.parent)!r} does not exist")
    if path.is_dir():
        raise ValueError(f"path: {str(path)!r} is a folder, not a file")
    for key in meta:
        if key in _RESERVED:
            raise ValueError(f"meta may not use the reserved key {key!r}")
    try:
        extra = {k: json.dumps(v) for k, v in meta.items()}
    except TypeError as err:
        raise TypeError(f"meta must be JSON-serialisable: {err}") from None
    except (ValueError, RecursionError) as err:  # a value that holds itself
        raise ValueError(f"meta cannot be written as JSON: {err}") from None
    tensors = {
        name: _stored(name, t, dtype) for name, t in _stored_names(model).items()
    }
    config = json.dumps(dataclasses.asdict(model.cfg))
    save_file(
        tensors, str(path), {"model": kind, "config": config, "dtype": dtype, **extra}
    )
    return path


def load_checkpoint(path: str | Path, model: str | None = None) -> nn.Module:
    """The model saved in ``path`` by ``save_checkpoint``, float32, in eval mode.

    ``model`` ("GPT", "BERT", "T5", "EncoderDecoder"), if given, is the class the
    file must hold. Its metadata (steps, seed...) is in ``loaded.checkpoint_meta``.
    """
    from safetensors import SafetensorError
    from safetensors.torch import safe_open

    path = _check_path("path", path)
    if model is not None and (not isinstance(model, str) or model not in MODEL_CLASSES):
        raise ValueError(f"model must be one of {list(MODEL_CLASSES)}, got {model!r}")
    if not path.is_file():
        raise ValueError(f"path: no file {str(path)!r}")
    try:
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except (SafetensorError, OSError) as err:
        raise ValueError(
            f"path: {str(path)!r} is not a safetensors file: {err}"
        ) from None
    kind = header.get("model")
    if kind not in MODEL_CLASSES or "config" not in header:
        raise ValueError(f"path: {str(path)!r} holds no model saved by save_checkpoint")
    if model is not None and kind != model:
        raise ValueError(f"path: {str(path)!r} holds a {kind}, not a {model}")
    cls, config_cls = MODEL_CLASSES[kind]
    try:
        cfg = config_cls(**json.loads(header["config"]))
        with torch.device("meta"):  # shapes only: nothing is allocated yet
            skeleton = cls(cfg)
    except (TypeError, ValueError, RuntimeError, RecursionError) as err:
        raise ValueError(
            f"path: the config in {str(path)!r} is invalid: {err}"
        ) from None
    expected = _stored_names(skeleton)
    if set(tensors) != set(expected):
        missing = sorted(set(expected) - set(tensors))[:3]
        extra = sorted(set(tensors) - set(expected))[:3]
        raise ValueError(
            f"path: the weights in {str(path)!r} do not fit a {kind} of its config "
            f"(missing {missing}, unexpected {extra})"
        )
    for name, tensor in tensors.items():
        if tensor.shape != expected[name].shape:
            raise ValueError(
                f"path: {name} in {str(path)!r} has shape {tuple(tensor.shape)}, "
                f"the config gives {tuple(expected[name].shape)}"
            )
        if not tensor.is_floating_point() and expected[name].is_floating_point():
            raise ValueError(
                f"path: {name} in {str(path)!r} has dtype {tensor.dtype}; the "
                "model's weight is floating point"
            )
    _check_unstored(path, skeleton)
    try:
        meta = {k: json.loads(v) for k, v in header.items() if k not in _RESERVED}
    except (ValueError, RecursionError) as err:
        raise ValueError(f"path: bad metadata in {str(path)!r}: {err}") from None
    built = cls(cfg)
    state = {n: t.float() if t.is_floating_point() else t for n, t in tensors.items()}
    built.load_state_dict(state, strict=False)  # ties share the stored table
    built.checkpoint_meta = {"dtype": header.get("dtype", "float32"), **meta}
    return built.eval()


def shipped_checkpoint(name: str) -> nn.Module:
    """Chapter 6's long-trained model ``name`` ("BERT", "GPT" or "T5"), from the
    package's data (``scripts/pretrain_variants.py`` wrote it)."""
    with resources.as_file(_shipped(name, ".safetensors")) as path:
        return load_checkpoint(path, model=name)


def shipped_record(name: str) -> dict:
    """How ``shipped_checkpoint(name)`` was trained: the JSON the script wrote with
    it (config, steps, seed, learning-rate schedule, seconds, the loss of every
    step)."""
    return json.loads(_shipped(name, ".json").read_text())


def _shipped(name: str, suffix: str):
    if not isinstance(name, str) or name not in SHIPPED:
        raise ValueError(f"name must be one of {list(SHIPPED)}, got {name!r}")
    return resources.files("transformer_book") / "weights" / f"{name.lower()}{suffix}"
