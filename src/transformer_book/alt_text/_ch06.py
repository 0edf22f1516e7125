"""Chapter 6's figures: GPT, BERT and T5."""

from __future__ import annotations

from ._registry import figure


@figure("variants_masks")
def _masks(masks, tokens, out_tokens):
    """§6.1: the attention masks of BERT, GPT and T5's cross-attention."""
    allowed = "; ".join(
        f"{title}, {int(mask.sum())} of {mask.numel()} query-key pairs allowed"
        for title, (mask, _, _) in masks.items()
    )
    return (
        f"Which tokens may attend to which, in {' '.join(tokens)}: {allowed}. BERT "
        f"lets every token see every other, GPT each token only itself and the tokens "
        f"before it, and T5's decoder tokens {' '.join(out_tokens)} see every source "
        f"token."
    )


@figure("variants_long_runs")
def _long_runs(records, per_step, every, unigram_acc):
    """§6.4: the long runs' held-out accuracy against the training targets seen."""
    ends = "; ".join(
        f"{name}: blank {records[name]['probes'][-1]['blank_acc']:.0%}, next token"
        f" {records[name]['probes'][-1]['next_acc']:.0%} after"
        f" {records[name]['steps'] * per_step[name] / 1e6:.1f} million targets"
        for name in per_step  # the models, in the book's order
    )
    return (
        f"Held-out accuracy of the three models against the training targets each has"
        f" seen (log scale), every {every} steps of the long runs, with the 200-step"
        f" race's models as hollow marks near the start: {ends}; unigram"
        f" {unigram_acc:.0%}. BERT leads on the blank, GPT on the next token."
    )


@figure("variants_sampling_rules")
def _sampling_rules(views, order, labels, prompt_text):
    """§6.5: the next token's distribution under temperature, top-k and top-p."""
    kept = {name: int((p > 0).sum()) for name, p in views.items()}
    top = {name: p[order[0]].item() for name, p in views.items()}
    return (
        f"Probabilities of the 15 likeliest next tokens after "
        f"'{prompt_text}', under four rules. At temperature 1 the top token "
        f"'{labels[0].replace('▁', ' ').strip()}' gets {top['temperature 1']:.2f}; "
        f"temperature 0.5 sharpens it to {top['temperature 0.5']:.2f}; top-k 5 keeps "
        f"{kept['top-k 5']} tokens and gives it {top['top-k 5']:.2f}; top-p 0.5 keeps "
        f"{kept['top-p 0.5']} and gives it {top['top-p 0.5']:.2f}."
    )


@figure("variants_first_block_attention")
def _first_block_attention(sent, sentence, bert_weights, gpt_weights):
    """§6.6: block 1's attention weights in BERT and in GPT, on one sentence."""
    bert_map, gpt_map = bert_weights[0][0].mean(0), gpt_weights[0].mean(0)  # (T, T)
    return (
        f"Block 1's attention weights, mean over heads, on the {sent.shape[1]} tokens "
        f"of '{sentence}'. BERT's map fills both triangles: "
        f"{bert_map.triu(1).sum() / bert_map.sum():.0%} of its weight is on later "
        f"tokens. GPT's upper triangle is empty: "
        f"{gpt_map.triu(1).sum() / gpt_map.sum():.0%} of its weight is on later tokens."
    )
