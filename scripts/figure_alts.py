"""Give every figure of the book a text alternative that states its finding (issue 29).

    python scripts/figure_alts.py            # edit book/0*.ipynb in place
    python scripts/figure_alts.py --check    # exit 1 if an edit is still to be made
    python scripts/figure_alts.py --outputs  # after execution: exit 1 if an image or
                                             # a widget view lacks its alt

Each figure cell ends in ``show(fig, alt=...)`` instead of ``plt.show()``, and each
``figure_view`` of a widget gets ``alt=...``. The alt texts are f-strings over the
cell's own results, so they stay true when a chapter is re-executed, and they round
as the chapter's printed outputs do. ``show`` is added to each chapter's import from
``transformer_book.plot``.

The script is idempotent, and it never relies on cell indices: every edit finds its
cell by a substring that occurs in exactly one code cell, then replaces a substring
that occurs exactly once in that cell. An edit already made is skipped; anything
else (no such cell, two such cells, the old text gone without the new text in its
place) stops the script with a message that names the chapter and the edit, before
any notebook is written. Execute the notebooks afterwards (``make execute``).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

BOOK = Path(__file__).resolve().parent.parent / "book"


@dataclass(frozen=True)
class Edit:
    anchor: str  # a substring of exactly one code cell: the cell to edit
    old: str  # occurs exactly once in that cell before the edit
    new: str  # what replaces it


def _squash(text: str) -> str:
    """Code without whitespace or trailing commas: formatting does not hide an edit."""
    return re.sub(r",(?=[)\]}])", "", re.sub(r"\s+", "", text))


def _one_cell(nb, anchor: str, where: str):
    cells = [c for c in nb.cells if c.cell_type == "code" and anchor in c.source]
    if len(cells) != 1:
        raise SystemExit(
            f"{where}: {len(cells)} code cells contain {anchor!r}; expected exactly 1"
        )
    return cells[0]


def apply_edit(nb, edit: Edit, where: str) -> bool:
    """Make ``edit`` in ``nb``; False when it was already made."""
    cell = _one_cell(nb, edit.anchor, where)
    made = _squash(edit.new) in _squash(cell.source)
    if made and (edit.old in edit.new or edit.old not in cell.source):
        return False
    count = cell.source.count(edit.old)
    if count != 1:
        raise SystemExit(
            f"{where}: the cell with {edit.anchor!r} contains {edit.old!r} {count} "
            "times (expected once), and the new text is not there either"
        )
    cell.source = cell.source.replace(edit.old, edit.new)
    return True


def _import_names(names: list[str]) -> list[str]:
    """isort's order (ruff's default): CONSTANTS, then Classes, then functions."""

    def kind(name: str) -> int:
        if name.isupper():
            return 0
        return 1 if name[:1].isupper() else 2

    return sorted(set(names), key=lambda n: (kind(n), n))


def add_plot_import(nb, name: str, where: str) -> bool:
    """Add ``name`` to the chapter's ``from transformer_book.plot import ...``."""
    anchor = "from transformer_book.plot import"
    cell = _one_cell(nb, anchor, where)
    pattern = re.compile(
        r"from transformer_book\.plot import (\(([^)]*)\)|([^\n(]*))", re.MULTILINE
    )
    match = pattern.search(cell.source)
    listed = match.group(2) if match.group(2) is not None else match.group(3)
    names = [n.strip() for n in listed.split(",") if n.strip()]
    if name in names:
        return False
    names = _import_names([*names, name])
    line = f"{anchor} {', '.join(names)}"
    if len(line) > 88:
        line = f"{anchor} (\n" + "".join(f"    {n},\n" for n in names) + ")"
    cell.source = cell.source[: match.start()] + line + cell.source[match.end() :]
    return True


# One list of edits per chapter, in the order of the chapter.
EDITS: dict[str, list[Edit]] = {}

EDITS["01_rnn_limits.ipynb"] = [
    Edit(
        anchor='title="Cost per token"',
        old="plt.show()",
        new="""\
per_token_growth = {
    name: (v[-1] / lengths[-1]) / (v[0] / lengths[0]) for name, v in times.items()
}
alt = (
    f"Forward time (left) and time per token (right) against the sequence length, "
    f"log-log, on {device.type}. From T = {lengths[0]} to {lengths[-1]} the time per "
    f"token grows {per_token_growth['nn.RNN']:.1f} times for nn.RNN and "
    f"{per_token_growth['nn.LSTM']:.1f} times for nn.LSTM, but "
    f"{per_token_growth['attention (readable)']:.0f} times for the readable attention "
    f"and {per_token_growth['attention (fused kernel)']:.0f} times for the fused one; "
    f"at T = {lengths[-1]} the fused attention takes "
    f"{times['attention (fused kernel)'][-1] * 1e3:.0f} ms, nn.RNN "
    f"{times['nn.RNN'][-1] * 1e3:.0f} ms."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor="How much the last output depends on each input",
        old="plt.show()",
        new="""\
attention_norms = grad_norms["self-attention"]  # index = distance
alt = (
    f"Gradient norm of the last output with respect to each input against the "
    f"distance back, 0 to {T - 1}, log scale: the vanilla RNN's falls by "
    f"x {factor['vanilla RNN']:.2f} per step, to "
    f"{grad_norms['vanilla RNN'][T - 1]:.1e} at distance {T - 1}, the LSTM's by "
    f"x {factor['LSTM']:.2f}, to {grad_norms['LSTM'][T - 1]:.1e}; the LSTM with "
    f"forget bias 3 (x {factor['LSTM, forget bias 3']:.2f}) and self-attention "
    f"(x {factor['self-attention']:.2f}) stay level, self-attention between "
    f"{attention_norms[1:].min():.1e} and {attention_norms[1:].max():.1e} at "
    f"distances 1 to {T - 1} and {attention_norms[0]:.1e} on its own token."
)
show(ax.figure, alt=alt)""",
    ),
    Edit(
        anchor="tanh RNN: the same W_hh rescaled to spectral radius",
        old="plt.show()",
        new="""\
sweep_factor = {
    name: ((norms[80] / norms[20]) ** (1 / 60)).item()
    for name, norms in sweep.items()
    if name != "ρ = 3.0"  # chaotic: its digits depend on the weights' last bits
}
factors = ", ".join(f"x {f:.2f} at {name}" for name, f in sweep_factor.items())
alt = (
    f"Gradient norm of the tanh RNN's last state against the distance back, log "
    f"scale, with W_hh rescaled to five spectral radii ρ. The per-step factor is "
    f"{factors}: up to ρ = 1.5 the norm vanishes, at ρ = 2.0 it stays roughly "
    f"level, and at ρ = 3.0 it explodes past 1e+06 at distance {T - 1}; every tanh "
    f"factor is smaller than the linear RNN's ρ."
)
show(ax.figure, alt=alt)""",
    ),
    Edit(
        anchor="def explore_radius(radius, nonlinearity):",
        old="    return fig",
        new="""\
    far = norms[T - 1].item()  # chaotic at ρ = 3 (tanh): say only "above"
    far_text = "above 1e+06" if far > 1e6 else f"{far:.1e}"
    where = "inside" if radius < 1 else "on" if radius == 1 else "outside"
    alt = (
        f"Left: the eigenvalues of W_hh, the largest of modulus {radius}, {where} "
        f"the unit circle. Right: the {nonlinearity} RNN's gradient norm against the "
        f"distance back, log scale, goes from {norms[1]:.1e} at distance 1 to "
        f"{far_text} at distance {T - 1}, where the linear rule ρ^k gives "
        f"{curves['ρ^k (linear)'][T - 1]:.1e}."
    )
    return figure_view(fig, alt=alt)""",
    ),
    Edit(
        anchor="linked_views([radius, nonlinearity]",
        old="lambda r, f: figure_view(explore_radius(r, f))",
        new="explore_radius",
    ),
    Edit(
        anchor="Recall after 150 training steps",
        old="plt.show()",
        new="""\
alt = (
    f"Test accuracy against the distance between the symbol and the query, "
    f"{recall_distances[0]} to {recall_distances[-1]} steps: attention recalls "
    f"{min(attention.values()):.0%} or more at every distance; the LSTM is at "
    f"{lstm[8]:.0%} at distance 8 but at most "
    f"{max(lstm[16], lstm[32], lstm[64]):.0%} from 16 on (chance: "
    f"{1 / n_symbols:.1%}); the LSTM with forget bias 3 reaches {opened[32]:.0%} "
    f"at 32 and {opened[64]:.0%} at 64."
)
show(ax.figure, alt=alt)""",
    ),
]


EDITS["02_attention.ipynb"] = [
    Edit(
        anchor='title="...and its gradient vanishes"',
        old="plt.show()",
        new="""\
alt = (
    f"Three panels against d_k from {d_ks[0]} to {d_ks[-1]}, unscaled against "
    f"scaled scores. The variance of the unscaled scores grows with d_k, to "
    f"{raw[-1]['var']:.0f}, while the scaled ones stay near "
    f"{scaled[-1]['var']:.2f}; the mean largest of 16 weights climbs to "
    f"{raw[-1]['top']:.2f} unscaled but stays near {scaled[-1]['top']:.2f} scaled; "
    f"the median softmax gradient norm falls to {raw[-1]['jac']:.2g} unscaled "
    f"while the scaled one stays at {scaled[-1]['jac']:.2f}."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='title="Hand-made token embeddings"',
        old="plt.show()",
        new="""\
rows_described = "; ".join(
    f"「{t}」 "
    + ", ".join(f"{f} {v:g}" for f, v in zip(features, row, strict=True) if v)
    for t, row in zip(tokens, X.tolist(), strict=True)
)
alt = (
    f"The hand-made embeddings, one row per token and one column per feature "
    f"(every entry not named is 0): {rows_described}."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor="(row 「餘額」 boxed)",
        old="plt.show()",
        new="""\
top_balance = bank_weights[BALANCE].topk(2)
alt = (
    f"Two 6 by 6 self-attention maps of 銀行帳戶裡的餘額不足. With random "
    f"projections the weights are scattered without a pattern, from "
    f"{random_weights.min():.2f} to {random_weights.max():.2f}; the boxed row "
    f"「餘額」 stays between {random_weights[BALANCE].min():.2f} and "
    f"{random_weights[BALANCE].max():.2f}, near uniform ({1 / 6:.2f}). With the "
    f"hand-made projections the boxed row 「餘額」 puts "
    f"{top_balance.values[0]:.2f} on 「{tokens[top_balance.indices[0]]}」 and "
    f"{top_balance.values[1]:.2f} on 「{tokens[top_balance.indices[1]]}」, "
    f"「不足」 puts {bank_weights[tokens.index('不足')].max():.2f} on "
    f"「{tokens[bank_weights[tokens.index('不足')].argmax()]}」, and the first four "
    f"rows are uniform."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor="'s weights at five temperatures",
        old="plt.show()",
        new="""\
alt = (
    f"「餘額」's weights over the six keys at temperatures τ = {temperatures[0]} "
    f"to {temperatures[-1]}: at τ = {temperatures[0]} almost all the weight, "
    f"{rows[0].max():.2f}, is on 「{tokens[rows[0].argmax()]}」; at "
    f"τ = {temperatures[-1]} the weights flatten to between {rows[-1].min():.2f} "
    f"and {rows[-1].max():.2f}, near uniform ({1 / 6:.2f})."
)
show(ax.figure, alt=alt)""",
    ),
    Edit(
        anchor="def show_attention(query, temperature):",
        old="    return fig",
        new="""\
    if w.max() - w.min() < 1e-6:  # a zero query: every key scores the same
        spread = f"every key gets the same weight, {w.max():.2f}"
    else:
        spread = f"the largest, {w.max():.2f}, is on 「{tokens[w.argmax()]}」"
    alt = (
        f"Attention weights of 「{query}」 over the six keys at τ = {temperature}: "
        f"{spread}; entropy {entropy:.2f} nats (uniform {math.log(6):.2f})."
    )
    return figure_view(fig, alt=alt)""",
    ),
    Edit(
        anchor="linked_views([query, temperature]",
        old="lambda q, t: figure_view(show_attention(q, t))",
        new="show_attention",
    ),
    Edit(
        anchor="Look-up task: attention against uniform averaging",
        old="plt.show()",
        new="""\
final_loss = {name: h["loss"][-1] for name, h in histories.items()}
attention_final = (
    "below 0.1" if final_loss["attention"] < 0.1 else f"{final_loss['attention']:.1f}"
)
n_steps = len(histories["attention"]["step"])
alt = (
    f"Training loss of the two look-up models over {n_steps} steps, log scale: "
    f"attention's falls from "
    f"{histories['attention']['loss'][0]:.1f} nats to {attention_final}, uniform "
    f"averaging's levels off near {final_loss['uniform average']:.1f}, below the "
    f"guessing line at log 16 = {math.log(N_VALUES):.2f}."
)
show(ax.figure, alt=alt)""",
    ),
    Edit(
        anchor="Trained attention over the 8 items",
        old="plt.show()",
        new="""\
on_true = [test_weights[i, test.position[i]].item() for i in range(len(axes))]
alt = (
    f"The trained attention weights of {len(axes)} test rows over their 8 items: "
    f"in each row nearly all the weight is on the boxed true item "
    f"({', '.join(f'{w:.2f}' for w in on_true)}); the other items get almost none."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='title="causal mask"',
        old="plt.show()",
        new="""\
alt = (
    f"Three attention maps. No mask: in 「帳戶 餘額 不足」 padded to 6 tokens, "
    f"「餘額」 puts {to_pads[0]:.0%} of its weight on the three pads. Padding "
    f"mask: the pad columns get {w_pad[1, :, 3:].max():.0%}, the real tokens "
    f"share all the weight. Causal mask: every weight above the diagonal is "
    f"{w_causal.triu(1).max():.0f}, so the first token 「{tokens[0]}」 puts "
    f"{w_causal[0, 0]:.2f} on itself."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor="Cross-attention: English queries over the Chinese sentence",
        old="plt.show()",
        new="""\
alt = "Cross-attention weights, English queries over the Chinese keys: " + "; ".join(
    f"{word} puts {row.max():.2f} on 「{tokens[row.argmax()]}」"
    for word, row in zip(english, cross_weights, strict=True)
)
show(ax.figure, alt=alt + ".")""",
    ),
]


EDITS["03_multi_head.ipynb"] = [
    Edit(
        anchor='title="Same parameters, different number of heads"',
        old="plt.show()",
        new="""\
final_2 = history_2["loss"][-1]
alt = (
    f"Training loss over {len(history_1['step'])} steps of two models with the same "
    f"{n_params(one_head):,} parameters: 2 heads of width 16 fall to "
    f"{'below 0.1' if final_2 < 0.1 else f'{final_2:.1f}'} nats, while 1 head of "
    f"width 32 ends at {history_1['loss'][-1]:.1f}, near the dotted line where one "
    f"relation stays at chance ({math.log(N_VALUES) / 2:.2f})."
)
show(ax.figure, alt=alt)""",
    ),
    Edit(
        anchor='"2 heads: head 1": maps_2[0, i, 1]',
        old="plt.show()",
        new="""\
later = torch.arange(1, T)  # queries that have a previous token
on_previous = {title: w[later, later - 1].mean().item() for title, w in panels.items()}
on_partner = {
    title: w[torch.arange(T), test.partner[i]].mean().item()
    for title, w in panels.items()
}
alt = (
    f"Attention maps of test row {i} ({T} tokens; circles mark the previous token, "
    f"crosses the partner). Mean weight on the previous token and on the partner: "
    + "; ".join(
        f"{title} {on_previous[title]:.2f} and {on_partner[title]:.2f}"
        for title in panels
    )
    + ". The single head splits its weight; each of the two heads takes one relation."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor="def draw_split(",
        old="    plt.show()",
        new="""\
    blocks = [
        f"head {i} gets columns {i * dh} to {(i + 1) * dh - 1} of every row, "
        + ", ".join(f"{int(r[0])}-{int(r[-1])}" for r in per_head[i])
        for i in range(h)
    ]
    alt = (
        f"split_heads on a (T, D) = ({t}, {d}) matrix whose entries are numbered 0 to "
        f"{t * d - 1} in memory order: {'; '.join(blocks)}. Each head is a ({t}, {dh}) "
        f"block of the same memory, coloured by head."
    )
    show(fig, alt=alt)""",
    ),
    Edit(
        anchor="Where each head of the 2-layer model looks",
        old="plt.show()",
        new="""\
described = []
for layer, h in itertools.product(range(N_LAYERS), range(N_HEADS)):
    prev, partner = shares["previous"][layer, h], shares["partner"][layer, h]
    described.append(
        f"L{layer}H{h} {kinds[layer][h]} ({prev:.2f} previous, {partner:.2f} partner)"
    )
alt = (
    "Share of each head's attention weight on the previous token, the partner, "
    f"itself and elsewhere, over the test rows: {'; '.join(described)}."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor="def draw_head(layer, head, row):",
        old="    return fig",
        new="""\
    t = torch.arange(1, T)  # queries that have a previous token
    on_previous = weights[t, t - 1].mean().item()
    on_partner = weights[torch.arange(T), test.partner[row]].mean().item()
    alt = (
        f"Attention map of layer {layer}, head {head} ({kinds[layer][head]}) on test "
        f"row {row}: mean weight {on_previous:.2f} on the previous token (circles) "
        f"and {on_partner:.2f} on the partner (crosses)."
    )
    return figure_view(fig, alt=alt)""",
    ),
    Edit(
        anchor="linked_views([layer, head, row]",
        old="lambda *lhr: figure_view(draw_head(*lhr))",
        new="draw_head",
    ),
    Edit(
        anchor='ax2.set_title("Two heads off: drop of mean accuracy (points)")',
        old="plt.show()",
        new="""\
worst_prev = max(range(n), key=lambda k: drop_previous[k])
worst_partner = max(range(n), key=lambda k: drop_partner[k])
rest = max(
    max(drop_previous[k], drop_partner[k])
    for k in range(n)
    if k not in (worst_prev, worst_partner)
)
worst_pair = max(pairs, key=lambda p: drop(pairs[p]))
alt = (
    f"Left: one head switched off. {names[worst_prev]} costs "
    f"{drop_previous[worst_prev]:.0f} points on the previous token, "
    f"{names[worst_partner]} {drop_partner[worst_partner]:.0f} points on the "
    f"partner, every other head at most {rest:.0f}. Right: with two heads off, the "
    f"largest drop of mean accuracy is {drop(pairs[worst_pair]):.0f} points, for "
    f"{' + '.join(f'L{layer}H{h}' for layer, h in worst_pair)}."
)
show(fig, alt=alt)""",
    ),
]


EDITS["04_positional_encoding.ipynb"] = [
    Edit(
        anchor="Head 0's attention weights",
        old="plt.show()",
        new="""\
head_0 = {(s, p): self_attend(s, p)[1] for s in (a, b) for p in (False, True)}
order = [a.index(ch) for ch in b]  # b's characters, found in a
reordered = {
    p: (head_0[a, p][order][:, order] - head_0[b, p]).abs().max().item()
    for p in (False, True)
}
alt = (
    f"Head 0's weights on {a} and {b}. Without positions, the map of {b} is the "
    f"map of {a} with rows and columns reordered (largest difference "
    f"{reordered[False]:.3f}): the model cannot tell who loves whom. With "
    f"positions added, the weights differ by up to {reordered[True]:.2f}."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='title="Some dimensions across positions"',
        old="plt.show()",
        new="""\
periods = ", ".join(
    f"{2 * math.pi / omega[dim // 2].item():.0f}" for dim in (0, 6, 16, 30)
)
alt = (
    f"Left: the sinusoidal table, {max_len} positions by {d_model} dimensions, "
    f"values between -1 and 1: the low dimensions alternate quickly along the "
    f"positions, the high ones barely change. Right: dimensions 0, 6, 16 and 30 "
    f"across the positions, with periods {periods} positions."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='title="Dot product of two encodings vs their offset"',
        old="plt.show()",
        new="""\
curve = curves["p = 100"]
lowest = curve.argmin().item()
alt = (
    f"PE(p) · PE(p + k) against the offset k from {offsets[0]} to {offsets[-1]}, "
    f"for p = 100, 500 and 1000: the three curves coincide (within 1e-3). Each "
    f"peaks at {curve.max():.0f} at k = 0, is symmetric ({curve[110]:.2f} at "
    f"k = +10 and -10), and falls with |k| to {curve.min():.2f} at "
    f"k = ±{abs(offsets[lowest])}."
)
show(ax.figure, alt=alt)""",
    ),
    Edit(
        anchor="def show_pair(i, position):",
        old="    return fig",
        new="""\
    turns = position / period
    alt = (
        f"Left: sin and cos of pair {i} (dimensions {2 * i} and {2 * i + 1}) over "
        f"positions 0 to 100, period {period:.1f} positions, with position "
        f"{position} marked. Right: positions 0 to {position} as points on the unit "
        f"circle, {turns:.2f} turns; the arrow at position {position} points to "
        f"(sin, cos) = ({sin[position]:.2f}, {cos[position]:.2f})."
    )
    return figure_view(fig, alt=alt, dpi=72)""",
    ),
    Edit(
        anchor="linked_views([pair, position]",
        old="lambda i, p: figure_view(show_pair(i, p), dpi=72)",
        new="show_pair",
    ),
    Edit(
        anchor='title="bucket(j − i), 16 buckets"',
        old="plt.show()",
        new="""\
both, causal = buckets["bidirectional (encoder)"], buckets["causal (decoder)"]
before, after = relative < 0, relative > 0
last_from = (-relative[before & (both == both[before].max())]).min()
alt = (
    f"Left: T5's bucket for each relative position j − i from {relative[0]} to "
    f"{relative[-1]}. Bidirectional: keys before the query fall in buckets "
    f"{both[before].min()} to {both[before].max()}, keys after it in "
    f"{both[after].min()} to {both[after].max()}; the buckets are one distance "
    f"wide near the query and wider farther away, and every key {last_from} or "
    f"more tokens before shares the last one. Causal: every key after the query "
    f"gets bucket {causal[after].max()}, keys before it buckets "
    f"{causal[before].min()} to {causal[before].max()}. Right: on {len(positions)} "
    f"positions with 16 buckets, bucket(j − i) is constant along each diagonal."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='("RoPE: R_m q · R_n k", "added: (q + PE_m) · (k + PE_n)")',
        old="plt.show()",
        new="""\
alt = (
    f"Scores of one query and one key at every query position m and key position "
    f"n, {T} by {T}. With RoPE the score depends only on the offset n − m: each "
    f"diagonal holds a single value (spread below 1e-4), so the map is striped "
    f"parallel to the diagonal. With added sinusoidal encodings the stripes are "
    f"broken: along one diagonal the score varies by up to "
    f"{diagonal_spread(scores_added):.2f}."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='title="ALiBi bias per head (8 heads)"',
        old="plt.show()",
        new="""\
slopes = alibi_slopes(8)
alt = (
    f"Left: ALiBi's bias −m (i − j) against the distance for the 8 heads, straight "
    f"lines with slopes from m = 1/{1 / slopes[0]:.0f} to 1/{1 / slopes[-1]:.0f}. "
    f"Middle and right: the causal weights from the bias alone on {T} positions. "
    f"Head 0 is local: its last query puts {weights[0, -1, -1]:.2f} on its own "
    f"token. Head 7 looks almost evenly: its last query puts between "
    f"{weights[7, -1].min():.2f} and {weights[7, -1].max():.2f} on each of the "
    f"{T} keys."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='title=f"Trained on length {L}, tested longer"',
        old="plt.show()",
        new="""\
at_4l = sorted((accs[-1], NAMES[p]) for p, accs in results.items())
alt = (
    f"Accuracy at test lengths {', '.join(map(str, test_lengths))} of six models "
    f"trained on length {L} (chance {1 / V:.0%}): "
    + "; ".join(
        f"{NAMES[p]} " + ", ".join(f"{a:.0%}" for a in accs)
        for p, accs in results.items()
    )
    + f". At {test_lengths[-1]} tokens {at_4l[-1][1]} leads, "
    f"{100 * (at_4l[-1][0] - at_4l[-2][0]):.0f} points ahead of {at_4l[-2][1]}."
)
show(ax.figure, alt=alt)""",
    ),
    Edit(
        anchor="Accuracy at each position (length 64, trained on 16)",
        old="plt.show()",
        new="""\
spans = [(1, L), (L, 2 * L), (2 * L, 4 * L)]  # position ranges, end excluded
alt = (
    f"Accuracy at each position of length-{4 * L} sequences, for models trained "
    f"on length {L}. Mean accuracy at positions "
    + ", ".join(f"{lo}-{hi - 1}" for lo, hi in spans)
    + ": "
    + "; ".join(
        f"{NAMES[p]} "
        + ", ".join(f"{result.by_position[p][lo:hi].mean():.0%}" for lo, hi in spans)
        for p in SCHEMES
    )
    + f". Sinusoidal and learned fall to chance just past position {L}, RoPE past "
    f"{2 * L}, while ALiBi stays high to the end."
)
show(ax.figure, alt=alt)""",
    ),
    Edit(
        anchor='title="T5 bias learned on length 16 (8 buckets)"',
        old="plt.show()",
        new="""\
flat_from = distance[buckets == buckets.max()].min()
peaks = sorted(set(learned_bias.argmax(dim=0).tolist()))  # distance of each top
others = learned_bias[[d for d in range(4 * L) if d not in peaks]]
alt = (
    f"The bias each of the 4 heads learned, against the distance back from 0 to "
    f"{4 * L - 1}: the heads peak at distance {' or '.join(map(str, peaks))}, up "
    f"to {learned_bias.max():.1f}, and lie between {others.min():.1f} and "
    f"{others.max():.1f} at every other distance. Every distance from {flat_from} "
    f"on shares the last bucket, so the curves are flat there, also past the "
    f"training length {L}."
)
show(plt.gcf(), alt=alt)""",
    ),
]


EDITS["05_transformer.ipynb"] = [
    Edit(
        anchor="def draw_transformer():",
        old="    plt.show()",
        new="""\
    alt = (
        "The Transformer as boxes, each labelled with its package object. Left, the "
        "encoder: the source tokens (B, S) are embedded (times √d_model), the "
        "sinusoidal positional encoding is added, and N× EncoderBlock applies "
        f"{', '.join(label for _, label, *_ in encoder)}, with a residual path "
        "around each sub-layer into its Add & Norm. Right, the decoder: the target "
        "tokens, shifted right (B, T), are embedded the same way, and N× DecoderBlock "
        f"applies {', '.join(label for _, label, *_ in decoder)}; a linear layer "
        "tied to the embedding and a softmax give the next-token probabilities. The "
        "encoder's output, memory (B, S, d_model), gives the keys and values of "
        "every cross-attention."
    )
    show(fig, alt=alt)""",
    ),
    Edit(
        anchor="The feed-forward network's non-linearity",
        old="plt.show()",
        new="""\
gelu = F.gelu(z)
alt = (
    f"ReLU and GELU for z from {z[0]:.0f} to {z[-1]:.0f}: both are near 0 for "
    f"negative z and near z for positive z. ReLU has a kink at 0; GELU is smooth "
    f"and dips below 0, to {gelu.min():.2f} at z = {z[gelu.argmin()]:.2f}."
)
show(ax.figure, alt=alt)""",
    ),
    Edit(
        anchor='title=f"Gradients in a stack of {DEPTH} encoder blocks"',
        old="plt.show()",
        new="""\
alt = (
    f"Gradient norm of each block's weights in a stack of {DEPTH} encoder blocks, "
    f"log scale, geometric mean over 3 seeds: "
    + "; ".join(
        f"{name} from {g[0]:.2g} at block 1 to {g[-1]:.2g} at block {DEPTH}"
        for name, g in grad_norms.items()
    )
    + f". Without residuals the first block gets "
    f"{ratio['no residual (post-norm)']:.2g} times less gradient than the last; "
    f"with residuals, post-norm is flat below the last block and pre-norm flat "
    f"throughout."
)
show(plt.gcf(), alt=alt)""",
    ),
    Edit(
        anchor='title="6 + 6 blocks, learning rate 5e-3, no warm-up"',
        old="plt.show()",
        new="""\
alt = (
    f"Training loss over 80 steps of 6 + 6 blocks at learning rate 5e-3 without "
    f"warm-up: post-norm (the paper) stays on the plateau of the input-blind model "
    f"({post_end:.2f} over the last 10 steps against {unigram:.2f}), while pre-norm "
    f"leaves it and ends at {pre_end:.2f}."
)
show(ax.figure, alt=alt)""",
    ),
    Edit(
        anchor='title="Causal mask: dark = may attend"',
        old="plt.show()",
        new="""\
alt = (
    f"The causal mask of the target {' '.join(target_tokens)}: each position may "
    f"attend to itself and the positions before it, a lower triangle of "
    f"{int(causal_mask(5).sum())} of 25 pairs; everything above the diagonal is "
    f"blocked."
)
show(ax.figure, alt=alt)""",
    ),
    Edit(
        anchor='"d_model=512, warmup=4000": [paper_lr(s) for s in steps]',
        old="plt.show()",
        new="""\
alt = (
    f"Left: the paper's schedule (d_model = 512, warm-up 4000) rises linearly to "
    f"{max(paper_lr(s) for s in range(8000)):.1e} at step 4000, then decays as "
    f"1/√step to {paper_lr(len(steps) - 1):.1e} at step {len(steps):,}. Right: ours "
    f"(d_model = {cfg.d_model}) rises to {our_lr(WARMUP - 1):.1e} in {WARMUP} steps, "
    f"decays as 1/√step to {our_lr(STEPS - COOLDOWN):.1e} at step "
    f"{STEPS - COOLDOWN}, then falls linearly to {our_lr(STEPS - 1):.1e} at step "
    f"{STEPS - 1}."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='title="Training the encoder-decoder"',
        old="plt.show()",
        new="""\
alt = (
    f"Training loss of the encoder-decoder over {STEPS} steps: it falls from "
    f"{history['loss'][0]:.1f} nats to {run.final_loss:.3f} (mean of the last 10 "
    f"steps), just above the label-smoothing floor at {loss_floor:.3f}."
)
show(ax.figure, alt=alt)""",
    ),
    Edit(
        anchor='title=f"decoder block {layer + 1}, mean over heads"',
        old="plt.show()",
        new="""\
block_maps = [w[0].mean(dim=0) for w in cross]  # per block: (T, S)
eos = key_labels.index("</s>")
alt = (
    f"Cross-attention of the decoder rows {' '.join(query_labels)} over the source "
    f"{' '.join(key_labels)}, mean over heads. "
    + "; ".join(
        f"Block {b + 1}: the largest weight of a row is {m.amax(-1).mean():.2f} on "
        f"average, {m[:, eos].mean():.2f} on </s>"
        for b, m in enumerate(block_maps)
    )
    + f". Over the held-out sentences block 2 puts {run.alignment[1]:.0%} of its "
    f"weight on the aligned source word, block 1 {run.alignment[0]:.0%}."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor="def show_step(step):",
        old="    return fig",
        new="""\
    likeliest = ", ".join(
        f"{task.tokens[t]} {p:.2f}"
        for t, p in zip(top.indices.tolist(), top.values.tolist(), strict=True)
    )
    alt = (
        f"Step {step}, after '{' '.join(query_labels[:step])}'. Left: block "
        f"{sharpest + 1}'s cross-attention over the source words, the largest weight, "
        f"{row.max():.2f}, on '{key_labels[row.argmax()]}'. Right: the three "
        f"likeliest next tokens: {likeliest}."
    )
    return figure_view(fig, alt=alt)""",
    ),
    Edit(
        anchor="linked_views([step]",
        old="lambda k: figure_view(show_step(k))",
        new="show_step",
    ),
]


EDITS["06_variants.ipynb"] = [
    Edit(
        anchor='"encoder-decoder (T5): cross-attention": (',
        old="plt.show()",
        new="""\
allowed = "; ".join(
    f"{title}, {int(mask.sum())} of {mask.numel()} query-key pairs allowed"
    for title, (mask, _, _) in masks.items()
)
alt = (
    f"Which tokens may attend to which, in {' '.join(tokens)}: {allowed}. BERT "
    f"lets every token see every other, GPT each token only itself and the tokens "
    f"before it, and T5's decoder tokens {' '.join(out_tokens)} see every source "
    f"token."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='ax.set_title("Three objectives, the same batches")',
        old="plt.show()",
        new="""\
ends = "; ".join(
    f"{name} ({objectives[name]}) from {sum(h['loss'][:10]) / 10:.1f} to "
    f"{sum(h['loss'][-10:]) / 10:.1f}"
    for name, h in run.histories.items()
)
alt = (
    f"Training loss (nats, mean of 10 steps) of the three models over {STEPS} "
    f"steps on the same batches: {ends}. T5's falls the most, by {drop['T5']:.1f} "
    f"nats; the unigram line is at {torch.tensor(base['unigram_ppl']).log():.2f}."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='"top-p 0.5": top_p_filter(z, 0.5).softmax(-1),',
        old="plt.show()",
        new="""\
kept = {name: int((p > 0).sum()) for name, p in views.items()}
top = {name: p[order[0]].item() for name, p in views.items()}
alt = (
    f"Probabilities of the 15 likeliest next tokens after "
    f"'{tok.decode(prompt[0])}', under four rules. At temperature 1 the top token "
    f"'{labels[0].replace('▁', ' ').strip()}' gets {top['temperature 1']:.2f}; "
    f"temperature 0.5 sharpens it to {top['temperature 0.5']:.2f}; top-k 5 keeps "
    f"{kept['top-k 5']} tokens and gives it {top['top-k 5']:.2f}; top-p 0.5 keeps "
    f"{kept['top-p 0.5']} and gives it {top['top-p 0.5']:.2f}."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='title="GPT, block 1: causal"',
        old="plt.show()",
        new="""\
bert_map, gpt_map = bert_weights[0][0].mean(0), gpt_weights[0].mean(0)  # (T, T)
alt = (
    f"Block 1's attention weights, mean over heads, on the {sent.shape[1]} tokens of "
    f"'{tok.decode(sent[0])}'. BERT's map fills both triangles: "
    f"{bert_map.triu(1).sum() / bert_map.sum():.0%} of its weight is on later "
    f"tokens. GPT's upper triangle is empty: "
    f"{gpt_map.triu(1).sum() / gpt_map.sum():.0%} of its weight is on later tokens."
)
show(fig, alt=alt)""",
    ),
]


EDITS["07_complexity.ipynb"] = [
    Edit(
        anchor='title="Peak memory, one head, d = 64"',
        old="plt.show()",
        new="""\
mib = {name: [s / 2**20 for s in sizes] for name, sizes in peak.items()}
alt = (
    f"Left: peak memory against the sequence length, log-log. The readable "
    f"attention grows as T^{slopes['readable']:.2f}, along the T² guide, from "
    f"{mib['readable'][0]:.2f} MiB at T = {lengths[0]} to {mib['readable'][-1]:.2f} "
    f"MiB at T = {lengths[-1]}; the fused kernel as T^{slopes['fused']:.2f}, to "
    f"{mib['fused'][-1]:.2f} MiB. Right: time on this CPU; at T = {lengths[-2]} the "
    f"readable attention takes {1000 * seconds['readable'][-1]:.0f} ms, the fused "
    f"kernel {1000 * seconds['fused'][-1]:.0f} ms."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='"sliding window, w = 8": sliding_window_mask(t, 8),',
        old="plt.show()",
        new="""\
allowed = "; ".join(
    f"{title}, {int(mask.sum()):,} of {t * t:,} pairs"
    for title, mask in patterns.items()
)
alt = (
    f"Three attention masks on {t} positions, allowed pairs dark: {allowed}. Full "
    f"causal is the whole lower triangle; the sliding window a band of width 8 "
    f"along the diagonal; block-sparse the blocks of 8 on and just below the "
    f"diagonal, plus the first block's columns, which every query sees."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor="def draw_pattern(name, t):",
        old="    return figure_view(fig)",
        new="""\
    trends = "; ".join(
        f"{other} from {100 * row[0]:.0f}% to {100 * row[-1]:.0f}%"
        for other, row in shares.items()
    )
    alt = (
        f"Left: the {name} mask at T = {t}, {int(mask.sum()):,} of {t * t:,} pairs "
        f"allowed ({mask.float().mean():.0%}). Right: the allowed share of T² as T "
        f"doubles from {widget_lengths[0]} to {widget_lengths[-1]}: {trends}."
    )
    return figure_view(fig, alt=alt)""",
    ),
]


EDITS["08_beyond_text.ipynb"] = [
    Edit(
        anchor="heads_study = run_heads(model, tokenizer, seed=0)",
        old="plt.show()",
        new="""\
peaks = {name: divmod(int(t.argmax()), cfg.n_heads) for name, t in scores.items()}
panels = "; ".join(
    f"on {name}, at most {table.max():.2f} (L{peaks[name][0]}H{peaks[name][1]}), "
    f"mean {table[0].mean():.2f} in layer 0 and {table[1:].mean():.2f} in layers 1-5"
    for name, table in scores.items()
)
alt = (
    f"Mean attention weight of each of the {cfg.n_layers} x {cfg.n_heads} heads "
    f"(rows: layers, columns: heads) on four targets: {panels}. One head "
    f"of layer 0 looks at the previous token; the later layers park much of their "
    f"weight on [CLS]."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor="def draw_head(head_name, sentence):",
        old="    return figure_view(fig)",
        new="""\
    words = [i for i, h in enumerate(p.heads) if h >= 0]  # words with a head
    on_head = sum(int(weights[i + 1].argmax()) == p.heads[i] + 1 for i in words)
    alt = (
        f"Attention of {head_name} on '{sentence}' ([CLS], {len(p.words)} words, "
        f"[SEP]); circles mark each word's syntactic head. {on_head} of {len(words)} "
        f"words put their largest weight on their head; the mean weight on [CLS] is "
        f"{weights[:, 0].mean():.2f}."
    )
    return figure_view(fig, alt=alt)""",
    ),
    Edit(
        anchor='label="share of the attention weight"',
        old="plt.show()",
        new="""\
alt = (
    f"Share on [CLS] in layers 0 to {cfg.n_layers - 1}: of the attention weight "
    f"{', '.join(f'{s:.2f}' for s in weight_share.tolist())}; of the weighted "
    f"vectors' norm {', '.join(f'{s:.2f}' for s in norm_share.tolist())}. In layers "
    f"1-5 [CLS] takes {weight_share[later].mean():.2f} of the weight but only "
    f"{norm_share[later].mean():.2f} of the norm: the weight parked there adds "
    f"little to the output."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor="efficiency = run_sample_efficiency(*topic_feats, seed=0)",
        old="plt.show()",
        new="""\
leads = [p - s for p, s in zip(efficiency.pretrained, efficiency.scratch, strict=True)]
alt = (
    f"Test accuracy against the number of labelled sentences "
    f"({', '.join(map(str, efficiency.label_counts))}), log scale. The pretrained "
    f"encoder with a linear probe reaches "
    f"{', '.join(f'{a:.2f}' for a in efficiency.pretrained)}; the model trained "
    f"from scratch {', '.join(f'{a:.2f}' for a in efficiency.scratch)}; the "
    f"majority class is at {efficiency.majority:.2f}. Pretrained leads at every "
    f"count, by {min(leads):.2f} to {max(leads):.2f}, the gap narrowing with more "
    f"labels."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor='title="the same image as 16 tokens"',
        old="plt.show()",
        new="""\
inked = int((patches[0].sum(dim=-1) > 0).sum())
alt = (
    f"Left: training image 0, the digit {labels[0].item()}, 8 by 8 grey pixels. "
    f"Right: the same image as {patches.shape[1]} tokens of 2 x 2 = 4 pixels, one "
    f"column per patch, taken row by row; {inked} of the {patches.shape[1]} "
    f"patches hold ink."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor="def draw_digit(index, kind):",
        old="    return figure_view(fig)",
        new="""\
    row, col = divmod(int(grid.argmax()), grid.shape[1])
    inked = patchify(shown[index : index + 1], 2)[0].sum(dim=-1) > 0  # (16,)
    ink = "holds ink" if inked[int(grid.argmax())] else "is blank"
    alt = (
        f"Left: test image {index}, the digit {test_labels[index].item()}. Right: "
        f"the {title} over its 4 x 4 patches; the largest weight, {grid.max():.2f}, "
        f"is on the patch in row {row + 1}, column {col + 1}, which {ink}."
    )
    return figure_view(fig, alt=alt)""",
    ),
    Edit(
        anchor='ax_n.plot(params, losses, **gpt, label="GPT (held-out loss)")',
        old="plt.show()",
        new="""\
alt = (
    f"Held-out loss of {len(params)} GPT sizes against the non-embedding parameters "
    f"N (left) and the training compute C (right), log-log: the loss falls from "
    f"{losses[0]:.2f} at N = {params[0]:,} to {losses[-1]:.2f} at N = "
    f"{params[-1]:,}, below the unigram model's {scaling_run.unigram_loss:.2f}, "
    f"close to the fitted power law {fit.a:.2f} N^-{fit.b:.3f} "
    f"(R² = {fit.r_squared:.3f})."
)
show(fig, alt=alt)""",
    ),
    Edit(
        anchor="p_token = torch.exp(",
        old="plt.show()",
        new="""\
p_at = {n: p_token[(n_models - n).abs().argmin()].item() for n in (1e9, 1e12)}
alt = (
    f"Score against the parameters N from 1 million to 1 trillion, log scale, for a "
    f"per-token accuracy p that rises smoothly with N: the exact match of 1 token "
    f"follows p, of 5 tokens p^5 and of 20 tokens p^20, each later and steeper. At "
    f"N = 1e+09 p is {p_at[1e9]:.2f} but the 20-token exact match only "
    f"{p_at[1e9] ** 20:.3f}; at 1e+12 they are {p_at[1e12]:.2f} and "
    f"{p_at[1e12] ** 20:.3f}."
)
show(fig, alt=alt)""",
    ),
]


def missing_alts(nb) -> list[str]:
    """What an executed notebook shows without a text alternative: image outputs
    with no ``alt`` in their metadata, and widget views (stored ``<img>``) with none.
    An empty alt (a decorative figure) counts as present."""
    missing = []
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if "image/png" in output.get("data", {}):
                if "alt" not in output.get("metadata", {}).get("image/png", {}):
                    missing.append(f"cell {i}: an image output without alt")
    state = nb.metadata.get("widgets", {})
    state = state.get("application/vnd.jupyter.widget-state+json", {})
    for model_id, model in state.get("state", {}).items():
        if model.get("model_name") == "ImageModel":  # ipywidgets.Image: no alt
            missing.append(f"widget {model_id}: an Image widget, which has no alt")
        value = model.get("state", {}).get("value")
        if isinstance(value, str):
            for img in re.findall(r"<img\b[^>]*>", value):
                if not re.search(r'\salt="', img):
                    missing.append(f"widget {model_id}: an <img> without alt")
    return missing


def edit_chapter(path: Path, edits: list[Edit]):
    """The chapter's notebook with its edits made (in memory), and their count."""
    nb = nbformat.read(path, as_version=4)
    where = path.name
    made = int(add_plot_import(nb, "show", where))
    for i, edit in enumerate(edits):
        made += apply_edit(nb, edit, f"{where}, edit {i} ({edit.anchor!r})")
    return nb, made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="report the edits to make, write nothing"
    )
    parser.add_argument(
        "--outputs",
        action="store_true",
        help="after execution: list the images and widget views without an alt",
    )
    parser.add_argument("chapters", nargs="*", help="file names (default: all)")
    args = parser.parse_args()
    names = args.chapters or list(EDITS)
    missing = [n for n in names if n not in EDITS]
    if missing:
        raise SystemExit(f"no edits for {missing}; known: {list(EDITS)}")
    if args.outputs:
        problems = {n: missing_alts(nbformat.read(BOOK / n, 4)) for n in names}
        for name, found in problems.items():
            print(f"{name}: {len(found)} without alt", *found, sep="\n  ")
        return 1 if any(problems.values()) else 0
    # Every chapter's edits are checked before any notebook is written
    edited = {name: edit_chapter(BOOK / name, EDITS[name]) for name in names}
    verb = "to make" if args.check else "made"
    for name, (nb, made) in edited.items():
        if made and not args.check:
            nbformat.write(nb, BOOK / name)
        print(f"{name}: {made} edits {verb} ({len(EDITS[name]) + 1} in all)")
    return 1 if args.check and any(made for _, made in edited.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
