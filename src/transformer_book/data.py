"""Toy tasks, generated on the fly: no downloads, any size, any seed.

Shape letters: B batch, T sequence length, N number of items.

Each generator takes a ``torch.Generator`` (or ``None`` for the global one), so a
chapter can draw the same data again, and a ``device`` to create tensors on.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "LookupBatch",
    "lookup_task",
    "TranslationBatch",
    "ToyTranslation",
    "TwoRelationBatch",
    "two_relation_task",
    "IGNORE_INDEX",
    "RecallBatch",
    "recall_task",
    "LagCopyBatch",
    "lag_copy_task",
]


@dataclass(frozen=True)
class LookupBatch:
    """A batch of dictionary look-ups (Chapter 2).

    keys: (B, N) distinct key ids per row; values: (B, N) value ids;
    query: (B,) one of the row's keys; target: (B,) the value stored under it;
    position: (B,) where in the row the queried key sits.
    """

    keys: Tensor
    values: Tensor
    query: Tensor
    target: Tensor
    position: Tensor


def lookup_task(
    batch_size: int,
    n_pairs: int,
    n_keys: int,
    n_values: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> LookupBatch:
    """Rows of ``n_pairs`` (key, value) pairs and a query key: find its value.

    The right answer sits at a different place in every row, so no fixed
    weighting of the positions can find it: the model has to compare the query
    with every key, which is exactly what attention's Q·K does.
    """
    if n_pairs > n_keys:
        raise ValueError(
            f"n_pairs={n_pairs} needs at least as many keys, got n_keys={n_keys}"
        )
    if min(batch_size, n_pairs, n_values) < 1:
        raise ValueError("batch_size, n_pairs and n_values must be positive")
    scores = torch.rand(batch_size, n_keys, generator=generator)
    keys = scores.argsort(dim=1)[:, :n_pairs]  # (B, N), distinct within a row
    values = torch.randint(n_values, (batch_size, n_pairs), generator=generator)
    position = torch.randint(n_pairs, (batch_size,), generator=generator)
    rows = torch.arange(batch_size)
    query, target = keys[rows, position], values[rows, position]
    return LookupBatch(*(t.to(device) for t in (keys, values, query, target, position)))


@dataclass(frozen=True)
class TranslationBatch:
    """A batch of the toy translation task (Chapter 5).

    src: (B, S) source words, then EOS, right-padded with PAD; S = max_len + 1
    tgt: (B, T) BOS, the translation, EOS, right-padded with PAD; T = max_len + 2
    """

    src: Tensor
    tgt: Tensor

    def teacher_forcing(self) -> tuple[tuple[Tensor, Tensor], Tensor]:
        """``((src, tgt[:, :-1]), tgt[:, 1:])``, the (inputs, targets) of training.

        Teacher forcing: the decoder reads the true target shifted right and
        predicts the next token at every position. The format is what
        ``train.train``'s ``get_batch`` returns.
        """
        return (self.src, self.tgt[:, :-1]), self.tgt[:, 1:]


_TARGET_WORDS = "甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉戌亥"


@dataclass(frozen=True)
class ToyTranslation:
    """A made-up language pair: translate word by word, then write it backwards.

    The source language uses the words ``a, b, c, ...``; the target language uses
    ``甲, 乙, 丙, ...`` and the opposite word order: "a b c" becomes "丙 乙 甲". Every
    target word comes from exactly one source word, so a model that has learnt the
    task shows the alignment in its cross-attention (an anti-diagonal).

    About 10% of all sentences (chosen by a fixed hash of the words) form the
    ``"test"`` split and never appear in ``"train"``: held-out accuracy is measured
    on sentences the model has never seen.

    One vocabulary serves both languages: ids 0-2 are PAD, BOS, EOS, then the
    ``n_words`` source words, then the ``n_words`` target words.
    """

    n_words: int = 10  # words in each language (at most 22)
    min_len: int = 3  # shortest sentence, in words
    max_len: int = 8  # longest sentence, in words

    pad_id = 0
    bos_id = 1
    eos_id = 2

    def __post_init__(self):
        if not 1 <= self.n_words <= len(_TARGET_WORDS):
            raise ValueError(
                f"n_words must lie in [1, {len(_TARGET_WORDS)}], got {self.n_words}"
            )
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(
                f"need 1 <= min_len <= max_len, got min_len={self.min_len}, "
                f"max_len={self.max_len}"
            )

    @property
    def vocab_size(self) -> int:
        return 3 + 2 * self.n_words

    @property
    def tokens(self) -> list[str]:
        """The string of every token id, for printing and plot labels."""
        source = [chr(ord("a") + i) for i in range(self.n_words)]
        return ["<pad>", "<s>", "</s>", *source, *_TARGET_WORDS[: self.n_words]]

    def to_text(self, ids: Tensor) -> list[str]:
        """The tokens of one sequence (T,), without padding."""
        return [self.tokens[i] for i in ids.tolist() if i != self.pad_id]

    def _is_test(self, words: Tensor, lengths: Tensor) -> Tensor:
        """(N,) bool: the fixed hash that puts a sentence in the test split."""
        positions = torch.arange(self.max_len)  # (L,)
        weights = 3**positions * (positions < lengths[:, None])  # (N, L)
        return ((words + 1) * weights).sum(dim=1) % 10 == 0

    def sample(
        self,
        batch_size: int,
        split: str = "train",
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
    ) -> TranslationBatch:
        """``batch_size`` random sentence pairs from ``split`` ("train" or "test")."""
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        words, lengths, have = [], [], 0
        while have < batch_size:  # draw, keep the rows of the split, repeat
            n = 2 * batch_size if split == "train" else 12 * batch_size
            w = torch.randint(self.n_words, (n, self.max_len), generator=generator)
            lens = torch.randint(
                self.min_len, self.max_len + 1, (n,), generator=generator
            )
            keep = self._is_test(w, lens) == (split == "test")
            words.append(w[keep])
            lengths.append(lens[keep])
            have += int(keep.sum())
        words = torch.cat(words)[:batch_size]  # (B, L)
        lengths = torch.cat(lengths)[:batch_size]  # (B,)
        return self._pairs(words, lengths, device)

    def _pairs(self, words: Tensor, lengths: Tensor, device) -> TranslationBatch:
        B, L = words.shape
        positions = torch.arange(L + 2)  # (L + 2,)
        real = positions[None, :L] < lengths[:, None]  # (B, L): words, not padding
        backwards = (lengths[:, None] - 1 - positions[None, :L]).clamp(min=0)  # (B, L)
        translated = words.gather(1, backwards) + 3 + self.n_words  # (B, L)
        src = torch.full((B, L + 1), self.pad_id, dtype=torch.long)
        tgt = torch.full((B, L + 2), self.pad_id, dtype=torch.long)
        src[:, :L] = torch.where(real, words + 3, self.pad_id)
        tgt[:, 1 : L + 1] = torch.where(real, translated, self.pad_id)
        src[positions[None, : L + 1] == lengths[:, None]] = self.eos_id
        tgt[:, 0] = self.bos_id
        tgt[positions[None, :] == lengths[:, None] + 1] = self.eos_id
        return TranslationBatch(src.to(device), tgt.to(device))


@dataclass(frozen=True)
class TwoRelationBatch:
    """A batch of the two-relation task (Chapter 3).

    keys: (B, T) key id per position, each key held by exactly two positions;
    values: (B, T) value id per position;
    partner: (B, T) the other position holding the same key;
    previous: (B, T) the previous position, ``t - 1`` (-1 at position 0);
    target: (B, T, 2) what to predict at each position: ``[..., 0]`` the value one
    position back (``IGNORE_INDEX`` at position 0, which has none), ``[..., 1]`` the
    value at the partner position.
    """

    keys: Tensor
    values: Tensor
    partner: Tensor
    previous: Tensor
    target: Tensor


IGNORE_INDEX = -100  # the default ignore_index of F.cross_entropy


def two_relation_task(
    batch_size: int,
    n_pairs: int,
    n_keys: int,
    n_values: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> TwoRelationBatch:
    """Sequences of T = 2 * n_pairs (key, value) tokens where every key occurs
    twice; at every position predict two values found by two different relations:

    - by position: the value of the token just before (a fixed offset, t - 1);
    - by content: the value of the other token that holds the same key.

    Each value is random and unknown to the asking position, so one attention
    pattern cannot fetch both; the keys of a row are distinct pairs placed at
    random positions, so no fixed positional pattern finds the partner.
    """
    if n_pairs > n_keys:
        raise ValueError(
            f"n_pairs={n_pairs} needs at least as many keys, got n_keys={n_keys}"
        )
    if min(batch_size, n_pairs, n_values) < 1:
        raise ValueError("batch_size, n_pairs and n_values must be positive")
    T = 2 * n_pairs
    pair_keys = torch.rand(batch_size, n_keys, generator=generator).argsort(dim=1)
    pair_keys = pair_keys[:, :n_pairs]  # (B, N), distinct within a row
    order = torch.rand(batch_size, T, generator=generator).argsort(dim=1)  # (B, T)
    pair_of = order % n_pairs  # (B, T): the pair each position belongs to
    keys = pair_keys.gather(1, pair_of)  # (B, N) -> (B, T)
    values = torch.randint(n_values, (batch_size, T), generator=generator)
    by_pair = pair_of.argsort(dim=1, stable=True)  # (B, T): pair 0's two positions...
    first, second = by_pair[:, 0::2], by_pair[:, 1::2]  # (B, N) each
    partner = torch.empty_like(by_pair)
    partner.scatter_(1, first, second)
    partner.scatter_(1, second, first)
    previous = (torch.arange(T) - 1).expand(batch_size, T)  # (B, T), -1 at t = 0
    prev_value = values.gather(1, previous.clamp(min=0))
    prev_value = prev_value.masked_fill(previous < 0, IGNORE_INDEX)
    target = torch.stack([prev_value, values.gather(1, partner)], dim=-1)  # (B,T,2)
    return TwoRelationBatch(
        *(t.to(device) for t in (keys, values, partner, previous.clone(), target))
    )


@dataclass(frozen=True)
class RecallBatch:
    """A batch of the long-range recall task (Chapter 1).

    tokens: (B, distance + 1) the symbol, distance - 1 fillers, then the query token;
    target: (B,) the symbol, which the model must name when it reads the query.
    """

    tokens: Tensor
    target: Tensor


def recall_task(
    batch_size: int,
    distance: int,
    n_symbols: int = 8,
    n_fillers: int = 8,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> RecallBatch:
    """Remember a symbol across ``distance`` steps: ``[s, f, f, ..., f, ?] -> s``.

    Token ids: symbols ``0 .. n_symbols - 1``, fillers ``n_symbols .. n_symbols +
    n_fillers - 1``, and the query ``n_symbols + n_fillers``, so the vocabulary has
    ``n_symbols + n_fillers + 1`` tokens and chance accuracy is ``1 / n_symbols``.
    The symbol sits ``distance`` positions before the query. Fillers never use a
    symbol's id: the difficulty is the distance, not telling the symbol apart.
    """
    if distance < 1:
        raise ValueError(f"distance must be at least 1, got {distance}")
    if min(batch_size, n_symbols, n_fillers) < 1:
        raise ValueError(
            f"batch_size, n_symbols and n_fillers must be positive, got "
            f"{batch_size}, {n_symbols}, {n_fillers}"
        )
    symbol = torch.randint(n_symbols, (batch_size, 1), generator=generator)  # (B, 1)
    shape = (batch_size, distance - 1)
    fillers = torch.randint(
        n_symbols, n_symbols + n_fillers, shape, generator=generator
    )  # (B, distance - 1)
    query = torch.full((batch_size, 1), n_symbols + n_fillers)  # (B, 1)
    tokens = torch.cat([symbol, fillers, query], dim=1)  # (B, distance + 1)
    return RecallBatch(tokens.to(device), symbol[:, 0].to(device))


@dataclass(frozen=True)
class LagCopyBatch:
    """A batch of the lag-copy task (Chapter 4).

    tokens: (B, T) random token ids; target: (B, T) the token ``lag`` positions
    back, ``IGNORE_INDEX`` at the first ``lag`` positions, which have none.
    """

    tokens: Tensor
    target: Tensor


def lag_copy_task(
    batch_size: int,
    length: int,
    vocab_size: int,
    lag: int = 1,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> LagCopyBatch:
    """At every position, name the token ``lag`` positions back: ``target[t] =
    tokens[t - lag]``.

    The tokens are independent and uniform, so content alone says nothing: only
    where a token sits does. The rule is the same at every position and every
    length, so a model that learned it at one length should apply it at any
    length, which makes the task a clean test of length extrapolation (chance
    accuracy is ``1 / vocab_size``).
    """
    if min(batch_size, length, vocab_size, lag) < 1:
        raise ValueError(
            f"batch_size, length, vocab_size and lag must be positive, got "
            f"{batch_size}, {length}, {vocab_size}, {lag}"
        )
    tokens = torch.randint(vocab_size, (batch_size, length), generator=generator)
    target = torch.full_like(tokens, IGNORE_INDEX)  # (B, T)
    target[:, lag:] = tokens[:, :-lag]  # (B, T - lag), empty when lag >= T
    return LagCopyBatch(tokens.to(device), target.to(device))
