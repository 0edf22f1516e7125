"""Chapter 2's concept checks: the answers marked right are the ones the code gives."""

import math
import re

import torch

from transformer_book.attention import causal_mask, scaled_dot_product_attention
from transformer_book.concepts.ch02 import CHECKS


def right(section, index=0):
    question = CHECKS[section][index]
    return question.options[question.answer]


def test_sections_and_count():
    assert set(CHECKS) == {"2.1", "2.2", "2.3", "2.6"}
    assert 4 <= sum(len(qs) for qs in CHECKS.values()) <= 5


def test_soft_lookup_price_of_a_tie():
    # §2.1's fruit look-up: one-hot keys, prices 3, 1, 8.
    assert "10 × (banana + cherry)" in CHECKS["2.1"][0].prompt
    keys, values = torch.eye(3), torch.tensor([[3.0], [1.0], [8.0]])
    query = 10.0 * torch.tensor([0.0, 1.0, 1.0])  # banana + cherry
    price = torch.softmax(keys @ query, dim=0) @ values
    assert right("2.1") == f"{price.item():.2f}"


def test_output_and_weight_shapes():
    assert "(2, 7, 16), (2, 10, 16) and (2, 10, 32)" in CHECKS["2.2"][0].prompt
    q, k, v = torch.randn(2, 7, 16), torch.randn(2, 10, 16), torch.randn(2, 10, 32)
    out, weights = scaled_dot_product_attention(q, k, v)  # no ValueError
    assert right("2.2") == f"output {tuple(out.shape)}, weights {tuple(weights.shape)}"


def test_unscaled_softmax_saturates():
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(500, 1, 1024, generator=gen)  # unit-variance queries
    k = torch.randn(500, 16, 1024, generator=gen)  # 16 keys each
    scores = q @ k.transpose(-2, -1)  # (500, 1, 16), without / √d_k
    top = torch.softmax(scores, dim=-1).amax(dim=-1)  # largest weight of each row
    scaled_top = torch.softmax(scores / math.sqrt(1024), dim=-1).amax(dim=-1)
    assert torch.isfinite(top).all()  # no overflow, no NaN
    if top.mean() > 0.9 and (top > 0.99).float().mean() > 0.5:
        outcome = "Nearly one-hot"
    elif top.mean() < 2 / 16:
        outcome = "Nearly uniform"
    else:
        outcome = "Nothing changes"
    assert scaled_top.mean() < 0.4  # the scaled softmax is far from one-hot
    assert right("2.3").startswith(outcome)


def test_fully_masked_rows_with_right_padding():
    prompt = CHECKS["2.6"][0].prompt
    code = re.search(r"`mask = (.+?)`", prompt).group(1)
    mask = eval(code, {"causal_mask": causal_mask, "torch": torch})  # the prompt's
    empty_rows = int((~mask.any(dim=-1)).sum())
    assert right("2.6", 0).split(":")[0] == str(empty_rows)
    # the explanation's contrast: with left padding, rows 0 and 1 are empty
    left = causal_mask(5) & torch.tensor([False, False, True, True, True])
    assert (~left.any(dim=-1)).nonzero().flatten().tolist() == [0, 1]


def _outcome(recipe, scores, mask):
    try:
        weights = recipe(scores, mask)
    except RuntimeError:
        return "error"
    if torch.isnan(weights).any():
        return "nan"
    assert weights.dtype == torch.float16
    assert (weights[~mask] == 0).all()
    return "ok"


def _float32_then_zero(scores, mask):
    w = torch.softmax(scores.float().masked_fill(~mask, float("-inf")), dim=-1)
    return w.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0).half()


def test_only_one_float16_recipe_is_safe():
    recipes = {  # each option, as code
        "`torch.softmax(scores.masked_fill(~mask, -1e9), -1)`": (
            lambda s, m: torch.softmax(s.masked_fill(~m, -1e9), -1)
        ),
        "`torch.softmax(scores.masked_fill(~mask, float('-inf')), -1)`": (
            lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), -1)
        ),
        "fill `-1e9` in float32, cast with `.half()`, then softmax": (
            lambda s, m: torch.softmax(s.float().masked_fill(~m, -1e9).half(), -1)
        ),
        "in float32: fill `-inf`, softmax, zero the empty rows; cast back": (
            _float32_then_zero
        ),
    }
    question = CHECKS["2.6"][1]
    assert set(recipes) == set(question.options)
    scores = torch.randn(4, 4, generator=torch.Generator().manual_seed(0)).half()
    mask = causal_mask(4) & torch.tensor([False, True, True, True])  # row 0 empty
    outcomes = {text: _outcome(fn, scores, mask) for text, fn in recipes.items()}
    safe = [text for text, outcome in outcomes.items() if outcome == "ok"]
    assert safe == [question.options[question.answer]], outcomes
    assert outcomes[question.options[0]] == "error"  # -1e9 overflows float16
