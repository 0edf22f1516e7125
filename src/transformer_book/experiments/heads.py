"""The two-relation experiment of Chapter 3: one head against two of the same width,
then what the heads of a larger model look at and what happens when they are
switched off.

Every position of a ``two_relation_task`` row must fetch two values: the one just
before it (found by position) and the one of its partner, the other token with the
same key (found by content). One softmax gives one average, so one head of width 32
cannot fetch both; two heads of width 16, with the same parameters, can. A model of
2 layers x 4 heads then shows which heads specialise in which relation, and ablating
them (one at a time, in pairs) shows which ones the model needs.

The chapter calls these functions with random seed 0 and asserts the bounds its prose
states; ``tests/test_experiments_heads.py`` runs ``run_heads`` with other seeds and
asserts the same bounds.

Shape letters: B test rows, T positions, L layers, H heads per layer.
"""

from __future__ import annotations

import itertools
from contextlib import ExitStack
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from .._validate import (
    check_compute_device,
    check_has_values,
    check_instance,
    check_int,
    check_real,
    check_seed,
    check_tensor,
)
from ..data import IGNORE_INDEX, TwoRelationBatch, two_relation_task
from ..device import get_device, set_seed
from ..probe import (
    AttentionOnlyClassifier,
    ProbeConfig,
    ablate_heads,
    attention_on,
    record_heads,
)
from ..train import accuracy, train

__all__ = [
    "N_PAIRS",
    "N_KEYS",
    "N_VALUES",
    "T",
    "make_test_set",
    "make_model",
    "fit",
    "evaluate",
    "maps_of",
    "relation_scores",
    "classify_heads",
    "evaluate_without",
    "head_means",
    "HeadsResult",
    "run_heads",
]

N_PAIRS, N_KEYS, N_VALUES = 6, 16, 8  # key pairs per row, letters, digits
T = 2 * N_PAIRS  # positions per row

Head = tuple[int, int]  # (layer, head)
Accuracy = dict[str, float]  # "previous", "partner", "mean"


def make_test_set(n_rows: int = 2000, seed: int = 123) -> TwoRelationBatch:
    """The fixed test rows every model of the chapter is measured on."""
    check_int("n_rows", n_rows, minimum=1)
    check_seed("seed", seed)
    gen = torch.Generator().manual_seed(seed)
    return two_relation_task(n_rows, N_PAIRS, N_KEYS, N_VALUES, generator=gen)


def make_model(n_heads: int, n_layers: int = 1) -> AttentionOnlyClassifier:
    """An attention-only model of width 32 with two 8-way predictions per position."""
    check_int("n_heads", n_heads)
    check_int("n_layers", n_layers)
    if n_heads < 1 or n_layers < 1 or 32 % n_heads:
        raise ValueError(
            f"need n_heads dividing d_model=32 and n_layers >= 1, "
            f"got n_heads={n_heads}, n_layers={n_layers}"
        )
    cfg = ProbeConfig(
        vocab_sizes=(N_KEYS, N_VALUES),  # one embedding table for keys, one for values
        max_len=T,
        n_classes=N_VALUES,
        n_outputs=2,  # previous value, partner value
        d_model=32,
        n_heads=n_heads,
        n_layers=n_layers,
    )
    return AttentionOnlyClassifier(cfg)


def loss_fn(logits: Tensor, target: Tensor) -> Tensor:
    # (B, T, 2, V) against (B, T, 2); position 0's "previous" is IGNORE_INDEX
    return F.cross_entropy(logits.flatten(0, -2), target.flatten())


def fit(
    n_heads: int,
    n_layers: int = 1,
    steps: int = 400,
    seed: int = 0,
    device: torch.device | str | None = None,
) -> tuple[AttentionOnlyClassifier, dict]:
    """Train a fresh model for ``steps`` steps of 128 new random rows each.

    Returns the model (in eval mode, on ``device``) and ``train``'s history.
    """
    check_int("n_heads", n_heads, minimum=1)
    check_int("n_layers", n_layers, minimum=1)
    check_int("steps", steps, minimum=1)
    check_seed("seed", seed)
    check_compute_device("device", device)
    set_seed(seed)
    model = make_model(n_heads, n_layers)
    gen = torch.Generator().manual_seed(seed + 1)

    def get_batch(step: int) -> tuple[tuple[Tensor, Tensor], Tensor]:
        b = two_relation_task(128, N_PAIRS, N_KEYS, N_VALUES, generator=gen)
        return (b.keys, b.values), b.target

    device = get_device() if device is None else device
    history = train(model, get_batch, loss_fn, steps=steps, lr=3e-3, device=device)
    return model, history


@torch.no_grad()
def evaluate(model: AttentionOnlyClassifier, test: TwoRelationBatch) -> Accuracy:
    """Accuracy of each relation on the test rows, and their mean."""
    _check_model_and_test(model, test)
    device = next(model.parameters()).device
    logits = model(test.keys.to(device), test.values.to(device)).cpu()  # (B,T,2,V)
    target = test.target.cpu()
    prev = accuracy(logits[..., 0, :], target[..., 0], ignore_index=IGNORE_INDEX)
    partner = accuracy(logits[..., 1, :], target[..., 1])
    return {"previous": prev, "partner": partner, "mean": (prev + partner) / 2}


def maps_of(model: AttentionOnlyClassifier, test: TwoRelationBatch) -> Tensor:
    """Every head's weights on every test row: (L, B, H, T, T), on the CPU."""
    _check_model_and_test(model, test)
    device = next(model.parameters()).device
    return model.attention_weights(test.keys.to(device), test.values.to(device)).cpu()


def _check_model_and_test(model: object, test: object) -> None:
    check_instance("model", model, AttentionOnlyClassifier)
    check_instance("test", test, TwoRelationBatch)


def _check_maps_and_test(maps: object, test: object) -> None:
    check_tensor("maps", maps, "float")
    check_has_values("maps", maps)
    if maps.dim() < 4 or 0 in maps.shape:
        raise ValueError(f"maps must be (..., B, H, T, T), got {tuple(maps.shape)}")
    check_instance("test", test, TwoRelationBatch)


def _check_heads(heads: object) -> None:
    if isinstance(heads, str) or not isinstance(heads, list | tuple):
        raise TypeError(f"heads must be a list of (layer, head) pairs, got {heads!r}")
    for i, pair in enumerate(heads):
        if not (isinstance(pair, tuple | list) and len(pair) == 2):
            raise TypeError(f"heads[{i}] must be a (layer, head) pair, got {pair!r}")
        check_int(f"heads[{i}] layer", pair[0], minimum=0)
        check_int(f"heads[{i}] head", pair[1], minimum=0)


def relation_scores(maps: Tensor, test: TwoRelationBatch) -> dict[str, Tensor]:
    """Mean weight each head of one layer puts on the previous token, the partner
    and itself, over the queries whose previous token is not also their partner
    (there the three targets are three different keys, so the shares add up to at
    most 1).

    Shapes: maps (B, H, T, T); returns a dict of (H,) tensors.
    """
    _check_maps_and_test(maps, test)
    if maps.dim() != 4 or maps.shape[0] != len(test.keys):
        raise ValueError(
            f"maps must be (B, H, T, T) with B={len(test.keys)} test rows, "
            f"got {tuple(maps.shape)}"
        )
    previous, partner = test.previous.cpu(), test.partner.cpu()
    clear = (previous >= 0) & (partner != previous)  # (B, T)
    targets = {
        "previous": previous,
        "partner": partner,
        "self": torch.arange(maps.shape[-2]).expand_as(partner),
    }
    # attention_on leaves out the queries whose target index is negative
    return {
        name: attention_on(maps.cpu(), index.masked_fill(~clear, -1))
        for name, index in targets.items()
    }


def classify_heads(
    maps: Tensor, test: TwoRelationBatch, threshold: float = 0.5
) -> tuple[dict[str, Tensor], list[list[str]]]:
    """Where each head looks, and what kind of head that makes it.

    A head whose share on the previous token (or on the partner) is larger than
    ``threshold`` and larger than its share on the other target is a
    ``"previous-head"`` (``"partner-head"``); any other head is ``"diffuse"``.

    Shapes: maps (L, B, H, T, T); returns shares {"previous", "partner", "self",
    "elsewhere"} of (L, H) tensors, and kinds[layer][head].
    """
    _check_maps_and_test(maps, test)
    check_real("threshold", threshold, 0.0, 1.0)
    if maps.dim() != 5:
        raise ValueError(f"maps must be (L, B, H, T, T), got {tuple(maps.shape)}")
    per_layer = [relation_scores(layer_maps, test) for layer_maps in maps]
    shares = {name: torch.stack([s[name] for s in per_layer]) for name in per_layer[0]}
    shares["elsewhere"] = 1 - sum(shares.values())  # (L, H)

    def kind(layer: int, head: int) -> str:
        best = max(("previous", "partner"), key=lambda n: shares[n][layer, head])
        return f"{best}-head" if shares[best][layer, head] > threshold else "diffuse"

    L, H = shares["previous"].shape
    return shares, [[kind(layer, h) for h in range(H)] for layer in range(L)]


def evaluate_without(
    model: AttentionOnlyClassifier,
    test: TwoRelationBatch,
    heads: list[Head],
    means: list[Tensor] | None = None,
) -> Accuracy:
    """``evaluate`` with the given (layer, head) pairs switched off together:
    zero ablation, or mean ablation with ``means[layer]`` of shape (H, T, Dh)."""
    _check_model_and_test(model, test)
    _check_heads(heads)
    n_layers = len(model.layers)
    bad = [lh for lh in heads if not 0 <= lh[0] < n_layers]
    if bad:
        raise ValueError(f"layers of {bad} out of range for n_layers={n_layers}")
    with ExitStack() as stack:
        for index, layer in enumerate(model.layers):
            chosen = [h for (at, h) in heads if at == index]
            if chosen:
                mean = None if means is None else means[index]
                stack.enter_context(ablate_heads(layer, chosen, mean=mean))
        return evaluate(model, test)


def head_means(model: AttentionOnlyClassifier, test: TwoRelationBatch) -> list[Tensor]:
    """Each layer's heads' outputs (before W^O) averaged over the test rows, for
    mean ablation: one (H, T, Dh) tensor per layer."""
    _check_model_and_test(model, test)
    with ExitStack() as stack:
        tapes = [stack.enter_context(record_heads(layer)) for layer in model.layers]
        evaluate(model, test)
    return [tape[0].mean(dim=0) for tape in tapes]  # (B, H, T, Dh) -> (H, T, Dh)


@dataclass
class HeadsResult:
    """Everything the chapter measures, for one random seed."""

    one_head: Accuracy  # 1 layer, 1 head of width 32
    two_heads: Accuracy  # 1 layer, 2 heads of width 16
    scores_one: dict[str, Tensor]  # relation_scores of the 1-head model, each (1,)
    scores_two: dict[str, Tensor]  # relation_scores of the 2-head model, each (2,)
    two_heads_without: list[Accuracy]  # the 2-head model without head 0, head 1
    deep: Accuracy  # 2 layers x 4 heads
    shares: dict[str, Tensor]  # classify_heads of the deep model, each (L, H)
    kinds: list[list[str]]  # kinds[layer][head]
    single: dict[Head, Accuracy]  # the deep model without one head
    pairs: dict[tuple[Head, Head], Accuracy]  # ... without two heads
    mean_single: dict[Head, Accuracy]  # ... with one head mean-ablated


def run_heads(
    seed: int = 0, steps: int = 400, device: torch.device | str | None = None
) -> HeadsResult:
    """Train the chapter's three models with ``seed`` and measure them."""
    check_seed("seed", seed)
    check_int("steps", steps, minimum=1)
    check_compute_device("device", device)
    test = make_test_set()
    one, _ = fit(n_heads=1, steps=steps, seed=seed, device=device)
    two, _ = fit(n_heads=2, steps=steps, seed=seed, device=device)
    deep, _ = fit(n_heads=4, n_layers=2, steps=steps, seed=seed, device=device)
    shares, kinds = classify_heads(maps_of(deep, test), test)
    all_heads = [(layer, h) for layer in range(2) for h in range(4)]
    means = head_means(deep, test)
    return HeadsResult(
        one_head=evaluate(one, test),
        two_heads=evaluate(two, test),
        scores_one=relation_scores(maps_of(one, test)[0], test),
        scores_two=relation_scores(maps_of(two, test)[0], test),
        two_heads_without=[evaluate_without(two, test, [(0, h)]) for h in range(2)],
        deep=evaluate(deep, test),
        shares=shares,
        kinds=kinds,
        single={lh: evaluate_without(deep, test, [lh]) for lh in all_heads},
        pairs={
            p: evaluate_without(deep, test, list(p))
            for p in itertools.combinations(all_heads, 2)
        },
        mean_single={lh: evaluate_without(deep, test, [lh], means) for lh in all_heads},
    )
