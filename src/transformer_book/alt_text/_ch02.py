"""Chapter 2's figures: attention."""

from __future__ import annotations

import math

from ._registry import figure


@figure("attention_score_scaling")
def _score_scaling(d_ks, raw, scaled):
    """§2.3: score variance, largest weight and softmax gradient against d_k."""
    return (
        f"Three panels against d_k from {d_ks[0]} to {d_ks[-1]}, unscaled against "
        f"scaled scores. The variance of the unscaled scores grows with d_k, to "
        f"{raw[-1]['var']:.0f}, while the scaled ones stay near "
        f"{scaled[-1]['var']:.2f}; the mean largest of 16 weights climbs to "
        f"{raw[-1]['top']:.2f} unscaled but stays near {scaled[-1]['top']:.2f} scaled; "
        f"the median softmax gradient norm falls to {raw[-1]['jac']:.2g} unscaled "
        f"while the scaled one stays at {scaled[-1]['jac']:.2f}."
    )


@figure("attention_embeddings")
def _embeddings(X, tokens, features):
    """§2.4: the hand-made token embeddings, one row per token."""
    rows_described = "; ".join(
        f"「{t}」 "
        + ", ".join(f"{f} {v:g}" for f, v in zip(features, row, strict=True) if v)
        for t, row in zip(tokens, X.tolist(), strict=True)
    )
    return (
        f"The hand-made embeddings, one row per token and one column per feature "
        f"(every entry not named is 0): {rows_described}."
    )


@figure("attention_random_vs_hand_made")
def _random_vs_hand_made(random_weights, bank_weights, tokens):
    """§2.4: self-attention maps with random and with hand-made projections."""
    balance = tokens.index("餘額")  # the boxed row
    top_balance = bank_weights[balance].topk(2)
    return (
        f"Two 6 by 6 self-attention maps of 銀行帳戶裡的餘額不足. With random "
        f"projections the weights are scattered without a pattern, from "
        f"{random_weights.min():.2f} to {random_weights.max():.2f}; the boxed row "
        f"「餘額」 stays between {random_weights[balance].min():.2f} and "
        f"{random_weights[balance].max():.2f}, near uniform ({1 / 6:.2f}). With the "
        f"hand-made projections the boxed row 「餘額」 puts "
        f"{top_balance.values[0]:.2f} on 「{tokens[top_balance.indices[0]]}」 and "
        f"{top_balance.values[1]:.2f} on 「{tokens[top_balance.indices[1]]}」, "
        f"「不足」 puts {bank_weights[tokens.index('不足')].max():.2f} on "
        f"「{tokens[bank_weights[tokens.index('不足')].argmax()]}」, and the first "
        f"four rows are uniform."
    )


@figure("attention_temperatures")
def _temperatures(rows, temperatures, tokens):
    """§2.4: 「餘額」's weights at five softmax temperatures."""
    return (
        f"「餘額」's weights over the six keys at temperatures τ = {temperatures[0]} "
        f"to {temperatures[-1]}: at τ = {temperatures[0]} almost all the weight, "
        f"{rows[0].max():.2f}, is on 「{tokens[rows[0].argmax()]}」; at "
        f"τ = {temperatures[-1]} the weights flatten to between {rows[-1].min():.2f} "
        f"and {rows[-1].max():.2f}, near uniform ({1 / 6:.2f})."
    )


@figure("attention_temperature_view")
def _temperature_view(query, temperature, w, entropy, tokens):
    """§2.4's widget: one query's weights over the six keys at one temperature."""
    if w.max() - w.min() < 1e-6:  # a zero query: every key scores the same
        spread = f"every key gets the same weight, {w.max():.2f}"
    else:
        spread = f"the largest, {w.max():.2f}, is on 「{tokens[w.argmax()]}」"
    return (
        f"Attention weights of 「{query}」 over the six keys at τ = {temperature}: "
        f"{spread}; entropy {entropy:.2f} nats (uniform {math.log(6):.2f})."
    )


@figure("attention_lookup_loss")
def _lookup_loss(histories, n_values):
    """§2.5: training loss of the look-up models, attention against averaging."""
    final_loss = {name: h["loss"][-1] for name, h in histories.items()}
    attention_final = (
        "below 0.1"
        if final_loss["attention"] < 0.1
        else f"{final_loss['attention']:.1f}"
    )
    n_steps = len(histories["attention"]["step"])
    return (
        f"Training loss of the two look-up models over {n_steps} steps, log scale: "
        f"attention's falls from "
        f"{histories['attention']['loss'][0]:.1f} nats to {attention_final}, uniform "
        f"averaging's levels off near {final_loss['uniform average']:.1f}, below the "
        f"guessing line at log 16 = {math.log(n_values):.2f}."
    )


@figure("attention_lookup_weights")
def _lookup_weights(test, test_weights, n_rows):
    """§2.5: the trained attention weights of the first test rows over their items."""
    on_true = [test_weights[i, test.position[i]].item() for i in range(n_rows)]
    return (
        f"The trained attention weights of {n_rows} test rows over their 8 items: "
        f"in each row nearly all the weight is on the boxed true item "
        f"({', '.join(f'{w:.2f}' for w in on_true)}); the other items get almost none."
    )


@figure("attention_masks")
def _masks(to_pads, w_pad, w_causal, tokens):
    """§2.6: attention maps with no mask, a padding mask and a causal mask."""
    return (
        f"Three attention maps. No mask: in 「帳戶 餘額 不足」 padded to 6 tokens, "
        f"「餘額」 puts {to_pads[0]:.0%} of its weight on the three pads. Padding "
        f"mask: the pad columns get {w_pad[1, :, 3:].max():.0%}, the real tokens "
        f"share all the weight. Causal mask: every weight above the diagonal is "
        f"{w_causal.triu(1).max():.0f}, so the first token 「{tokens[0]}」 puts "
        f"{w_causal[0, 0]:.2f} on itself."
    )


@figure("attention_cross")
def _cross(cross_weights, english, tokens):
    """§2.7: cross-attention of English queries over the Chinese sentence."""
    attended = "; ".join(
        f"{word} puts {row.max():.2f} on 「{tokens[row.argmax()]}」"
        for word, row in zip(english, cross_weights, strict=True)
    )
    return (
        f"Cross-attention weights, English queries over the Chinese keys: {attended}."
    )
