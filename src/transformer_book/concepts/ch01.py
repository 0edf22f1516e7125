"""Concept checks for Chapter 1: Why Transformers: the limits of RNNs, measured."""

from __future__ import annotations

from . import Question

CHECKS = {
    "1.2": (
        Question(
            prompt=(
                "Batch 1, D = H = 64: the sequence grows from T = 2048 to T = 4096 "
                "tokens. By about what factor does the arithmetic (floating-point "
                "operations) of each layer grow?"
            ),
            options=(
                "`nn.RNN` ×2, self-attention ×2",
                "`nn.RNN` ×2, self-attention ≈×4",
                "`nn.RNN` ×4, self-attention ×2",
                "`nn.RNN` ×2, self-attention ×1: it runs in parallel",
            ),
            answer=1,
            why=(
                "Attention does not read each token once: every query is compared "
                "with all T keys, so its two (T, T) products cost about 4T²D, which "
                "quadruples when T doubles.",
                "The RNN does T steps of the same size, about 2T(DH + H²): 34 → 67 "
                "million operations. Attention's 4T²D term dominates: 1.14 → 4.43 "
                "billion, almost four times as many. On the machine that built this "
                "page, the timings of §1.2 grew alike.",
                "This confuses depth with work. The RNN's steps are sequential, but "
                "there are only T of them, all the same size, so its work is linear "
                "in T; it is attention whose work is quadratic.",
                "Parallel is not free. Attention's depth does not grow with T, but "
                "its work grows as T²; one CPU core has little parallel hardware to "
                "absorb it, which is why, in the chapter's CPU timings, attention fell "
                "behind `nn.RNN` at long lengths.",
            ),
        ),
    ),
    "1.3": (
        Question(
            prompt=(
                "A linear RNN (no tanh) has W_hh = [[0.5, 0], [0, −1.2]]. How does "
                "the norm of ∂h_T/∂h_(T−k) = W_hhᵏ behave as k grows large?"
            ),
            options=(
                "It vanishes: the largest eigenvalue, 0.5, is below 1",
                "It vanishes like 0.6ᵏ: |det W_hh| = 0.6 sets the rate",
                "It explodes like 1.2ᵏ, with a sign that flips at every step",
                "It stays bounded: the sign flips of −1.2 cancel out",
            ),
            answer=2,
            why=(
                "The long run is set by the spectral radius, the largest |λ|, not "
                "the largest λ. The eigenvalue −1.2 has modulus 1.2, so "
                "ρ(W_hh) = 1.2.",
                "The determinant, the product of the eigenvalues, measures how "
                "volumes shrink, not how the longest direction grows: one direction "
                "can explode while another vanishes faster.",
                "W_hhᵏ = diag(0.5ᵏ, (−1.2)ᵏ), so the norm grows like ρᵏ with "
                "ρ = max |λ| = 1.2: about 5.6 × 10⁴ at k = 60. The sign alternates; "
                "the size only grows.",
                "A flipping sign changes the gradient's direction, not its size: "
                "for this diagonal matrix the entry is (−1.2)ᵏ, whose modulus 1.2ᵏ "
                "keeps growing.",
            ),
        ),
        Question(
            prompt=(
                "The chapter rescales its tanh RNN's W_hh (PyTorch's default, "
                "ρ ≈ 0.65) to spectral radius exactly 1. What does the gradient of "
                "h_T with respect to an input 99 steps back do?"
            ),
            options=(
                "It stays about as large as 1 step back: ρ = 1 is the balance point",
                "It still vanishes, by about ×0.7 per step",
                "It explodes: the tanh factors undo cancellations, as for ρ = 0",
                "It vanishes as fast as at ρ ≈ 0.65: the tanh sets the rate",
            ),
            answer=1,
            why=(
                "ρ = 1 balances only a linear RNN, whose Jacobian is W_hh at every "
                "step. The tanh multiplies each step by diag(1 − h²), with entries "
                "between 0 and 1, and here that shrinks the product further.",
                "Each factor diag(1 − h²) W_hh is smaller than W_hh alone for this "
                "matrix: the chapter measured ×0.69 per step and a norm of about "
                "4.6 × 10⁻¹⁶ at distance 99. The gradient starts to grow only near "
                "ρ = 2.",
                "The 2 × 2 counter-example was built for that: one unit saturated, "
                "one not, on a matrix whose powers cancel. PyTorch's random W_hh is "
                "far from it; in the sweep the tanh RNN stayed below the linear one.",
                "W_hh still matters: the sweep moved the per-step factor from ×0.49 "
                "at the default radius to ×0.69 at ρ = 1 and ×1.02 at ρ = 2.",
            ),
        ),
    ),
    "1.4": (
        Question(
            prompt=(
                "A recall sequence at distance 10 has the symbol first and `?` last. "
                "You swap the symbol with the filler just before `?`: the same "
                "tokens, but the symbol is now 1 step from the query. What do the "
                "logits of the attention classifier (no positional encoding) do?"
            ),
            options=(
                "They do not change (up to rounding)",
                "They get more confident: the symbol is now closer",
                "They get worse: the model learned to look 10 steps back",
                "They change a little: the weights now sit on other positions",
            ),
            answer=0,
            why=(
                "Without positions, each key and value depends only on its token's "
                "id. Permuting the tokens before the query permutes keys, values and "
                "weights together, and the weighted sum is the same: the chapter's "
                "shuffle test printed `True`. An LSTM's logits would change.",
                "Closeness means nothing to this model: with no positions, the same "
                "token 1 step back and 10 steps back gives the same key. Distance "
                "matters to the LSTM, not here.",
                "The model cannot look k steps back: it knows what a token is, not "
                "where it is. That is also why its accuracy did not depend on the "
                "distance.",
                "The weights do move to other positions, but each one moves with its "
                "own value vector, so the sum of weight × value over the same pairs "
                "is unchanged.",
            ),
        ),
    ),
    "1.5": (
        Question(
            prompt=(
                "Training on one sequence, D = 64, 4 heads: T grows from 1024 to "
                "2048. How does the memory autograd keeps for the backward pass "
                "change, for the readable attention and for the fused kernel?"
            ),
            options=(
                "readable ×4, fused ×4: same function, same memory",
                "readable ×4, fused ×2",
                "readable ×2, fused ×2: activations are kept per token",
                "readable ×4, fused unchanged, like an RNN's state",
            ),
            answer=1,
            why=(
                "The fused kernel computes the same output in tiles and never keeps "
                "the (T, T) matrix. Its time is still quadratic; its memory is not.",
                "The readable layer keeps its 4 × T² attention weights, 4 bytes each: "
                "16 MiB of the 17.00 MiB it keeps at T = 1024, and 64 MiB at T = 2048, "
                "four times as much. The fused kernel keeps queries, keys, values, "
                "output and one log-sum-exp per row, 1,040 bytes per token: about "
                "1 MiB at T = 1024 and 2 MiB at T = 2048.",
                "The readable attention keeps a weight for every pair of tokens, "
                "4 × T² numbers, which dominates from a few hundred tokens on; only "
                "the fused kernel is linear in T.",
                "Nothing that trains is O(1) in T: even the RNN keeps one state per "
                "step (256 bytes per token), and the fused kernel keeps its queries, "
                "keys, values and output for every token.",
            ),
        ),
    ),
}
