"""The toy translation task of Chapter 5: a made-up language pair, word by word
and written backwards, with a held-out test split.

Shape letters: B batch, S source positions, T target positions, L words.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import Tensor

from .._validate import (
    check_device,
    check_generator,
    check_has_values,
    check_int,
    check_tensor,
)

__all__ = ["TranslationBatch", "ToyTranslation"]


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
        for name in ("n_words", "min_len", "max_len"):
            check_int(name, getattr(self, name))
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
        check_tensor("ids", ids, "int")
        check_has_values("ids", ids)
        if ids.dim() != 1:
            raise ValueError(f"ids must be one sequence (T,), got {tuple(ids.shape)}")
        if ids.numel() and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(
                f"ids holds token ids outside [0, vocab_size={self.vocab_size}): "
                f"smallest {int(ids.min())}, largest {int(ids.max())}"
            )
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
        check_int("batch_size", batch_size, minimum=1)
        check_generator("generator", generator)
        check_device("device", device)
        if split not in _splits_present(self):  # else the loop below never ends
            raise ValueError(
                f"the {split!r} split of {self} is empty: no sentence of these "
                "lengths and words falls in it"
            )
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

    def _sentences(self) -> tuple[Tensor, Tensor] | None:
        """Every sentence (words (N, L), lengths (N,)), or None if there are many."""
        lengths = range(self.min_len, self.max_len + 1)
        if sum(self.n_words**n for n in lengths) > 2**16:
            return None
        words, sizes = [], []
        for n in lengths:
            grid = torch.cartesian_prod(*[torch.arange(self.n_words)] * n)
            grid = grid.reshape(-1, n)  # (n_words^n, n): every sentence of n words
            words.append(torch.nn.functional.pad(grid, (0, self.max_len - n)))
            sizes.append(torch.full((len(grid),), n))
        return torch.cat(words), torch.cat(sizes)

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


@lru_cache(maxsize=64)
def _splits_present(task: ToyTranslation) -> frozenset[str]:
    """The splits that hold at least one sentence.

    A small language (a few words, short sentences) may have no sentence whose hash
    puts it in the test split; a large one always has both splits.
    """
    sentences = task._sentences()
    if sentences is None:
        return frozenset({"train", "test"})
    is_test = task._is_test(*sentences)
    return frozenset(
        name
        for name, present in (("train", (~is_test).any()), ("test", is_test.any()))
        if present
    )
