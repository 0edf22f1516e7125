"""Chapter 5's figures: the Transformer."""

from __future__ import annotations

import math

import torch.nn.functional as F

from ._registry import figure


@figure("transformer_architecture")
def _architecture(encoder, decoder):
    """§5.1: the encoder and decoder blocks as boxes, each with its package object."""
    return (
        "The Transformer as boxes, each labelled with its package object. Left, the "
        "encoder: the source tokens (B, S) are embedded (times √d_model), the "
        "sinusoidal positional encoding is added, and N× EncoderBlock applies "
        f"{', '.join(label for _, label, *_ in encoder)}, with a residual path "
        "around each sub-layer into its Add & Norm. Right, the decoder: the target "
        "tokens, shifted right (B, T), are embedded the same way, and N× DecoderBlock "
        f"applies {', '.join(label for _, label, *_ in decoder)}; a linear layer "
        "tied to the embedding and a softmax give the next-token probabilities. The "
        "encoder's output, memory (B, S, d_model), gives the keys and values of "
        "every cross-attention. A legend names the lines: the main path in dark "
        "grey, every residual path in blue, the memory in red, and a dashed grey box "
        "around one block."
    )


@figure("transformer_activations")
def _activations(z):
    """§5.2: ReLU and GELU, the feed-forward network's non-linearity."""
    gelu = F.gelu(z)
    return (
        f"ReLU and GELU for z from {z[0]:.0f} to {z[-1]:.0f}: both are near 0 for "
        f"negative z and near z for positive z. ReLU has a kink at 0; GELU is smooth "
        f"and dips below 0, to {gelu.min():.2f} at z = {z[gelu.argmin()]:.2f}."
    )


@figure("transformer_ffn_losses")
def _ffn_losses(losses, accuracy, n_params, n_values):
    """§5.2: training one block with and without its feed-forward network."""
    ends = {name: sum(loss[-10:]) / 10 for name, loss in losses.items()}
    return (
        f"Training loss over {len(losses['with FFN'])} steps, starting near chance "
        f"(ln 20 = {math.log(n_values):.2f} nats). With its feed-forward network the "
        f"block ends at {ends['with FFN']:.2f} nats (mean of the last 10 steps) and "
        f"gets {accuracy['with FFN']:.1%} of the held-out positions right; attention "
        f"alone, with {n_params['without FFN']:,} parameters against "
        f"{n_params['with FFN']:,}, ends at {ends['without FFN']:.2f} nats and "
        f"{accuracy['without FFN']:.1%}."
    )


@figure("transformer_residual_gradients")
def _residual_gradients(grad_norms, ratio):
    """§5.3: the gradient of each block's weights in a deep stack, with and without
    residual paths, post-norm and pre-norm."""
    depth = len(next(iter(grad_norms.values())))  # one norm per block
    return (
        f"Gradient norm of each block's weights in a stack of {depth} encoder blocks, "
        f"log scale, geometric mean over 3 seeds: "
        + "; ".join(
            f"{name} from {g[0]:.2g} at block 1 to {g[-1]:.2g} at block {depth}"
            for name, g in grad_norms.items()
        )
        + f". Without residuals the first block gets "
        f"{ratio['no residual (post-norm)']:.2g} times less gradient than the last; "
        f"with residuals, post-norm is flat below the last block and pre-norm flat "
        f"throughout."
    )


@figure("transformer_norm_placement")
def _norm_placement(post_end, pre_end, unigram):
    """§5.3: training 6 + 6 blocks post-norm and pre-norm, without warm-up."""
    return (
        f"Training loss over 80 steps of 6 + 6 blocks at learning rate 5e-3 without "
        f"warm-up: post-norm (the paper) stays on the plateau of the input-blind model "
        f"({post_end:.2f} over the last 10 steps against {unigram:.2f}), while "
        f"pre-norm leaves it and ends at {pre_end:.2f}."
    )


@figure("transformer_causal_mask")
def _causal_mask(target_tokens, mask):
    """§5.4: the decoder's causal mask over a target sentence."""
    return (
        f"The causal mask of the target {' '.join(target_tokens)}: each position may "
        f"attend to itself and the positions before it, a lower triangle of "
        f"{int(mask.sum())} of 25 pairs; everything above the diagonal is "
        f"blocked."
    )


@figure("transformer_lr_schedules")
def _lr_schedules(paper_lr, our_lr, paper_steps, d_model, warmup, steps, cooldown):
    """§5.5: the paper's learning-rate schedule and ours."""
    return (
        f"Left: the paper's schedule (d_model = 512, warm-up 4000) rises linearly to "
        f"{max(paper_lr(s) for s in range(8000)):.1e} at step 4000, then decays as "
        f"1/√step to {paper_lr(paper_steps - 1):.1e} at step {paper_steps:,}. Right: "
        f"ours (d_model = {d_model}) rises to {our_lr(warmup - 1):.1e} in {warmup} "
        f"steps, decays as 1/√step to {our_lr(steps - cooldown):.1e} at step "
        f"{steps - cooldown}, then falls linearly to {our_lr(steps - 1):.1e} at step "
        f"{steps - 1}."
    )


@figure("transformer_training_loss")
def _training_loss(losses, final_loss, loss_floor):
    """§5.6: the encoder-decoder's training loss on the toy translation task."""
    return (
        f"Training loss of the encoder-decoder over {len(losses)} steps: it falls from "
        f"{losses[0]:.1f} nats to {final_loss:.3f} (mean of the last 10 "
        f"steps), just above the label-smoothing floor at {loss_floor:.3f}."
    )


@figure("transformer_cross_attention")
def _cross_attention(query_labels, key_labels, cross, alignment):
    """§5.7: the cross-attention of each decoder block over the source sentence."""
    block_maps = [w[0].mean(dim=0) for w in cross]  # per block: (T, S)
    eos = key_labels.index("</s>")
    return (
        f"Cross-attention of the decoder rows {' '.join(query_labels)} over the source "
        f"{' '.join(key_labels)}, mean over heads. "
        + "; ".join(
            f"Block {b + 1}: the largest weight of a row is {m.amax(-1).mean():.2f} on "
            f"average, {m[:, eos].mean():.2f} on </s>"
            for b, m in enumerate(block_maps)
        )
        + f". Over the held-out sentences block 2 puts {alignment[1]:.0%} of its "
        f"weight on the aligned source word, block 1 {alignment[0]:.0%}."
    )


@figure("transformer_decoding_step")
def _decoding_step(step, query_labels, key_labels, sharpest, row, top, tokens):
    """§5.7's widget: one step of greedy decoding, its cross-attention row and its
    three likeliest next tokens."""
    likeliest = ", ".join(
        f"{tokens[t]} {p:.2f}"
        for t, p in zip(top.indices.tolist(), top.values.tolist(), strict=True)
    )
    return (
        f"Step {step}, after '{' '.join(query_labels[:step])}'. Left: block "
        f"{sharpest + 1}'s cross-attention over the source words, the largest weight, "
        f"{row.max():.2f}, on '{key_labels[row.argmax()]}'. Right: the three "
        f"likeliest next tokens: {likeliest}."
    )
