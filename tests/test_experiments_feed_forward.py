"""Chapter 5's feed-forward experiment: its functions, and its claims over seeds."""

from __future__ import annotations

import pytest
import torch

from transformer_book.blocks import EncoderBlock
from transformer_book.experiments.feed_forward import (
    MODEL_NAMES,
    N_VALUES,
    SEQ_LEN,
    AttentionOnlyBlock,
    FFNResult,
    MixThenMap,
    make_model,
    neighbour_batch,
    neighbour_table,
    run_feed_forward,
)


def test_targets_are_the_table_entry_of_the_two_neighbours():
    table = neighbour_table()
    assert table.shape == (N_VALUES, N_VALUES)
    assert torch.equal(table, neighbour_table())
    assert len(table.unique()) > N_VALUES // 2  # a lookup, not a constant
    x, y = neighbour_batch(4, torch.Generator().manual_seed(0), table)
    assert x.shape == y.shape == (4, SEQ_LEN)
    for b in range(4):
        for t in range(SEQ_LEN):
            left, right = x[b, t - 1], x[b, (t + 1) % SEQ_LEN]
            assert y[b, t] == table[left, right]


def test_parameter_counts_follow_the_formula():
    V, T, H = N_VALUES, SEQ_LEN, 4

    def count(D, d_ff):
        embeddings, readout = V * D + T * D, D * V + V
        attention, norms = 4 * D * D + 4 * D, 2 * D * (2 if d_ff else 1)
        ffn = 2 * D * d_ff + d_ff + D if d_ff else 0
        return embeddings + attention + ffn + norms + readout

    sizes = {n: sum(p.numel() for p in make_model(n).parameters()) for n in MODEL_NAMES}
    assert sizes == {"with FFN": count(32, 128), "without FFN": count(56, 0)}
    assert sizes == {"with FFN": 14_260, "without FFN": 15_588}
    assert make_model("with FFN").block.self_attn.n_heads == H


def test_attention_only_block_is_the_encoder_block_with_its_ffn_zeroed():
    torch.manual_seed(0)
    encoder = EncoderBlock(16, 4, 32)
    with torch.no_grad():
        for p in encoder.feed_forward.linear2.parameters():
            p.zero_()
    block = AttentionOnlyBlock(16, 4)
    block.self_attn.load_state_dict(encoder.self_attn.state_dict())
    x = torch.randn(3, 5, 16)
    # the encoder's second LayerNorm (fresh: scale 1, shift 0) of an already
    # normalised vector changes it by less than its eps
    torch.testing.assert_close(encoder(x), block(x), atol=1e-4, rtol=0)


def test_mix_then_map_positions_meet_only_in_the_block():
    torch.manual_seed(0)
    per_position = MixThenMap(torch.nn.Identity(), 8)  # no mixing block
    x = torch.randint(N_VALUES, (2, SEQ_LEN))
    changed = x.clone()
    changed[:, 3] = (changed[:, 3] + 1) % N_VALUES
    diff = (per_position(x) - per_position(changed)).abs().amax(dim=(0, 2))  # (T,)
    assert diff[3] > 0 and diff[torch.arange(SEQ_LEN) != 3].max() == 0
    mixing = make_model("with FFN")
    diff = (mixing(x) - mixing(changed)).abs().amax(dim=(0, 2))
    assert (diff > 0).all()  # attention carries position 3 everywhere


@pytest.mark.parametrize(
    "x, words",
    [
        (torch.zeros(2, SEQ_LEN + 1, dtype=torch.long), "SEQ_LEN"),
        (torch.full((2, 3), N_VALUES), "outside"),
        (torch.zeros(2, 3), "integer"),
    ],
)
def test_mix_then_map_rejects_bad_rows(x, words):
    with pytest.raises((ValueError, TypeError), match=words):
        make_model("without FFN")(x)


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="name"):
        make_model("with MLP")
    with pytest.raises(ValueError, match="table"):
        neighbour_batch(2, torch.Generator(), torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="generator"):
        neighbour_batch(2, 0, neighbour_table())
    with pytest.raises(ValueError, match="x"):
        AttentionOnlyBlock(8, 2)(torch.randn(2, 3, 4))


def test_run_feed_forward_returns_its_measurements():
    result = run_feed_forward(seed=5, steps=2, device="cpu")
    assert isinstance(result, FFNResult)
    assert set(result.accuracy) == set(MODEL_NAMES)
    # the model without the FFN has at least as many parameters
    assert result.n_params["without FFN"] >= result.n_params["with FFN"]
    assert all(0.0 <= a <= 1.0 for a in result.accuracy.values())
    assert 0.0 <= result.ffn_zeroed <= 1.0
    assert all(len(h["loss"]) == 2 for h in result.histories.values())
    assert not result.models["with FFN"].block.feed_forward._forward_hooks


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"seed": -1}, ValueError),
        ({"seed": 1.5}, TypeError),
        ({"steps": 0}, ValueError),
        ({"steps": True}, TypeError),
        ({"device": "nowhere"}, ValueError),
    ],
)
def test_run_feed_forward_rejects_bad_arguments(kwargs, error):
    name = next(iter(kwargs))
    with pytest.raises(error, match=name):
        run_feed_forward(**kwargs)


@pytest.mark.seeds
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_feed_forward_claims_hold_for_other_seeds(seed):
    result = run_feed_forward(seed=seed)
    acc = result.accuracy
    assert acc["with FFN"] >= 0.97, acc
    assert acc["without FFN"] <= 0.75, acc
    assert result.ffn_zeroed <= 0.35, result.ffn_zeroed
