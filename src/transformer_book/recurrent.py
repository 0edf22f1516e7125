"""Recurrent networks unrolled step by step, and what Chapter 1 measures on them.

Shape letters: B batch, T time steps, D input width, H hidden width (``d_hidden``),
V vocabulary size, C number of classes.

The step functions and the unrolled modules are the readable versions of
``nn.RNN`` and ``nn.LSTM`` (same parameter names, same gate order, and a
``from_torch`` that copies the weights), so a test can prove they compute the same
thing. The measurement helpers (:func:`jacobian_norms`, :func:`spectral_radius`,
:func:`saved_tensor_bytes`, in :mod:`transformer_book.measure`) and the two small
classifiers of the long-range experiment (in :mod:`transformer_book.classifiers`)
serve the chapter's three questions: speed, gradients, memory; they are imported
here too, so ``from transformer_book.recurrent import jacobian_norms`` works.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from ._validate import autocast_enabled, check_int, check_like_module, check_tensor
from .classifiers import AttentionClassifier, LSTMClassifier
from .measure import (
    jacobian_norms,
    rescale_spectral_radius,
    saved_tensor_bytes,
    spectral_radius,
)

__all__ = [
    "rnn_step",
    "lstm_step",
    "VanillaRNN",
    "LSTM",
    "jacobian_norms",
    "spectral_radius",
    "rescale_spectral_radius",
    "saved_tensor_bytes",
    "LSTMClassifier",
    "AttentionClassifier",
]

_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "tanh": torch.tanh,
    "relu": torch.relu,
    "identity": lambda z: z,  # a linear RNN: the textbook case for eigenvalues
}


def rnn_step(
    x_t: Tensor,
    h_prev: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor | None = None,
    bias_hh: Tensor | None = None,
    nonlinearity: str = "tanh",
) -> Tensor:
    """One step of an Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh).

    Shapes:
        x_t: (B, D)   h_prev: (B, H)   weight_ih: (H, D)   weight_hh: (H, H)
        bias_ih, bias_hh: (H,)   returns h_t: (B, H)
    """
    if nonlinearity not in _ACTIVATIONS:
        raise ValueError(
            f"nonlinearity must be one of {sorted(_ACTIVATIONS)}, got {nonlinearity!r}"
        )
    _check_step(1, x_t, h_prev, None, weight_ih, weight_hh, bias_ih, bias_hh)
    z = x_t @ weight_ih.T + h_prev @ weight_hh.T  # (B, D) @ (D, H) -> (B, H)
    if bias_ih is not None:
        z = z + bias_ih
    if bias_hh is not None:
        z = z + bias_hh
    return _ACTIVATIONS[nonlinearity](z)


def lstm_step(
    x_t: Tensor,
    h_prev: Tensor,
    c_prev: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor | None = None,
    bias_hh: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """One LSTM step (Hochreiter & Schmidhuber, 1997, with a forget gate).

    Gates in PyTorch's order i, f, g, o:
        i, f, o = sigmoid(...), g = tanh(...), each of x_t W^T + h_{t-1} U^T + b
        c_t = f * c_{t-1} + i * g        (the cell: an additive memory path)
        h_t = o * tanh(c_t)

    Shapes:
        x_t: (B, D)   h_prev, c_prev: (B, H)   weight_ih: (4H, D)   weight_hh: (4H, H)
        bias_ih, bias_hh: (4H,)   returns (h_t, c_t), each (B, H)
    """
    _check_step(4, x_t, h_prev, c_prev, weight_ih, weight_hh, bias_ih, bias_hh)
    gates = x_t @ weight_ih.T + h_prev @ weight_hh.T  # (B, 4H)
    if bias_ih is not None:
        gates = gates + bias_ih
    if bias_hh is not None:
        gates = gates + bias_hh
    i, f, g, o = gates.chunk(4, dim=-1)  # (B, 4H) -> 4 x (B, H)
    c_t = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    h_t = torch.sigmoid(o) * torch.tanh(c_t)
    return h_t, c_t


def _check_step(n_gates, x_t, h_prev, c_prev, weight_ih, weight_hh, bias_ih, bias_hh):
    """The arguments of one step: every shape follows from x_t (B, D), h_prev (B, H).

    A step runs T times per sequence, so the valid case costs a few comparisons;
    only a failing call builds the message (in :func:`_explain_step`).
    """
    try:
        (B, D), H = x_t.shape, h_prev.shape[1]
        G, dtype = n_gates * H, x_t.dtype
        valid = (
            x_t.is_floating_point()
            and h_prev.shape == (B, H)
            and weight_ih.shape == (G, D)
            and weight_hh.shape == (G, H)
            and (c_prev is None or c_prev.shape == (B, H))
            and (bias_ih is None or bias_ih.shape == (G,))
            and (bias_hh is None or bias_hh.shape == (G,))
            and h_prev.dtype == weight_ih.dtype == weight_hh.dtype == dtype
            and (c_prev is None or c_prev.dtype == dtype)
            and (bias_ih is None or bias_ih.dtype == dtype)
            and (bias_hh is None or bias_hh.dtype == dtype)
            and (n_gates == 1 or c_prev is not None)
            and not x_t.is_meta
            and all(
                t is None or t.device == x_t.device
                for t in (h_prev, c_prev, weight_ih, weight_hh, bias_ih, bias_hh)
            )
        )
    except (AttributeError, IndexError, TypeError, ValueError):
        valid = False
    if not valid:
        _explain_step(
            n_gates, x_t, h_prev, c_prev, weight_ih, weight_hh, bias_ih, bias_hh
        )


def _explain_step(n_gates, x_t, h_prev, c_prev, weight_ih, weight_hh, bias_ih, bias_hh):
    """Raise the error that names the first bad argument of a step."""
    for name, t in (("x_t", x_t), ("h_prev", h_prev)):
        check_tensor(name, t, "float")
        if t.dim() != 2:
            raise ValueError(f"{name} must have shape (B, width), got {tuple(t.shape)}")
    (B, D), H = x_t.shape, h_prev.shape[1]
    gh = "4H" if n_gates == 4 else "H"
    expected = {
        "h_prev": (h_prev, (B, H), "(B, H)"),
        "c_prev": (c_prev, (B, H), "(B, H)"),
        "weight_ih": (weight_ih, (n_gates * H, D), f"({gh}, D)"),
        "weight_hh": (weight_hh, (n_gates * H, H), f"({gh}, H)"),
        "bias_ih": (bias_ih, (n_gates * H,), f"({gh},)"),
        "bias_hh": (bias_hh, (n_gates * H,), f"({gh},)"),
    }
    required = ("weight_ih", "weight_hh") + (("c_prev",) if n_gates == 4 else ())
    for name, (t, shape, letters) in expected.items():
        if t is None and name in required:
            raise TypeError(f"{name} must be a torch.Tensor, got None")
        if t is None:
            continue
        check_tensor(name, t, "float")
        if tuple(t.shape) != shape:
            raise ValueError(
                f"{name} must have shape {letters} = {shape} for x_t {tuple(x_t.shape)}"
                f" and h_prev {tuple(h_prev.shape)}, got {tuple(t.shape)}"
            )
        if t.dtype != x_t.dtype and not autocast_enabled(x_t.device.type):
            raise TypeError(f"{name} has dtype {t.dtype}, x_t has {x_t.dtype}")
    for name, (t, _, _) in {"x_t": (x_t, 0, 0), **expected}.items():
        if t is not None and (t.is_meta or t.device != x_t.device):
            raise ValueError(
                f"{name} is on {t.device} and x_t on {x_t.device}: every tensor of "
                "a step must be on one device that holds values (not meta)"
            )


def _check_input(x: Tensor, d_input: int, weight: Tensor) -> None:
    check_tensor("x", x, "float")
    if x.dim() != 3 or x.shape[-1] != d_input:
        raise ValueError(
            f"x must have shape (B, T, d_input={d_input}), got {tuple(x.shape)}"
        )
    check_like_module("x", x, weight)


def _check_state(name: str, h: Tensor, x: Tensor, d_hidden: int) -> None:
    check_tensor(name, h, "float")
    if tuple(h.shape) != (x.shape[0], d_hidden):
        raise ValueError(
            f"{name} must have shape (B, H) = {(x.shape[0], d_hidden)} for x "
            f"{tuple(x.shape)}, got {tuple(h.shape)}"
        )
    if h.device != x.device:
        raise ValueError(f"{name} is on {h.device} but x is on {x.device}")


def _from_torch_check(m: nn.RNNBase, kind: type) -> None:
    if not isinstance(m, kind):
        raise TypeError(f"m must be an nn.{kind.__name__}, got {type(m).__name__}")
    if m.num_layers != 1 or m.bidirectional or not m.batch_first or m.proj_size:
        raise ValueError(
            "from_torch supports one layer, one direction, batch_first=True and no "
            f"projection; got num_layers={m.num_layers}, "
            f"bidirectional={m.bidirectional}, batch_first={m.batch_first}"
        )


class _Unrolled(nn.Module):
    """Parameters named and initialised as in ``nn.RNN``/``nn.LSTM``."""

    def __init__(self, d_input: int, d_hidden: int, n_gates: int, bias: bool):
        super().__init__()
        check_int("d_input", d_input, minimum=1)
        check_int("d_hidden", d_hidden, minimum=1)
        self.d_input, self.d_hidden = d_input, d_hidden
        self.weight_ih = nn.Parameter(torch.empty(n_gates * d_hidden, d_input))
        self.weight_hh = nn.Parameter(torch.empty(n_gates * d_hidden, d_hidden))
        self.bias_ih = nn.Parameter(torch.empty(n_gates * d_hidden)) if bias else None
        self.bias_hh = nn.Parameter(torch.empty(n_gates * d_hidden)) if bias else None
        bound = 1.0 / math.sqrt(d_hidden)  # PyTorch's U(-1/sqrt(H), 1/sqrt(H))
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def _copy_from(self, m: nn.RNNBase) -> None:
        with torch.no_grad():
            self.weight_ih.copy_(m.weight_ih_l0)
            self.weight_hh.copy_(m.weight_hh_l0)
            if self.bias_ih is not None:
                self.bias_ih.copy_(m.bias_ih_l0)
                self.bias_hh.copy_(m.bias_hh_l0)


class VanillaRNN(_Unrolled):
    """An Elman RNN unrolled in a Python loop: one :func:`rnn_step` per time step.

    Same parameters and outputs as ``nn.RNN(d_input, d_hidden, batch_first=True)``,
    plus ``nonlinearity="identity"`` for a linear RNN.

    Shapes:
        x: (B, T, D)   h0: (B, H), zeros if None
        returns outputs (B, T, H) (every h_t) and the last state h_T (B, H)
    """

    def __init__(
        self, d_input: int, d_hidden: int, nonlinearity: str = "tanh", bias: bool = True
    ):
        super().__init__(d_input, d_hidden, n_gates=1, bias=bias)
        if nonlinearity not in _ACTIVATIONS:
            raise ValueError(
                f"nonlinearity must be one of {sorted(_ACTIVATIONS)}, "
                f"got {nonlinearity!r}"
            )
        self.nonlinearity = nonlinearity

    def forward(self, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        _check_input(x, self.d_input, self.weight_ih)
        B, T, _ = x.shape
        if h0 is not None:
            _check_state("h0", h0, x, self.d_hidden)
        h = x.new_zeros(B, self.d_hidden) if h0 is None else h0  # (B, H)
        outputs = []
        for t in range(T):  # T dependent steps: step t needs h from step t - 1
            h = rnn_step(
                x[:, t],
                h,
                self.weight_ih,
                self.weight_hh,
                self.bias_ih,
                self.bias_hh,
                self.nonlinearity,
            )
            outputs.append(h)
        if T == 0:  # no step taken: no outputs, and the state is still h0
            return x.new_zeros(B, 0, self.d_hidden), h
        return torch.stack(outputs, dim=1), h  # T x (B, H) -> (B, T, H)

    @classmethod
    def from_torch(cls, m: nn.RNN) -> VanillaRNN:
        """A copy of a one-layer, batch-first ``nn.RNN`` with the same weights, in
        ``m``'s train/eval mode."""
        _from_torch_check(m, nn.RNN)
        new = cls(m.input_size, m.hidden_size, m.nonlinearity, bias=m.bias)
        new = new.to(device=m.weight_ih_l0.device, dtype=m.weight_ih_l0.dtype)
        new._copy_from(m)
        return new.train(m.training)


class LSTM(_Unrolled):
    """An LSTM unrolled in a Python loop: one :func:`lstm_step` per time step.

    Same parameters and outputs as ``nn.LSTM(d_input, d_hidden, batch_first=True)``.

    Shapes:
        x: (B, T, D)   state: (h0, c0), each (B, H), zeros if None
        returns outputs (B, T, H) and the last (h_T, c_T), each (B, H)
    """

    def __init__(self, d_input: int, d_hidden: int, bias: bool = True):
        super().__init__(d_input, d_hidden, n_gates=4, bias=bias)

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        _check_input(x, self.d_input, self.weight_ih)
        B, T, _ = x.shape
        if state is None:
            state = (x.new_zeros(B, self.d_hidden), x.new_zeros(B, self.d_hidden))
        if not isinstance(state, (tuple, list)) or len(state) != 2:
            raise TypeError(
                f"state must be a pair (h0, c0), got {type(state).__name__}"
            )
        for name, t in zip(("state[0]", "state[1]"), state, strict=True):
            _check_state(name, t, x, self.d_hidden)
        h, c = state  # (B, H), (B, H)
        outputs = []
        for t in range(T):
            h, c = lstm_step(
                x[:, t],
                h,
                c,
                self.weight_ih,
                self.weight_hh,
                self.bias_ih,
                self.bias_hh,
            )
            outputs.append(h)
        if T == 0:  # no step taken: no outputs, and the state is still (h0, c0)
            return x.new_zeros(B, 0, self.d_hidden), (h, c)
        return torch.stack(outputs, dim=1), (h, c)  # T x (B, H) -> (B, T, H)

    @classmethod
    def from_torch(cls, m: nn.LSTM) -> LSTM:
        """A copy of a one-layer, batch-first ``nn.LSTM`` with the same weights, in
        ``m``'s train/eval mode."""
        _from_torch_check(m, nn.LSTM)
        new = cls(m.input_size, m.hidden_size, bias=m.bias)
        new = new.to(device=m.weight_ih_l0.device, dtype=m.weight_ih_l0.dtype)
        new._copy_from(m)
        return new.train(m.training)
