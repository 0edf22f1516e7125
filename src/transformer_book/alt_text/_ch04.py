"""Chapter 4's figures: positional encoding."""

from __future__ import annotations

import math

from ._registry import figure


@figure("position_word_order_maps")
def _word_order_maps(head_0, a, b):
    """§4.1: head 0's weights on 我愛你 and 你愛我, without and with positions."""
    order = [a.index(ch) for ch in b]  # b's characters, found in a
    reordered = {
        p: (head_0[a, p][order][:, order] - head_0[b, p]).abs().max().item()
        for p in (False, True)
    }
    return (
        f"Head 0's weights on {a} and {b}. Without positions, the map of {b} is the "
        f"map of {a} with rows and columns reordered (largest difference "
        f"{reordered[False]:.3f}): the model cannot tell who loves whom. With "
        f"positions added, the weights differ by up to {reordered[True]:.2f}."
    )


@figure("position_sinusoidal_table")
def _sinusoidal_table(omega, max_len, d_model):
    """§4.2: the sinusoidal table, and four of its dimensions across positions."""
    periods = ", ".join(
        f"{2 * math.pi / omega[dim // 2].item():.0f}" for dim in (0, 6, 16, 30)
    )
    return (
        f"Left: the sinusoidal table, {max_len} positions by {d_model} dimensions, "
        f"values between -1 and 1: the low dimensions alternate quickly along the "
        f"positions, the high ones barely change. Right: dimensions 0, 6, 16 and 30 "
        f"across the positions, with periods {periods} positions."
    )


@figure("position_dot_products")
def _dot_products(offsets, curves):
    """§4.2: PE(p) · PE(p + k) against the offset k, at three positions p."""
    curve = curves["p = 100"]
    lowest = curve.argmin().item()
    return (
        f"PE(p) · PE(p + k) against the offset k from {offsets[0]} to {offsets[-1]}, "
        f"for p = 100, 500 and 1000: the three curves coincide (within 1e-3). Each "
        f"peaks at {curve.max():.0f} at k = 0, is symmetric ({curve[110]:.2f} at "
        f"k = +10 and -10), and falls with |k| to {curve.min():.2f} at "
        f"k = ±{abs(offsets[lowest])}."
    )


@figure("position_pair_view")
def _pair_view(i, position, period, sin, cos):
    """§4.2's widget: one sin/cos pair across positions, and on the unit circle."""
    turns = position / period
    return (
        f"Left: sin and cos of pair {i} (dimensions {2 * i} and {2 * i + 1}) over "
        f"positions 0 to 100, period {period:.1f} positions, with position "
        f"{position} marked. Right: positions 0 to {position} as points on the unit "
        f"circle, {turns:.2f} turns; the arrow at position {position} points to "
        f"(sin, cos) = ({sin[position]:.2f}, {cos[position]:.2f})."
    )


@figure("position_t5_buckets")
def _t5_buckets(relative, buckets, positions):
    """§4.4: T5's bucket of each relative position, and bucket(j − i) on a grid."""
    both, causal = buckets["bidirectional (encoder)"], buckets["causal (decoder)"]
    before, after = relative < 0, relative > 0
    last_from = (-relative[before & (both == both[before].max())]).min()
    return (
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


@figure("position_rope_scores")
def _rope_scores(T, spread):
    """§4.5: one query-key pair scored at every two positions, RoPE against added."""
    return (
        f"Scores of one query and one key at every query position m and key position "
        f"n, {T} by {T}. With RoPE the score depends only on the offset n − m: each "
        f"diagonal holds a single value (spread below 1e-4), so the map is striped "
        f"parallel to the diagonal. With added sinusoidal encodings the stripes are "
        f"broken: along one diagonal the score varies by up to {spread:.2f}."
    )


@figure("position_alibi_bias")
def _alibi_bias(slopes, weights, T):
    """§4.6: ALiBi's bias per head, and the causal weights it gives alone."""
    return (
        f"Left: ALiBi's bias −m (i − j) against the distance for the 8 heads, "
        f"straight lines with slopes from m = 1/{1 / slopes[0]:.0f} to "
        f"1/{1 / slopes[-1]:.0f}. Middle and right: the causal weights from the bias "
        f"alone on {T} positions. Head 0 is local: its last query puts "
        f"{weights[0, -1, -1]:.2f} on its own token. Head 7 looks almost evenly: its "
        f"last query puts between {weights[7, -1].min():.2f} and "
        f"{weights[7, -1].max():.2f} on each of the {T} keys."
    )


@figure("position_extrapolation")
def _extrapolation(results, test_lengths, names, L, V):
    """§4.7: accuracy of the six schemes at the training length and beyond."""
    at_4l = sorted((accs[-1], names[p]) for p, accs in results.items())
    return (
        f"Accuracy at test lengths {', '.join(map(str, test_lengths))} of six models "
        f"trained on length {L} (chance {1 / V:.0%}): "
        + "; ".join(
            f"{names[p]} " + ", ".join(f"{a:.0%}" for a in accs)
            for p, accs in results.items()
        )
        + f". At {test_lengths[-1]} tokens {at_4l[-1][1]} leads, "
        f"{100 * (at_4l[-1][0] - at_4l[-2][0]):.0f} points ahead of {at_4l[-2][1]}."
    )


@figure("position_accuracy_by_position")
def _accuracy_by_position(result, names, L):
    """§4.7: accuracy at each position of sequences four times the training length."""
    spans = [(1, L), (L, 2 * L), (2 * L, 4 * L)]  # position ranges, end excluded
    return (
        f"Accuracy at each position of length-{4 * L} sequences, for models trained "
        f"on length {L}. Mean accuracy at positions "
        + ", ".join(f"{lo}-{hi - 1}" for lo, hi in spans)
        + ": "
        + "; ".join(
            f"{names[p]} " + ", ".join(f"{acc[lo:hi].mean():.0%}" for lo, hi in spans)
            for p, acc in result.by_position.items()  # in the order of SCHEMES
        )
        + f". Sinusoidal and learned fall to chance just past position {L}, RoPE past "
        f"{2 * L}, while ALiBi stays high to the end."
    )


@figure("position_t5_learned_bias")
def _t5_learned_bias(learned_bias, buckets, distance, L):
    """§4.7: the T5 bias each head learned, against the distance back."""
    flat_from = distance[buckets == buckets.max()].min()
    peaks = sorted(set(learned_bias.argmax(dim=0).tolist()))  # distance of each top
    others = learned_bias[[d for d in range(len(distance)) if d not in peaks]]
    return (
        f"The bias each of the 4 heads learned, against the distance back from 0 to "
        f"{len(distance) - 1}: the heads peak at distance "
        f"{' or '.join(map(str, peaks))}, up to {learned_bias.max():.1f}, and lie "
        f"between {others.min():.1f} and {others.max():.1f} at every other distance. "
        f"Every distance from {flat_from} on shares the last bucket, so the curves "
        f"are flat there, also past the training length {L}."
    )
