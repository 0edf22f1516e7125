"""Concept checks for Chapter 5: the full Transformer, encoder and decoder blocks."""

from __future__ import annotations

from . import Question

CHECKS = {
    "5.3": (
        Question(
            prompt=(
                "In the 32-block stack without residual connections, block 1's "
                "gradient was 48× smaller than block 32's. On the first AdamW "
                "step (lr 1e-3), how big is block 1's weight update compared with "
                "block 32's?"
            ),
            options=(
                "About 48× smaller, like its gradient",
                "About the same size",
                "About √48 ≈ 7× smaller",
                "About 48× larger: Adam boosts small gradients",
            ),
            answer=1,
            why=(
                "That is plain gradient descent, where the step is the learning rate "
                "times the gradient. AdamW divides each gradient by the root of its "
                "own running mean square, which cancels the gradient's scale.",
                "On the first step Adam's update of each weight is about lr × g/|g|, "
                "that is ±lr, whatever the size of g. The chapter measured it: the "
                "largest block update was less than twice the smallest. Whether the "
                "faint gradient points somewhere useful is another matter.",
                "Adam divides by the root of the mean of g², which scales like |g| "
                "itself, not like √|g|: the scale cancels completely instead of "
                "shrinking to its square root.",
                "Adam normalises the gradient's size, it does not invert it: a "
                "gradient 48× smaller and one 48× larger give steps of the same size.",
            ),
        ),
    ),
    "5.4": (
        Question(
            prompt=(
                "A `DecoderBlock` with the causal self-mask gets a 5-position input "
                "`y` (positions 0 to 4) and a fixed memory. You change only position "
                "3 of `y`. Which positions of the block's output change?"
            ),
            options=(
                "Only position 3",
                "Positions 3 and 4",
                "Positions 0 to 3",
                "All five positions",
            ),
            answer=1,
            why=(
                "Position 3's own output changes, but position 4 may attend to "
                "position 3 (j ≤ i), so its self-attention output changes too.",
                "The causal mask lets query i read keys j ≤ i: position 3 reads its "
                "changed input, position 4 reads it through self-attention, and "
                "positions 0 to 2 cannot see it. Cross-attention reads only the "
                "memory and the feed-forward network works on each position alone.",
                "That is the mask read the wrong way round: earlier positions never "
                "see later ones. The chapter changed positions 3 and 4 and found "
                "positions 0 to 2 moved by less than 1e-6.",
                "Cross-attention does not mix the decoder's positions: its keys and "
                "values come from the memory, which did not change. Only masked "
                "self-attention mixes positions, and only forwards.",
            ),
        ),
    ),
    "5.5": (
        Question(
            prompt=(
                "`tgt` holds each target sentence as `<s>`, the words, `</s>`, then "
                "padding. Which (decoder input, labels) pair is teacher forcing?"
            ),
            options=(
                "`tgt[:, :-1]` and `tgt[:, 1:]`",
                "`tgt[:, 1:]` and `tgt[:, :-1]`",
                "`tgt` and `tgt`",
                "the model's own greedy output so far, and `tgt[:, 1:]`",
            ),
            answer=0,
            why=(
                "The decoder reads the target shifted right, starting with `<s>`, "
                "and at every position the label is the next token: exactly "
                "what `TranslationBatch.teacher_forcing()` returns.",
                "Swapped: each position would have to predict the token before it, "
                "which the causal mask already lets it see, and the decoder would "
                "never read the start token it begins from at inference.",
                "Each position's label would be its own input, which the causal mask "
                "lets it see (j ≤ i): the model learns to copy, the loss falls fast, "
                "and at inference it has nothing to copy.",
                "That is decoding, not teacher forcing: it runs one step at a time "
                "and lets early mistakes feed later steps. Teacher forcing feeds the "
                "true tokens, so all positions train in one parallel pass.",
            ),
        ),
        Question(
            prompt=(
                "With label smoothing ε = 0.1 the lowest possible loss for our "
                "V = 23 tokens is 0.611 nats. What is it for a vocabulary of "
                "V = 1000 tokens, with the same ε?"
            ),
            options=(
                "0.611, unchanged: the floor depends only on ε",
                "About −ln 0.9 ≈ 0.1: the share of each wrong token vanishes",
                "About 1.01: higher",
                "0, once the model matches the smoothed target exactly",
            ),
            answer=2,
            why=(
                "The floor is the entropy of the smoothed target, and that depends "
                "on how many tokens the ε is spread over, not on ε alone.",
                "Each wrong token gets only ε/V, but there are V − 1 of them and "
                "each costs −ln(ε/V), which grows with V: together about "
                "ε · ln(V/ε) nats, on top of what the right token costs.",
                "The floor is −(p ln p) summed over the smoothed target: 1 − ε + ε/V "
                "on the right token and ε/V on each of the 999 others. Spreading ε "
                "over more tokens raises the entropy, to about 1.01 nats "
                "(`label_smoothing_floor(1000)`).",
                "Cross-entropy against a soft target is that target's entropy plus "
                "the mismatch; a perfect model removes the mismatch but still pays "
                "the entropy, which is why our training flattens at 0.611, not 0.",
            ),
        ),
    ),
    "5.7": (
        Question(
            prompt=(
                "`greedy_decode` writes 10 new tokens (the end token included) after "
                "the start token. Counting every decoder call, how many decoder "
                "positions does it compute in all?"
            ),
            options=("10", "55", "65", "100"),
            answer=1,
            why=(
                "That is what a KV cache gives: each step computes only its new "
                "position. `EncoderDecoder.greedy_decode` has none and runs the "
                "decoder on the whole prefix at every step.",
                "The 10 steps run the decoder on prefixes of length 1, 2, …, 10, "
                "so 1 + 2 + … + 10 = 55 positions, of which only 10 give a logit "
                "that is used. The chapter's 7-token example computed 28.",
                "The step that appends a token runs on the prefix before it: the "
                "prefixes have lengths 1 to 10, not 2 to 11. The new token is first "
                "read at the next step.",
                "Each step runs on the prefix so far, not on a full-length sequence: "
                "early steps are short, so the total is about half of 10 × 10.",
            ),
        ),
    ),
}
