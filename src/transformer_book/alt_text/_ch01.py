"""Chapter 1's figures: the cost of recurrence, and its vanishing gradients."""

from __future__ import annotations

from ._registry import figure


@figure("rnn_forward_times")
def _forward_times(times, lengths, device):
    """§1.2: forward time and time per token, against the sequence length."""
    growth = {  # of the time per token, from the shortest length to the longest
        name: (v[-1] / lengths[-1]) / (v[0] / lengths[0]) for name, v in times.items()
    }
    return (
        f"Forward time (left) and time per token (right) against the sequence length, "
        f"log-log, on {device}. From T = {lengths[0]} to {lengths[-1]} the time per "
        f"token changes by a factor of {growth['nn.RNN']:.1f} for nn.RNN and "
        f"{growth['nn.LSTM']:.1f} for nn.LSTM, but grows by a factor of "
        f"{growth['attention (readable)']:.0f} for the readable attention "
        f"and {growth['attention (fused kernel)']:.0f} for the fused one; "
        f"at T = {lengths[-1]} the fused attention takes "
        f"{times['attention (fused kernel)'][-1] * 1e3:.0f} ms, nn.RNN "
        f"{times['nn.RNN'][-1] * 1e3:.0f} ms."
    )


@figure("rnn_gradient_norms")
def _gradient_norms(grad_norms, factor):
    """§1.3: the last output's gradient with respect to each input, by distance."""
    last = len(grad_norms["vanilla RNN"]) - 1
    attention = grad_norms["self-attention"]  # index = distance
    return (
        f"Gradient norm of the last output with respect to each input against the "
        f"distance back, 0 to {last}, log scale: the vanilla RNN's falls by "
        f"x {factor['vanilla RNN']:.2f} per step, to "
        f"{grad_norms['vanilla RNN'][last]:.1e} at distance {last}, the LSTM's by "
        f"x {factor['LSTM']:.2f}, to {grad_norms['LSTM'][last]:.1e}; the LSTM with "
        f"forget bias 3 (x {factor['LSTM, forget bias 3']:.2f}) and self-attention "
        f"(x {factor['self-attention']:.2f}) stay level, self-attention between "
        f"{attention[1:].min():.1e} and {attention[1:].max():.1e} at "
        f"distances 1 to {last} and {attention[0]:.1e} on its own token."
    )


@figure("rnn_radius_sweep")
def _radius_sweep(sweep):
    """§1.3: the tanh RNN's gradient with W_hh rescaled to five spectral radii."""
    factors = ", ".join(
        f"x {((norms[80] / norms[20]) ** (1 / 60)).item():.2f} at {name}"
        for name, norms in sweep.items()
        if name != "ρ = 3.0"  # chaotic: its digits depend on the weights' last bits
    )
    last = len(next(iter(sweep.values()))) - 1
    return (
        f"Gradient norm of the tanh RNN's last state against the distance back, log "
        f"scale, with W_hh rescaled to five spectral radii ρ. The per-step factor is "
        f"{factors}: up to ρ = 1.5 the norm vanishes, at ρ = 2.0 it stays roughly "
        f"level, and at ρ = 3.0 it explodes past 1e+06 at distance {last}; every tanh "
        f"factor is smaller than the linear RNN's ρ."
    )


@figure("rnn_radius_view")
def _radius_view(radius, nonlinearity, norms, linear):
    """§1.3's widget: the eigenvalues of W_hh at one radius, and the gradient norm
    of the RNN against the linear rule ρ^k."""
    last = len(norms) - 1
    far = norms[last].item()  # chaotic at ρ = 3 (tanh): say only "above"
    far_text = "above 1e+06" if far > 1e6 else f"{far:.1e}"
    where = "inside" if radius < 1 else "on" if radius == 1 else "outside"
    return (
        f"Left: the eigenvalues of W_hh, the largest of modulus {radius}, {where} "
        f"the unit circle. Right: the {nonlinearity} RNN's gradient norm against the "
        f"distance back, log scale, goes from {norms[1]:.1e} at distance 1 to "
        f"{far_text} at distance {last}, where the linear rule ρ^k gives "
        f"{linear[last]:.1e}."
    )


@figure("rnn_recall")
def _recall(distances, attention, lstm, opened, n_symbols):
    """§1.4: recall accuracy against the distance between symbol and query."""
    worst = min(attention.values())
    recalled = "every symbol" if worst == 1 else f"at least {worst:.0%}"
    return (
        f"Test accuracy against the distance between the symbol and the query, "
        f"{distances[0]} to {distances[-1]} steps: attention recalls "
        f"{recalled} at every distance; the LSTM is at "
        f"{lstm[8]:.0%} at distance 8 but at most "
        f"{max(lstm[16], lstm[32], lstm[64]):.0%} from 16 on (chance: "
        f"{1 / n_symbols:.1%}); the LSTM with forget bias 3 reaches {opened[32]:.0%} "
        f"at 32 and {opened[64]:.0%} at 64."
    )
