"""Issue 24's defects, one test each: the silent wrong results and the crashes the
audit found, now right results or errors that name the argument. (The generic
contract over every public name is ``test_public_api.py``.)"""

from __future__ import annotations

import json
import math
import struct

import pytest
import torch
from torch import nn

from transformer_book.attention import (
    MultiHeadAttention,
    fused_scaled_dot_product_attention,
    scaled_dot_product_attention,
)
from transformer_book.blocks import DecoderBlock, EncoderBlock
from transformer_book.corpus import sentences, topic_sentences
from transformer_book.efficient import (
    orthogonal_random_features,
    performer_attention,
)
from transformer_book.measure import peak_memory
from transformer_book.models import BERT, BERTConfig, mask_tokens, span_corrupt
from transformer_book.pretrained import (
    bert_config_from_hf,
    bert_from_hf,
    read_safetensors,
)
from transformer_book.speed import mha_forward_backward_ms
from transformer_book.tokenizer import char_tokenizer, get_tokenizer
from transformer_book.train import train
from transformer_book.vision import CNNBaseline, MLPBaseline, ViT, ViTConfig


def randn(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


# ---------------------------------------------------------------- attention


@pytest.mark.parametrize("mask_shape", [(6,), (), (1, 6)])
def test_fused_paths_take_the_masks_the_readable_path_takes(mask_shape):
    q, k, v = randn(2, 2, 5, 4), randn(2, 2, 6, 4), randn(2, 2, 6, 4)
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(1)) > 0.3
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(
        fused_scaled_dot_product_attention(q, k, v, mask), expected
    )
    mha, x = MultiHeadAttention(8, 2), randn(2, 5, 8)
    readable, _ = mha(x, mask=mask[..., :5] if mask.dim() else mask, need_weights=True)
    fused = mha(x, mask=mask[..., :5] if mask.dim() else mask)
    torch.testing.assert_close(fused, readable)


def test_fused_attention_on_3d_inputs_keeps_no_scores():
    """The math fallback builds the (T, T) scores; 3-D inputs run as 4-D instead."""
    q = randn(1, 512, 64)
    three_d = peak_memory(fused_scaled_dot_product_attention, q, q, q)
    four_d = peak_memory(fused_scaled_dot_product_attention, *[q[:, None]] * 3)
    assert three_d <= 1.1 * four_d
    assert three_d < 512 * 512 * 4  # less than one float32 (T, T) matrix


def test_fused_attention_with_many_batch_axes_equals_the_readable_one():
    q, k, v = randn(3, 1, 2, 5, 4), randn(2, 6, 4), randn(2, 6, 3)
    mask = torch.rand(1, 5, 6, generator=torch.Generator().manual_seed(2)) > 0.3
    torch.testing.assert_close(
        fused_scaled_dot_product_attention(q, k, v, mask),
        scaled_dot_product_attention(q, k, v, mask)[0],
    )


# ---------------------------------------------------------------- models


def test_mask_tokens_refuses_special_ids_outside_the_vocabulary():
    ids = torch.randint(3, 10, (2, 8), generator=torch.Generator().manual_seed(0))
    for special in ([0, 2, -1], [0, 2, 25]):  # -1 would make token 9 special
        with pytest.raises(ValueError, match="special_ids"):
            mask_tokens(ids, 10, 2, special)


@pytest.mark.parametrize("pad_id", [1.5, None, True])
def test_bert_config_pad_id_must_be_an_int(pad_id):
    with pytest.raises((TypeError, ValueError), match="pad_id"):
        BERTConfig(vocab_size=10, max_len=8, pad_id=pad_id)


def test_bert_encode_names_a_mask_that_is_a_list():
    model = BERT(BERTConfig(vocab_size=10, max_len=8, d_model=8, n_heads=2))
    with pytest.raises(TypeError, match="mask"):
        model.encode(torch.ones(1, 4, dtype=torch.long), mask=[[True] * 4])


def test_span_corrupt_refuses_a_nan_span_length():
    with pytest.raises(ValueError, match="mean_span_length"):
        span_corrupt(torch.arange(5, 25), [1, 2, 3], mean_span_length=math.nan)


# ---------------------------------------------------------------- pretrained

HF = {
    "model_type": "bert",
    "vocab_size": 11,
    "max_position_embeddings": 8,
    "hidden_size": 8,
    "num_attention_heads": 2,
    "num_hidden_layers": 1,
    "intermediate_size": 8,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "pad_token_id": 0,
}


def test_bert_config_from_hf_refuses_a_decoder_and_a_null_pad_id():
    with pytest.raises(ValueError, match="is_decoder"):
        bert_config_from_hf(HF | {"is_decoder": True})
    with pytest.raises(ValueError, match="pad_token_id"):
        bert_config_from_hf(HF | {"pad_token_id": None})


def _state(model: BERT) -> dict:
    from transformer_book.pretrained import _LAYER_NAMES

    names = {
        "token.weight": "embeddings.word_embeddings.weight",
        "position.weight": "embeddings.position_embeddings.weight",
        "embed_norm.weight": "embeddings.LayerNorm.weight",
        "embed_norm.bias": "embeddings.LayerNorm.bias",
    }
    for ours, theirs in _LAYER_NAMES.items():
        for kind in ("weight", "bias"):
            names[f"blocks.0.{ours}.{kind}"] = f"encoder.layer.0.{theirs}.{kind}"
    state = model.state_dict()
    return {theirs: state[ours] for ours, theirs in names.items()}


@pytest.mark.parametrize("shape", [(2, 1), (16,), (0, 8)])
def test_bert_from_hf_refuses_a_token_type_table_of_the_wrong_shape(shape):
    config = bert_config_from_hf(HF)
    state = _state(BERT(config))
    state["embeddings.token_type_embeddings.weight"] = torch.zeros(shape)
    with pytest.raises(ValueError, match="token_type_embeddings"):
        bert_from_hf(state, config)


def _safetensors(header: object) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + bytes(16)


@pytest.mark.parametrize(
    "header",
    [
        [1, 2],
        {"w": 3},
        {"w": {"dtype": "F32", "data_offsets": [0, 8]}},
        {"w": {"dtype": "F32", "shape": [2]}},
        {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4, 8]}},
        {"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}},
        {"w": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}},
    ],
)
def test_read_safetensors_names_a_malformed_header(header):
    with pytest.raises(ValueError, match="data"):
        read_safetensors(_safetensors(header))


def test_sentence_embeddings_keep_a_literal_pad_in_the_text():
    """Padding is where the tokenizer padded, not wherever id 0 occurs."""
    pytest.importorskip("all_minilm_l6_v2")
    from transformer_book.pretrained import load_minilm, sentence_embeddings, tokenize

    model, tokenizer = load_minilm()
    text = "the word [PAD] is a token here"
    ids, real = tokenize(tokenizer, [text])
    assert (ids[real] == 0).any()  # the literal [PAD] is a real token
    h = model.encode(ids, mask=real[:, None, :])
    expected = torch.nn.functional.normalize(h.mean(dim=1), dim=-1)
    got = sentence_embeddings(model, tokenizer, [text, "a longer sentence pads it"])
    torch.testing.assert_close(got[:1], expected, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------- efficient


def test_causal_performer_keeps_an_early_key_of_large_norm():
    d, t = 16, 6
    features = orthogonal_random_features(64, d, torch.Generator().manual_seed(0))
    q, k, v = randn(1, t, d), randn(1, t, d), randn(1, t, 3)
    k[:, 0] = k[:, 0] / k[:, 0].norm() * 36  # its features underflow against the rest
    out = performer_attention(q, k, v, features, causal=True)
    torch.testing.assert_close(out[:, 0], v[:, 0])  # query 0 sees key 0 alone
    for i in range(t):  # and each prefix equals the non-causal attention over it
        alone = performer_attention(
            q[:, i : i + 1], k[:, : i + 1], v[:, : i + 1], features
        )
        torch.testing.assert_close(out[:, i : i + 1], alone, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------- measure


def test_peak_memory_nests():
    def inner():
        return torch.ones(1000)

    def outer():
        a = torch.ones(10_000)  # 40,000 bytes
        assert peak_memory(inner) >= 4000
        b = torch.ones(5000)  # 20,000 bytes more
        return a, b

    assert peak_memory(outer) >= 60_000


# ---------------------------------------------------------------- tokenizer


@pytest.mark.parametrize("ids", [[24.7], "24", torch.tensor([True, False]), [True]])
@pytest.mark.parametrize("make", [get_tokenizer, char_tokenizer])
def test_decode_refuses_ids_that_are_not_ints(make, ids):
    with pytest.raises((TypeError, ValueError), match="ids"):
        make().decode(ids)


def test_encode_batch_length_must_be_an_int():
    with pytest.raises(TypeError, match="length"):
        get_tokenizer().encode_batch(["a b"], length=2.5)


# ---------------------------------------------------------------- corpus, speed


def test_min_words_is_checked_alike():
    with pytest.raises(TypeError, match="min_words"):
        sentences(min_words="3")
    with pytest.raises(ValueError, match="min_words"):
        topic_sentences(min_words=0)


def test_mha_timing_refuses_heads_that_do_not_divide():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by n_heads=3"):
        mha_forward_backward_ms(4, d_model=10, n_heads=3)


# ---------------------------------------------------------------- dtypes


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize(
    "make",
    [lambda: ViT(ViTConfig(d_model=8, d_ff=8)), MLPBaseline, CNNBaseline],
    ids=["ViT", "MLP", "CNN"],
)
def test_image_models_cast_images_to_their_weights(make, dtype):
    torch.manual_seed(0)
    model = make()
    images = torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    out = model(images.to(dtype))
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, model(images.to(dtype).float()))


# ---------------------------------------------------------------- converters


def _gelu_tanh(x):
    return nn.functional.gelu(x, approximate="tanh")


@pytest.mark.parametrize(
    "change, what",
    [
        (lambda m: setattr(m, "activation", nn.GELU(approximate="tanh")), "activation"),
        (lambda m: setattr(m, "activation", _gelu_tanh), "activation"),
        (lambda m: setattr(m.norm2, "eps", 1e-3), "eps"),
        (lambda m: setattr(m.dropout1, "p", 0.3), "dropout"),
        (lambda m: setattr(m, "norm1", nn.RMSNorm(8)), "norm1"),
        (lambda m: setattr(m, "norm1", nn.LayerNorm(8, bias=False)), "norm1"),
    ],
)
@pytest.mark.parametrize("kind", [EncoderBlock, DecoderBlock])
def test_from_torch_refuses_what_it_cannot_copy(kind, change, what):
    layer = (
        nn.TransformerEncoderLayer
        if kind is EncoderBlock
        else nn.TransformerDecoderLayer
    )(8, 2, 16, batch_first=True)
    change(layer)
    with pytest.raises(ValueError, match=what):
        kind.from_torch(layer)


@pytest.mark.parametrize("eps", [1e-5, 1e-9])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu", nn.GELU()])
def test_from_torch_copies_exactly_what_it_accepts(activation, norm_first, eps):
    torch.manual_seed(0)
    kw = dict(dropout=0.0, activation=activation, batch_first=True)
    kw |= dict(norm_first=norm_first, layer_norm_eps=eps)
    x, memory = randn(2, 5, 8), randn(2, 4, 8)
    encoder = nn.TransformerEncoderLayer(8, 2, 16, **kw).eval()
    torch.testing.assert_close(EncoderBlock.from_torch(encoder)(x), encoder(x))
    decoder = nn.TransformerDecoderLayer(8, 2, 16, **kw).eval()
    torch.testing.assert_close(
        DecoderBlock.from_torch(decoder)(x, memory), decoder(x, memory)
    )


# ---------------------------------------------------------------- issue 44


def test_train_refuses_the_meta_device_and_leaves_the_model_where_it_was():
    model = nn.Linear(3, 2)
    weight = model.weight.detach().clone()

    def batch(step):
        return torch.randn(4, 3), torch.randint(2, (4,))

    with pytest.raises(ValueError, match="device"):
        train(model, batch, nn.functional.cross_entropy, 2, device="meta")
    assert model.weight.device.type == "cpu" and torch.equal(model.weight, weight)


def _run_functions():
    """Every public run_* of the experiments and of decision, with a device."""
    import importlib
    import inspect
    import pkgutil

    import transformer_book.experiments as experiments

    names = [f"transformer_book.experiments.{m.name}"
             for m in pkgutil.iter_modules(experiments.__path__)]  # fmt: skip
    found = {}
    for module in map(importlib.import_module, [*names, "transformer_book.decision"]):
        for name, fn in vars(module).items():
            if name.startswith("run_") and inspect.isfunction(fn):
                if "device" in inspect.signature(fn).parameters:
                    found[name] = fn
    return found


RUNS = _run_functions()
REQUIRED = {"run_deep": {"norm_first": True}}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_run_refuses_the_meta_device_before_it_trains(name):
    import time

    start = time.perf_counter()
    with pytest.raises(ValueError, match="device"):
        RUNS[name](**REQUIRED.get(name, {}), device="meta")
    assert time.perf_counter() - start < 2.0, "refused only after some work"


@pytest.mark.parametrize(
    "name", ["run_sort", "run_reverse", "run_feed_forward", "run_variants"]
)
@pytest.mark.parametrize("seed", [2**64 - 1, 2**63])
def test_a_seed_too_large_for_a_generator_is_refused_at_once(name, seed):
    import time

    start = time.perf_counter()
    with pytest.raises(ValueError, match="seed"):
        RUNS[name](seed=seed)
    assert time.perf_counter() - start < 2.0, "refused only after some work"


# ------------------------------------------- issue 44: the last entries of GAPS


def _lookup_rows():
    from transformer_book.data import lookup_task

    return lookup_task(2, 3, 5, 4, torch.Generator().manual_seed(0))


@pytest.mark.parametrize("kind", ["LookupAttention", "UniformAverage"])
@pytest.mark.parametrize(
    "change, name",
    [
        (lambda b: (b.keys.float(), b.values, b.query), "keys"),  # float ids
        (lambda b: (b.keys, b.values[:, :2], b.query), "values"),  # N differs
        (lambda b: (b.keys, b.values.to("meta"), b.query), "values"),
        (lambda b: (b.keys + 5, b.values, b.query), "keys"),  # past n_keys
        (lambda b: (b.keys, b.values, b.query[:1]), "query"),  # batch differs
        (lambda b: (b.keys, b.values, None), "query"),  # the average ignores it
        (lambda b: (b.keys, b.values, b.query[:, None]), "query"),  # (B, 1)
    ],
)
def test_lookup_models_name_a_bad_row(kind, change, name):
    from transformer_book.experiments import lookup

    model = getattr(lookup, kind)(5, 4, 4, 4)
    keys, values, query = change(_lookup_rows())
    with pytest.raises((TypeError, ValueError), match=rf"\b{name}\b"):
        model(keys, values, query)


@pytest.mark.parametrize("size", [0, -1, True, 2.5])
def test_lookup_models_name_a_bad_size(size):
    from transformer_book.experiments.lookup import UniformAverage

    with pytest.raises((TypeError, ValueError), match="d_half"):
        UniformAverage(5, 4, d_half=size)


def test_lookup_models_answer_valid_rows_as_before():
    from transformer_book.experiments.lookup import LookupAttention, UniformAverage

    b = _lookup_rows()
    for kind in (LookupAttention, UniformAverage):
        torch.manual_seed(0)
        out, weights = kind(5, 4, 4, 4).attend(b.keys, b.values, b.query)
        assert out.shape == (2, 1, 4) and weights.shape == (2, 1, 3)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 1))


def test_attention_heatmap_names_meta_weights_and_a_str_of_labels():
    import matplotlib.pyplot as plt

    from transformer_book.plot import attention_heatmap

    w = torch.full((3, 3), 1 / 3)
    with pytest.raises(ValueError, match="weights.*meta"):
        attention_heatmap(w.to("meta"))
    with pytest.raises(TypeError, match="query_tokens"):
        attention_heatmap(w, query_tokens="abc")  # three labels, or one?
    with pytest.raises(TypeError, match="key_tokens"):
        attention_heatmap(w, key_tokens=3)
    attention_heatmap(w, ("a", "b", "c"), __import__("numpy").array(["x", "y", "z"]))
    plt.close("all")


def test_linked_widgets_name_a_list_that_is_not_one():
    from ipywidgets import Dropdown, Label

    from transformer_book.plot import linked_stack, linked_views

    choice = Dropdown(options=["a", "b"])
    with pytest.raises(TypeError, match="children"):
        linked_stack(choice, None)
    with pytest.raises(TypeError, match="controls"):
        linked_views("ab", lambda v: Label(v))
    with pytest.raises(TypeError, match=r"controls\[1\]"):
        linked_views([choice, 3], lambda a, b: Label(a))
    linked_stack(choice, [Label("a"), Label("b")])


def test_apply_rope_names_meta_positions():
    from transformer_book.positional import apply_rope

    x = randn(2, 5, 4)
    with pytest.raises(ValueError, match="positions.*meta"):
        apply_rope(x, torch.arange(5, device="meta"))
    out = apply_rope(x.to("meta"), torch.arange(5, device="meta"))  # no values
    assert out.is_meta and out.shape == x.shape


# ------------------------------------------ issue 44: tokenizer arguments


@pytest.mark.parametrize(
    "bad", [None, "abc", 3, object()], ids=["None", "str", "int", "object"]
)
def test_task_pairs_names_a_tokenizer_that_is_not_one(bad):
    from transformer_book.experiments.variants import task_pairs

    # None gave AttributeError, a str LookupError (str.encode read a codec's name)
    with pytest.raises(TypeError, match=r"^tok must be one of the book's tokenizers"):
        task_pairs(bad, "test")


def test_a_tokenizer_of_the_other_kind_is_named():
    from transformer_book.experiments.bert_heads.study import corpus_texts
    from transformer_book.pretrained import load_minilm, tokenize

    with pytest.raises(TypeError, match="tokenizer must be a Hugging Face"):
        tokenize(get_tokenizer(), ["a sentence"])  # the book's BPE: no Encodings
    with pytest.raises(TypeError, match="tokenizer must be a Hugging Face"):
        corpus_texts(char_tokenizer())
    from transformer_book.experiments.variants import format_batch

    with pytest.raises(TypeError, match="tok must be one of the book's"):
        format_batch("GPT", load_minilm()[1], torch.zeros(1, 4, dtype=torch.long),
                     [], torch.Generator())  # fmt: skip
