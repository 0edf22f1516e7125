"""The BPE and character tokenizers, and token streams cut into blocks."""

from __future__ import annotations

import hashlib
import json
import time

import pytest
import torch

from transformer_book.corpus import corpus_text, paragraphs
from transformer_book.tokenizer import (
    SPECIAL_TOKENS,
    VOCAB_SIZE,
    CharTokenizer,
    blocks,
    char_tokenizer,
    encode_stream,
    get_tokenizer,
    random_blocks,
    train_bpe,
)

# The vocabulary and merges of get_tokenizer(): the same on every machine.
VOCAB_SHA256 = "5b654055e0ff0c0b9ab17e6fe26fb521a9af2798bb2028392fd1e892883837cd"
FIRST_MERGES = [
    ("▁", "t"),
    ("▁", "a"),
    ("h", "e"),
    ("i", "n"),
    ("o", "n"),
    ("▁t", "he"),
]


def vocabulary_hash(tok) -> str:
    vocab = sorted(tok.hf.get_vocab().items(), key=lambda kv: kv[1])
    return hashlib.sha256(json.dumps([vocab, tok.merges()]).encode()).hexdigest()


def test_the_book_tokenizer_is_the_same_everywhere():
    tok = get_tokenizer()
    assert tok.vocab_size == VOCAB_SIZE == 1024
    assert tok.merges()[:6] == FIRST_MERGES
    assert len(tok.merges()) == VOCAB_SIZE - len(SPECIAL_TOKENS) - 256
    assert vocabulary_hash(tok) == VOCAB_SHA256
    assert get_tokenizer() is tok  # cached


def test_training_is_fast_and_deterministic():
    texts = [p for _, p in paragraphs("train")]
    start = time.perf_counter()
    again = train_bpe(texts)
    assert time.perf_counter() - start < 10.0  # about 0.5 s on an idle 2-core CPU
    assert vocabulary_hash(again) == VOCAB_SHA256
    small = train_bpe(texts, vocab_size=400)
    assert small.vocab_size == 400 and small.merges() == again.merges()[:121]


def test_special_tokens_come_first_in_both_tokenizers():
    for tok in (get_tokenizer(), char_tokenizer()):
        assert tok.special_ids == tuple(range(len(SPECIAL_TOKENS)))
        assert tok.pad_id == 0 and tok.mask_id == 2 and tok.eos_id == 6
        assert tok.sentinel_ids[0] == tok.token_to_id("<extra_id_0>") == 7
        assert (tok.cls_id, tok.sep_id, tok.bos_id) == (3, 4, 5)
        with pytest.raises(ValueError, match="not in the vocabulary"):
            tok.token_to_id("<extra_id_99>")


@pytest.mark.parametrize(
    "text", ["The cat sat on the mat.", "變壓器 → ✓\n  x = {1: 2}"]
)
def test_bpe_decodes_back_to_the_text(text):
    tok = get_tokenizer()
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(torch.tensor(tok.encode(text))) == text


def test_bpe_merges_frequent_words_and_compresses():
    tok = get_tokenizer()
    assert tok.tokens(tok.encode("The object of the function")) == [
        "The",
        "▁object",
        "▁of",
        "▁the",
        "▁function",
    ]
    held = corpus_text("heldout")
    n_bpe, n_char = len(tok.encode(held)), len(char_tokenizer().encode(held))
    assert n_char == len(held)
    assert 2.8 < n_char / n_bpe < 3.3, n_char / n_bpe
    mask = tok.encode("a [MASK] b")
    assert tok.mask_id in mask  # a special token is recognised in text
    assert tok.decode(mask, skip_special=True) == "a  b"


def test_char_tokenizer():
    tok = char_tokenizer()
    chars = sorted(set(corpus_text("all")))
    assert tok.vocab_size == len(SPECIAL_TOKENS) + len(chars)
    text = paragraphs("heldout")[0][1]
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode("☃") == [tok.unk_id]
    assert tok.decode(tok.encode("[PAD]")) == "[PAD]"  # five characters
    assert len(tok.encode("[PAD]")) == 5
    assert tok.decode([tok.pad_id, *tok.encode("ab")], skip_special=True) == "ab"
    small = CharTokenizer("ba")
    assert small.tokens(small.encode("ab")) == ["a", "b"]


def test_encode_batch_pads_on_the_right():
    tok = get_tokenizer()
    batch = tok.encode_batch(["The", "The object of"])
    assert batch.shape == (2, 3) and batch.dtype == torch.long
    assert batch[0, 1:].tolist() == [tok.pad_id] * 2
    assert tok.encode_batch(["The"], length=5).shape == (1, 5)
    with pytest.raises(ValueError, match="length=1"):
        tok.encode_batch(["The object of"], length=1)


def test_streams_and_blocks():
    tok = get_tokenizer()
    stream = encode_stream(tok, ["the cat", "a mat"])
    assert stream.tolist() == tok.encode("the cat") + [tok.eos_id] + tok.encode(
        "a mat"
    ) + [tok.eos_id]
    cut = blocks(torch.arange(10), 3)
    assert cut.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    gen = torch.Generator().manual_seed(0)
    windows = random_blocks(torch.arange(100), 8, 5, gen)
    assert windows.shape == (8, 5)
    assert torch.equal(windows - windows[:, :1], torch.arange(5).expand(8, 5))
    again = random_blocks(torch.arange(100), 8, 5, torch.Generator().manual_seed(0))
    assert torch.equal(windows, again)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: train_bpe(["a b"], vocab_size=100), ValueError, "vocab_size"),
        (lambda: train_bpe("a text"), ValueError, "texts"),
        (lambda: get_tokenizer().encode(3), TypeError, "text"),
        (lambda: get_tokenizer().decode([5000]), ValueError, "ids"),
        (lambda: get_tokenizer().decode(torch.ones(2, 2).long()), ValueError, "ids"),
        (lambda: char_tokenizer().decode([-1]), ValueError, "ids"),
        (lambda: encode_stream(get_tokenizer(), "a text"), TypeError, "texts"),
        (lambda: blocks(torch.arange(4), 5), ValueError, "block_len"),
        (lambda: blocks(torch.ones(2, 3), 1), ValueError, "stream"),
        (lambda: random_blocks(torch.arange(9), 0, 2), ValueError, "batch_size"),
    ],
)
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
