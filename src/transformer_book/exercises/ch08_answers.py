"""Checkers of Chapter 8's Exercises 8.5 and 8.6.

``check_gpt2_convert(fn)``: GPT-2's names and shapes for one block, converted to
the book's GPT, on random tensors of several widths and block numbers.
``check_head_drift(drift, weight_predicts, norm_predicts)``: the reader's drift
of the 12 heads of layer 1, checked against a re-run, and whether each property
read off the weights predicts it, which must follow from that drift.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import torch
from torch import Tensor

from ._checking import (
    as_list,
    as_number,
    attempted,
    call,
    checker,
    expect_bool,
    matches,
    seeded,
)

__all__ = ["check_gpt2_convert", "check_head_drift"]


# -- Exercise 8.5: convert GPT-2 ----------------------------------------------------

_PARTS = {  # GPT-2's module -> the book's module, for the weights and the biases
    "attn.c_proj": "self_attn.out_proj",
    "mlp.c_fc": "feed_forward.linear1",
    "mlp.c_proj": "feed_forward.linear2",
}
_NORMS = {"ln_1": "norm1", "ln_2": "norm2"}


def _gpt2_block(d: int, block: int, seed: int) -> dict[str, Tensor]:
    """Random tensors with GPT-2's names and shapes for block ``block``."""
    shapes = {
        "attn.c_attn.weight": (d, 3 * d),
        "attn.c_attn.bias": (3 * d,),
        "attn.c_proj.weight": (d, d),
        "attn.c_proj.bias": (d,),
        "mlp.c_fc.weight": (d, 4 * d),
        "mlp.c_fc.bias": (4 * d,),
        "mlp.c_proj.weight": (4 * d, d),
        "mlp.c_proj.bias": (d,),
        "ln_1.weight": (d,),
        "ln_1.bias": (d,),
        "ln_2.weight": (d,),
        "ln_2.bias": (d,),
    }
    with seeded(seed):
        return {f"h.{block}.{k}": torch.randn(shape) for k, shape in shapes.items()}


def _converted(state: Mapping[str, Tensor], block: int) -> dict[str, Tensor]:
    """The book's names and layout: Conv1D's (in, out) weights transposed to
    nn.Linear's (out, in), and c_attn's columns split into Q, K and V."""
    h, b = f"h.{block}.", f"blocks.{block}."
    ours = {}
    w, bias = state[h + "attn.c_attn.weight"], state[h + "attn.c_attn.bias"]
    d = w.shape[0]
    for name, w_part, b_part in zip(
        ("q_proj", "k_proj", "v_proj"), w.split(d, dim=1), bias.split(d), strict=True
    ):
        ours[f"{b}self_attn.{name}.weight"] = w_part.T
        ours[f"{b}self_attn.{name}.bias"] = b_part
    for theirs, mine in _PARTS.items():
        ours[f"{b}{mine}.weight"] = state[f"{h}{theirs}.weight"].T
        ours[f"{b}{mine}.bias"] = state[f"{h}{theirs}.bias"]
    for theirs, mine in _NORMS.items():
        for kind in ("weight", "bias"):
            ours[f"{b}{mine}.{kind}"] = state[f"{h}{theirs}.{kind}"]
    return ours


def _diagnose(key: str, got, expected: dict[str, Tensor]) -> None:
    right = expected[key]
    if not isinstance(got, Tensor):
        raise AssertionError(f"{key} should be a tensor, got {type(got).__name__}")
    if tuple(got.shape) != tuple(right.shape):
        raise AssertionError(
            f"{key} has shape {tuple(got.shape)}; the book's GPT expects "
            f"{tuple(right.shape)}"
        )
    if matches(got, right):
        return
    if right.dim() == 2 and matches(got, right.T):
        raise AssertionError(
            f"{key} holds the transpose of the right weight: GPT-2's Conv1D stores "
            "(in, out), nn.Linear (out, in)"
        )
    prefix, _, _ = key.rpartition("self_attn.")
    for other in ("q_proj", "k_proj", "v_proj"):
        for kind in ("weight", "bias"):
            name = f"{prefix}self_attn.{other}.{kind}"
            if prefix and name in expected and name != key:
                other_right = expected[name]
                candidates = (
                    [other_right, other_right.T]
                    if other_right.dim() == 2
                    else [other_right]
                )
                for candidate in candidates:
                    if candidate.shape == got.shape and matches(got, candidate):
                        raise AssertionError(
                            f"{key} holds what {other} should hold: c_attn's "
                            "columns are Q's, then K's, then V's"
                        )
    raise AssertionError(f"{key} holds the wrong values")


_CONVERT_CASES = [(768, 0, 1), (48, 0, 2), (32, 3, 3)]  # (d_model, block, seed)


@checker("gpt2_convert")
def check_gpt2_convert(fn: Callable) -> None:
    """Exercise 8.5: ``fn(state)`` maps one GPT-2 block's 12 tensors (named
    ``h.{i}.…``) to the book's 16 names ``blocks.{i}.…`` with the book's shapes
    and values, for widths 768, 48 and 32 and blocks 0 and 3; the result loads
    into the book's GPT of that size."""
    from ..models import GPT, GPTConfig

    for d, block, seed in _CONVERT_CASES:
        state = _gpt2_block(d, block, seed)
        given = {k: v.clone() for k, v in state.items()}
        out = call(fn, given)
        where = f"(width {d}, block {block})"
        if not isinstance(out, Mapping):
            raise AssertionError(
                f"convert should return a dict of the book's names to tensors, got "
                f"{type(out).__name__}"
            )
        expected = _converted(state, block)
        missing = [k for k in expected if k not in out]
        if missing:
            raise AssertionError(
                f"{where} your dict has no {missing[0]!r} ({len(missing)} of the "
                f"{len(expected)} names missing)"
            )
        extra = [k for k in out if k not in expected]
        if extra:
            raise AssertionError(
                f"{where} {extra[0]!r} is not one of the names this block maps to "
                "in the book's GPT"
            )
        for key in expected:
            try:
                _diagnose(key, out[key], expected)
            except AssertionError as err:
                raise AssertionError(f"{where} {err}") from None
        with torch.device("meta"):  # shapes only: no weights drawn
            model = GPT(GPTConfig(vocab_size=10, max_len=4, d_model=d, n_heads=4,
                                  n_layers=block + 1, d_ff=4 * d))  # fmt: skip
        model.load_state_dict({k: v.to("meta") for k, v in out.items()}, strict=False)


# -- Exercise 8.6: which single head matters? -----------------------------------------

LAYER = 1
# 12 heads: a rank correlation of at least 0.5 is significant at the 5% level
# (one-sided; the critical value of Spearman's rho for 12 pairs is 0.503)
PREDICTS = 0.5
_AGREE = 0.9  # the reader's drift must rank the heads as the re-run does


@functools.cache  # one re-run per process: it loads the pretrained model
def _measured() -> dict[str, Tensor]:
    """A re-run of the exercise: the drift of each head of layer 1 switched off
    alone (1 - mean cosine with the intact embeddings), and the heads' weight and
    norm shares on [CLS], all on the corpus of run_heads(seed=0)."""
    from ..experiments.bert_heads import ablated, corpus_texts, value_norm_shares
    from ..pretrained import load_minilm, sentence_embeddings, tokenize

    model, tokenizer = load_minilm("cpu")
    texts = corpus_texts(tokenizer, seed=0)
    intact = sentence_embeddings(model, tokenizer, texts)
    drift = []
    for head in range(model.cfg.n_heads):
        with ablated(model, {LAYER: [head]}):
            e = sentence_embeddings(model, tokenizer, texts)
        drift.append(1.0 - (e * intact).sum(dim=-1).mean().item())
    ids, real = tokenize(tokenizer, texts)
    cls = torch.zeros_like(real)
    cls[:, 0] = True
    weight_share, norm_share = value_norm_shares(model, ids, cls)
    return {
        "drift": torch.tensor(drift, dtype=torch.float64),
        "weight": weight_share[LAYER].double(),
        "norm": norm_share[LAYER].double(),
    }


def _as_drift(drift, n_heads: int) -> Tensor:
    values = as_list(attempted(drift, "drift"))
    if values is None or len(values) != n_heads:
        raise AssertionError(
            f"drift should hold one number per head of layer {LAYER}: {n_heads} "
            "numbers, in the order of the heads"
        )
    return torch.tensor(
        [as_number(v, f"drift[{i}]") for i, v in enumerate(values)],
        dtype=torch.float64,
    )


@checker("head_drift", todo="Replace each `...` with your result or answer")
def check_head_drift(drift, weight_predicts, norm_predicts) -> None:
    """Exercise 8.6: ``drift``, the 12 heads' drift (any measure that ranks the
    heads as 1 - mean cosine does: rank correlation with a re-run of at least
    0.9), and whether the weight on [CLS] (less weight, more drift) and the norm
    share (more share, more drift) predict it: a rank correlation with the
    reader's drift of at least 0.5, significant at 5% for 12 heads."""
    from ..decision import rank_correlation

    attempted(drift, "drift")
    rerun = _measured()
    yours = _as_drift(drift, len(rerun["drift"]))
    agreement = rank_correlation(yours, rerun["drift"])
    if agreement < _AGREE:
        raise AssertionError(
            f"your drift ranks the heads unlike a re-run (rank correlation "
            f"{agreement:.2f}): switch off one head of layer {LAYER} at a time, "
            "in the order 0 to 11, and compare the 32 corpus sentences' embeddings "
            "with the intact ones"
        )
    for name, answer, property_, sign, reading in (
        ("weight_predicts", weight_predicts, rerun["weight"], -1, "weight on [CLS]"),
        ("norm_predicts", norm_predicts, rerun["norm"], 1, "norm share"),
    ):
        rho = rank_correlation(yours, sign * property_)
        if expect_bool(answer, name) != (rho >= PREDICTS):
            raise AssertionError(
                f"{name} does not follow from your drift: its rank correlation with "
                f"the {reading} is {rho:.2f} (the sign that says 'predicts'), and "
                f"with 12 heads it takes {PREDICTS} or more to tell from chance"
            )
