"""Concept checks for Chapter 3: Multi-head attention."""

from __future__ import annotations

from . import Question

CHECKS = {
    "3.1": (
        Question(
            prompt=(
                "As in §3.1, the values are one-hot token ids, and we compare the "
                "sequences `[0, 1, 2, 3]` and `[0, 3, 2, 1]` (the tokens at positions "
                "1 and 3 trade places). The attention weights are fixed. Which setup "
                "gives different outputs for the two sequences?"
            ),
            options=(
                "One head, weight 0.5 on position 1 and 0.5 on position 3",
                "Two such 0.5/0.5 heads, their outputs concatenated",
                "Two heads, one all on position 1, one all on position 3: added",
                "Two heads, one all on position 1, one all on position 3: concatenated",
            ),
            answer=3,
            why=(
                "Both sequences give `[0, 0.5, 0, 0.5]`: a weighted sum records which "
                "tokens were there and how much weight each got, not which was where.",
                "More heads do not help if each head still blends the two tokens: "
                "both halves of the concatenation are `[0, 0.5, 0, 0.5]` for either "
                "sequence.",
                "Each head fetches one token cleanly, but adding the two outputs "
                "makes the blend again (`[0, 1, 0, 1]` for both): the sum forgets "
                "which head brought which token.",
                "Each head has its own softmax and fetches one position, and the "
                "concatenation keeps the two answers in separate slots: "
                "`[0, 1, 0, 0, 0, 0, 0, 1]` against `[0, 0, 0, 1, 0, 1, 0, 0]`. "
                "W^O then gives each slot its own weights.",
            ),
        ),
    ),
    "3.3": (
        Question(
            prompt=(
                "`mha` is a copy of `torch_mha = nn.MultiheadAttention(8, 2, "
                "batch_first=True)` made by `from_torch`, and `causal = "
                "causal_mask(5)`. What does `torch_mha(x, x, x, attn_mask=causal)` "
                "give, on `x` of shape (2, 5, 8)?"
            ),
            options=(
                "The same output as `mha(x, mask=causal)`",
                "Each query sees only later keys; the last position's output is NaN",
                "A ValueError: PyTorch wants a float mask",
                "NaN everywhere: every query is blocked",
            ),
            answer=1,
            why=(
                "The two modules read a boolean mask in opposite ways: for the package "
                "True means may attend, for `nn.MultiheadAttention` True means "
                "blocked. It needs `attn_mask=~causal` to match.",
                "PyTorch blocks where the mask is True, on and below the diagonal, so "
                "query i may attend only to keys after i. The last query has no key "
                "left, and `nn.MultiheadAttention` gives NaN for such a row (the "
                "package would give zeros).",
                "`nn.MultiheadAttention` accepts boolean masks; it just reads True as "
                "blocked, so the call runs without an error and gives the wrong "
                "pattern.",
                "Only the diagonal and the past are blocked; the keys above the "
                "diagonal stay open, so only the last query, which has none, gets "
                "NaN.",
            ),
        ),
    ),
    "3.4": (
        Question(
            prompt=(
                "A `MultiHeadAttention` with d_model = 256 runs on T = 128 tokens. You "
                "change it from 4 heads to 16. What happens to its parameters, to the "
                "FLOPs of its matrix products, and to the number of attention weights "
                "per example?"
            ),
            options=(
                "Parameters, FLOPs and attention weights all stay the same",
                "Parameters and FLOPs stay the same; the attention weights grow 4×",
                "Parameters stay the same; FLOPs and attention weights grow 4×",
                "Parameters, FLOPs and attention weights all grow 4×",
            ),
            answer=1,
            why=(
                "Each head has its own T × T matrix of weights, so there are "
                "H · T² of them: 65,536 with 4 heads, 262,144 with 16.",
                "W^Q, W^K, W^V and W^O stay d_model × d_model, and the heads' products "
                "cost H · 2T²·d_h = 2T²·d_model whatever H is. Only the H · T² "
                "weights (and their softmax) grow, as §3.4 measured for 1 to 32 heads.",
                "The score products get 4× more heads but each head is 4× narrower "
                "(d_h = 64 → 16), so their FLOPs stay the same: §3.4 counted 0.671 "
                "GFLOP for every H at d_model = 512.",
                "Heads do not get their own full-width projections: one d_model × "
                "d_model projection is cut into H slices, so the parameter count "
                "(1,050,624 at d_model = 512 in §3.4) does not depend on H.",
            ),
        ),
    ),
    "3.6": (
        Question(
            prompt=(
                "The 2-head model of §3.2 has one head on t−1 and one on the partner. "
                "You switch off the head that attends to t−1. What do you predict for "
                "the two accuracies?"
            ),
            options=(
                "Both fall to about 50%: half of the heads are gone",
                "previous falls near chance (about 15%); partner stays near 100%",
                "Both stay near 100%: multi-head attention is robust to a failed head",
                "previous drops a few points; the partner head covers for it",
            ),
            answer=1,
            why=(
                "Each head does one job, and the read-out predicts each relation from "
                "its own head's output, so the loss is not shared out evenly.",
                "With exactly one head per relation there is no spare: §3.6 measured "
                "about 15% on previous (chance is 12.5%) and 100% on partner, and in "
                "every run one relation fell to at most 20%.",
                "Robustness comes from redundancy, from several heads doing the same "
                "job, as in the 8-head model. This model has no second head for t−1.",
                "The partner head attends to the partner, not to t−1, so it carries "
                "no copy of the previous value; nothing else can supply it.",
            ),
        ),
        Question(
            prompt=(
                "In a trained model, two heads of layer 0, A and B, both put about 0.9 "
                "of their weight on the previous token. Switching off A leaves both "
                "accuracies at 100%; switching off B costs 25 points of previous. "
                "What is the best explanation?"
            ),
            options=(
                "B carries the copy of the t−1 value that the read-out learnt to use",
                "Zero ablation is too blunt; mean ablation would reveal A's cost",
                "The task can be solved without the previous-token relation",
                "A's attention map is wrong: it does not really look at t−1",
            ),
            answer=0,
            why=(
                "Both heads fetch the same value, but the layers after them learnt "
                "to read it from B. §3.6 found such a pair: one twin could go for "
                "free, the other could not, and both together sent previous close "
                "to chance.",
                "Mean ablation removes the same information while keeping the next "
                "layer's input in range, and §3.6 found it never harsher than zero "
                "ablation: a head that is free to zero is free to mean-ablate too. "
                "A's information is not needed because B carries it.",
                "Predicting previous needs the value at t−1: switching off both "
                "previous-token heads sends that accuracy close to chance (12.5%).",
                "The map shows the weights the head really uses; it does look at t−1. "
                "Where a head looks does not say whether the model needs what it "
                "fetches: only an intervention such as ablation tells.",
            ),
        ),
    ),
}
