"""Concept checks for Chapter 4: Positional encodings."""

from __future__ import annotations

from . import Question

CHECKS = {
    "4.1": (
        Question(
            prompt=(
                "In §4.1's `self_attend` without positions, `out_a` is the (3, 16) "
                "output for 我愛你 and `out_b` the one for 你愛我. Which row of "
                "`out_a` equals `out_b[0]`, the output for 你?"
            ),
            options=(
                "`out_a[0]`: the output at the same position, 0",
                "`out_a[2]`: the output for the same character, 你",
                "None of them: 你's neighbours moved, so its output changed",
                "Every row: all three outputs average the same three values",
            ),
            answer=1,
            why=(
                "Without positions, position 0 means nothing to the layer. In 我愛你 "
                "it holds 我, whose query, key and value differ from 你's, so its "
                "output differs.",
                "A token's output depends on its own query and on the set of keys "
                "and values, the same three characters in both sentences. Permuting "
                "the inputs permutes the outputs, so 你's output is the same wherever "
                "it stands (the chapter measured a difference of 0.000).",
                "To attention the other tokens form a set: the softmax runs over all "
                "keys, and their order never enters the weighted sum. Only adding "
                "positions changes that (0.033 for 你 in the chapter).",
                "The weights differ per row: each token's own query scores the keys "
                "differently, so the three rows differ from one another. What is "
                "exact is each row's match across the two sentences.",
            ),
        ),
    ),
    "4.2": (
        Question(
            prompt=(
                "Every row of `sinusoidal_encoding(100, 512)` has the same length. "
                "What is the Euclidean norm of each row?"
            ),
            options=("1.000", "16.000", "22.627", "It grows with the position p"),
            answer=1,
            why=(
                "The table is not normalised. Each of the 256 pairs is a point "
                "(sin, cos) on the unit circle, and the pairs' squared lengths add up.",
                "Each pair has sin² a + cos² a = 1, and there are 512 / 2 = 256 "
                "pairs, so the norm is √256 = 16 at every position (√32 ≈ 5.657 for "
                "d_model = 64, as the chapter printed).",
                "√512 would need all 512 entries to be ±1. A sine and a cosine of the "
                "same angle share one unit of squared length, so the squares sum to "
                "256, not 512.",
                "The position enters only inside sin and cos, which stay between −1 "
                "and 1. Each pair just turns around its circle, so the length never "
                "changes.",
            ),
        ),
    ),
    "4.5": (
        Question(
            prompt=(
                "With `apply_rope`, the chapter's q = (1, 0.3) and k = (0.6, 0.8) "
                "score 0.9756 with the query at position 2 and the key at position 1. "
                "Which placement of the same q and k also scores 0.9756?"
            ),
            options=(
                "query at 12, key at 11",
                "query at 1, key at 2",
                "query at 4, key at 2",
                "query at 0, key at 0",
            ),
            answer=0,
            why=(
                "The score is qᵀ R_(n−m) k, a function of the offset n − m alone. "
                "Here n − m = 11 − 12 = −1, the same offset as for positions 2 and 1.",
                "Swapping the positions flips the offset to +1, and the score becomes "
                "−0.068: RoPE scores tell before from after (Exercise 4.4).",
                "Doubling both positions keeps their ratio, but RoPE depends on the "
                "difference: 2 − 4 = −2 is another offset, and the score is 0.214.",
                "Position 0 is the identity, so this is the plain q·k = 0.84: offset "
                "0, not −1.",
            ),
        ),
        Question(
            prompt=(
                "Generating with a key-value cache: the keys of tokens 0..39 were "
                "rotated at their positions, and the new token 40 gets its query from "
                "`q = apply_rope(x_new)`, where `x_new` has shape (B, H, 1, Dh). What "
                "goes wrong?"
            ),
            options=(
                "Nothing: RoPE scores depend on offsets, not on positions",
                "T = 1, so the query is rotated as position 0, not 40",
                "A single token cannot be rotated alone; re-rotate all 41",
                "The cached values must be rotated to position 40 as well",
            ),
            answer=1,
            why=(
                "The offset comes out right only if both rotations use true "
                "positions. A query rotated as position 0 sees the key of token 39 at "
                "offset +39 instead of −1, as if it lay 39 tokens ahead.",
                "`positions` defaults to arange(T), and here T = 1: the angle is 0 "
                "and the query is not rotated at all. Pass "
                "`positions=torch.tensor([40])`, as the chapter did for the last 8 "
                "tokens.",
                "A token's rotation depends only on its own position: the chapter "
                "checked that rotating the last 8 tokens with positions 40..47 "
                "equals slicing the full result.",
                "RoPE rotates only the queries and the keys. The values are never "
                "rotated, so the cache keeps them as they are.",
            ),
        ),
    ),
    "4.7": (
        Question(
            prompt=(
                "Make all content scores equal, apply a causal mask, and let ALiBi's "
                "steepest head of 8 (slope 1/2) alone set the weights. At T = 16 the "
                "last query puts 0.239 on the previous token. What does it put there "
                "at T = 64?"
            ),
            options=(
                "0.239",
                "0.060",
                "It cannot be known: distances over 15 were never trained",
            ),
            answer=0,
            why=(
                "A key d tokens back gets a weight proportional to e^(−d/2). The 48 "
                "new keys all lie 16 or more back, and together they take under 0.1% "
                "of the weight. However long the sequence, far keys stay negligible: "
                "this is why ALiBi stayed at 95% or more at 4L.",
                "Four times the keys dilute the weight only under a flat bias, as "
                "with T5's far bucket, which gives every key 12 or more back the same "
                "bias. ALiBi's penalty keeps growing with the distance.",
                "ALiBi learns nothing: its bias −m·(i − j) is a fixed formula, "
                "defined at every distance. Untrained parts are the problem of "
                "learned schemes, such as the learned table's rows 16 and beyond.",
            ),
        ),
    ),
}
