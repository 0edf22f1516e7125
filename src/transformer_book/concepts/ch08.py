"""Concept checks for Chapter 8: Beyond text."""

from __future__ import annotations

from . import Question

CHECKS = {
    "8.1": (
        Question(
            prompt=(
                "BERT adds a segment vector (sentence A or B) to every token's "
                "embedding. The book's BERT has no segment table, so the converter "
                "adds segment A's vector to every row of the position table. Why "
                "does the converted model give the same outputs on single sentences?"
            ),
            options=(
                "Every token of a single sentence is in segment A, and the three "
                "embeddings are summed, so A's vector can be added to each position's "
                "vector once, ahead of time",
                "Trained segment vectors are close to zero, so leaving them out "
                "changes the outputs by no more than float32 rounding",
                "The LayerNorm after the embeddings removes any vector added to every "
                "token",
                "It does not: folding is an approximation that only the sentence "
                "embeddings survive",
            ),
            answer=0,
            why=(
                "token + position + segment_A = token + (position + segment_A): the "
                "sum is the same for every input whose tokens are all in segment A, "
                "up to float rounding.",
                "MiniLM's segment-A vector is not small (its norm is comparable to a "
                "position vector's); dropping it changes every hidden state.",
                "LayerNorm subtracts each vector's mean over its own features, a "
                "scalar, not a shared vector: an added vector changes the normalised "
                "result.",
                "It is exact, not approximate: the tests compare every hidden state "
                "with Hugging Face's own BERT and assert that they agree up to float32 "
                "rounding.",
            ),
        ),
    ),
    "8.2": (
        Question(
            prompt=(
                "In MiniLM's layers 1 to 5, heads put about 42% of their attention "
                "weight on `[CLS]`, yet switching off the three heads that look at it "
                "most moves the sentence embedding less than switching off three "
                "random heads. What explains both?"
            ),
            options=(
                "`[CLS]`'s value vectors, through each head's share of W^O, are "
                "short, so a large weight on `[CLS]` adds little to the output",
                "`[CLS]` holds the meaning of the whole sentence, which the other "
                "heads already copy",
                "The mean pooling of the sentence embedding leaves out `[CLS]`",
                "The softmax of those heads is saturated, so their outputs are zero",
            ),
            answer=0,
            why=(
                "A head's output is the sum of a_ij f(x_j); Kobayashi et al.'s norm "
                "share measures the size of each term: `[CLS]` gets 42% of the weight "
                "but gives 7% of the output.",
                "Nothing measured shows that; in an encoder trained for sentence "
                "embeddings by mean pooling, `[CLS]` has no special role to play.",
                "The mean includes `[CLS]` and `[SEP]`, as sentence-transformers' "
                "pooling does; and pooling cannot change what a head's output adds to "
                "the other tokens.",
                "A saturated softmax puts all the weight on one key, and the output is "
                "that key's value vector, not zero.",
            ),
        ),
    ),
    "8.3": (
        Question(
            prompt=(
                "Section 8.3's linear probe keeps MiniLM frozen and trains a linear "
                "classifier on its 384-dimensional sentence embedding, for 10 topics. "
                "How many weights does training the probe change?"
            ),
            options=("3,850", "3,840", "22.6 million", "384"),
            answer=0,
            why=(
                "A 384-to-10 linear layer: 384 × 10 weights and 10 biases, 3,850 in "
                "all. The encoder's 22.6 million weights are frozen.",
                "That forgets the 10 biases of the classifier.",
                "That is what §8.3's fine-tune changes: every weight, at a far "
                "higher cost per step (§8.3 times one). The probe's encoder is frozen.",
                "One weight per input dimension would give one score, not ten.",
            ),
        ),
    ),
    "8.4": (
        Question(
            prompt=(
                "The chapter's ViT cuts each 8 × 8 digit into 2 × 2 patches and adds a "
                "`[CLS]` token. How many tokens does its encoder read, and how long is "
                "each patch's vector before the linear embedding?"
            ),
            options=(
                "17 tokens; 4 numbers per patch",
                "64 tokens; 1 number per patch",
                "16 tokens; 4 numbers per patch",
                "5 tokens; 16 numbers per patch",
            ),
            answer=0,
            why=(
                "(8 / 2) × (8 / 2) = 16 patches of 2 × 2 = 4 pixels, plus `[CLS]`: 17 "
                "tokens.",
                "That is one token per pixel, a patch size of 1.",
                "That forgets `[CLS]`, whose final vector the classifier reads.",
                "That is 4 × 4 patches: 4 of them, 16 pixels each, plus `[CLS]`.",
            ),
        ),
    ),
    "8.6": (
        Question(
            prompt=(
                "As a model family grows, its per-token accuracy on a task rises "
                "smoothly: 0.5, 0.7, 0.9. The task is scored by exact match of a "
                "10-token answer, and the tokens are right or wrong independently. "
                "What does the exact-match score do?"
            ),
            options=(
                "About 0.001, 0.03, 0.35: it looks like an ability that appears "
                "suddenly",
                "0.5, 0.7, 0.9: the same curve",
                "0.05, 0.07, 0.09: a tenth of it",
                "It stays at 0 until the per-token accuracy is 1",
            ),
            answer=0,
            why=(
                "Exact match needs all 10 tokens right: p to the 10th power, so 0.5, "
                "0.7 and 0.9 become about 0.001, 0.03 and 0.35. A smooth change "
                "looks sudden through a sharp metric, which is Schaeffer et al.'s "
                "critique of emergent abilities.",
                "That is the per-token accuracy, the smooth metric, not the exact "
                "match.",
                "Dividing by the length is not what requiring every token does.",
                "Any p above 0 gives a score p to the 10th power above 0, though tiny "
                "for small p.",
            ),
        ),
    ),
}
