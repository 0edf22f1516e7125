"""The four projections of multi-head attention, shared by the linear-cost
approximations of Chapter 7.

The names ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj`` are those of
:class:`transformer_book.attention.MultiHeadAttention`, so a trained
MultiHeadAttention's weights load into an approximation with ``load_state_dict``
and the two can be compared on the same projections.

Shape letters: B batch, H heads, T positions, D ``d_model``, Dh ``d_head``.
"""

from __future__ import annotations

from torch import Tensor, nn

from .._validate import check_int, check_like_module, check_tensor


class ProjectedHeads(nn.Module):
    """Q, K, V and output projections of width D, split into H heads of width Dh.

    Shapes: split_heads (B, T, D) -> (B, H, T, Dh); merge_heads the reverse.
    """

    def __init__(self, d_model: int, n_heads: int, bias: bool = True):
        super().__init__()
        d_model = check_int("d_model", d_model, 1)
        n_heads = check_int("n_heads", n_heads, 1)
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        x = x.view(B, T, self.n_heads, self.d_head)  # (B, T, D) -> (B, T, H, Dh)
        return x.transpose(1, 2)  # (B, T, H, Dh) -> (B, H, T, Dh)

    def merge_heads(self, x: Tensor) -> Tensor:
        B, _, T, _ = x.shape
        return x.transpose(1, 2).reshape(B, T, self.d_model)  # (B,H,T,Dh) -> (B,T,D)

    def check_input(self, x: Tensor, max_len: int | None = None) -> None:
        """``x`` is (B, T, d_model) on the module's device and dtype, T <= max_len."""
        check_tensor("x", x, "float")
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (B, T, d_model={self.d_model}), "
                f"got {tuple(x.shape)}"
            )
        check_like_module("x", x, self.q_proj.weight)
        if max_len is not None and x.shape[1] > max_len:
            raise ValueError(
                f"x has T={x.shape[1]} positions, more than seq_len={max_len}"
            )
