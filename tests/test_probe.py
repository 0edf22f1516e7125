"""The attention-only probe model and the head helpers of Chapter 3."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from transformer_book.attention import MultiHeadAttention
from transformer_book.probe import (
    AttentionOnlyClassifier,
    ProbeConfig,
    ablate_heads,
    attention_on,
    record_heads,
)

D, H = 12, 3


def mha_and_input(seed=0):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(D, H)
    x = torch.randn(2, 5, D, generator=torch.Generator().manual_seed(seed + 1))
    return mha, x


def test_record_heads_keeps_each_heads_output_before_w_o():
    mha, x = mha_and_input()
    with record_heads(mha) as recorded:
        out = mha(x)
    (heads,) = recorded
    assert heads.shape == (2, H, 5, D // H)
    assert_close(mha.out_proj(mha.merge_heads(heads)), out)
    mha(x)
    assert len(recorded) == 1  # the hook is gone after the block


def test_zero_ablation_removes_exactly_the_chosen_heads():
    mha, x = mha_and_input()
    with record_heads(mha) as recorded:
        mha(x)
    heads = recorded[0].clone()
    heads[:, [0, 2]] = 0.0
    with ablate_heads(mha, [2, 0]):
        out = mha(x)
    assert_close(out, mha.out_proj(mha.merge_heads(heads)))
    assert_close(mha(x), mha.out_proj(mha.merge_heads(recorded[0])))  # restored


def test_ablating_every_head_leaves_only_the_output_bias():
    mha, x = mha_and_input()
    with ablate_heads(mha, range(H)):
        out = mha(x)
    assert_close(out, mha.out_proj.bias.expand_as(out))


def test_mean_ablation_replaces_heads_by_the_given_mean():
    mha, x = mha_and_input()
    with record_heads(mha) as recorded:
        mha(x)
    mean = recorded[0].mean(dim=0)  # (H, T, Dh)
    with ablate_heads(mha, [1], mean=mean):
        out = mha(x)
    expected = recorded[0].clone()
    expected[:, 1] = mean[1]
    assert_close(out, mha.out_proj(mha.merge_heads(expected)))
    # The mean of a batch of identical inputs is their own output: no change.
    same = x[:1].expand(4, -1, -1)
    with record_heads(mha) as rec:
        plain = mha(same)
    with ablate_heads(mha, [0, 1, 2], mean=rec[0].mean(dim=0)):
        assert_close(mha(same), plain)


def test_ablation_keeps_gradients_flowing_to_the_other_heads():
    mha, x = mha_and_input()
    with ablate_heads(mha, [0]):
        mha(x).sum().backward()
    dh = D // H
    assert mha.v_proj.weight.grad[:dh].abs().sum() == 0  # head 0 is cut off
    assert mha.v_proj.weight.grad[dh:].abs().sum() > 0


@pytest.mark.parametrize("heads", [[3], [-1], [0, 5]])
def test_bad_head_indices_raise_value_error(heads):
    mha, _ = mha_and_input()
    with pytest.raises(ValueError, match="out of range for n_heads=3"):
        with ablate_heads(mha, heads):
            pass


def test_attention_on_averages_the_weight_on_the_chosen_keys():
    w = torch.zeros(2, 2, 4, 4)
    w[:, 0] = torch.eye(4)  # head 0 looks at itself
    w[:, 1] = 0.25  # head 1 is uniform
    assert_close(attention_on(w, torch.arange(4)), torch.tensor([1.0, 0.25]))
    previous = torch.arange(4) - 1  # query 0 (index -1) is left out
    assert_close(attention_on(w, previous), torch.tensor([0.0, 0.25]))
    per_example = torch.tensor([[0, 1, 2, 3], [-1, -1, -1, 3]])
    assert_close(attention_on(w, per_example), torch.tensor([1.0, 0.25]))
    with pytest.raises(ValueError, match="must be"):
        attention_on(w[0], previous)


def probe(n_heads=2, n_layers=2):
    cfg = ProbeConfig(
        vocab_sizes=(5, 7), max_len=6, n_classes=4, n_outputs=2,
        d_model=8, n_heads=n_heads, n_layers=n_layers,
    )  # fmt: skip
    torch.manual_seed(0)
    return AttentionOnlyClassifier(cfg)


def tokens(b=3, t=6):
    gen = torch.Generator().manual_seed(2)
    return torch.randint(5, (b, t), generator=gen), torch.randint(
        7, (b, t), generator=gen
    )


def test_classifier_shapes_and_attention_maps():
    model = probe()
    logits = model(*tokens())
    assert logits.shape == (3, 6, 2, 4)
    maps = model.attention_weights(*tokens())
    assert maps.shape == (2, 3, 2, 6, 6)
    assert_close(maps.sum(-1), torch.ones(2, 3, 2, 6))
    assert model(*tokens(t=4)).shape == (3, 4, 2, 4)  # shorter sequences are fine


def test_classifier_is_attention_only_and_ablating_all_heads_leaves_position_wise():
    model = probe()
    keys, values = tokens()
    changed = values.clone()
    changed[:, 0] = (changed[:, 0] + 1) % 7
    with ablate_heads(model.layers[0], [0, 1]), ablate_heads(model.layers[1], [0, 1]):
        a, b = model(keys, values), model(keys, changed)
    assert_close(a[:, 1:], b[:, 1:])  # no head, no information between positions
    assert not torch.allclose(model(keys, values)[:, 1:], model(keys, changed)[:, 1:])


def test_classifier_learns_a_previous_token_copy():
    """One head, a few steps: the probe can learn a purely positional relation."""
    cfg = ProbeConfig((6,), max_len=5, n_classes=6, d_model=16, n_heads=1)
    torch.manual_seed(0)
    model = AttentionOnlyClassifier(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    for _ in range(150):
        x = torch.randint(6, (64, 5), generator=gen)
        loss = F.cross_entropy(model(x)[:, 1:, 0].flatten(0, 1), x[:, :-1].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    x = torch.randint(6, (256, 5), generator=gen)
    accuracy = (model(x)[:, 1:, 0].argmax(-1) == x[:, :-1]).float().mean()
    assert accuracy > 0.95
    score = attention_on(model.attention_weights(x)[0], torch.arange(5) - 1)
    assert score.item() > 0.8


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m(tokens()[0]), "expected 2 token tensors"),
        (lambda m: m(*tokens(t=7)), "exceeds max_len=6"),
    ],
)
def test_bad_inputs_raise_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call(probe())


def test_bad_config_raises_value_error():
    with pytest.raises(ValueError, match="vocab_sizes"):
        AttentionOnlyClassifier(ProbeConfig((), max_len=4, n_classes=2))
    with pytest.raises(ValueError, match="not divisible"):
        AttentionOnlyClassifier(ProbeConfig((3,), 4, 2, d_model=10, n_heads=4))
