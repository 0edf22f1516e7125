"""The dictionary look-up experiment of Chapter 2 (§2.5), as a function of its seed.

Each row holds ``n_pairs`` (key, value) items and a query key; the answer is the value
stored under the query (``data.lookup_task``). One attention step learns to find it,
while the same model with uniform weights (an average of the items) cannot. The
chapter runs ``run_lookup(seed=0)`` and asserts the bounds its prose states;
``tests/test_experiments_lookup.py`` runs other seeds against the same bounds.

Shape letters: B batch, N items in a row, Dh width of each half of an item (key
embedding, value embedding), Dk width of queries, keys and values, V number of values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._validate import (
    check_compute_device,
    check_int,
    check_on,
    check_real,
    check_seed,
    check_tensor,
    check_token_ids,
)
from ..attention import scaled_dot_product_attention
from ..data import LookupBatch, lookup_task
from ..device import set_seed
from ..train import accuracy, train

__all__ = [
    "N_PAIRS",
    "N_KEYS",
    "N_VALUES",
    "LookupAttention",
    "UniformAverage",
    "MODELS",
    "lookup_batches",
    "train_lookup",
    "half_norms",
    "LookupResult",
    "run_lookup",
]

N_PAIRS, N_KEYS, N_VALUES = 8, 16, 16  # items per row; key and value vocabularies


class LookupAttention(nn.Module):
    """One attention step from a query key over N (key, value) items.

    Shapes: keys, values (B, N) ids; query (B,) ids; returns logits (B, n_values).
    """

    def __init__(self, n_keys: int, n_values: int, d_half: int = 16, d_k: int = 16):
        super().__init__()
        _check_sizes(n_keys=n_keys, n_values=n_values, d_half=d_half, d_k=d_k)
        self.key_embed = nn.Embedding(n_keys, d_half)
        self.value_embed = nn.Embedding(n_values, d_half)
        self.W_Q = nn.Linear(2 * d_half, d_k, bias=False)
        self.W_K = nn.Linear(2 * d_half, d_k, bias=False)
        self.W_V = nn.Linear(2 * d_half, d_k, bias=False)
        self.readout = nn.Linear(d_k, n_values)

    def items(self, keys: Tensor, values: Tensor) -> Tensor:
        # (B, N) ids -> (B, N, 2 * Dh): key embedding glued to value embedding
        _check_rows(self, keys, values)
        return torch.cat([self.key_embed(keys), self.value_embed(values)], dim=-1)

    def attend(
        self, keys: Tensor, values: Tensor, query: Tensor
    ) -> tuple[Tensor, Tensor]:
        # -> output (B, 1, Dk), weights (B, 1, N)
        _check_rows(self, keys, values, query)
        asked = self.key_embed(query)[:, None]  # (B,) -> (B, 1, Dh)
        asked = torch.cat([asked, torch.zeros_like(asked)], dim=-1)  # (B, 1, 2 * Dh)
        items = self.items(keys, values)  # (B, N, 2 * Dh)
        q, k, v = self.W_Q(asked), self.W_K(items), self.W_V(items)  # (B, ., Dk)
        return scaled_dot_product_attention(q, k, v)

    def forward(self, keys: Tensor, values: Tensor, query: Tensor) -> Tensor:
        out, _ = self.attend(keys, values, query)
        return self.readout(out[:, 0])  # (B, 1, Dk) -> (B, V)


class UniformAverage(LookupAttention):
    """The same model, but every weight is 1/N: it cannot choose where to look."""

    def attend(
        self, keys: Tensor, values: Tensor, query: Tensor
    ) -> tuple[Tensor, Tensor]:
        _check_rows(self, keys, values, query)  # the query is checked, then unused
        v = self.W_V(self.items(keys, values))  # (B, N, Dk)
        weights = torch.full((len(v), 1, v.shape[1]), 1 / v.shape[1], device=v.device)
        return weights @ v, weights  # (B, 1, N) @ (B, N, Dk) -> (B, 1, Dk)


def _check_sizes(**sizes: object) -> None:
    for name, size in sizes.items():
        check_int(name, size, minimum=1)


_NO_QUERY = object()  # items() has keys and values only


def _check_rows(
    model: LookupAttention, keys: object, values: object, query: object = _NO_QUERY
) -> None:
    """keys and values (B, N) ids in range, query (B,) (if given), on the model's
    device: shapes and the ids' smallest and largest values, cheap on the CPU."""
    weight = model.key_embed.weight
    check_token_ids("keys", keys, model.key_embed.num_embeddings, "(B, N)")
    check_token_ids("values", values, model.value_embed.num_embeddings, "(B, N)")
    if keys.shape != values.shape or keys.shape[1] == 0:
        raise ValueError(
            "keys and values must have one shape (B, N) with N >= 1, got "
            f"keys {tuple(keys.shape)} and values {tuple(values.shape)}"
        )
    check_on("keys", keys, weight)
    check_on("values", values, weight)
    if query is _NO_QUERY:
        return
    check_tensor("query", query, "int")
    if query.dim() != 1:
        raise ValueError(
            f"query must have shape (B,) of key ids, got {tuple(query.shape)}"
        )
    check_token_ids("query", query[:, None], model.key_embed.num_embeddings, "(B,)")
    if len(query) != len(keys):
        raise ValueError(
            f"query {tuple(query.shape)} and keys {tuple(keys.shape)} have "
            "different batch sizes"
        )
    check_on("query", query, weight)


MODELS: dict[str, type[LookupAttention]] = {
    "attention": LookupAttention,
    "uniform average": UniformAverage,
}


def lookup_batches(
    seed: int, batch_size: int = 128
) -> Callable[[int], tuple[tuple[Tensor, Tensor, Tensor], Tensor]]:
    """``get_batch(step)`` for ``train.train``: fresh rows at every step.

    Returns ``((keys, values, query), target)``, shapes ((B, N), (B, N), (B,)), (B,).
    """
    check_seed("seed", seed)
    check_int("batch_size", batch_size, minimum=1)
    gen = torch.Generator().manual_seed(seed)

    def get_batch(step: int) -> tuple[tuple[Tensor, Tensor, Tensor], Tensor]:
        b = lookup_task(batch_size, N_PAIRS, N_KEYS, N_VALUES, generator=gen)
        return (b.keys, b.values, b.query), b.target

    return get_batch


def train_lookup(
    model_class: type[LookupAttention],
    seed: int = 0,
    steps: int = 300,
    lr: float = 1e-2,
    batch_size: int = 128,
    device: torch.device | str | None = None,
) -> tuple[LookupAttention, dict]:
    """Train one look-up model with AdamW; returns the model and ``train``'s history.

    The initial weights come from ``seed``, the training rows from ``seed + 1``:
    both models of the chapter start from the same weights and see the same rows.
    """
    if not (isinstance(model_class, type) and issubclass(model_class, LookupAttention)):
        raise TypeError(
            f"model_class must be LookupAttention or a subclass, got {model_class!r}"
        )
    _check_training(seed, steps, lr, batch_size, device)
    set_seed(seed)
    model = model_class(N_KEYS, N_VALUES)
    history = train(
        model,
        lookup_batches(seed + 1, batch_size),
        F.cross_entropy,
        steps=steps,
        lr=lr,
        device=device,
    )
    return model, history


def _check_training(seed, steps, lr, batch_size, device) -> None:
    check_seed("seed", seed)
    if seed >= 2**62:  # the rows are seeded with seed + 1 and seed + 123
        raise ValueError(f"seed must be below 2**62, got {seed}")
    check_int("steps", steps, minimum=1)
    check_real("lr", lr, 0.0, low_open=True)
    check_int("batch_size", batch_size, minimum=1)
    check_compute_device("device", device)


def half_norms(model: LookupAttention) -> dict[str, tuple[float, float]]:
    """For W_K and W_V: (norm of the block reading the key half, of the value half).

    Each weight is (Dk, 2 * Dh); columns :Dh read the key embedding, Dh: the value.
    """
    if not isinstance(model, LookupAttention):
        raise TypeError(f"model must be a LookupAttention, got {type(model).__name__}")
    half = model.key_embed.embedding_dim
    norms = {}
    for name in ("W_K", "W_V"):
        w = getattr(model, name).weight.detach().float().cpu()  # (Dk, 2 * Dh)
        norms[name] = (w[:, :half].norm().item(), w[:, half:].norm().item())
    return norms


@dataclass(frozen=True)
class LookupResult:
    """What ``run_lookup`` measured; keys of the dicts are ``"attention"`` and
    ``"uniform average"``."""

    models: dict[str, LookupAttention]  # the trained models (eval mode)
    histories: dict[str, dict]  # train's history of each model (loss per step)
    test: LookupBatch  # the held-out rows, on the models' device
    accuracy: dict[str, float]  # fraction of test rows answered right
    bag_guess: float  # accuracy of "the most frequent value of the row"
    weights: Tensor  # (n_test, N) trained attention weights, float32 on the CPU
    weight_on_match: float  # mean weight on the item that holds the answer
    norms: dict[str, dict[str, tuple[float, float]]]  # "initial"/"trained": half_norms


def run_lookup(
    seed: int = 0,
    steps: int = 300,
    lr: float = 1e-2,
    batch_size: int = 128,
    n_test: int = 4000,
    device: torch.device | str | None = None,
) -> LookupResult:
    """Train the attention model and the uniform average, then test both.

    Weights from ``seed``, training rows from ``seed + 1``, ``n_test`` test rows from
    ``seed + 123`` (so ``seed=0`` is the chapter's run).
    """
    _check_training(seed, steps, lr, batch_size, device)
    check_int("n_test", n_test, minimum=1)
    device = torch.device(device) if device is not None else torch.device("cpu")

    set_seed(seed)
    initial = half_norms(LookupAttention(N_KEYS, N_VALUES))  # where training starts
    models, histories = {}, {}
    for name, model_class in MODELS.items():
        models[name], histories[name] = train_lookup(
            model_class, seed, steps, lr, batch_size, device
        )

    test = lookup_task(
        n_test,
        N_PAIRS,
        N_KEYS,
        N_VALUES,
        generator=torch.Generator().manual_seed(seed + 123),
        device=device,
    )
    with torch.no_grad():
        acc = {
            name: accuracy(m(test.keys, test.values, test.query), test.target)
            for name, m in models.items()
        }
        _, weights = models["attention"].attend(test.keys, test.values, test.query)
    weights = weights[:, 0].float().cpu()  # (n_test, 1, N) -> (n_test, N)
    counts = F.one_hot(test.values, N_VALUES).sum(dim=1)  # (n_test, N) -> (n_test, V)
    bag_guess = (counts.argmax(dim=1) == test.target).float().mean().item()
    rows = torch.arange(n_test)
    on_match = weights[rows, test.position.cpu()].mean().item()
    return LookupResult(
        models=models,
        histories=histories,
        test=test,
        accuracy=acc,
        bag_guess=bag_guess,
        weights=weights,
        weight_on_match=on_match,
        norms={
            "initial": initial,
            "trained": half_norms(models["attention"]),
        },
    )
