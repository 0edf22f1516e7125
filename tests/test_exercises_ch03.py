"""The Chapter 3 checkers accept right answers and explain wrong ones."""

import math

import pytest
import torch

from transformer_book.attention import MultiHeadAttention, causal_mask
from transformer_book.exercises import (
    check_causal_multi_head_attention,
    check_previous_token_score,
    check_split_heads,
)

# split_heads ---------------------------------------------------------------


def split_heads(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)


def test_split_heads_accepts_a_right_answer_and_the_package(capsys):
    check_split_heads(split_heads)
    check_split_heads(lambda x, h: MultiHeadAttention(x.shape[-1], h).split_heads(x))
    assert "split_heads: all checks passed" in capsys.readouterr().out


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
    ],
)
def test_split_heads_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_split_heads(wrong)


# causal multi-head attention -------------------------------------------------


def causal_mha(x, w_q, w_k, w_v, w_o, n_heads, scale_by=None, mask="right", mix=False):
    B, T, D = x.shape
    dh = D // n_heads

    def split(t):
        if mix:
            return t.reshape(B, n_heads, T, dh)
        return t.view(B, T, n_heads, dh).transpose(1, 2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale_by or dh)
    allowed = causal_mask(T)
    if mask == "flipped":
        allowed = allowed.T
    if mask is not None:
        scores = scores.masked_fill(~allowed, -math.inf)
    heads = torch.softmax(scores, dim=-1) @ v
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


def test_causal_mha_accepts_a_right_answer_and_the_package(capsys):
    check_causal_multi_head_attention(causal_mha)
    check_causal_multi_head_attention(package_causal_mha)
    assert "all checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mask": None}, "future leaks"),
        ({"mask": "flipped"}, "future leaks"),
        ({"scale_by": 12}, r"sqrt\(d_model\)"),
        ({"scale_by": 1}, "not scaled"),
        ({"mix": True}, "mix up positions"),
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


def test_previous_token_score_accepts_right_answers(capsys):
    from transformer_book.probe import attention_on

    check_previous_token_score(previous_token_score)
    check_previous_token_score(lambda w: attention_on(w, torch.arange(w.shape[-1]) - 1))
    assert "previous_token_score: all checks passed" in capsys.readouterr().out


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
    ],
)
def test_previous_token_score_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_previous_token_score(wrong)
