"""Chapter 7's figures: complexity and efficiency."""

from __future__ import annotations

from ._registry import figure


@figure("efficiency_memory_time")
def _memory_time(slopes, peak, lengths, seconds):
    """§7.1: peak memory and time of the readable and fused attention, against T."""
    mib = {name: [s / 2**20 for s in sizes] for name, sizes in peak.items()}
    return (
        f"Left: peak memory against the sequence length, log-log. The readable "
        f"attention grows as T^{slopes['readable']:.2f}, along the T² guide, from "
        f"{mib['readable'][0]:.2f} MiB at T = {lengths[0]} to "
        f"{mib['readable'][-1]:.2f} MiB at T = {lengths[-1]}; the fused kernel as "
        f"T^{slopes['fused']:.2f}, to {mib['fused'][-1]:.2f} MiB. Right: time on "
        f"this CPU; at T = {lengths[-2]} the readable attention takes "
        f"{1000 * seconds['readable'][-1]:.0f} ms, the fused kernel "
        f"{1000 * seconds['fused'][-1]:.0f} ms."
    )


@figure("efficiency_decode_batch")
def _decode_batch(step_shares, step_batches, decode_rates):
    """§7.4: a cached decode step's shares of work, and tokens per second, by batch."""
    first, last = step_shares[step_batches[0]], step_shares[step_batches[-1]]
    return (
        f"Left: the share of a cached decode step outside the matrix products and "
        f"attention falls from {first['everything else']:.0%} at batch "
        f"{step_batches[0]} to {last['everything else']:.0%} at batch "
        f"{step_batches[-1]}. Right: tokens per second rise with the batch, from "
        f"{decode_rates[step_batches[0]]:,.0f} at batch {step_batches[0]} to "
        f"{decode_rates[step_batches[-1]]:,.0f} at batch {step_batches[-1]} "
        f"(timed on the machine that built this page)."
    )


@figure("efficiency_sparse_masks")
def _sparse_masks(patterns):
    """§7.5: the full causal, sliding-window and block-sparse masks on 64 positions."""
    t = len(next(iter(patterns.values())))  # the masks are (t, t)
    allowed = "; ".join(
        f"{title}, {int(mask.sum()):,} of {t * t:,} pairs"
        for title, mask in patterns.items()
    )
    return (
        f"Three attention masks on {t} positions, allowed pairs dark: {allowed}. Full "
        f"causal is the whole lower triangle; the sliding window a band of width 8 "
        f"along the diagonal; block-sparse the blocks of 8 on and just below the "
        f"diagonal, plus the first block's columns, which every query sees."
    )


@figure("efficiency_mask_view")
def _mask_view(name, t, mask, shares, widget_lengths):
    """§7.5's widget: one sparse mask at length T, and each mask's allowed share."""
    trends = "; ".join(
        f"{other} from {100 * row[0]:.0f}% to {100 * row[-1]:.0f}%"
        for other, row in shares.items()
    )
    return (
        f"Left: the {name} mask at T = {t}, {int(mask.sum()):,} of {t * t:,} pairs "
        f"allowed ({mask.float().mean():.0%}). Right: the allowed share of T² as T "
        f"doubles from {widget_lengths[0]} to {widget_lengths[-1]}: {trends}."
    )
