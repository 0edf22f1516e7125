"""T5: Chapter 5's encoder-decoder with a shared relative bias; span corruption."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer_book.attention import MultiHeadAttention, scaled_dot_product_attention
from transformer_book.models import (
    T5,
    EncoderDecoder,
    EncoderDecoderConfig,
    T5Config,
    span_corrupt,
    span_restore,
)
from transformer_book.models.t5 import RelativeSelfAttention
from transformer_book.positional import relative_position_bucket

V, MAX_LEN = 40, 24
SENTINELS = tuple(range(20, 36))  # ids the test sequences never use


def tiny(seed: int = 0, **kw) -> T5:
    torch.manual_seed(seed)
    return T5(T5Config(V, MAX_LEN, d_model=16, n_heads=4, d_ff=32, **kw)).eval()


def ids(b: int, t: int, seed: int = 1, high: int = 20) -> torch.Tensor:
    return torch.randint(3, high, (b, t), generator=torch.Generator().manual_seed(seed))


def perturb_bias(model: T5) -> None:
    with torch.no_grad():  # the tables start at zero: give them a shape
        for bias in (model.encoder_bias, model.decoder_bias):
            bias.bias.weight.normal_(generator=torch.Generator().manual_seed(5))


def test_t5_is_chapter_5s_model_with_one_shared_bias_per_stack():
    model = tiny()
    assert isinstance(model, EncoderDecoder) and model.cfg.norm_first
    assert isinstance(model.cfg, EncoderDecoderConfig)
    assert model.output.weight is model.embed.token.weight
    for block in model.encoder:
        assert block.self_attn.position_bias is model.encoder_bias
    for block in model.decoder:
        assert block.self_attn.position_bias is model.decoder_bias
        assert type(block.cross_attn) is MultiHeadAttention  # no bias there
    assert model.encoder_bias.bidirectional and not model.decoder_bias.bidirectional
    assert model(ids(2, 7), ids(2, 5)).shape == (2, 5, V)
    with pytest.raises(TypeError, match="T5Config"):
        T5(EncoderDecoderConfig(V, MAX_LEN))


def test_without_a_bias_the_encoder_ignores_order_with_one_it_does_not():
    model, x = tiny(), ids(2, 8)
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(model.encode(x[:, perm]), model.encode(x)[:, perm])
    perturb_bias(model)  # positions enter only through the relative bias
    assert (model.encode(x[:, perm]) - model.encode(x)[:, perm]).abs().amax() > 1e-3


def test_relative_self_attention_adds_the_bucketed_bias():
    model = tiny()
    perturb_bias(model)
    attn = model.encoder[0].self_attn
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(2))
    rel = torch.arange(6)[None, :] - torch.arange(6)[:, None]  # key - query
    table = model.encoder_bias.bias.weight  # (buckets, H)
    bias = table[relative_position_bucket(rel)].permute(2, 0, 1)  # (H, T, T)
    q, k, v = (attn.split_heads(p(x)) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    heads, w = scaled_dot_product_attention(q, k, v, bias=bias)
    expected = attn.out_proj(attn.merge_heads(heads))
    out, weights = attn(x, need_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, w)
    with pytest.raises(ValueError, match="self-attention"):
        attn(x, x[:, :3])
    assert isinstance(attn, RelativeSelfAttention)


def test_the_decoder_is_causal_and_padding_is_masked():
    model = tiny()
    perturb_bias(model)
    src, tgt = ids(2, 7), ids(2, 6)
    later = tgt.clone()
    later[:, 4:] = 9
    torch.testing.assert_close(model(src, later)[:, :4], model(src, tgt)[:, :4])
    padded = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    # Padded keys are masked, and the bias depends only on j - i: padding at the end
    # leaves every real position's memory as it was, bias and all...
    torch.testing.assert_close(model.encode(padded)[:, :7], model.encode(src))
    unmasked = padded.clone()
    unmasked[:, 7:] = 5  # ...while three real tokens there do change it
    assert (model.encode(unmasked)[:, :7] - model.encode(src)).abs().amax() > 1e-3


def test_a_task_prefix_selects_the_task():
    """Trained on "max:" and "min:" rows, the model does what the prefix says.

    A model blind to the prefix gives the same answer to both, so it is right on
    at most half of the rows of one task or the other.
    """
    to_max, to_min, bos, eos = 1, 2, 37, 38
    model = tiny(seed=3, n_layers=1)
    model.train()
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def batch(n: int):
        x = torch.rand(n, 12, generator=gen).argsort(dim=1)[:, :4] + 3  # distinct
        task = torch.randint(2, (n,), generator=gen)
        y = torch.where(task == 1, x.min(dim=1).values, x.max(dim=1).values)
        src = torch.cat([torch.where(task == 1, to_min, to_max)[:, None], x], dim=1)
        tgt = torch.stack([torch.full((n,), bos), y, torch.full((n,), eos)], dim=1)
        return src, tgt, task

    for _ in range(150):
        src, tgt, _ = batch(64)
        loss = F.cross_entropy(model(src, tgt[:, :-1]).transpose(1, 2), tgt[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    src, tgt, task = batch(400)
    out = model.greedy_decode(src, bos, eos, max_new_tokens=2)
    right = (out[:, 1:] == tgt[:, 1:]).all(dim=1)
    for t in (0, 1):  # both tasks, told apart by the prefix alone
        assert right[task == t].float().mean() > 0.75, right[task == t].float().mean()


# -- span corruption ----------------------------------------------------------------


def test_span_corruption_of_one_sequence():
    x = torch.arange(40, 60)  # T = 20: N = 3 noise tokens in K = 1 span
    inputs, targets = span_corrupt(x, SENTINELS, generator=torch.Generator())
    assert inputs.shape == (18,) and targets.shape == (4,)
    assert inputs[-1] == targets[0] == SENTINELS[0]  # the last run is dropped
    assert torch.equal(inputs[:-1], x[:17]) and torch.equal(targets[1:], x[17:])
    assert torch.equal(span_restore(inputs, targets, SENTINELS), x)


@pytest.mark.parametrize("length", [2, 5, 17, 64, 100])
def test_span_corruption_round_trips(length):
    x = ids(50, length, seed=length)
    gen = torch.Generator().manual_seed(length)
    inputs, targets = span_corrupt(x, SENTINELS, generator=gen)
    n_noise = min(max(round(length * 0.15), 1), length - 1)
    n_spans = min(max(round(n_noise / 3), 1), n_noise, length - n_noise)
    assert inputs.shape == (50, length - n_noise + n_spans)
    assert targets.shape == (50, n_noise + n_spans)
    assert torch.equal(span_restore(inputs, targets, SENTINELS), x)
    used = torch.tensor(SENTINELS[:n_spans])
    for row, row_in, row_out in zip(x, inputs, targets, strict=True):
        assert torch.equal(row_in[torch.isin(row_in, used)], used)  # in order, once
        assert torch.equal(row_out[torch.isin(row_out, used)], used)
        assert row_in[0] == row[0] and row_out[0] == SENTINELS[0]  # first run kept
        assert row_in[-1] == SENTINELS[n_spans - 1]  # the last run is dropped


def test_span_corruption_statistics():
    x = ids(500, 64)
    inputs, targets = span_corrupt(x, SENTINELS, generator=torch.Generator())
    noise = targets.shape[1] - 3  # 10 noise tokens in 3 spans per row
    assert noise / 64 == pytest.approx(0.15, abs=0.01)
    spans = torch.isin(targets, torch.tensor(SENTINELS)).sum(1)
    assert (spans == 3).all()
    assert len({tuple(r.tolist()) for r in targets}) > 450  # random places
    first_span = (inputs == SENTINELS[0]).int().argmax(dim=1)  # (B,)
    assert first_span.min() <= 3 and first_span.max() >= 40  # anywhere it fits
    span_lengths = torch.tensor(
        [len(s) for r in targets.tolist() for s in _split(r)], dtype=torch.float
    )
    assert span_lengths.mean() == pytest.approx(10 / 3)  # N / K, on average 3
    assert span_lengths.min() == 1 and span_lengths.max() >= 6


def _split(target: list[int]) -> list[list[int]]:
    spans: list[list[int]] = []
    for token in target:
        if token in SENTINELS:
            spans.append([])
        else:
            spans[-1].append(token)
    return spans


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"ids": torch.tensor([1, SENTINELS[0], 3])}, "sentinel"),
        ({"ids": torch.ones(5)}, "integer"),
        ({"ids": torch.tensor([4])}, "at least 2"),
        ({"ids": torch.ones(2, 2, 2).long()}, r"\(T,\) or \(B, T\)"),
        ({"noise_density": 0.0}, "noise_density"),
        ({"mean_span_length": 0.5}, "mean_span_length"),
        ({"sentinel_ids": (30,), "ids": ids(1, 80)[0]}, "sentinel_ids has 1"),
    ],
)
def test_span_corruption_names_bad_arguments(kw, match):
    args = dict(ids=ids(1, 20)[0], sentinel_ids=SENTINELS) | kw
    with pytest.raises(ValueError, match=match):
        span_corrupt(**args)


def test_restore_needs_every_sentinel_in_the_target():
    with pytest.raises(ValueError, match="not in targets"):
        span_restore(torch.tensor([5, 20]), torch.tensor([21, 6]), SENTINELS)
