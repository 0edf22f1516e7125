"""Chapter 5's concept checks: the answers marked right are the ones the code gives."""

import torch

from transformer_book.attention import causal_mask
from transformer_book.blocks import DecoderBlock
from transformer_book.concepts.ch05 import CHECKS
from transformer_book.data import ToyTranslation
from transformer_book.experiments.translation import label_smoothing_floor
from transformer_book.models import EncoderDecoder, EncoderDecoderConfig


def marked(key, index=0):
    question = CHECKS[key][index]
    return question.options[question.answer]


def test_keys_and_counts():
    assert set(CHECKS) == {"5.3", "5.4", "5.5", "5.7"}
    assert 4 <= sum(len(questions) for questions in CHECKS.values()) <= 5


def test_adamw_first_step_ignores_the_gradient_scale():
    """5.3: a gradient 48× smaller gives an AdamW step of the same size."""

    def update_norm(grad_scale):
        torch.manual_seed(0)
        weight = torch.nn.Parameter(torch.randn(1000))
        weight.grad = torch.randn(1000) * grad_scale
        before = weight.detach().clone()
        torch.optim.AdamW([weight], lr=1e-3).step()
        return (weight.detach() - before).norm().item()

    ratio = update_norm(1.0) / update_norm(1 / 48)  # block 32's step / block 1's
    options = CHECKS["5.3"][0].options
    if ratio > 30:
        computed = options[0]  # 48× smaller
    elif 0.5 < ratio < 2:
        computed = options[1]  # about the same
    elif 4 < ratio < 12:
        computed = options[2]  # √48 ≈ 7× smaller
    else:
        assert ratio < 1 / 30, ratio
        computed = options[3]  # 48× larger
    assert marked("5.3") == computed == "About the same size", ratio


def test_changing_one_decoder_position_moves_it_and_the_later_ones():
    """5.4: change position 3 of 5; the causal mask decides which outputs move."""
    torch.manual_seed(0)
    block = DecoderBlock(16, 2, 32).eval()
    y, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    changed = y.clone()
    changed[:, 3] += 1.0
    mask = causal_mask(5)
    with torch.no_grad():
        moved = block(changed, memory, mask) - block(y, memory, mask)
    per_position = moved.abs().amax(dim=(0, 2))  # (T,)
    assert ((per_position < 1e-6) | (per_position > 0.01)).all(), per_position
    positions = frozenset(torch.nonzero(per_position > 0.01).flatten().tolist())
    options = CHECKS["5.4"][0].options
    by_positions = {
        frozenset({3}): options[0],
        frozenset({3, 4}): options[1],
        frozenset({0, 1, 2, 3}): options[2],
        frozenset(range(5)): options[3],
    }
    assert marked("5.4") == by_positions[positions] == "Positions 3 and 4"


def test_teacher_forcing_shifts_the_target():
    """5.5: the package's teacher forcing is (tgt[:, :-1], tgt[:, 1:])."""
    task = ToyTranslation(n_words=10, min_len=3, max_len=8)
    batch = task.sample(4, generator=torch.Generator().manual_seed(0))
    (_, decoder_input), labels = batch.teacher_forcing()
    assert torch.equal(decoder_input, batch.tgt[:, :-1])
    assert torch.equal(labels, batch.tgt[:, 1:])
    assert (decoder_input[:, 0] == task.bos_id).all()
    assert marked("5.5", 0) == "`tgt[:, :-1]` and `tgt[:, 1:]`"


def test_label_smoothing_floor_grows_with_the_vocabulary():
    """5.5: the floor for V = 1000 is about 1.01 nats, above V = 23's 0.611."""
    small, large = label_smoothing_floor(23, 0.1), label_smoothing_floor(1000, 0.1)
    assert f"{small:.3f}" == "0.611" and large > small
    right = marked("5.5", 1)
    assert f"About {large:.2f}" in right and "higher" in right
    others = [o for o in CHECKS["5.5"][1].options if o != right]
    assert all(f"{large:.2f}" not in o for o in others)


def test_greedy_decoding_recomputes_the_prefix():
    """5.7: 10 new tokens without a KV cache compute 1 + 2 + ... + 10 positions."""
    task = ToyTranslation(n_words=10, min_len=3, max_len=8)
    torch.manual_seed(0)
    cfg = EncoderDecoderConfig(task.vocab_size, 11, d_model=16, n_heads=2, d_ff=32)
    model = EncoderDecoder(cfg).eval()
    lengths = []
    model.decoder[0].register_forward_pre_hook(
        lambda module, args: lengths.append(args[0].shape[1])
    )

    def never_eos(module, args, logits):  # so that it writes exactly 10 tokens
        logits = logits.clone()
        logits[..., task.eos_id] = float("-inf")
        return logits

    model.output.register_forward_hook(never_eos)
    source = task.sample(1, generator=torch.Generator().manual_seed(0)).src
    with torch.no_grad():
        out = model.greedy_decode(source, task.bos_id, task.eos_id, max_new_tokens=10)
    assert out.shape == (1, 11)
    assert lengths == list(range(1, 11))
    assert marked("5.7") == str(sum(lengths)) == "55"
