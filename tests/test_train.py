import pytest
import torch
from torch import nn

from transformer_book.train import accuracy, progress_enabled, train


def linear_problem(seed=0):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(4, 3, generator=gen)

    def get_batch(step):
        x = torch.randn(64, 4, generator=gen)
        return x, (x @ w).argmax(-1)

    return get_batch


def test_train_reduces_the_loss_and_returns_a_history():
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    history = train(
        model,
        linear_problem(),
        nn.functional.cross_entropy,
        steps=200,
        lr=0.05,
        progress=False,
    )
    assert history["step"] == list(range(200))
    assert len(history["loss"]) == 200 and history["seconds"] > 0
    assert sum(history["loss"][-20:]) / 20 < 0.5 * sum(history["loss"][:20]) / 20
    assert not model.training  # left in eval mode


def test_train_passes_tuples_as_arguments_and_applies_lr_lambda():
    class Add(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(()))

        def forward(self, a, b):
            return a + b + self.w

    model = Add()
    history = train(
        model,
        lambda s: ((torch.ones(2), torch.ones(2)), torch.zeros(2)),
        nn.functional.mse_loss,
        steps=3,
        lr=0.1,
        lr_lambda=lambda step: 0.0,
        progress=False,
    )
    assert model.w.item() == 0.0  # a zero learning rate leaves the weights alone
    assert history["loss"][0] == pytest.approx(4.0)


def test_train_rejects_zero_steps():
    with pytest.raises(ValueError):
        train(nn.Linear(1, 1), linear_problem(), nn.functional.mse_loss, steps=0)


def test_progress_is_off_in_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TRANSFORMER_BOOK_QUIET", raising=False)
    assert progress_enabled()
    monkeypatch.setenv("TRANSFORMER_BOOK_QUIET", "1")
    assert not progress_enabled()


def test_accuracy_counts_and_ignores():
    logits = torch.tensor([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    targets = torch.tensor([1, 1, 0])
    assert accuracy(logits, targets) == pytest.approx(2 / 3)
    assert accuracy(logits, targets, ignore_index=1) == 1.0
    with pytest.raises(ValueError):
        accuracy(logits, targets[:2])
