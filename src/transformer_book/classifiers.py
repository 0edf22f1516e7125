"""The two small classifiers of Chapter 1's long-range recall experiment: an LSTM,
and one attention layer, each reading a sequence of tokens and naming one class.

Shape letters: B batch, T positions, D ``d_model``, C classes.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ._validate import check_int, check_real, check_token_ids
from .attention import MultiHeadAttention

__all__ = ["LSTMClassifier", "AttentionClassifier"]


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
        _check_sizes(vocab_size, n_classes, d_model)
        if forget_bias is not None:
            check_real("forget_bias", forget_bias)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.lstm = nn.LSTM(d_model, d_model, batch_first=True)
        self.head = nn.Linear(d_model, n_classes)
        if forget_bias is not None:
            forget = slice(d_model, 2 * d_model)  # gate order i, f, g, o
            with torch.no_grad():
                self.lstm.bias_ih_l0[forget] = forget_bias
                self.lstm.bias_hh_l0[forget] = 0.0

    def forward(self, tokens: Tensor) -> Tensor:
        _check_tokens(tokens, self.embed)
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
        _check_sizes(vocab_size, n_classes, d_model)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, tokens: Tensor) -> Tensor:
        _check_tokens(tokens, self.embed)
        x = self.embed(tokens)  # (B, T) -> (B, T, D)
        query = x[:, -1:]  # (B, 1, D): only the last position answers
        h = query + self.attn(query, x, x)  # (B, 1, D)
        return self.head(h[:, 0])  # (B, D) -> (B, C)


def _check_sizes(vocab_size: int, n_classes: int, d_model: int) -> None:
    check_int("vocab_size", vocab_size, minimum=1)
    check_int("n_classes", n_classes, minimum=1)
    check_int("d_model", d_model, minimum=1)


def _check_tokens(tokens: Tensor, embed: nn.Embedding) -> None:
    """(B, T) ids of the vocabulary, T >= 1: both models read the last position."""
    check_token_ids("tokens", tokens, embed.num_embeddings)
    if tokens.shape[1] < 1:
        raise ValueError(f"tokens has no positions: shape {tuple(tokens.shape)}")
