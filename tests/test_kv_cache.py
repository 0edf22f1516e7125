"""models.kv_cache: the preallocated cache, the unchecked decode step, and the
checks that GPT.forward_cached and GPT.generate make once per call (issues 24, 28)."""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close

from transformer_book.models import GPT, GPTConfig
from transformer_book.models.kv_cache import KVCache

V, MAX_LEN = 30, 40
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from bare_decode import bare_generate  # noqa: E402


def tiny(n_kv_heads=None, dropout=0.0) -> GPT:
    torch.manual_seed(0)
    cfg = GPTConfig(V, MAX_LEN, n_kv_heads=n_kv_heads, dropout=dropout)
    return GPT(cfg).eval()


def ids(b, t, seed=1) -> torch.Tensor:
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
def test_chunks_of_any_size_give_the_full_forward(n_kv_heads):
    """One token (no mask), a prompt (causal kernel), a chunk after a cache (mask)."""
    model, x = tiny(n_kv_heads), ids(2, 17)
    full = model(x)
    logits, cache = model.forward_cached(x[:, :5])
    pieces = [logits]
    for start, stop in ((5, 6), (6, 10), (10, 11), (11, 17)):
        logits, again = model.forward_cached(x[:, start:stop], cache)
        assert again is cache and cache.length == stop  # written in place
        pieces.append(logits)
    assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-4)
    n_kv = n_kv_heads or 4
    assert [tuple(t.shape) for t in cache[1]] == [(2, n_kv, 17, 16)] * 2


def test_the_cache_is_allocated_once_and_grows_by_doubling():
    model, x = tiny(), ids(1, 20)
    _, cache = model.forward_cached(x[:, :3])
    assert cache.capacity == 3
    buffer = cache.buffer
    model.forward_cached(x[:, 3:4], cache)
    assert cache.capacity == 6 and cache.buffer is not buffer
    buffer = cache.buffer
    model.forward_cached(x[:, 4:6], cache)
    assert cache.buffer is buffer, "room was left: no new allocation"
    assert_close(model.forward_cached(x[:, 6:7], cache)[0][:, 0], model(x)[:, 6])


def test_generate_allocates_exactly_the_positions_it_feeds(monkeypatch):
    made = []
    init = KVCache.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(KVCache, "__init__", spy)
    out = tiny(n_kv_heads=1).generate(ids(3, 4), 9, temperature=0)
    assert out.shape == (3, 13) and out.dtype == torch.long
    (cache,) = made
    assert cache.buffer.shape == (2, 2, 3, 1, 12, 16)  # (L, 2, B, Hkv, T0 + n - 1, Dh)
    assert cache.length == cache.capacity == 12


def test_a_list_cache_is_copied_and_left_as_it_was():
    model, x = tiny(), ids(2, 8)
    _, cache = model.forward_cached(x[:, :5])
    pairs = [(k.clone(), v.clone()) for k, v in cache]
    before = [(k.clone(), v.clone()) for k, v in pairs]
    logits, extended = model.forward_cached(x[:, 5:6], pairs)
    assert isinstance(extended, KVCache) and extended.length == 6
    for (k, v), (k0, v0) in zip(pairs, before, strict=True):
        assert torch.equal(k, k0) and torch.equal(v, v0)
    assert_close(logits[:, 0], model(x)[:, 5], atol=1e-5, rtol=1e-4)


def test_a_copied_cache_branches():
    model, x = tiny(), ids(1, 6)
    _, cache = model.forward_cached(x[:, :4])
    branch = copy.deepcopy(cache)
    a, _ = model.forward_cached(x[:, 4:5], cache)
    b, _ = model.forward_cached(x[:, 5:6], branch)
    assert_close(a[:, 0], model(x[:, :5])[:, 4], atol=1e-5, rtol=1e-4)
    assert_close(b[:, 0], model(x[:, [0, 1, 2, 3, 5]])[:, 4], atol=1e-5, rtol=1e-4)
    assert "5 of 8 positions" in repr(branch) and cache.length == 5


@pytest.mark.parametrize("n_kv_heads", [None, 2])
def test_the_package_and_the_bare_loop_give_the_same_tokens(n_kv_heads):
    model, prompt = tiny(n_kv_heads), ids(3, 5)
    assert torch.equal(
        model.generate(prompt, 20, temperature=0), bare_generate(model, prompt, 20)
    )


def test_sampling_with_and_without_the_cache_gives_the_same_tokens():
    model, prompt = tiny(), ids(2, 3)
    runs = [
        model.generate(
            prompt, 15, 0.8, top_k=10, top_p=0.9, use_cache=use_cache,
            generator=torch.Generator().manual_seed(5),
        )
        for use_cache in (True, False)
    ]  # fmt: skip
    assert torch.equal(*runs)


def test_forward_cached_applies_dropout_in_training_mode_only():
    model, x = tiny(dropout=0.5), ids(2, 6)
    model.train()
    a, _ = model.forward_cached(x)
    b, _ = model.forward_cached(x)
    assert (a - b).abs().amax() > 1e-3, "dropout draws differ"
    model.eval()
    assert_close(model.forward_cached(x)[0], model(x), atol=1e-5, rtol=1e-4)


def test_generate_restores_the_mode_also_when_it_raises(monkeypatch):
    model = tiny()
    for mode in (True, False):
        model.train(mode)
        model.generate(ids(1, 2), 3, temperature=0)
        assert model.training is mode
        with pytest.raises(ValueError, match="top_k"):
            model.generate(ids(1, 2), 3, top_k=0)
        assert model.training is mode

        def boom(*args):
            raise RuntimeError("midway")

        monkeypatch.setattr(model, "_generate", boom)
        with pytest.raises(RuntimeError, match="midway"):
            model.generate(ids(1, 2), 3)
        assert model.training is mode
        monkeypatch.undo()


def test_a_tiny_temperature_is_the_arg_max():
    model, prompt = tiny(), ids(2, 4)
    greedy = model.generate(prompt, 10, temperature=0)
    for t in (1e-40, 1e-300, 5e-324):
        assert torch.equal(model.generate(prompt, 10, temperature=t), greedy)


def cached(model, *lengths):
    _, cache = model.forward_cached(ids(2, lengths[0]))
    return cache


BAD_CACHES = [
    (lambda m: [], ValueError, "cache has 0 layers"),
    (lambda m: list(cached(m, 4))[:1], ValueError, "cache has 1 layers"),
    (
        lambda m: [list(cached(m, 4))[0], list(cached(m, 5))[1]],
        ValueError,
        r"cache\[1\] holds .* one P",
    ),
    (lambda m: _batch(m, 3), ValueError, r"cache\[0\] holds a tensor of shape \(3,"),
    (lambda m: [(k, v[:, :1]) for k, v in cached(m, 4)], ValueError, r"cache\[0\]"),
    (lambda m: [(k,) for k, v in cached(m, 4)], ValueError, r"cache\[0\] must be a"),
    (lambda m: [(k, 1) for k, v in cached(m, 4)], ValueError, r"cache\[0\] must hold"),
    (lambda m: [(k.double(), v) for k, v in cached(m, 4)], ValueError, "float64"),
    (lambda m: "cache", TypeError, "cache must be None, a KVCache"),
    (lambda m: {0: 1}, TypeError, "cache must be"),
    (lambda m: tiny(n_kv_heads=1).forward_cached(ids(2, 3))[1], ValueError, "buffers"),
    (lambda m: m.forward_cached(ids(3, 3))[1], ValueError, "cache has buffers"),
]


def _batch(model, b):
    _, cache = model.forward_cached(ids(b, 4))
    return list(cache)


@pytest.mark.parametrize(("make", "error", "match"), BAD_CACHES)
def test_a_bad_cache_is_refused_by_name(make, error, match):
    model = tiny()
    with pytest.raises(error, match=match):
        model.forward_cached(ids(2, 1), make(model))


def test_a_cache_that_would_pass_max_len_is_refused():
    model = tiny()
    _, cache = model.forward_cached(ids(1, MAX_LEN))
    with pytest.raises(ValueError, match="after 40 cached ones"):
        model.forward_cached(ids(1, 1), cache)
    assert cache.length == MAX_LEN, "a refused call writes nothing"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_new_tokens": True}, TypeError, "max_new_tokens"),
        ({"max_new_tokens": 2.0}, TypeError, "max_new_tokens"),
        ({"temperature": math.nan}, ValueError, "temperature"),
        ({"temperature": math.inf}, ValueError, "temperature"),
        ({"temperature": "1"}, ValueError, "temperature"),
        ({"temperature": 0, "top_k": 0}, ValueError, "top_k"),
        ({"temperature": 0, "top_k": True}, ValueError, "top_k"),
        ({"temperature": 0, "top_p": 1.5}, ValueError, "top_p"),
        ({"temperature": 0, "top_p": math.nan}, ValueError, "top_p"),
        ({"generator": 0}, TypeError, "generator"),
        ({"use_cache": "yes"}, TypeError, "use_cache"),
    ],
)
def test_generate_refuses_bad_arguments_by_name(kwargs, error, match):
    kwargs = {"max_new_tokens": 2, **kwargs}
    with pytest.raises(error, match=match):
        tiny().generate(ids(1, 2), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_layers": 0}, ValueError, "n_layers"),
        ({"batch": True}, TypeError, "batch"),
        ({"n_kv_heads": 1.5}, TypeError, "n_kv_heads"),
        ({"d_head": -1}, ValueError, "d_head"),
        ({"capacity": 0}, ValueError, "capacity"),
        ({"dtype": torch.long}, TypeError, "dtype"),
        ({"dtype": "float32"}, TypeError, "dtype"),
        ({"device": 1.5}, TypeError, "device"),
    ],
)
def test_a_cache_is_made_only_of_valid_sizes(kwargs, error, match):
    sizes = {"n_layers": 2, "batch": 1, "n_kv_heads": 4, "d_head": 16, "capacity": 8}
    with pytest.raises(error, match=match):
        KVCache(**{**sizes, **kwargs})


def test_reserve_refuses_a_bad_length():
    cache = KVCache(2, 1, 4, 16, capacity=4)
    with pytest.raises(ValueError, match="length"):
        cache.reserve(0)
    cache.reserve(3)
    assert cache.capacity == 4 and len(cache) == 2 and cache[0][0].shape[2] == 0


# ---- issue 44


def test_generate_puts_back_each_submodules_own_mode():
    model = tiny(dropout=0.1).train()
    model.blocks[0].eval()  # the reader froze one block's dropout
    modes = {name: m.training for name, m in model.named_modules()}
    model.generate(ids(1, 2), 3, temperature=0)
    assert {name: m.training for name, m in model.named_modules()} == modes


def test_generate_in_eval_mode_is_unchanged_by_the_mode_handling():
    model = tiny(dropout=0.1).eval()
    first = model.generate(ids(2, 3), 6, temperature=0)
    again = model.generate(ids(2, 3), 6, temperature=0)
    assert torch.equal(first, again) and not model.training


@pytest.mark.parametrize("kind", ["EncoderDecoder", "T5"])
def test_greedy_decode_is_greedy_in_training_mode_and_keeps_the_modes(kind):
    from transformer_book.models import (
        T5,
        EncoderDecoder,
        EncoderDecoderConfig,
        T5Config,
    )

    classes = {"EncoderDecoder": (EncoderDecoder, EncoderDecoderConfig),
               "T5": (T5, T5Config)}  # fmt: skip
    cls, config = classes[kind]
    torch.manual_seed(0)
    model = cls(config(vocab_size=V, max_len=12, dropout=0.5))
    src = ids(3, 7)
    expected = model.eval().greedy_decode(src, 1, 2)
    model.train()
    model.decoder[0].eval()
    modes = {name: m.training for name, m in model.named_modules()}
    for _ in range(3):
        assert torch.equal(model.greedy_decode(src, 1, 2), expected)
    assert {name: m.training for name, m in model.named_modules()} == modes


def test_a_cache_slices_like_a_list():
    model = tiny()
    _, cache = model.forward_cached(ids(2, 3))
    pairs = list(cache)
    for part in (cache[:1], cache[:], cache[::-1], cache[5:]):
        assert isinstance(part, list)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(cache[:], pairs, strict=True))
    assert len(cache[:1]) == 1 and torch.equal(cache[-1][1], pairs[-1][1])
    with pytest.raises(ValueError, match="cache has 1 layers, the model has 2"):
        model.forward_cached(ids(2, 1), cache[:1])  # a cache missing a layer


@pytest.mark.parametrize("size", [2**62, 2**40])
def test_a_cache_too_large_to_allocate_is_refused_by_name(size):
    with pytest.raises(ValueError, match="capacity"):
        KVCache(1, 1, 2, 8, capacity=size)
    cache = KVCache(1, 1, 2, 8, capacity=4)
    with pytest.raises(ValueError, match="length"):
        cache.reserve(size)
    assert cache.capacity == 4


def test_an_empty_batch_decodes_with_and_without_the_cache():
    model = tiny()
    for use_cache in (True, False):
        out = model.generate(ids(0, 2), 3, temperature=0, use_cache=use_cache)
        assert out.shape == (0, 5) and out.dtype == torch.long
    logits, cache = model.forward_cached(ids(0, 2))
    assert logits.shape == (0, 2, V) and cache[0][0].shape[0] == 0
