"""The appendices' figures."""

from __future__ import annotations

import math

from ._registry import figure


@figure("appendix_listing_losses")
def _listing_losses(sorting, reversing):
    """§A.5: training loss of the one-page GPT (sorting) and Transformer (reversing)."""
    return (
        "Training loss of the two listings on a log scale: the GPT sorting digits "
        f"over {len(sorting.losses)} steps starts at a uniform guess's "
        f"{math.log(11):.1f} nats, the Transformer reversing them over "
        f"{len(reversing.losses)} steps starts above its uniform guess's "
        f"{math.log(13):.1f}, and both end below 0.2 nats (mean of the last 20 steps)."
    )


@figure("appendix_gpt_text_losses")
def _gpt_text_losses(steps, vocab_size, unigram, bigram, margin):
    """§B.8: training and held-out loss of the GPT on text, against the baselines."""
    return (
        f"Training and held-out loss over {steps} steps: both start near "
        f"{math.log(vocab_size):.1f} nats, cross the unigram baseline ({unigram:.2f}) "
        f"and the add-one bigram baseline ({bigram:.2f}), and the held-out loss ends "
        f"below {bigram - margin:.1f}."
    )
