"""Subword (BPE) and character tokenizers; token streams cut into blocks (Ch. 6).

Byte-pair encoding (Sennrich et al., 2016) starts from single bytes and merges the
most frequent adjacent pair into a new token, again and again, until the vocabulary
has ``vocab_size`` tokens: frequent words become one token ("Ġthe", where "Ġ" marks
the space before a word), rare words stay in pieces. It is GPT-2's byte-level
variant, trained by Hugging Face ``tokenizers`` on the training prose of
``corpus``: no text can fail to encode, and decoding gives back the exact text.
Training is deterministic, so every machine gets the same vocabulary.

Both tokenizers put the same special tokens first, the ones the three models of
Chapter 6 need: [PAD] (padding), [UNK], [MASK] (BERT), [CLS] and [SEP] (BERT's
sequence start and separator), [BOS] and [EOS], and T5's sentinels <extra_id_0>,
<extra_id_1>, ... that stand for dropped spans.

Shape letters: B batch, T block length, N number of tokens.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

import torch
from torch import Tensor

from ._validate import (
    check_generator,
    check_has_values,
    check_int,
    check_tensor,
    check_tokenizer,
)
from .corpus import corpus_text, paragraphs

__all__ = [
    "N_SENTINELS",
    "SPECIAL_TOKENS",
    "VOCAB_SIZE",
    "Tokenizer",
    "BPETokenizer",
    "CharTokenizer",
    "train_bpe",
    "get_tokenizer",
    "char_tokenizer",
    "encode_stream",
    "blocks",
    "random_blocks",
]

N_SENTINELS = 16  # T5's <extra_id_k>: at most this many dropped spans per sequence
SPECIAL_TOKENS = (
    "[PAD]",
    "[UNK]",
    "[MASK]",
    "[CLS]",
    "[SEP]",
    "[BOS]",
    "[EOS]",
    *(f"<extra_id_{k}>" for k in range(N_SENTINELS)),
)
VOCAB_SIZE = 1024  # the book's BPE: 23 special tokens, 256 bytes, 745 merges


class Tokenizer:
    """What both tokenizers share: the special tokens' ids, and batch helpers.

    ``pad_id``, ``mask_id``, ``cls_id``, ``sep_id``, ``bos_id``, ``eos_id`` and
    ``sentinel_ids`` (T5's, in order) are the ids of the special tokens;
    ``special_ids`` holds them all. A subclass defines ``vocab_size``,
    ``encode(text) -> list[int]``, ``decode(ids) -> str`` and ``tokens(ids)``.
    """

    def _set_special_ids(self) -> None:
        ids = [self.token_to_id(t) for t in SPECIAL_TOKENS]
        self.pad_id, self.unk_id, self.mask_id, self.cls_id = ids[:4]
        self.sep_id, self.bos_id, self.eos_id = ids[4:7]
        self.sentinel_ids = tuple(ids[7:])
        self.special_ids = tuple(ids)

    def token_to_id(self, token: str) -> int:
        raise NotImplementedError

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def decode(self, ids, skip_special: bool = False) -> str:
        raise NotImplementedError

    def _check_ids(self, ids) -> list[int]:
        """``ids`` (a 1-D integer tensor, or a sequence of ints) as a list of ints
        of the vocabulary; a float, a bool or a string is refused, never rounded."""
        if isinstance(ids, Tensor):
            check_tensor("ids", ids, "int")
            check_has_values("ids", ids)
            if ids.dim() > 1:
                raise ValueError(
                    f"ids must be a 1-D integer tensor or a list, got shape "
                    f"{tuple(ids.shape)}"
                )
            ids = ids.tolist()
        if isinstance(ids, str | bytes) or not isinstance(ids, Sequence):
            raise TypeError(
                f"ids must be a list of ints or a 1-D integer tensor, got "
                f"{type(ids).__name__}"
            )
        ids = [check_int(f"ids[{i}]", x) for i, x in enumerate(ids)]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids {bad[:5]} are not in [0, {self.vocab_size})")
        return ids

    def encode_batch(self, texts: list[str], length: int | None = None) -> Tensor:
        """Encode ``texts`` into one (B, T) tensor, right-padded with [PAD].

        ``length`` fixes T (longer texts raise ValueError); by default the longest.
        """
        _check_texts("texts", texts)
        rows = [self.encode(t) for t in texts]
        longest = max((len(r) for r in rows), default=0)
        length = longest if length is None else check_int("length", length, 0)
        if longest > length:
            raise ValueError(f"a text has {longest} tokens, more than length={length}")
        out = torch.full((len(rows), length), self.pad_id, dtype=torch.long)
        for i, row in enumerate(rows):
            out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        return out


class BPETokenizer(Tokenizer):
    """A byte-level BPE tokenizer: a thin wrapper of a ``tokenizers.Tokenizer``."""

    def __init__(self, hf_tokenizer):
        from tokenizers import Tokenizer as HFTokenizer

        if not isinstance(hf_tokenizer, HFTokenizer):
            raise TypeError(
                f"hf_tokenizer must be a tokenizers.Tokenizer, got "
                f"{type(hf_tokenizer).__name__}"
            )
        self.hf = hf_tokenizer
        self.vocab_size = hf_tokenizer.get_vocab_size()
        self._set_special_ids()

    def token_to_id(self, token: str) -> int:
        _check_token(token)
        i = self.hf.token_to_id(token)
        if i is None:
            raise ValueError(f"token {token!r} is not in the vocabulary")
        return i

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return self.hf.encode(text).ids

    def decode(self, ids, skip_special: bool = False) -> str:
        _check_flag("skip_special", skip_special)
        return self.hf.decode(self._check_ids(ids), skip_special_tokens=skip_special)

    def tokens(self, ids) -> list[str]:
        """The token strings, with the byte-level space mark "Ġ" shown as "▁"."""
        return [self.hf.id_to_token(i).replace("Ġ", "▁") for i in self._check_ids(ids)]

    def merges(self) -> list[tuple[str, str]]:
        """The learned merges in the order they were learned ("Ġ" shown as "▁")."""
        merges = json.loads(self.hf.to_str())["model"]["merges"]
        return [tuple(m.replace("Ġ", "▁") for m in pair) for pair in merges]


class CharTokenizer(Tokenizer):
    """One token per character, after the same special tokens, for comparison.

    The characters are those of ``text``; any other character encodes as [UNK].
    """

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self.chars = sorted(set(text))
        self.vocab = list(SPECIAL_TOKENS) + self.chars
        self.index = {c: i for i, c in enumerate(self.vocab)}
        self.vocab_size = len(self.vocab)
        self._set_special_ids()

    def token_to_id(self, token: str) -> int:
        _check_token(token)
        if token not in self.index:
            raise ValueError(f"token {token!r} is not in the vocabulary")
        return self.index[token]

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        n = len(SPECIAL_TOKENS)  # a special token's name is not a character
        return [
            i if (i := self.index.get(c, self.unk_id)) >= n else self.unk_id
            for c in text
        ]

    def decode(self, ids, skip_special: bool = False) -> str:
        _check_flag("skip_special", skip_special)
        ids = self._check_ids(ids)
        special = set(self.special_ids)
        return "".join(
            self.vocab[i] for i in ids if not (skip_special and i in special)
        )

    def tokens(self, ids) -> list[str]:
        return [self.vocab[i] for i in self._check_ids(ids)]


def train_bpe(texts: list[str], vocab_size: int = VOCAB_SIZE) -> BPETokenizer:
    """Train a byte-level BPE tokenizer on ``texts`` (deterministic, about 1 s).

    The 256 bytes are always in the vocabulary, so any text can be encoded.
    """
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    base = len(SPECIAL_TOKENS) + 256
    check_int("vocab_size", vocab_size)
    if vocab_size < base:
        raise ValueError(
            f"vocab_size must be an int of at least {base} (special tokens and "
            f"bytes), got {vocab_size!r}"
        )
    if isinstance(texts, str) or not texts:
        raise ValueError("texts must be a non-empty list of strings")
    _check_texts("texts", texts)
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(texts, trainer)
    return BPETokenizer(hf)


@functools.cache
def get_tokenizer(vocab_size: int = VOCAB_SIZE) -> BPETokenizer:
    """The book's BPE tokenizer, trained on the training prose (cached)."""
    return train_bpe([p for _, p in paragraphs("train")], vocab_size)


@functools.cache
def char_tokenizer() -> CharTokenizer:
    """The character tokenizer over the characters of the whole corpus (cached)."""
    return CharTokenizer(corpus_text("all"))


def encode_stream(tokenizer: Tokenizer, texts: list[str]) -> Tensor:
    """All ``texts`` encoded into one stream of ids, each text followed by [EOS].

    Shapes: returns (N,) int64.
    """
    check_tokenizer("tokenizer", tokenizer)
    _check_texts("texts", texts)
    ids: list[int] = []
    for text in texts:
        ids += tokenizer.encode(text) + [tokenizer.eos_id]
    return torch.tensor(ids, dtype=torch.long)


def _check_texts(name: str, texts: object) -> None:
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError(f"{name} must be a list of strings, got {type(texts).__name__}")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(text).__name__}")


def _check_token(token: object) -> None:
    if not isinstance(token, str):
        raise TypeError(f"token must be a str, got {type(token).__name__}")


def _check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")


def _check_stream(stream: Tensor, block_len: int) -> None:
    check_tensor("stream", stream)
    if stream.dim() != 1:
        raise ValueError(
            f"stream must be a 1-D tensor of token ids, got {tuple(stream.shape)}"
        )
    check_tensor("stream", stream, "int")
    block_len = check_int("block_len", block_len, minimum=1)
    if block_len > len(stream):
        raise ValueError(
            f"block_len must be an int in [1, len(stream)={len(stream)}], got "
            f"{block_len!r}"
        )


def blocks(stream: Tensor, block_len: int) -> Tensor:
    """The stream cut into consecutive blocks; the incomplete last one is dropped.

    Shapes: stream (N,) -> (N // T, T)
    """
    _check_stream(stream, block_len)
    n = len(stream) // block_len
    return stream[: n * block_len].view(n, block_len)  # (N,) -> (N // T, T)


def random_blocks(
    stream: Tensor,
    batch_size: int,
    block_len: int,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``batch_size`` windows of ``block_len`` tokens, starting anywhere.

    Shapes: stream (N,) -> (B, T)
    """
    _check_stream(stream, block_len)
    check_int("batch_size", batch_size, minimum=1)
    check_generator("generator", generator)
    check_has_values("stream", stream)
    starts = torch.randint(
        len(stream) - block_len + 1, (batch_size,), generator=generator
    )  # (B,)
    offsets = torch.arange(block_len)  # (T,)
    return stream[starts[:, None] + offsets]  # (B, 1) + (T,) -> (B, T)
