"""The appendix's one-page listings compute what the package's models compute.

``listings/gpt.py`` holds the parameters of ``models.GPT`` under the same names;
``listings/transformer.py`` those of ``models.EncoderDecoder`` (the paper's
configuration: post-norm, tied embeddings, padding id 0), with one name moved: the
package keeps the token table in its ``TokenEmbedding`` (``embed.token``), the
listing on the model (``token``). With the package model's weights loaded:

- the logits agree in float64 to 1e-12. They are not bit-equal, and should not be:
  the package's self-attention runs through PyTorch's fused kernel
  (``F.scaled_dot_product_attention``), which sums the softmax and the weighted
  values in its own order, while the listing writes the formula out. Both are
  correctly rounded float64 computations of the same sums, so they differ by a few
  units in the last place of numbers of order 1 (about 5e-15 here): 1e-12 leaves
  room for other CPUs and thread counts and is still a billion times smaller than
  any difference that a wrong mask, scale or layer would make;
- where the same operations run, they are bit-equal: with the package's attention
  held to its readable path (the formula, as in the listing), the logits are
  identical in float64 and float32;
- greedy generation gives the same 20 tokens, and training gets the same gradients.

The files stay within their line budgets and import only torch and math, so the
appendix page can say that they are whole programs a reader can paste anywhere.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import transformer_book.attention as attention
from transformer_book.listings import gpt as gpt_listing
from transformer_book.listings import transformer as transformer_listing
from transformer_book.models import (
    GPT,
    EncoderDecoder,
    EncoderDecoderConfig,
    GPTConfig,
)

LISTINGS = {gpt_listing: 110, transformer_listing: 160}  # module -> line budget
IDS = ["gpt", "transformer"]
TOLERANCE = 1e-12  # float64, fused kernel against the formula (module docstring)
SIZES = dict(d_model=32, n_heads=4, n_layers=2, d_ff=64)


def perturbed_(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Add N(0, 0.3^2) noise to every parameter: logits of order 1 to 10 and
    attention far from uniform, so that a wrong mask or scale shows (the
    initialisations' small weights would hide it in near-equal logits)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=generator, dtype=p.dtype))
    return model


def gpt_pair(seed: int = 0, dtype=torch.float64):
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=13, max_len=32, **SIZES)
    package = perturbed_(GPT(cfg).to(dtype), seed).eval()
    listing = gpt_listing.GPT(cfg.vocab_size, cfg.max_len, **SIZES).to(dtype).eval()
    listing.load_state_dict(package.state_dict())  # strict: the same names
    return package, listing


def transformer_pair(seed: int = 0, dtype=torch.float64):
    torch.manual_seed(seed)
    cfg = EncoderDecoderConfig(vocab_size=11, max_len=24, **SIZES)
    assert (cfg.norm_first, cfg.tie_weights, cfg.pad_id) == (False, True, 0)
    package = perturbed_(EncoderDecoder(cfg).to(dtype), seed).eval()
    listing = transformer_listing.Transformer(cfg.vocab_size, cfg.max_len, **SIZES)
    listing = listing.to(dtype).eval()
    listing.load_state_dict(package_state_for_listing(package))  # strict
    return package, listing


def package_state_for_listing(package: EncoderDecoder) -> dict:
    """The package's state dict under the listing's names: one table moves."""
    return {
        name.replace("embed.token.", "token."): value
        for name, value in package.state_dict().items()
    }


def tokens(seed: int, shape: tuple[int, ...], vocab_size: int, low: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, vocab_size, shape, generator=generator)


def source_batch(seed: int = 1) -> torch.Tensor:
    """(3, 12) source ids, 1..10, two of them padded (id 0) at the end."""
    src = tokens(seed, (3, 12), 11, low=1)
    src[0, 8:] = 0
    src[2, 5:] = 0
    return src


@pytest.fixture
def readable_attention(monkeypatch):
    """The package's attention held to its readable path: the listing's formula."""

    def readable(q, k, v, mask=None, dropout_p=0.0):
        return attention.scaled_dot_product_attention(q, k, v, mask, None, dropout_p)[0]

    monkeypatch.setattr(attention, "fused_scaled_dot_product_attention", readable)


# ------------------------------------------------------------------ the logits


@pytest.mark.parametrize("seed", [0, 1])
def test_gpt_listing_gives_the_packages_logits(seed):
    package, listing = gpt_pair(seed)
    idx = tokens(seed, (3, 32), 13)  # max_len positions
    expected = package(idx)
    assert expected.abs().max() > 1.0  # logits that a wrong layer would change
    torch.testing.assert_close(listing(idx), expected, rtol=0, atol=TOLERANCE)
    short = idx[:, :7]  # a shorter sequence: the causal mask and positions 0..6
    torch.testing.assert_close(listing(short), package(short), rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("seed", [0, 1])
def test_transformer_listing_gives_the_packages_logits(seed):
    package, listing = transformer_pair(seed)
    src, tgt = source_batch(seed), tokens(seed + 10, (3, 10), 11, low=1)
    expected = package(src, tgt)
    assert expected.abs().max() > 1.0
    torch.testing.assert_close(listing(src, tgt), expected, rtol=0, atol=TOLERANCE)
    memory = listing.encode(src)
    torch.testing.assert_close(memory, package.encode(src), rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_same_operations_give_bit_equal_logits(readable_attention, dtype):
    package, listing = gpt_pair(0, dtype)
    idx = tokens(0, (3, 32), 13)
    assert torch.equal(listing(idx), package(idx))
    package, listing = transformer_pair(0, dtype)
    src, tgt = source_batch(), tokens(10, (3, 10), 11, low=1)
    assert torch.equal(listing(src, tgt), package(src, tgt))


def test_the_tolerance_separates_a_wrong_model():
    """A listing that forgot the 1/sqrt(d_k) or the causal mask would fail."""
    package, listing = gpt_pair(0)
    idx = tokens(0, (3, 32), 13)
    with torch.no_grad():
        listing.blocks[0].self_attn.q_proj.weight.mul_(1 + 1e-9)
    assert (listing(idx) - package(idx)).abs().max() > TOLERANCE
    package, listing = gpt_pair(0)
    listing.blocks[1].self_attn.forward = lambda x, mask: torch.zeros_like(x)
    assert (listing(idx) - package(idx)).abs().max() > 1e-3


def test_padding_is_no_key_in_the_listing():
    """Changing a padded source token changes nothing, in the listing as in the
    package; changing a real one changes the logits."""
    _, listing = transformer_pair(0)
    src, tgt = source_batch(), tokens(10, (3, 10), 11, low=1)
    before = listing(src, tgt)
    changed = src.clone()
    changed[0, 9] = 5  # was padding: now a real token, which the model must see
    assert (listing(changed, tgt)[0] - before[0]).abs().max() > 1e-3
    assert torch.equal(listing(changed, tgt)[1:], before[1:])


# ------------------------------------------------------------------ generation


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gpt_greedy_generation_is_the_packages(seed):
    package, listing = gpt_pair(seed)
    prompt = tokens(seed, (3, 5), 13)
    expected = package.generate(prompt, 20, temperature=0)
    assert expected.shape == (3, 25)
    assert len(expected[:, 5:].unique()) >= 3  # not one token repeated
    assert torch.equal(listing.generate(prompt, 20), expected)


@pytest.mark.parametrize("seed", [8, 10])
def test_transformer_greedy_decoding_is_the_packages(seed):
    """An EOS id never produced gives 20 tokens; one produced stops early and pads
    the finished rows: in the listing as in the package. (An untrained post-norm
    model with a tied table mostly repeats one token, often the same for every
    source; seeds 8 and 10 give rows that differ and change within a row.)"""
    package, listing = transformer_pair(seed)
    src = source_batch(seed)
    free = listing.greedy_decode(src, 1, -1, 20)  # no validation: -1 never comes
    assert len(free[:, 1:].unique()) >= 3  # the decoding depends on the source
    never = sorted(set(range(11)) - set(free[:, 1:].flatten().tolist()))
    assert never, "every token was produced: pick another seed"
    first = {  # token -> the step at which each row first produces it (99: never)
        t: [row.tolist().index(t) if t in row.tolist() else 99 for row in free[:, 1:]]
        for t in range(11)
    }
    stops = next(t for t, steps in first.items() if min(steps) < max(steps))
    # one row produces `stops` before another does: it finishes early and is padded
    for eos_id, length in ((never[0], 21), (stops, None)):
        expected = package.greedy_decode(src, 1, eos_id, max_new_tokens=20)
        assert torch.equal(listing.greedy_decode(src, 1, eos_id, 20), expected)
        assert expected.shape[1] == length if length else expected.shape[1] > 1


# ------------------------------------------------------------------ training


def test_training_gets_the_packages_gradients():
    for package, listing, inputs in (
        (*gpt_pair(0), (tokens(0, (3, 16), 13),)),
        (*transformer_pair(0), (source_batch(), tokens(10, (3, 10), 11, low=1))),
    ):
        for model in (package, listing):
            model(*inputs).logsumexp(dim=-1).mean().backward()
        grads = {n: p.grad for n, p in package.named_parameters()}
        if isinstance(package, EncoderDecoder):
            grads = {n.replace("embed.token.", "token."): g for n, g in grads.items()}
        for name, p in listing.named_parameters():
            assert grads[name].abs().max() > 0, name
            torch.testing.assert_close(p.grad, grads[name], rtol=0, atol=TOLERANCE)


def test_dropout_is_where_the_package_has_it():
    """In training mode with dropout both models are random; in eval mode equal."""
    torch.manual_seed(0)
    listing = gpt_listing.GPT(13, 32, **SIZES, dropout=0.5).double()
    idx = tokens(0, (2, 8), 13)
    assert not torch.equal(listing(idx), listing(idx))
    listing.eval()
    assert torch.equal(listing(idx), listing(idx))


# ------------------------------------------------------------------ the files


@pytest.mark.parametrize(("module", "budget"), LISTINGS.items(), ids=IDS)
def test_each_listing_stays_within_its_line_budget(module, budget):
    lines = Path(module.__file__).read_text().splitlines()
    assert len(lines) <= budget, f"{len(lines)} lines, budget {budget}"
    assert len(lines) >= budget * 0.8  # the whole model, not a stub


@pytest.mark.parametrize("module", LISTINGS, ids=IDS)
def test_each_listing_imports_only_torch_and_math(module):
    tree = ast.parse(Path(module.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import"
            imported.add(node.module.split(".")[0])
    assert imported == {"torch", "math"}
    calls = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert not calls & {"__import__", "exec", "eval"}


def test_the_import_check_sees_other_imports():
    source = "import math\nfrom torch import nn\nimport numpy as np\n"
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module.split(".")[0])
    assert found == {"math", "torch", "numpy"}


@pytest.mark.parametrize("module", LISTINGS, ids=IDS)
def test_each_listing_runs_pasted_alone(module):
    """The file's text, run in an empty namespace as in a fresh notebook, builds a
    model that gives logits of the right shape."""
    namespace: dict = {}
    exec(compile(Path(module.__file__).read_text(), module.__file__, "exec"), namespace)
    assert "transformer_book" not in str(namespace.get("__builtins__", ""))
    torch.manual_seed(0)
    if module is gpt_listing:
        model = namespace["GPT"](vocab_size=7, max_len=9, **SIZES)
        assert model(torch.zeros(2, 9, dtype=torch.long)).shape == (2, 9, 7)
    else:
        model = namespace["Transformer"](vocab_size=7, max_len=9, **SIZES)
        src, tgt = (
            torch.ones(2, 9, dtype=torch.long),
            torch.ones(2, 4, dtype=torch.long),
        )
        assert model(src, tgt).shape == (2, 4, 7)
