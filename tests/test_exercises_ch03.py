"""The Chapter 3 checkers accept right answers and explain wrong ones.

Per checker: right answers written in several ways (float64 among them) pass, and
each wrong answer is rejected with a message that names its mistake.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_book.attention import MultiHeadAttention, causal_mask
from transformer_book.exercises import (
    check_causal_multi_head_attention,
    check_previous_token_score,
    check_split_heads,
)
from transformer_book.probe import attention_on

# split_heads ---------------------------------------------------------------


def split_heads(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)


RIGHT_SPLITS = {
    "book": split_heads,
    "package": lambda x, h: MultiHeadAttention(x.shape[-1], h).split_heads(x),
    "permute": lambda x, h: x.reshape(*x.shape[:2], h, -1).permute(0, 2, 1, 3),
    "chunks": lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1),
    "float64": lambda x, h: split_heads(x.double(), h),
}


@pytest.mark.parametrize("right", RIGHT_SPLITS.values(), ids=RIGHT_SPLITS.keys())
def test_split_heads_checker_accepts_right_answers(right, capsys):
    assert check_split_heads(right) is None
    assert "all checks passed" in capsys.readouterr().out


def doubles_in_place(x, n_heads):
    x *= 2
    return split_heads(x / 2, n_heads)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), "scrambled"),
        (
            lambda x, h: x.view(*x.shape[:2], -1, h).permute(0, 3, 1, 2),
            "every H-th feature",
        ),
        (lambda x, h: x.view(*x.shape[:2], h, -1), r"has shape"),
        (lambda x, h: split_heads(x, h).flip(1), "are wrong"),
        (doubles_in_place, "modified x in place"),
    ],
)
def test_split_heads_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_split_heads(wrong)


# causal multi-head attention -------------------------------------------------


def causal_mha(x, w_q, w_k, w_v, w_o, n_heads, scale_by=None, mistake=None):
    """Right by default; ``scale_by`` and ``mistake`` make one mistake."""
    B, T, D = x.shape
    dh = D // n_heads

    def split(t):
        if mistake == "mix":
            return t.reshape(B, n_heads, T, dh)
        return t.view(B, T, n_heads, dh).transpose(1, 2)

    if mistake == "transposed":
        w_q, w_k, w_v, w_o = w_q.T, w_k.T, w_v.T, w_o.T
    if mistake == "scales w_q in place":
        w_q /= math.sqrt(dh)
        scale_by = 1
    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale_by or dh)
    diagonal = {"no diagonal": -1, "one ahead": 1}.get(mistake, 0)
    allowed = torch.ones(T, T, dtype=torch.bool).tril(diagonal)
    if mistake == "flipped":
        allowed = allowed.T
    if mistake == "lowest value":
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    elif mistake != "no mask":
        scores = scores.masked_fill(~allowed, -math.inf)
    heads = torch.softmax(scores, dim=-2 if mistake == "softmax dim" else -1) @ v
    if mistake == "no transpose":
        return heads.reshape(B, T, D) @ w_o
    return heads.transpose(1, 2).reshape(B, T, D) @ w_o


def package_causal_mha(x, w_q, w_k, w_v, w_o, n_heads):
    mha = MultiHeadAttention(x.shape[-1], n_heads, bias=False)
    with torch.no_grad():
        for proj, w in zip(
            (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj),
            (w_q, w_k, w_v, w_o),
            strict=True,
        ):
            proj.weight.copy_(w.T)  # nn.Linear computes x @ weight.T
    return mha(x, mask=causal_mask(x.shape[1]))


def fused_causal_mha(x, w_q, w_k, w_v, w_o, n_heads):
    B, T, D = x.shape
    q, k, v = ((x @ w).view(B, T, n_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return heads.transpose(1, 2).reshape(B, T, D) @ w_o


def in_float64(x, w_q, w_k, w_v, w_o, n_heads):
    return causal_mha(*(t.double() for t in (x, w_q, w_k, w_v, w_o)), n_heads)


RIGHT_MHA = {
    "by hand": causal_mha,
    "package": package_causal_mha,
    "fused": fused_causal_mha,
    "float64": in_float64,
    "lowest value": lambda *args: causal_mha(*args, mistake="lowest value"),
}


@pytest.mark.parametrize("right", RIGHT_MHA.values(), ids=RIGHT_MHA.keys())
def test_causal_mha_checker_accepts_right_answers(right, capsys):
    assert check_causal_multi_head_attention(right) is None
    assert "all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mistake": "no mask"}, "causal mask is missing"),
        ({"mistake": "flipped"}, "causal mask is the wrong way round"),
        ({"mistake": "one ahead"}, "future leaks"),
        ({"mistake": "no diagonal"}, "contains NaN"),
        ({"mistake": "mix"}, "mix up positions"),
        ({"mistake": "no transpose"}, "merged in the wrong order"),
        ({"mistake": "softmax dim"}, "softmax runs over the queries"),
        ({"mistake": "transposed"}, "applied transposed"),
        ({"mistake": "scales w_q in place"}, "modified w_q in place"),
        ({"scale_by": 12}, r"sqrt\(d_model\)"),
        ({"scale_by": 1}, "not scaled"),
    ],
)
def test_causal_mha_names_the_mistake(kwargs, message):
    with pytest.raises(AssertionError, match=message):
        check_causal_multi_head_attention(lambda *a: causal_mha(*a, **kwargs))


def test_causal_mha_names_one_head_a_missing_w_o_and_a_wrong_shape():
    with pytest.raises(AssertionError, match="ONE head"):
        check_causal_multi_head_attention(lambda *a: causal_mha(*a[:5], 1))
    with pytest.raises(AssertionError, match="through w_o"):
        check_causal_multi_head_attention(
            lambda x, q, k, v, o, h: causal_mha(x, q, k, v, torch.eye(x.shape[-1]), h)
        )
    with pytest.raises(AssertionError, match="has shape"):
        check_causal_multi_head_attention(lambda *a: causal_mha(*a)[:, -1])
    with pytest.raises(AssertionError, match="is wrong"):
        check_causal_multi_head_attention(lambda *a: causal_mha(*a) * 1.1)


# previous-token score --------------------------------------------------------


def previous_token_score(weights):
    T = weights.shape[-1]
    t = torch.arange(1, T)
    return weights[:, :, t, t - 1].mean(dim=(0, 2))


def by_loops(weights):
    B, H, T, _ = weights.shape
    return torch.stack(
        [sum(weights[:, h, t, t - 1].mean() for t in range(1, T)) / (T - 1)
         for h in range(H)]
    )  # fmt: skip


RIGHT_SCORES = {
    "book": previous_token_score,
    "probe": lambda w: attention_on(w, torch.arange(w.shape[-1]) - 1),
    "diagonal": lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2)),
    "loops": by_loops,
    "float64": lambda w: previous_token_score(w.double()),
}


@pytest.mark.parametrize("right", RIGHT_SCORES.values(), ids=RIGHT_SCORES.keys())
def test_previous_token_score_checker_accepts_right_answers(right, capsys):
    assert check_previous_token_score(right) is None
    assert "all checks passed" in capsys.readouterr().out


def zeroes_query_0(weights):
    weights[:, :, 0] = 0.0
    return previous_token_score(weights)


def over_all_queries(weights):
    T = weights.shape[-1]
    t = torch.arange(1, T)
    return weights[:, :, t, t - 1].sum(dim=2).mean(dim=0) / T


def diagonal_score(weights, offset):
    return weights.diagonal(offset=offset, dim1=-2, dim2=-1).mean(dim=(0, 2))


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda w: diagonal_score(w, 0), "query itself"),
        (lambda w: diagonal_score(w, 1), "next token"),
        (
            lambda w: w[:, :, torch.arange(6), torch.arange(6) - 1].mean(dim=(0, 2)),
            "wraps",
        ),
        (lambda w: previous_token_score(w)[None], "has shape"),
        (lambda w: previous_token_score(w) * 0.9, "should score 1.0"),
        (lambda w: previous_token_score(w) + torch.tensor([0, 0.1, 0, 0]), "wrong"),
        (over_all_queries, "divided by all T queries"),
        (zeroes_query_0, "modified weights in place"),
    ],
)
def test_previous_token_score_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_previous_token_score(wrong)
