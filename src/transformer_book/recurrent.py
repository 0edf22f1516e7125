"""Recurrent networks unrolled step by step, and what Chapter 1 measures on them.

Shape letters: B batch, T time steps, D input width, H hidden width (``d_hidden``),
V vocabulary size, C number of classes.

The step functions and the unrolled modules are the readable versions of
``nn.RNN`` and ``nn.LSTM`` (same parameter names, same gate order, and a
``from_torch`` that copies the weights), so a test can prove they compute the same
thing. The measurement helpers (:func:`jacobian_norms`, :func:`spectral_radius`,
:func:`saved_tensor_bytes`) and the two small classifiers of the long-range
experiment serve the chapter's three questions: speed, gradients, memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention

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
    gates = x_t @ weight_ih.T + h_prev @ weight_hh.T  # (B, 4H)
    if bias_ih is not None:
        gates = gates + bias_ih
    if bias_hh is not None:
        gates = gates + bias_hh
    i, f, g, o = gates.chunk(4, dim=-1)  # (B, 4H) -> 4 x (B, H)
    c_t = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    h_t = torch.sigmoid(o) * torch.tanh(c_t)
    return h_t, c_t


def _check_input(x: Tensor, d_input: int) -> None:
    if x.dim() != 3 or x.shape[-1] != d_input:
        raise ValueError(
            f"x must have shape (B, T, d_input={d_input}), got {tuple(x.shape)}"
        )


def _from_torch_check(m: nn.RNNBase) -> None:
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
        if d_input < 1 or d_hidden < 1:
            raise ValueError(
                f"d_input and d_hidden must be positive, got {d_input}, {d_hidden}"
            )
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
        _check_input(x, self.d_input)
        B, T, _ = x.shape
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
        return torch.stack(outputs, dim=1), h  # T x (B, H) -> (B, T, H)

    @classmethod
    def from_torch(cls, m: nn.RNN) -> VanillaRNN:
        """A copy of a one-layer, batch-first ``nn.RNN`` with the same weights."""
        _from_torch_check(m)
        new = cls(m.input_size, m.hidden_size, m.nonlinearity, bias=m.bias)
        new = new.to(device=m.weight_ih_l0.device, dtype=m.weight_ih_l0.dtype)
        new._copy_from(m)
        return new


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
        _check_input(x, self.d_input)
        B, T, _ = x.shape
        if state is None:
            state = (x.new_zeros(B, self.d_hidden), x.new_zeros(B, self.d_hidden))
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
        return torch.stack(outputs, dim=1), (h, c)  # T x (B, H) -> (B, T, H)

    @classmethod
    def from_torch(cls, m: nn.LSTM) -> LSTM:
        """A copy of a one-layer, batch-first ``nn.LSTM`` with the same weights."""
        _from_torch_check(m)
        new = cls(m.input_size, m.hidden_size, bias=m.bias)
        new = new.to(device=m.weight_ih_l0.device, dtype=m.weight_ih_l0.dtype)
        new._copy_from(m)
        return new


def jacobian_norms(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """||dy/dx_t||_F for every time step t, averaged over the batch, y = fn(x).

    ``fn`` maps a batch of sequences to one vector per sequence, e.g. the last
    hidden state; it must not mix the rows of the batch. One backward pass per
    output unit builds the whole (K, D) Jacobian of each step. Use float64 to
    measure norms below float32's range (about 1e-38).

    Shapes: x: (B, T, D); fn(x): (B, K); returns (T,)
    """
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, D), got {tuple(x.shape)}")
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        y = fn(x)
        if y.dim() != 2 or y.shape[0] != x.shape[0]:
            raise ValueError(
                f"fn(x) must have shape (B={x.shape[0]}, K), got {tuple(y.shape)}"
            )
        squares = torch.zeros(x.shape[:2], dtype=x.dtype, device=x.device)  # (B, T)
        for k in range(y.shape[1]):
            (grad,) = torch.autograd.grad(y[:, k].sum(), x, retain_graph=True)
            squares += grad.pow(2).sum(dim=-1)  # (B, T, D) -> (B, T)
    return squares.sqrt().mean(dim=0)  # (B, T) -> (T,)


def spectral_radius(weight: Tensor) -> float:
    """max |lambda| over the eigenvalues lambda of a square matrix.

    For a linear RNN, h_T depends on h_t through W^(T-t), whose norm grows or
    shrinks like spectral_radius(W)^(T-t).
    """
    if weight.dim() != 2 or weight.shape[0] != weight.shape[1]:
        raise ValueError(f"weight must be a square matrix, got {tuple(weight.shape)}")
    eigenvalues = torch.linalg.eigvals(weight.detach().double().cpu())
    return eigenvalues.abs().max().item()


def rescale_spectral_radius(weight: Tensor, radius: float) -> Tensor:
    """``weight`` scaled so that its spectral radius equals ``radius``."""
    if radius < 0:
        raise ValueError(f"radius must be non-negative, got {radius}")
    current = spectral_radius(weight)
    if current == 0.0:
        raise ValueError("weight has spectral radius 0 and cannot be rescaled")
    return weight * (radius / current)


def saved_tensor_bytes(
    fn: Callable[..., object], *args: object, exclude: Iterable[Tensor] = ()
) -> int:
    """Bytes that autograd keeps for the backward pass while ``fn(*args)`` runs.

    Each tensor storage is counted once. Tensors in ``exclude`` (typically the
    parameters and the input, which exist anyway) are not counted. This is the
    activation memory that training needs on top of the model itself.
    """
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    kept: dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in skip:
            kept[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, _unpack):
        fn(*args)
    return sum(kept.values())


def _unpack(t: Tensor) -> Tensor:
    return t


class LSTMClassifier(nn.Module):
    """Embed the tokens, run an ``nn.LSTM``, classify from the last hidden state.

    ``forget_bias`` sets the forget gate's bias at initialisation (b_ih's forget
    slice; b_hh's is zeroed); ``None`` keeps PyTorch's small random biases.

    Shapes: tokens (B, T) int -> logits (B, C)
    """

    def __init__(
        self,
        vocab_size: int,
        n_classes: int,
        d_model: int = 32,
        forget_bias: float | None = None,
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.lstm = nn.LSTM(d_model, d_model, batch_first=True)
        self.head = nn.Linear(d_model, n_classes)
        if forget_bias is not None:
            forget = slice(d_model, 2 * d_model)  # gate order i, f, g, o
            with torch.no_grad():
                self.lstm.bias_ih_l0[forget] = forget_bias
                self.lstm.bias_hh_l0[forget] = 0.0

    def forward(self, tokens: Tensor) -> Tensor:
        outputs, _ = self.lstm(self.embed(tokens))  # (B, T) -> (B, T, D)
        return self.head(outputs[:, -1])  # (B, D) -> (B, C)


class AttentionClassifier(nn.Module):
    """Embed the tokens; the last token attends to all of them; classify the result.

    One :class:`~transformer_book.attention.MultiHeadAttention` layer with a
    residual connection: every token is one attention step away from the last,
    whatever the distance. There is no positional encoding (Chapter 4): this model
    can find a token by *what* it is, not by *where* it is.

    Shapes: tokens (B, T) int -> logits (B, C)
    """

    def __init__(
        self, vocab_size: int, n_classes: int, d_model: int = 32, n_heads: int = 2
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens)  # (B, T) -> (B, T, D)
        query = x[:, -1:]  # (B, 1, D): only the last position answers
        h = query + self.attn(query, x, x)  # (B, 1, D)
        return self.head(h[:, 0])  # (B, D) -> (B, C)
