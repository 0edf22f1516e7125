"""Concept checks for Chapter 6: Encoder-only, decoder-only, encoder-decoder."""

from __future__ import annotations

from . import Question

CHECKS = {
    "6.3": (
        Question(
            prompt=(
                "`mask_tokens` corrupts a long text that holds no special tokens. "
                "About what share of ALL the input positions then hold `[MASK]`?"
            ),
            options=("15%", "12%", "13.5%", "80%"),
            answer=1,
            why=(
                "15% is the share of positions chosen as targets; only 80% of those "
                "become `[MASK]`, the others a random token or themselves.",
                "15% chosen × 80% of them masked = 12%. On the training text the "
                "chapter measured 14.8% chosen and 80.2% of those masked: about "
                "12% again.",
                "15% × 90% = 13.5% is the share of positions whose token changes "
                "(`[MASK]` or a random token); the random 10% are not `[MASK]`.",
                "80% is a share of the chosen tokens, not of all tokens: only 15% of "
                "the positions are chosen in the first place.",
            ),
        ),
        Question(
            prompt=(
                "`span_corrupt` runs on a sequence of 100 tokens (15% noise, mean span "
                "length 3). How many tokens do its input and its target hold?"
            ),
            options=(
                "input 90, target 20",
                "input 85, target 15",
                "input 100, target 15",
                "input 85, target 20",
            ),
            answer=0,
            why=(
                "15 tokens are dropped in round(15 / 3) = 5 spans. The input keeps 85 "
                "tokens plus one sentinel per span (90); the target holds the 15 "
                "dropped tokens, each span led by its sentinel (20).",
                "That forgets the sentinels: each span leaves one in the input, and "
                "the same sentinel comes before the span's tokens in the target.",
                "That is BERT's way, replacing tokens in place. T5 replaces a whole "
                "span by one sentinel, so the input gets shorter; and the target "
                "holds the 5 sentinels too.",
                "The target is right, but the input also keeps a sentinel where each "
                "span was: it marks where the target's span belongs.",
            ),
        ),
    ),
    "6.4": (
        Question(
            prompt=(
                "In §6.4's probes GPT scores exactly the same on the blank probe (the "
                "sentence with both sides of the hidden token) as on the next probe "
                "(the sentence cut just before it). Why?"
            ),
            options=(
                "The two probes happen to be equally hard for GPT",
                "The causal mask: the prediction never sees the tokens to the right",
                "GPT has not learned to use context yet, so context changes nothing",
                "GPT was trained on both probes, so it scores them alike",
            ),
            answer=1,
            why=(
                "The probes share their targets but not their context. For GPT the "
                "two scores are equal on every run and every machine (the chapter "
                "asserts it): no coincidence guarantees that.",
                "GPT predicts the hidden token from the position just before it, and "
                "the causal mask hides every later token from that position: both "
                "probes give it the same input, so the same logits.",
                "GPT does use its left context: the chapter checks that its "
                "perplexity is at most 0.65 × the unigram model's. The equality is "
                "exact by construction, not a sign of an untrained model.",
                "The probes are held-out sentences that no model trained on; and "
                "training would not make two different inputs give identical logits.",
            ),
        ),
    ),
    "6.5": (
        Question(
            prompt=(
                "The chapter's GPT has 2 layers, 4 heads and d_model = 64. "
                "`forward_cached` runs a 10-token prompt (batch 1), then 3 more tokens "
                "one at a time, each with the cache the previous call returned. What "
                "is the shape of `cache[0][0]`, the first layer's keys?"
            ),
            options=(
                "(1, 4, 13, 16)",
                "(1, 4, 1, 16)",
                "(1, 4, 13, 64)",
                "(1, 13, 64)",
            ),
            answer=0,
            why=(
                "(B, H, P, Dh): per head, one key for each of the 13 positions so far, "
                "each of d_model / H = 16 numbers. The cache grows by one position per "
                "new token.",
                "That is the newest token's key alone. The returned cache holds every "
                "earlier position too: the next query must attend to all of them.",
                "Each head's key has d_model / H = 16 numbers, not 64: the 4 heads "
                "split the width between them.",
                "The cache keeps keys already split into heads, (B, H, P, Dh), the "
                "layout attention uses, with the values apart in `cache[0][1]`.",
            ),
        ),
        Question(
            prompt=(
                "The next token's probabilities are (0.5, 0.3, 0.15, 0.05). After "
                "`top_p_filter` with p = 0.75, how many tokens can still be sampled?"
            ),
            options=("1", "2", "3", "4"),
            answer=1,
            why=(
                "Keeping only tokens whose running total stays at or below p drops "
                "the token that crosses it, leaving 0.5 < 0.75. Top-p keeps the token "
                "that takes the total to p or beyond.",
                "0.5 alone falls short of 0.75; adding 0.3 reaches 0.8 ≥ 0.75, so the "
                "nucleus is the two most probable tokens, renormalised to 5/8 and "
                "3/8.",
                "Once 0.5 + 0.3 = 0.8 has reached p, the third token is not needed: "
                "the tokens more probable than it already hold 0.8 ≥ 0.75.",
                "Top-p sets the logits outside the nucleus to `-inf`; only p = 1 keeps "
                "every token.",
            ),
        ),
    ),
}
