"""Encoder and decoder blocks against nn.TransformerEncoderLayer / DecoderLayer."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from transformer_book.attention import causal_mask, padding_mask
from transformer_book.blocks import DecoderBlock, EncoderBlock, FeedForward

D, H, D_FF = 16, 4, 48


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def torch_layer(layer_class, norm_first, activation="relu", seed=0):
    torch.manual_seed(seed)
    return layer_class(
        D, H, D_FF, dropout=0.0, activation=activation, batch_first=True,
        norm_first=norm_first,
    )  # fmt: skip


def torch_encoder(norm_first, activation="relu", seed=0):
    return torch_layer(nn.TransformerEncoderLayer, norm_first, activation, seed)


def torch_decoder(norm_first, activation="relu", seed=0):
    return torch_layer(nn.TransformerDecoderLayer, norm_first, activation, seed)


def perturb_norms(layer):
    """LayerNorms start at weight 1, bias 0: make them non-trivial so copies count."""
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if "norm" in name:
                p.add_(0.3 * randn(*p.shape, seed=len(name)))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_block_matches_pytorch(norm_first, activation):
    theirs = torch_encoder(norm_first, activation)
    perturb_norms(theirs)
    ours = EncoderBlock.from_torch(theirs)
    assert ours.norm_first is norm_first
    x = randn(3, 7, D)
    assert_close(ours(x), theirs(x))


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_matches_pytorch_with_masks(norm_first):
    theirs = torch_encoder(norm_first)
    ours = EncoderBlock.from_torch(theirs)
    x = randn(3, 7, D)
    pad = padding_mask(torch.tensor([7, 4, 2]))  # (B, 1, T), True = real token
    out = ours(x, mask=pad)
    expected = theirs(x, src_key_padding_mask=~pad[:, 0])  # PyTorch: True = blocked
    assert_close(out, expected)
    causal = causal_mask(7)
    assert_close(ours(x, mask=causal), theirs(x, src_mask=~causal, is_causal=True))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_block_matches_pytorch(norm_first, activation):
    theirs = torch_decoder(norm_first, activation)
    perturb_norms(theirs)
    ours = DecoderBlock.from_torch(theirs)
    x, memory = randn(2, 5, D, seed=1), randn(2, 6, D, seed=2)
    self_mask = causal_mask(5)
    memory_mask = padding_mask(torch.tensor([6, 3]))  # (B, 1, S)
    out = ours(x, memory, self_mask=self_mask, memory_mask=memory_mask)
    expected = theirs(
        x, memory, tgt_mask=~self_mask, memory_key_padding_mask=~memory_mask[:, 0]
    )
    assert_close(out, expected)
    assert_close(ours(x, memory), theirs(x, memory))


def test_cross_attention_reads_the_memory_and_its_weights_are_returned():
    block = DecoderBlock(D, H, D_FF)
    x, memory = randn(2, 5, D, seed=1), randn(2, 6, D, seed=2)
    memory_mask = padding_mask(torch.tensor([6, 3]))  # (B, 1, S)
    out, weights = block(x, memory, memory_mask=memory_mask, need_weights=True)
    assert out.shape == (2, 5, D) and weights.shape == (2, H, 5, 6)
    assert_close(weights.sum(-1), torch.ones(2, H, 5))
    assert torch.all(weights[1, :, :, 3:] == 0), "padded memory keys got weight"
    # Changing a padded memory position changes nothing; a real one changes x.
    changed = memory.clone()
    changed[1, 4] += 5.0
    assert_close(
        block(x, changed, memory_mask=memory_mask), block(x, memory, None, memory_mask)
    )
    changed[1, 0] += 5.0
    assert not torch.allclose(block(x, changed, memory_mask=memory_mask)[1], out[1])


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_self_attention_is_causal(norm_first):
    block = DecoderBlock(D, H, D_FF, norm_first=norm_first)
    x, memory = randn(1, 6, D, seed=3), randn(1, 4, D, seed=4)
    out = block(x, memory, self_mask=causal_mask(6))
    changed = x.clone()
    changed[0, 4:] += 3.0  # change the future of position 3
    out_changed = block(changed, memory, self_mask=causal_mask(6))
    assert_close(out_changed[0, :4], out[0, :4])
    assert not torch.allclose(out_changed[0, 4:], out[0, 4:])


def test_feed_forward_acts_on_each_position_alone():
    ff = FeedForward(D, D_FF)
    x = randn(2, 5, D)
    out = ff(x)
    assert out.shape == (2, 5, D)
    assert_close(out[:, 2], ff(x[:, 2:3])[:, 0])
    expected = ff.linear2(F.relu(ff.linear1(x)))  # max(0, x W1 + b1) W2 + b2
    assert_close(out, expected)
    assert_close(FeedForward(D, D_FF, activation="gelu")(x).shape, out.shape)


def test_dropout_is_active_in_training_only():
    block = EncoderBlock(D, H, D_FF, dropout=0.5)
    x = randn(2, 5, D)
    block.train()
    assert not torch.allclose(block(x), block(x))
    block.eval()
    assert_close(block(x), block(x))


def test_from_torch_copies_dropout_and_is_independent():
    theirs = nn.TransformerEncoderLayer(D, H, D_FF, dropout=0.25, batch_first=True)
    ours = EncoderBlock.from_torch(theirs)
    assert ours.dropout1.p == 0.25 and ours.self_attn.dropout == 0.25
    with torch.no_grad():
        ours.feed_forward.linear1.weight.zero_()
    assert theirs.linear1.weight.abs().sum() > 0, "the copy shares storage"


def test_bad_input():
    with pytest.raises(ValueError, match="divisible"):
        EncoderBlock(10, 3, 20)
    with pytest.raises(ValueError, match="activation"):
        FeedForward(D, D_FF, activation="tanh")
    block = EncoderBlock(D, H, D_FF)
    with pytest.raises(ValueError, match=r"\(B, T, d_model=16\)"):
        block(randn(2, 5, D + 1))
    with pytest.raises(ValueError, match=r"\(B, T, d_model=16\)"):
        block(randn(5, D))
    decoder = DecoderBlock(D, H, D_FF)
    with pytest.raises(ValueError, match="memory"):
        decoder(randn(2, 5, D), randn(2, 6, D + 2))
    with pytest.raises(ValueError, match="batch sizes"):
        decoder(randn(2, 5, D), randn(3, 6, D))
    with pytest.raises(TypeError, match="bool"):
        block(randn(2, 5, D), mask=torch.ones(5, 5))
    torch_layer = nn.TransformerEncoderLayer(D, H, D_FF, batch_first=True, bias=False)
    with pytest.raises(ValueError, match="bias=True"):
        EncoderBlock.from_torch(torch_layer)
    tanh_layer = nn.TransformerDecoderLayer(D, H, D_FF, activation=torch.tanh)
    with pytest.raises(ValueError, match="relu and gelu"):
        DecoderBlock.from_torch(tanh_layer)
