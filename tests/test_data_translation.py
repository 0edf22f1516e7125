"""The toy translation task of Chapter 5."""

import pytest
import torch

from transformer_book.data import ToyTranslation


def sample(task, n=64, split="train", seed=0):
    return task.sample(n, split=split, generator=torch.Generator().manual_seed(seed))


def test_target_is_the_word_by_word_translation_written_backwards():
    task = ToyTranslation(n_words=5, min_len=1, max_len=6)
    batch = sample(task)
    assert batch.src.shape == (64, 7) and batch.tgt.shape == (64, 8)
    for src, tgt in zip(batch.src, batch.tgt, strict=True):
        words = src[src > task.eos_id]
        n = len(words)
        assert src[n] == task.eos_id and torch.all(src[n + 1 :] == task.pad_id)
        assert tgt[0] == task.bos_id and tgt[n + 1] == task.eos_id
        assert torch.equal(tgt[1 : n + 1], words.flip(0) + task.n_words)
        assert torch.all(tgt[n + 2 :] == task.pad_id)
        assert task.min_len <= n <= task.max_len


def test_tokens_and_text():
    task = ToyTranslation(n_words=3)
    assert task.vocab_size == len(task.tokens) == 9
    assert task.tokens[:3] == ["<pad>", "<s>", "</s>"]
    assert task.to_text(torch.tensor([1, 8, 7, 2, 0])) == ["<s>", "丙", "乙", "</s>"]


def test_teacher_forcing_shifts_the_target():
    batch = sample(ToyTranslation(), n=4)
    (src, tgt_in), tgt_out = batch.teacher_forcing()
    assert torch.equal(src, batch.src)
    assert torch.equal(tgt_in, batch.tgt[:, :-1])
    assert torch.equal(tgt_out, batch.tgt[:, 1:])


def test_splits_are_disjoint_and_reproducible():
    task = ToyTranslation(n_words=4, min_len=2, max_len=4)
    train = {tuple(r.tolist()) for r in sample(task, 2000).src}
    test = {tuple(r.tolist()) for r in sample(task, 500, split="test").src}
    assert train and test and not train & test
    assert len(test) > 20
    assert torch.equal(sample(task, seed=3).src, sample(task, seed=3).src)
    assert not torch.equal(sample(task, seed=3).src, sample(task, seed=4).src)


def test_bad_input():
    with pytest.raises(ValueError, match="n_words"):
        ToyTranslation(n_words=23)
    with pytest.raises(ValueError, match="min_len"):
        ToyTranslation(min_len=5, max_len=4)
    with pytest.raises(ValueError, match="split"):
        ToyTranslation().sample(4, split="valid")
    with pytest.raises(ValueError, match="batch_size"):
        ToyTranslation().sample(0)
