"""Tests of the Chapter 4 model whose position scheme is a switch."""

import pytest
import torch

from transformer_book.attention import MultiHeadAttention, causal_mask
from transformer_book.position_lm import (
    SCHEMES,
    PositionalSelfAttention,
    PositionLM,
    PositionLMConfig,
)


def _model(position, **kw):
    torch.manual_seed(0)
    cfg = PositionLMConfig(
        vocab_size=11, position=position, d_model=16, n_heads=2, n_layers=2, d_ff=32,
        **kw,
    )  # fmt: skip
    return PositionLM(cfg).eval()


@pytest.mark.parametrize("position", SCHEMES)
def test_every_scheme_gives_logits_and_is_causal(position):
    model = _model(position, max_len=32)
    idx = torch.randint(11, (3, 9))
    logits = model(idx)
    assert logits.shape == (3, 9, 11)
    changed = idx.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 11  # change only the future of 0..5
    torch.testing.assert_close(model(changed)[:, :6], logits[:, :6])
    assert not torch.allclose(model(changed)[:, 6:], logits[:, 6:])


@pytest.mark.parametrize("position", ["none", "sinusoidal", "t5", "rope", "alibi"])
def test_schemes_without_a_table_run_at_any_length(position):
    model = _model(position, max_len=8)
    assert model(torch.randint(11, (1, 40))).shape == (1, 40, 11)


def test_learned_positions_stop_at_max_len():
    model = _model("learned", max_len=8)
    model(torch.randint(11, (1, 8)))
    with pytest.raises(ValueError, match="exceeds max_len=8"):
        model(torch.randint(11, (1, 9)))


def test_positions_change_the_output_except_for_none():
    idx = torch.randint(11, (2, 7))
    for position in SCHEMES:
        model = _model(position, max_len=16)
        if position == "t5":  # its bias starts at zero: give it a preference
            with torch.no_grad():
                model.t5_bias.bias.weight.normal_()
        reference = _model("none")
        reference.load_state_dict(model.state_dict(), strict=False)
        same = torch.allclose(model(idx), reference(idx), atol=1e-6)
        assert same == (position == "none"), position


def test_attention_without_positions_equals_causal_multi_head_attention():
    torch.manual_seed(1)
    attn = PositionalSelfAttention(16, 4)
    plain = MultiHeadAttention(16, 4)
    plain.load_state_dict(attn.state_dict())
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(attn(x), plain(x, mask=causal_mask(5)))
    assert not torch.allclose(attn(x, rope=True), attn(x))


def test_t5_bias_is_shared_by_the_layers_and_alibi_has_no_parameters():
    t5, alibi, none = _model("t5"), _model("alibi"), _model("none")
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(alibi) == n(none)
    assert n(t5) == n(none) + 32 * 2  # num_buckets x n_heads, once for all layers
    assert n(_model("learned", max_len=10)) == n(none) + 10 * 16


def test_unknown_scheme_is_rejected():
    with pytest.raises(ValueError, match="position='absolute'"):
        PositionLM(PositionLMConfig(vocab_size=5, position="absolute"))


def test_after_the_same_seed_the_shared_weights_are_identical():
    reference = _model("none").state_dict()
    for position in SCHEMES:
        state = _model(position, max_len=16).state_dict()
        for name, value in reference.items():
            assert torch.equal(state[name], value), (position, name)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("position", SCHEMES)
def test_every_scheme_runs_on_cuda_under_bfloat16_autocast(position):
    from transformer_book.device import autocast

    model = _model(position, max_len=32)
    idx = torch.randint(11, (3, 20))
    reference = model(idx)
    model, idx = model.cuda(), idx.cuda()
    with autocast("cuda"):
        logits = model(idx)
    assert logits.device.type == "cuda"
    torch.testing.assert_close(logits.float().cpu(), reference, atol=0.1, rtol=0.1)
