"""Concept checks for Chapter 2: Query, key, value: scaled dot-product attention."""

from __future__ import annotations

from . import Question

CHECKS = {
    "2.1": (
        Question(
            prompt=(
                "In the fruit look-up of §2.1 (one-hot keys, prices 3, 1, 8), the "
                "query 2 × (banana + cherry) gave the price 4.40. What price does the "
                "sharper query 10 × (banana + cherry) give?"
            ),
            options=("4.50", "1.00", "9.00", "4.00"),
            answer=0,
            why=(
                "Banana and cherry both score 10, apple 0: the two tied keys share the "
                "weight (0.49999 each, apple 0.00002), so the price tends to "
                "(1 + 8) / 2 = 4.50. Sharpening concentrates the weight on the best "
                "keys, and a tie stays a tie.",
                "A sharp query becomes a hard look-up only when one key scores "
                "highest. Here banana and cherry tie, and the softmax has no 'take "
                "the first' rule (that would be argmax).",
                "The weights always sum to 1, so the output is a weighted average of "
                "the prices, never their sum: it cannot exceed the largest price, 8.",
                "4.00 is the plain average of all three prices, what the flat query "
                "0 × banana gives. Multiplying the query by 10 moves the weights "
                "away from uniform, not towards it.",
            ),
        ),
    ),
    "2.2": (
        Question(
            prompt=(
                "`q`, `k` and `v` have shapes (2, 7, 16), (2, 10, 16) and "
                "(2, 10, 32). What does `scaled_dot_product_attention(q, k, v)` "
                "return?"
            ),
            options=(
                "output (2, 7, 32), weights (2, 7, 10)",
                "output (2, 10, 32), weights (2, 10, 7)",
                "output (2, 7, 16), weights (2, 7, 10)",
                "a ValueError: the widths 16 and 32 differ",
            ),
            answer=0,
            why=(
                "The weights have one row per query and one column per key, "
                "(…, T_q, T_k); the output has one row per query and the width of "
                "the values, (…, T_q, d_v). The leading 2 rides along as a batch "
                "dimension.",
                "Attention moves information from the key/value positions to the "
                "query positions, so there is one output row per query (7), not per "
                "key (10).",
                "The output is a blend of value vectors, so it has their width "
                "d_v = 32. The width d_k = 16 only serves to compare queries with "
                "keys and disappears in the product QKᵀ.",
                "Only queries and keys must share a width (they meet in a dot "
                "product), and keys and values must share a length. Values may have "
                "any width d_v.",
            ),
        ),
    ),
    "2.3": (
        Question(
            prompt=(
                "A head has d_k = 1024 and unit-variance queries and keys, and "
                "someone deletes the `/ math.sqrt(d_k)`. What does the softmax over "
                "16 keys do at initialisation?"
            ),
            options=(
                "Nearly one-hot on an arbitrary key, with a vanishing gradient",
                "Nothing changes: the softmax ignores the scale of its input",
                "Nearly uniform weights: over 1024 terms the noise averages out",
                "The scores overflow and the weights become NaN",
            ),
            answer=0,
            why=(
                "The unscaled scores have variance d_k = 1024 (standard deviation "
                "32), so one key usually wins by a wide margin. §2.3 measured 77% of "
                "the rows with a weight above 0.99, and a typical gradient to q about "
                "1,000× smaller (0.00023 against 0.28).",
                "The softmax ignores a constant added to all scores, not a factor "
                "multiplying them: multiplying the scores by c acts as a temperature "
                "1/c and sharpens the weights.",
                "A sum of 1024 independent terms grows rather than averages: its "
                "variance is 1024. Nearly uniform weights are what dividing by d_k "
                "instead of √d_k would give (Exercise 2.3).",
                "Scores of a few hundred at most are tiny for float32 (largest about "
                "3.4 × 10³⁸), and `torch.softmax` subtracts each row's maximum "
                "before exponentiating. The failure is saturation, not overflow.",
            ),
        ),
    ),
    "2.6": (
        Question(
            prompt=(
                "A sequence holds 3 real tokens followed by 2 pads, and "
                "`mask = causal_mask(5) & torch.tensor([True, True, True, False, "
                "False])`. How many query rows have no allowed key at all?"
            ),
            options=(
                "0",
                "2: the pads' rows, 3 and 4",
                "1: row 0, which may see only itself",
                "1: row 4, the last one",
            ),
            answer=0,
            why=(
                "Every row may see key 0, a real token. Fully masked rows come with "
                "left padding: pads at positions 0 and 1 may see only pads, as in the "
                "example of §2.6.",
                "A padding mask hides the pads as keys (columns), not as queries: "
                "rows 3 and 4 still see the 3 real tokens. Their outputs are simply "
                "never used.",
                "One allowed key is enough: row 0 puts weight 1 on key 0, a real "
                "token. A row is empty only when every key it may see is blocked.",
                "The last row lost every key only when the `~` was forgotten with "
                "`nn.MultiheadAttention` (an 'attend only to the future' mask). Here "
                "row 4 sees keys 0 to 2.",
            ),
        ),
        Question(
            prompt=(
                "`scores` is float16 (as under autocast) and one row of `mask` allows "
                "no key. Which recipe gives masked keys zero weight, with no error "
                "and no NaN anywhere?"
            ),
            options=(
                "`torch.softmax(scores.masked_fill(~mask, -1e9), -1)`",
                "`torch.softmax(scores.masked_fill(~mask, float('-inf')), -1)`",
                "fill `-1e9` in float32, cast with `.half()`, then softmax",
                "in float32: fill `-inf`, softmax, zero the empty rows; cast back",
            ),
            answer=3,
            why=(
                "`-1e9` does not exist in float16, whose largest finite value is "
                "65,504: `masked_fill` raises a RuntimeError (overflow), as §2.6 "
                "showed.",
                "Masked keys get weight 0, but the row with no allowed key computes "
                "exp(-∞) / Σ exp(-∞) = 0/0 = NaN, and in the next layer the NaN "
                "spreads to every token.",
                "No error this time, but `-1e9` turns into -∞ when cast to float16, so "
                "the empty row is 0/0 = NaN again: the silent form of the bug.",
                "In float32 -∞ is safe: masked keys get exactly 0, the empty row is "
                "set to zeros instead of NaN, and the weights return to float16. "
                "The package does this, with float32's minimum as the fill value.",
            ),
        ),
    ),
}
