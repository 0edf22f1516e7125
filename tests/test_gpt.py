"""GPT: causal, tied, and generating the same tokens with and without the KV cache."""

from __future__ import annotations

import pytest
import torch

from transformer_book.blocks import EncoderBlock
from transformer_book.models import GPT, GPTConfig

V, MAX_LEN = 40, 24


def tiny(seed: int = 0, **kw) -> GPT:
    torch.manual_seed(seed)
    cfg = GPTConfig(V, MAX_LEN, d_model=16, n_heads=4, n_layers=2, d_ff=32, **kw)
    return GPT(cfg).eval()


def ids(b: int, t: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(V, (b, t), generator=torch.Generator().manual_seed(seed))


def test_shapes_blocks_and_tied_output():
    model = tiny()
    assert model(ids(3, 7)).shape == (3, 7, V)
    assert model.output.weight is model.token.weight
    assert all(isinstance(b, EncoderBlock) and b.norm_first for b in model.blocks)
    assert all(b.feed_forward.activation == "gelu" for b in model.blocks)
    n_blocks = sum(p.numel() for p in model.blocks.parameters())
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == V * 16 + MAX_LEN * 16 + n_blocks + 2 * 16  # no output table


def test_gpt_is_causal():
    model, x = tiny(), ids(2, 12)
    later = x.clone()
    later[:, 7:] = (later[:, 7:] + 1) % V
    before, after = model(x), model(later)
    torch.testing.assert_close(after[:, :7], before[:, :7])  # the past ignores it
    assert (after[:, 7:] - before[:, 7:]).abs().amax() > 1e-3  # the future sees it
    earlier = x.clone()
    earlier[:, 0] = (earlier[:, 0] + 1) % V
    assert (model(earlier)[:, -1] - before[:, -1]).abs().amax() > 1e-4


def test_cached_forward_equals_the_full_forward():
    model, x = tiny(), ids(2, 10)
    full = model(x)
    logits, cache = model.forward_cached(x[:, :6])
    torch.testing.assert_close(logits, full[:, :6], atol=1e-5, rtol=1e-4)
    assert len(cache) == 2 and all(len(pair) == 2 for pair in cache)
    assert cache[0][0].shape == (2, 4, 6, 4)  # (B, H, P, Dh)
    for t in range(6, 10):  # one token at a time, from the cache
        logits, cache = model.forward_cached(x[:, t : t + 1], cache)
        torch.testing.assert_close(logits[:, 0], full[:, t], atol=1e-5, rtol=1e-4)
    assert torch.stack([torch.stack(kv) for kv in cache]).shape == (2, 2, 2, 4, 10, 4)


def test_greedy_generation_is_the_same_with_and_without_cache():
    model, prompt = tiny(), ids(3, 5)
    cached = model.generate(prompt, 12, temperature=0)
    plain = model.generate(prompt, 12, temperature=0, use_cache=False)
    assert torch.equal(cached, plain) and cached.shape == (3, 17)
    assert torch.equal(cached[:, :5], prompt)
    by_hand = prompt
    for _ in range(12):  # greedy: the arg-max of the last position, again and again
        next_id = model(by_hand)[:, -1].argmax(-1, keepdim=True)
        by_hand = torch.cat([by_hand, next_id], dim=1)
    assert torch.equal(cached, by_hand)
    assert torch.equal(model.generate(prompt, 12, top_k=1), cached)


@pytest.mark.parametrize(
    "kw", [{}, {"temperature": 1.5}, {"top_k": 5}, {"top_p": 0.8, "top_k": 20}]
)
def test_sampling_is_the_same_with_and_without_cache(kw):
    model, prompt = tiny(seed=2), ids(4, 3)
    runs = [
        model.generate(
            prompt, 15, use_cache=c, generator=torch.Generator().manual_seed(7), **kw
        )
        for c in (True, False)
    ]
    assert torch.equal(runs[0], runs[1])
    other = model.generate(prompt, 15, generator=torch.Generator().manual_seed(8), **kw)
    assert not torch.equal(other, runs[0])  # the generator does drive the sampling


def test_generate_runs_in_eval_mode_and_restores_the_mode():
    model = tiny(dropout=0.5).train()
    prompt = ids(2, 4)
    a = model.generate(prompt, 6, temperature=0)
    b = model.generate(prompt, 6, temperature=0, use_cache=False)
    assert torch.equal(a, b) and model.training
    assert model.generate(prompt, 0).shape == (2, 4)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m: m(ids(1, MAX_LEN + 1)), "idx has 25 positions, more than max_len"),
        (lambda m: m(torch.tensor([[1, V]])), "idx holds ids outside"),
        (lambda m: m(torch.tensor([[-1, 2]])), "idx holds ids outside"),
        (lambda m: m(torch.ones(1, 3)), "idx must hold integer"),
        (lambda m: m(torch.ones(3).long()), r"idx must be a \(B, T\)"),
        (lambda m: m.generate(ids(1, MAX_LEN + 1), 1), "idx has 25 positions"),
        (
            lambda m: m.forward_cached(ids(1, 4), m.forward_cached(ids(1, 21))[1]),
            "idx has 4 positions after 21 cached ones",
        ),
        (lambda m: m(ids(1, 3).short()), "idx must hold integer"),
        (lambda m: m.generate(ids(1, 20), 5), "max_new_tokens=5"),
        (lambda m: m.generate(ids(1, 2), -1), "max_new_tokens"),
        (lambda m: m.generate(torch.tensor([[0, V + 3]]), 2), "idx holds ids"),
        (lambda m: m.generate(ids(1, 2), 2, temperature=-1.0), "temperature"),
        (lambda m: m.generate(ids(1, 2), 2, top_k=0), "top_k"),
        (lambda m: m.generate(ids(1, 2), 2, top_p=0.0), "top_p"),
        (lambda m: m.generate(ids(1, 2), 2, top_p=1.5), "top_p"),
    ],
)
def test_bad_input_raises_a_value_error_naming_it(call, match):
    with pytest.raises(ValueError, match=match):
        call(tiny())


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"d_model": 30}, "not divisible by n_heads"),
        ({"n_layers": 0}, "n_layers"),
        ({"dropout": 1.0}, "dropout"),
        ({"vocab_size": 2.5}, "vocab_size"),
    ],
)
def test_bad_configs_are_named(kw, match):
    args = dict(vocab_size=V, max_len=8, d_model=16, n_heads=4) | kw
    with pytest.raises(ValueError, match=match):
        GPTConfig(**args)


def test_a_few_steps_of_training_lower_the_loss():
    model = tiny().train()
    x = ids(8, 16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        logits = model(x[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
