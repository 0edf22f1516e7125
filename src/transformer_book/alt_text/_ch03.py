"""Chapter 3's figures: multi-head attention."""

from __future__ import annotations

import itertools
import math

import torch

from ._registry import figure


def _weight_on_targets(weights, partner):
    """Mean weight of a (T, T) map on the previous token and on the partner."""
    later = torch.arange(1, len(weights))  # queries that have a previous token
    on_previous = weights[later, later - 1].mean().item()
    on_partner = weights[torch.arange(len(weights)), partner].mean().item()
    return on_previous, on_partner


@figure("heads_loss_curves")
def _loss_curves(history_1, history_2, n_params, n_values):
    """§3.2: training loss of 1 head of width 32 against 2 heads of width 16."""
    final_2 = history_2["loss"][-1]
    return (
        f"Training loss over {len(history_1['step'])} steps of two models with the "
        f"same {n_params:,} parameters: 2 heads of width 16 fall to "
        f"{'below 0.1' if final_2 < 0.1 else f'{final_2:.1f}'} nats, while 1 head of "
        f"width 32 ends at {history_1['loss'][-1]:.1f}, near the dotted line where "
        f"one relation stays at chance ({math.log(n_values) / 2:.2f})."
    )


@figure("heads_one_vs_two_maps")
def _one_vs_two_maps(panels, row, partner):
    """§3.2: the attention maps of one test row, 1 head against 2 heads."""
    on_targets = {title: _weight_on_targets(w, partner) for title, w in panels.items()}
    return (
        f"Attention maps of test row {row} ({len(partner)} tokens; circles mark the "
        f"previous token, crosses the partner). Mean weight on the previous token "
        f"and on the partner: "
        + "; ".join(
            f"{title} {on_previous:.2f} and {on_partner:.2f}"
            for title, (on_previous, on_partner) in on_targets.items()
        )
        + ". The single head splits its weight; each of the two heads takes one "
        "relation."
    )


@figure("heads_split")
def _split(per_head):
    """§3.3: split_heads on a numbered (T, D) matrix, one block per head."""
    h, t, dh = per_head.shape  # (H, T, Dh)
    d = h * dh
    blocks = [
        f"head {i} gets columns {i * dh} to {(i + 1) * dh - 1} of every row, "
        + ", ".join(f"{int(r[0])}-{int(r[-1])}" for r in per_head[i])
        for i in range(h)
    ]
    return (
        f"split_heads on a (T, D) = ({t}, {d}) matrix whose entries are numbered 0 "
        f"to {t * d - 1} in memory order: {'; '.join(blocks)}. Each head is a "
        f"({t}, {dh}) block of the same memory, coloured by head."
    )


@figure("heads_kinds")
def _kinds(shares, kinds):
    """§3.5: where each head of the 2-layer model looks, and its kind."""
    n_layers, n_heads = shares["previous"].shape
    described = []
    for layer, h in itertools.product(range(n_layers), range(n_heads)):
        prev, partner = shares["previous"][layer, h], shares["partner"][layer, h]
        described.append(
            f"L{layer}H{h} {kinds[layer][h]} ({prev:.2f} previous, "
            f"{partner:.2f} partner)"
        )
    return (
        "Share of each head's attention weight on the previous token, the partner, "
        f"itself and elsewhere, over the test rows: {'; '.join(described)}."
    )


@figure("heads_map_view")
def _map_view(layer, head, kind, row, weights, partner):
    """§3.5's widget: one head's attention map on one test row."""
    on_previous, on_partner = _weight_on_targets(weights, partner)
    return (
        f"Attention map of layer {layer}, head {head} ({kind}) on test "
        f"row {row}: mean weight {on_previous:.2f} on the previous token (circles) "
        f"and {on_partner:.2f} on the partner (crosses)."
    )


@figure("heads_ablation")
def _ablation(names, drop_previous, drop_partner, pairs, base):
    """§3.6: the accuracy lost with one head, and with two heads, switched off."""

    def pair_drop(pair):  # of the mean accuracy, in percentage points
        return 100 * (base["mean"] - pairs[pair]["mean"])

    n = len(drop_previous)
    worst_prev = max(range(n), key=lambda k: drop_previous[k])
    worst_partner = max(range(n), key=lambda k: drop_partner[k])
    rest = max(
        max(drop_previous[k], drop_partner[k])
        for k in range(n)
        if k not in (worst_prev, worst_partner)
    )
    worst_pair = max(pairs, key=pair_drop)
    return (
        f"Left: one head switched off. {names[worst_prev]} costs "
        f"{drop_previous[worst_prev]:.0f} points on the previous token, "
        f"{names[worst_partner]} {drop_partner[worst_partner]:.0f} points on the "
        f"partner, every other head at most {rest:.0f}. Right: with two heads off, "
        f"the largest drop of mean accuracy is {pair_drop(worst_pair):.0f} points, "
        f"for {' + '.join(f'L{layer}H{h}' for layer, h in worst_pair)}."
    )
