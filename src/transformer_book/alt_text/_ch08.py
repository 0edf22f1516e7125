"""Chapter 8's figures: beyond text."""

from __future__ import annotations

from ..vision import patchify
from ._registry import figure


@figure("beyond_head_view")
def _head_view(head_name, sentence, parsed, weights):
    """§8.2's widget: one head's attention on a parsed sentence, heads circled."""
    words = [i for i, h in enumerate(parsed.heads) if h >= 0]  # words with a head
    on_head = sum(int(weights[i + 1].argmax()) == parsed.heads[i] + 1 for i in words)
    return (
        f"Attention of {head_name} on '{sentence}' ([CLS], {len(parsed.words)} words, "
        f"[SEP]); circles mark each word's syntactic head. {on_head} of {len(words)} "
        f"words put their largest weight on their head; the mean weight on [CLS] is "
        f"{weights[:, 0].mean():.2f}."
    )


@figure("beyond_cls_share")
def _cls_share(weight_share, norm_share):
    """§8.2: each layer's share on [CLS] of the attention weight and of the norm."""
    later = slice(1, None)  # layers 1-5 (counting from 0), where [CLS] takes the weight
    return (
        f"Share on [CLS] in layers 0 to {len(weight_share) - 1}: of the attention "
        f"weight {', '.join(f'{s:.2f}' for s in weight_share.tolist())}; of the "
        f"weighted vectors' norm {', '.join(f'{s:.2f}' for s in norm_share.tolist())}. "
        f"In layers 1-5 [CLS] takes {weight_share[later].mean():.2f} of the weight "
        f"but only {norm_share[later].mean():.2f} of the norm: the weight parked "
        f"there adds little to the output."
    )


@figure("beyond_sample_efficiency")
def _sample_efficiency(efficiency):
    """§8.3: test accuracy of the pretrained probe and the scratch model, by labels."""
    leads = [
        p - s for p, s in zip(efficiency.pretrained, efficiency.scratch, strict=True)
    ]
    return (
        f"Test accuracy against the number of labelled sentences "
        f"({', '.join(map(str, efficiency.label_counts))}), log scale. The pretrained "
        f"encoder with a linear probe reaches "
        f"{', '.join(f'{a:.2f}' for a in efficiency.pretrained)}; the model trained "
        f"from scratch {', '.join(f'{a:.2f}' for a in efficiency.scratch)}; the "
        f"majority class is at {efficiency.majority:.2f}. Pretrained leads at every "
        f"count, by {min(leads):.2f} to {max(leads):.2f}, the gap narrowing with more "
        f"labels."
    )


@figure("beyond_patches")
def _patches(labels, patches):
    """§8.4: a training digit, and the same image as a sequence of patch tokens."""
    inked = int((patches[0].sum(dim=-1) > 0).sum())
    return (
        f"Left: training image 0, the digit {labels[0].item()}, 8 by 8 grey pixels. "
        f"Right: the same image as {patches.shape[1]} tokens of 2 x 2 = 4 pixels, one "
        f"column per patch, taken row by row; {inked} of the {patches.shape[1]} "
        f"patches hold ink."
    )


@figure("beyond_digit_view")
def _digit_view(index, test_labels, shown, title, grid):
    """§8.4's widget: a test digit, and the ViT's [CLS] attention over its patches."""
    row, col = divmod(int(grid.argmax()), grid.shape[1])
    inked = patchify(shown[index : index + 1], 2)[0].sum(dim=-1) > 0  # (16,)
    ink = "holds ink" if inked[int(grid.argmax())] else "is blank"
    return (
        f"Left: test image {index}, the digit {test_labels[index].item()}. Right: "
        f"the {title} over its 4 x 4 patches; the largest weight, {grid.max():.2f}, "
        f"is on the patch in row {row + 1}, column {col + 1}, which {ink}."
    )


@figure("beyond_scaling_law")
def _scaling_law(scaling_run):
    """§8.6: held-out loss against the parameters and the compute, with the fit."""
    rows, fit = scaling_run.rows, scaling_run.fit
    return (
        f"Held-out loss of {len(rows)} GPT sizes against the non-embedding parameters "
        f"N (left) and the training compute C (right), log-log: the loss falls from "
        f"{rows[0].loss:.2f} at N = {rows[0].params:,} to {rows[-1].loss:.2f} at N = "
        f"{rows[-1].params:,}, below the unigram model's "
        f"{scaling_run.unigram_loss:.2f}, close to the fitted power law "
        f"{fit.a:.2f} N^-{fit.b:.3f} (R² = {fit.r_squared:.3f})."
    )


@figure("beyond_emergence")
def _emergence(n_models, p_token):
    """§8.6: exact-match scores of 1, 5 and 20 tokens from a smooth per-token p."""
    p_at = {n: p_token[(n_models - n).abs().argmin()].item() for n in (1e9, 1e12)}
    return (
        f"Score against the parameters N from 1 million to 1 trillion, log scale, for "
        f"a per-token accuracy p that rises smoothly with N: the exact match of 1 "
        f"token follows p, of 5 tokens p^5 and of 20 tokens p^20, each later and "
        f"steeper. At N = 1e+09 p is {p_at[1e9]:.2f} but the 20-token exact match "
        f"only {p_at[1e9] ** 20:.3f}; at 1e+12 they are {p_at[1e12]:.2f} and "
        f"{p_at[1e12] ** 20:.3f}."
    )
