"""BERT: bidirectional, padding-aware, pooled vectors, and the 80/10/10 masking."""

from __future__ import annotations

import pytest
import torch

from transformer_book.models import BERT, BERTConfig, mask_tokens
from transformer_book.models.bert import IGNORE_INDEX

V, MAX_LEN, PAD, MASK = 40, 24, 0, 2
SPECIAL = (0, 1, 2, 3, 4)


def tiny(seed: int = 0) -> BERT:
    torch.manual_seed(seed)
    return BERT(BERTConfig(V, MAX_LEN, d_model=16, n_heads=4, d_ff=32)).eval()


def ids(b: int, t: int, seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(5, V, (b, t), generator=gen)


def test_shapes_and_tied_output():
    model = tiny()
    assert model(ids(3, 7)).shape == (3, 7, V)
    assert model.output.weight is model.token.weight
    assert model.output.bias.shape == (V,)


def test_bert_is_bidirectional():
    model, x = tiny(), ids(2, 10)
    later = x.clone()
    later[:, 8] = (later[:, 8] + 1) % V
    change = (model(later)[:, :8] - model(x)[:, :8]).abs().amax(dim=-1)  # (B, 8)
    assert (change > 1e-4).all()  # every earlier position sees the later token


def test_padding_keys_are_ignored():
    model, x = tiny(), ids(2, 6)
    padded = torch.cat([x, torch.full((2, 4), PAD)], dim=1)
    torch.testing.assert_close(model(padded)[:, :6], model(x), atol=1e-5, rtol=1e-4)
    everything = torch.ones(2, 1, 6, dtype=torch.bool)
    torch.testing.assert_close(model(x, mask=everything), model(x))
    unpadded = model(padded, mask=torch.ones(2, 1, 10, dtype=torch.bool))[:, :6]
    assert (unpadded - model(x)).abs().amax() > 1e-4  # the explicit mask is used
    with pytest.raises(TypeError, match="mask must be bool"):
        model(x, mask=everything.float())


def test_attention_weights_for_maps():
    model = tiny()
    x = torch.cat([ids(2, 5), torch.full((2, 2), PAD)], dim=1)
    h, weights = model.encode(x, need_weights=True)
    torch.testing.assert_close(h, model.encode(x))
    assert len(weights) == 2 and weights[0].shape == (2, 4, 7, 7)
    for w in weights:
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 7))
        assert w[..., 5:].abs().amax() == 0  # no weight on [PAD] keys
        assert (w[..., :5] > 0).all()  # left and right: every real key


def test_pooled_vectors():
    model, x = tiny(), ids(3, 6)
    h = model.encode(x)
    torch.testing.assert_close(model.pooled(x, "cls"), h[:, 0])
    torch.testing.assert_close(model.pooled(x), h.mean(dim=1))
    padded = torch.cat([x, torch.full((3, 3), PAD)], dim=1)
    torch.testing.assert_close(model.pooled(padded), model.pooled(x), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="how"):
        model.pooled(x, how="max")


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m: m(ids(1, MAX_LEN + 1)), "more than max_len"),
        (lambda m: m(torch.tensor([[5, V]])), "idx holds ids outside"),
        (lambda m: m(torch.ones(2, 3)), "integer"),
        (lambda m: BERTConfig(V, 8, d_model=16, n_heads=4, pad_id=V), "pad_id"),
        (lambda m: BERTConfig(V, 8, d_model=10, n_heads=4), "divisible"),
    ],
)
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call(tiny())


# -- masking: the exact rules, then the proportions ------------------------------


def corrupt(x, seed=0, **kw):
    gen = torch.Generator().manual_seed(seed)
    return mask_tokens(x, V, MASK, SPECIAL, generator=gen, **kw)


def sample(seed: int = 3) -> torch.Tensor:
    x = ids(400, 256, seed)
    x[:, :3] = torch.tensor([3, 1, 4])  # special tokens never get chosen
    x[:, -20:] = PAD
    return x


def test_masking_follows_the_rules_exactly():
    x = sample()
    before = x.clone()
    inputs, labels = corrupt(x)
    assert torch.equal(x, before)  # not modified in place
    chosen = labels != IGNORE_INDEX
    assert torch.equal(labels[chosen], x[chosen])  # the original token
    assert torch.equal(inputs[~chosen], x[~chosen])  # the rest unchanged
    special = torch.isin(x, torch.tensor(SPECIAL))
    assert not (chosen & special).any()
    replaced = chosen & (inputs != MASK) & (inputs != x)
    assert not torch.isin(inputs[replaced], torch.tensor(SPECIAL)).any()
    again = corrupt(x)
    assert all(torch.equal(a, b) for a, b in zip(again, (inputs, labels), strict=False))
    assert not torch.equal(corrupt(x, seed=1)[1], labels)
    one_row, one_labels = corrupt(x[0])
    assert one_row.shape == one_labels.shape == x[0].shape


def test_masking_proportions_are_15_and_80_10_10():
    x = sample()
    inputs, labels = corrupt(x)
    normal = ~torch.isin(x, torch.tensor(SPECIAL))  # 400 * 233 = 93,200 tokens
    chosen = labels != IGNORE_INDEX
    share = chosen.sum().item() / normal.sum().item()
    assert abs(share - 0.15) < 0.005, share  # 4.5 standard deviations
    n = chosen.sum().item()
    to_mask = (inputs[chosen] == MASK).sum().item() / n
    kept = (inputs[chosen] == x[chosen]).sum().item() / n
    other = 1 - to_mask - kept
    assert abs(to_mask - 0.8) < 0.015, to_mask  # about 4.5 standard deviations
    assert abs(other - 0.1 * (1 - 1 / 35)) < 0.012, other  # a random other token
    assert abs(kept - 0.1 * (1 + 1 / 35)) < 0.012, kept  # incl. random = itself
    assert corrupt(x, mask_prob=0.0)[1].eq(IGNORE_INDEX).all()
    assert torch.equal(corrupt(x, mask_prob=1.0)[1] != IGNORE_INDEX, normal)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"mask_prob": 1.5}, "mask_prob"),
        ({"special_ids": (0, 1)}, "mask_id"),
        ({"ids": torch.tensor([[5, V]])}, "vocab_size"),
        ({"ids": torch.ones(2, 2)}, "integer"),
        ({"special_ids": tuple(range(V))}, "whole vocabulary"),
    ],
)
def test_masking_names_bad_arguments(kw, match):
    args = dict(ids=ids(2, 4), vocab_size=V, mask_id=MASK, special_ids=SPECIAL) | kw
    with pytest.raises(ValueError, match=match):
        mask_tokens(**args)
