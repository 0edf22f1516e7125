"""checkpoints: save and load a model through one safetensors file (Chapter 6).

Round trips are exact in float32 and equal to a cast in float16/bfloat16; files of
another model, of another config or of no model are refused with errors that name
the argument; the shipped checkpoints load, fit 2 MB, and match their records.
"""

from __future__ import annotations

import json
import struct

import pytest
import torch
from safetensors.torch import save_file

from transformer_book.checkpoints import (
    load_checkpoint,
    save_checkpoint,
    shipped_checkpoint,
    shipped_record,
)
from transformer_book.models import (
    BERT,
    GPT,
    T5,
    BERTConfig,
    EncoderDecoder,
    EncoderDecoderConfig,
    GPTConfig,
    T5Config,
)

SMALL = dict(vocab_size=23, max_len=10, d_model=16, n_heads=2, n_layers=1, d_ff=32)
BUILDERS = {
    "GPT": lambda: GPT(GPTConfig(**SMALL)),
    "BERT": lambda: BERT(BERTConfig(**SMALL)),
    "T5": lambda: T5(T5Config(**SMALL)),
    "EncoderDecoder": lambda: EncoderDecoder(EncoderDecoderConfig(**SMALL)),
}
MAX_BYTES = 2_000_000  # the limit: at most 2 MB per shipped model


def build(kind: str, seed: int = 0):
    torch.manual_seed(seed)
    model = BUILDERS[kind]()
    with torch.no_grad():  # move every weight off its initial value (LayerNorms: 1, 0)
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape))
    return model.eval()


def data_bytes(path) -> int:
    """The bytes of a safetensors file's tensors: the file less its header."""
    raw = path.read_bytes()
    return len(raw) - 8 - struct.unpack("<Q", raw[:8])[0]


def logits(model, kind: str) -> torch.Tensor:
    ids = torch.randint(4, SMALL["vocab_size"], (2, 7), generator=torch.Generator())
    if kind in ("T5", "EncoderDecoder"):
        return model(ids, ids[:, :5])
    return model(ids)


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_a_float32_round_trip_is_exact(kind, tmp_path):
    model = build(kind)
    path = save_checkpoint(model, tmp_path / "m.safetensors", steps=7, note="x")
    loaded = load_checkpoint(path)
    assert type(loaded) is type(model) and loaded.cfg == model.cfg
    assert not loaded.training
    state, back = model.state_dict(), loaded.state_dict()
    assert state.keys() == back.keys()
    for name in state:
        assert torch.equal(state[name], back[name]), name
    with torch.no_grad():
        assert torch.equal(logits(model, kind), logits(loaded, kind))
    assert loaded.checkpoint_meta == {"dtype": "float32", "steps": 7, "note": "x"}


@pytest.mark.parametrize("kind", ["GPT", "T5"])
def test_tied_tables_are_stored_once_and_stay_tied(kind, tmp_path):
    model = build(kind)
    path = save_checkpoint(model, tmp_path / "m.safetensors")
    tables = SMALL["vocab_size"] * SMALL["d_model"] * 4  # bytes of one float32 table
    untied = sum(t.numel() * 4 for t in model.state_dict().values())
    assert path.stat().st_size < untied - tables + 10_000
    loaded = load_checkpoint(path)
    assert (
        loaded.output.weight is loaded.embed.token.weight
        if kind == "T5"
        else (loaded.output.weight is loaded.token.weight)
    )


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_storage_equals_a_cast_and_halves_the_file(dtype, tmp_path):
    model = build("BERT")
    full = save_checkpoint(model, tmp_path / "full.safetensors")
    half = save_checkpoint(model, tmp_path / "half.safetensors", dtype=dtype)
    assert 2 * data_bytes(half) == data_bytes(full)
    loaded = load_checkpoint(half, model="BERT")
    assert loaded.checkpoint_meta["dtype"] == dtype
    cast = getattr(torch, dtype)
    for name, tensor in model.state_dict().items():
        back = loaded.state_dict()[name]
        assert back.dtype == torch.float32
        assert torch.equal(back, tensor.to(cast).float()), name


def test_save_refuses_bad_arguments(tmp_path):
    model, path = build("GPT"), tmp_path / "m.safetensors"
    with pytest.raises(TypeError, match="model"):
        save_checkpoint(torch.nn.Linear(2, 2), path)
    with pytest.raises(TypeError, match="path"):
        save_checkpoint(model, 3)
    with pytest.raises(ValueError, match="path"):
        save_checkpoint(model, tmp_path / "m.pt")
    with pytest.raises(ValueError, match="path"):
        save_checkpoint(model, tmp_path / "no-folder" / "m.safetensors")
    with pytest.raises(ValueError, match="dtype"):
        save_checkpoint(model, path, dtype="int8")
    with pytest.raises(ValueError, match="meta"):
        save_checkpoint(model, path, config="mine")
    with pytest.raises(TypeError, match="meta"):
        save_checkpoint(model, path, when=object())
    assert not path.exists()


def test_load_refuses_what_is_not_a_checkpoint_of_that_model(tmp_path):
    gpt = save_checkpoint(build("GPT"), tmp_path / "gpt.safetensors")
    with pytest.raises(TypeError, match="path"):
        load_checkpoint(None)
    with pytest.raises(ValueError, match="path"):
        load_checkpoint(tmp_path / "missing.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a safetensors file at all")
    with pytest.raises(ValueError, match="path"):
        load_checkpoint(junk)
    bare = tmp_path / "bare.safetensors"
    save_file({"w": torch.ones(2)}, str(bare))  # weights, but no model in metadata
    with pytest.raises(ValueError, match="path.*no model"):
        load_checkpoint(bare)
    with pytest.raises(ValueError, match="path.*holds a GPT, not a BERT"):
        load_checkpoint(gpt, model="BERT")
    with pytest.raises(ValueError, match="model"):
        load_checkpoint(gpt, model="LLaMA")


def _rewritten(path, tmp_path, config=None, drop=None, kind=None):
    """A copy of checkpoint ``path`` with its config, model or a tensor changed."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = dict(f.metadata())
        tensors = {n: f.get_tensor(n) for n in f.keys() if n != drop}
    if config:
        meta["config"] = json.dumps({**json.loads(meta["config"]), **config})
    if kind:
        meta["model"] = kind
    out = tmp_path / "changed.safetensors"
    save_file(tensors, str(out), meta)
    return out


def test_load_refuses_weights_that_do_not_fit_the_config(tmp_path):
    gpt = save_checkpoint(build("GPT"), tmp_path / "gpt.safetensors")
    wider = _rewritten(gpt, tmp_path, config={"d_ff": 64})
    with pytest.raises(ValueError, match="path.*shape"):
        load_checkpoint(wider)
    with pytest.raises(ValueError, match="path.*do not fit a GPT.*missing"):
        load_checkpoint(_rewritten(gpt, tmp_path, drop="norm.weight"))
    with pytest.raises(ValueError, match="path.*config.*n_kv_heads"):
        load_checkpoint(_rewritten(gpt, tmp_path, kind="BERT"))  # GPT's config
    bert = save_checkpoint(build("BERT"), tmp_path / "bert.safetensors")
    with pytest.raises(ValueError, match="path.*config.*pad_id"):
        load_checkpoint(_rewritten(bert, tmp_path, kind="GPT"))  # BERT's weights
    with pytest.raises(ValueError, match="path.*config"):
        load_checkpoint(_rewritten(gpt, tmp_path, config={"colour": "red"}))


@pytest.mark.parametrize("name", ["BERT", "GPT", "T5"])
def test_the_shipped_checkpoints_load_fit_2_mb_and_match_their_records(name):
    from importlib import resources

    path = (
        resources.files("transformer_book") / "weights" / f"{name.lower()}.safetensors"
    )
    assert path.stat().st_size <= MAX_BYTES
    model = shipped_checkpoint(name)
    record = shipped_record(name)
    assert type(model).__name__ == name == record["model"]
    assert model.checkpoint_meta == {"dtype": "float16", "steps": record["steps"]}
    cfg = {k: getattr(model.cfg, k) for k in record["config"]}
    assert cfg == record["config"]
    assert sum(p.numel() for p in model.parameters()) == record["parameters"]
    assert len(record["loss"]) == record["steps"]
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_shipped_names_are_checked():
    for call in (shipped_checkpoint, shipped_record):
        with pytest.raises(ValueError, match="name"):
            call("LLaMA")
        with pytest.raises(ValueError, match="name"):
            call(["GPT"])


# ---- issue 44: what a checkpoint file or a save may not do silently


def _with_tensor(path, tmp_path, name, tensor, meta=None):
    """A copy of checkpoint ``path`` with tensor ``name`` and metadata replaced."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        header = dict(f.metadata())
        tensors = {n: f.get_tensor(n) for n in f.keys()}
    if name is not None:
        tensors[name] = tensor
    out = tmp_path / "crafted.safetensors"
    save_file(tensors, str(out), {**header, **(meta or {})})
    return out


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.complex64])
def test_load_refuses_a_weight_that_is_not_floating_point(dtype, tmp_path):
    gpt = save_checkpoint(build("GPT"), tmp_path / "gpt.safetensors")
    table = build("GPT").token.weight.detach()
    crafted = _with_tensor(gpt, tmp_path, "token.weight", (3 * table).to(dtype))
    with pytest.raises(ValueError, match=r"path.*token\.weight.*dtype"):
        load_checkpoint(crafted)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_save_refuses_a_weight_its_dtype_cannot_hold(dtype, tmp_path):
    model, path = build("GPT"), tmp_path / "m.safetensors"
    if dtype == "bfloat16":
        model = model.double()  # float32 cannot hold 1e39 either
    with torch.no_grad():
        model.token.weight[0, 0] = 1e5 if dtype == "float16" else 1e39
    with pytest.raises(ValueError, match=f"dtype.*{dtype}.*token.weight"):
        save_checkpoint(model, path, dtype=dtype)
    assert not path.exists()


@pytest.mark.parametrize(
    "change", [{"vocab_size": 2**62}, {"vocab_size": 2**26}, {"max_len": 2**40}]
)
def test_load_compares_shapes_before_building_the_model(change, tmp_path):
    """A crafted config must not allocate gigabytes (or overflow) for a small file."""
    gpt = save_checkpoint(build("GPT"), tmp_path / "gpt.safetensors")
    with pytest.raises(ValueError, match="path"):
        load_checkpoint(_rewritten(gpt, tmp_path, config=change))


@pytest.mark.parametrize("key", ["note", "config"])
def test_load_names_metadata_nested_too_deep(key, tmp_path):
    gpt = save_checkpoint(build("GPT"), tmp_path / "gpt.safetensors")
    deep = "[" * 100_000 + "]" * 100_000
    crafted = _with_tensor(gpt, tmp_path, None, None, meta={key: deep})
    with pytest.raises(ValueError, match="path"):
        load_checkpoint(crafted)


def test_save_refuses_a_folder_named_like_a_checkpoint(tmp_path):
    folder = tmp_path / "x.safetensors"
    folder.mkdir()
    with pytest.raises(ValueError, match="path.*folder"):
        save_checkpoint(build("GPT"), folder)


def test_save_names_meta_that_refers_to_itself(tmp_path):
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="meta"):
        save_checkpoint(build("GPT"), tmp_path / "m.safetensors", note=loop)
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    with pytest.raises(ValueError, match="meta"):
        save_checkpoint(build("GPT"), tmp_path / "m.safetensors", note=nested)
