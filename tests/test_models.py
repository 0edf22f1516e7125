"""The encoder-decoder Transformer, its warm-up schedule and its decoding."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from transformer_book.data import ToyTranslation
from transformer_book.models import EncoderDecoder, EncoderDecoderConfig, TokenEmbedding
from transformer_book.positional import sinusoidal_encoding
from transformer_book.train import noam_lr_lambda, sequence_accuracy, train

TASK = ToyTranslation(n_words=6, min_len=2, max_len=5)


def small_config(**changes):
    base = dict(
        vocab_size=TASK.vocab_size, max_len=8, d_model=32, n_heads=4, n_layers=1,
        d_ff=64,
    )  # fmt: skip
    return EncoderDecoderConfig(**{**base, **changes})


def model_for(seed=0, **changes):
    torch.manual_seed(seed)
    return EncoderDecoder(small_config(**changes)).eval()


def tiny_batch(n=8, seed=0):
    return TASK.sample(n, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("norm_first", [False, True])
def test_shapes(norm_first):
    model = model_for(norm_first=norm_first, n_layers=2)
    batch = tiny_batch(3)
    (src, tgt_in), _ = batch.teacher_forcing()
    logits = model(src, tgt_in)
    assert logits.shape == (3, tgt_in.shape[1], TASK.vocab_size)
    memory = model.encode(src)
    assert memory.shape == (3, src.shape[1], 32)
    out, weights = model.decode(tgt_in, memory, src, need_weights=True)
    assert_close(out, logits)
    assert len(weights) == 2
    assert weights[0].shape == (3, 4, tgt_in.shape[1], src.shape[1])


def test_embedding_is_scaled_by_sqrt_d_model_and_adds_positions():
    embed = TokenEmbedding(vocab_size=11, d_model=8, max_len=6, dropout=0.0)
    idx = torch.tensor([[3, 1, 4, 1, 5]])
    expected = embed.token.weight[idx] * math.sqrt(8) + sinusoidal_encoding(6, 8)[:5]
    assert_close(embed(idx), expected)
    assert "positions" not in embed.state_dict()  # a constant, not a parameter


def test_output_layer_is_tied_to_the_embedding():
    model = model_for()
    assert model.output.weight is model.embed.token.weight
    n_tied = sum(p.numel() for p in model.parameters())
    untied = model_for(tie_weights=False)
    assert untied.output.weight is not untied.embed.token.weight
    assert sum(p.numel() for p in untied.parameters()) == n_tied + TASK.vocab_size * 32


def test_decoder_is_causal():
    """Changing a future target token leaves the logits of earlier positions alone."""
    model = model_for(n_layers=2)
    (src, tgt_in), _ = tiny_batch(2).teacher_forcing()
    logits = model(src, tgt_in)
    for j in range(1, tgt_in.shape[1]):
        changed = tgt_in.clone()
        changed[:, j] = (changed[:, j] + 1) % TASK.vocab_size
        new = model(src, changed)
        assert_close(new[:, :j], logits[:, :j])
        assert not torch.allclose(new[:, j:], logits[:, j:])


def test_source_padding_is_ignored():
    model = model_for()
    (src, tgt_in), _ = tiny_batch(3).teacher_forcing()
    longer = F.pad(src, (0, 2), value=TASK.pad_id)  # two more padding positions
    assert_close(model(longer, tgt_in), model(src, tgt_in))


def test_overfits_a_tiny_batch_and_greedy_decoding_reproduces_it():
    model = model_for()
    batch = tiny_batch(8)
    inputs, targets = batch.teacher_forcing()

    def loss_fn(logits, y):
        return F.cross_entropy(logits.transpose(1, 2), y, ignore_index=TASK.pad_id)

    history = train(
        model, lambda step: (inputs, targets), loss_fn, steps=120, lr=1e-2,
        progress=False,
    )  # fmt: skip
    assert history["loss"][-1] < 0.05 < history["loss"][0]
    predicted = model.greedy_decode(batch.src, TASK.bos_id, TASK.eos_id)
    assert sequence_accuracy(predicted, batch.tgt, TASK.pad_id) == 1.0
    assert torch.equal(
        predicted[:, : batch.tgt.shape[1]], batch.tgt[:, : predicted.shape[1]]
    )


def test_greedy_decode_pads_after_eos_and_respects_the_limit():
    model = model_for()
    batch = tiny_batch(4)
    out = model.greedy_decode(batch.src, TASK.bos_id, TASK.eos_id, max_new_tokens=3)
    assert out.shape[0] == 4 and out.shape[1] <= 4
    assert torch.all(out[:, 0] == TASK.bos_id)
    out = model.greedy_decode(batch.src, TASK.bos_id, TASK.eos_id)
    for row in out:
        ends = (row == TASK.eos_id).nonzero()
        if len(ends):
            assert torch.all(row[ends[0, 0] + 1 :] == TASK.pad_id)
    # Greedy: every new token is the arg-max of the logits given the prefix.
    logits = model(batch.src, out[:, :-1])
    first = logits[:, 0].argmax(-1)
    assert torch.equal(out[:, 1], first)


def test_noam_schedule_is_the_papers_formula():
    d_model, warmup = 512, 4000
    lam = noam_lr_lambda(d_model, warmup)
    for step in (1, 100, 3999, 4000, 4001, 20000):
        expected = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert lam(step - 1) == pytest.approx(expected)
    rates = [lam(s) for s in range(10000)]
    assert max(range(10000), key=rates.__getitem__) == warmup - 1  # peak at warmup
    assert noam_lr_lambda(64, 10, scale=2.0)(3) == pytest.approx(
        2 * lam_value(64, 10, 4)
    )
    with pytest.raises(ValueError, match="warmup"):
        noam_lr_lambda(64, 0)


def lam_value(d_model, warmup, step):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def test_sequence_accuracy_pads_the_shorter_and_needs_every_token():
    targets = torch.tensor([[1, 5, 6, 2, 0], [1, 7, 2, 0, 0]])
    assert sequence_accuracy(targets[:, :4], targets, pad_id=0) == 1.0
    wrong = targets.clone()
    wrong[1, 1] = 8
    assert sequence_accuracy(wrong, targets, pad_id=0) == 0.5
    longer = F.pad(targets, (0, 3), value=4)  # runs on past the end
    assert sequence_accuracy(longer, targets, pad_id=0) == 0.0
    with pytest.raises(ValueError, match="same B"):
        sequence_accuracy(targets[:1], targets, pad_id=0)


def test_bad_input():
    with pytest.raises(ValueError, match="divisible"):
        small_config(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="pad_id"):
        small_config(pad_id=TASK.vocab_size)
    with pytest.raises(ValueError, match="dropout"):
        small_config(dropout=1.0)
    with pytest.raises(ValueError, match="n_layers"):
        small_config(n_layers=0)
    model = model_for()
    src = torch.ones(2, 4, dtype=torch.long)
    with pytest.raises(TypeError, match="integer token ids"):
        model(src.float(), src)
    with pytest.raises(ValueError, match="max_len=8"):
        model(torch.ones(2, 9, dtype=torch.long), src)
    with pytest.raises(ValueError, match="batch sizes"):
        model(src, src[:1])
    with pytest.raises(ValueError, match="max_new_tokens"):
        model.greedy_decode(src, TASK.bos_id, TASK.eos_id, max_new_tokens=8)
