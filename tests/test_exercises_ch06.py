"""The Chapter 6 checkers accept right answers and name the mistake in wrong ones."""

from __future__ import annotations

import contextlib

import pytest
import torch
from test_exercises_checking import disguises

import transformer_book.models as models
from transformer_book.exercises import check_mask_tokens, check_top_p
from transformer_book.models import mask_tokens, top_p_filter

# -- Exercise: top-p (nucleus) filtering -----------------------------------------


def top_p(probs, p):
    """Keep token i when the tokens more probable than i hold less than p."""
    above = (probs[..., None, :] * (probs[..., None, :] > probs[..., :, None])).sum(-1)
    kept = torch.where(above < p, probs, torch.zeros_like(probs))
    return kept / kept.sum(dim=-1, keepdim=True)


def top_p_sorted(probs, p):
    """The sort-and-accumulate way, with ties widened to the crossing token."""
    ordered, _ = probs.sort(dim=-1, descending=True)
    before = ordered.cumsum(dim=-1) - ordered  # the total of the tokens before
    last_in = torch.where(before < p, ordered, 2.0).amin(dim=-1, keepdim=True)
    kept = torch.where(probs >= last_in, probs, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


def top_p_loops(probs, p):
    out = torch.zeros(probs.shape, dtype=torch.float64)
    for r, row in enumerate(probs.tolist()):
        total, last = 0.0, None
        for value in sorted(row, reverse=True):
            if total >= p:
                break
            total, last = total + value, value
        kept = [v if v >= last else 0.0 for v in row]
        out[r] = torch.tensor(kept) / sum(kept)
    return out


def through_the_package(probs, p):
    return top_p_filter(probs.log(), p).softmax(dim=-1)


@pytest.mark.parametrize(
    "right", [top_p, top_p_sorted, top_p_loops, lambda x, p: top_p(x.double(), p)]
)
def test_top_p_checker_accepts_right_answers(right, capsys):
    assert check_top_p(right) is None
    assert "top_p: all checks passed" in capsys.readouterr().out


def sort_based(probs, p, descending=True, exclusive=True, renormalise=True):
    ordered, order = probs.sort(dim=-1, descending=descending, stable=True)
    total = ordered.cumsum(dim=-1)
    keep_sorted = (total - ordered < p) if exclusive else (total < p)
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = torch.where(keep, probs, 0.0)
    return kept / kept.sum(-1, keepdim=True) if renormalise else kept


def unsorted(probs, p):
    before = probs.cumsum(dim=-1) - probs
    kept = torch.where(before < p, probs, 0.0)
    return kept / kept.sum(-1, keepdim=True)


def one_too_many(probs, p):
    ordered, order = probs.sort(dim=-1, descending=True)
    keep_sorted = ordered.cumsum(dim=-1) - ordered <= p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = torch.where(keep, probs, 0.0)
    return kept / kept.sum(-1, keepdim=True)


def in_place(probs, p):
    out = top_p(probs, p)
    probs.copy_(out)
    return out


def whole_batch_total(probs, p):
    kept = top_p(probs, p) * probs  # the kept probabilities, up to a row factor
    kept = torch.where(kept > 0, probs, 0.0)
    return kept / kept.sum()  # the total of the whole batch, not of each row


def flattens_the_batch(probs, p):
    """Right for one row; for several it accumulates across the rows."""
    return top_p_sorted(probs.flatten()[None], p).view(probs.shape) * len(probs)


def calls_the_package(probs, p):
    return top_p_filter(probs.log(), p).softmax(dim=-1)


def calls_the_models_module(probs, p):
    return models.top_p_filter(probs.log(), p).softmax(dim=-1)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda x, p: sort_based(x, p, exclusive=False), "too few tokens"),
        (lambda x, p: sort_based(x, p, renormalise=False), "not 1: divide"),
        (lambda x, p: sort_based(x, p, descending=False), "least probable"),
        (sort_based, "equal probability are split"),
        (unsorted, "sort the probabilities"),
        (one_too_many, "too many tokens"),
        (lambda x, p: torch.where(x >= p, x, 0.0), "keeps no token"),
        (lambda x, p: top_p(x, p).log(), "not logits"),
        (in_place, "in place"),
        (whole_batch_total, "not 1"),
        (flattens_the_batch, "each row alone is right"),
        (lambda x, p: top_p(x, p)[:, :-1], "shape"),
        (lambda x, p: x, "nothing was filtered out"),
        (
            lambda x, p: top_p(x, p) ** 2 / (top_p(x, p) ** 2).sum(-1, keepdim=True),
            "relative sizes",
        ),
        (calls_the_package, "without calling the package's top_p_filter"),
        (calls_the_models_module, "without calling the package's top_p_filter"),
    ],
)
def test_top_p_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_top_p(wrong)


def test_the_forbidden_function_is_restored_after_a_check():
    with pytest.raises(AssertionError):
        check_top_p(calls_the_models_module)
    assert models.top_p_filter is top_p_filter
    assert models.sampling.top_p_filter is top_p_filter


# -- Exercise: BERT's masking -----------------------------------------------------


def masking(ids, vocab_size, mask_id, special_ids, generator, **mistakes):
    """BERT's rule; keyword arguments switch on one mistake at a time."""
    specials = mistakes.get("fixed_specials", special_ids)
    special = torch.isin(ids, torch.tensor(list(specials)))
    if mistakes.get("below_5"):
        special = ids < 5
    rate = mistakes.get("rate", 0.15)
    shape = ids.shape
    if mistakes.get("per_column"):
        shape = ids.shape[-1:]  # one draw per column, broadcast over the rows
    if mistakes.get("per_row"):
        shape = (*ids.shape[:-1], 1)
    chosen = torch.rand(shape, generator=generator) < rate
    chosen = chosen.expand(ids.shape)
    if not mistakes.get("specials"):
        chosen = chosen & ~special
    fate_shape = ids.shape[-1:] if mistakes.get("fate_per_column") else ids.shape
    split = torch.rand(fate_shape, generator=generator).expand(ids.shape)
    shares = mistakes.get("shares", (0.8, 0.1))
    where = torch.ones_like(chosen) if mistakes.get("all_tokens") else chosen
    to_mask = where & (split < shares[0])
    to_random = where & (split >= shares[0]) & (split < shares[0] + shares[1])
    if mistakes.get("from_batch"):
        pool = ids[~special]
        pick = torch.randint(len(pool), ids.shape, generator=generator)
        random_ids = pool[pick]
    else:
        top = mistakes.get("fixed_vocab", vocab_size)
        random_ids = torch.randint(top, ids.shape, generator=generator)
    inputs = ids if mistakes.get("in_place") else ids.clone()
    inputs[to_mask] = mistakes.get("fixed_mask_id", mask_id)
    inputs[to_random] = random_ids[to_random]
    if mistakes.get("label_everything"):
        return inputs, ids.clone()
    source = inputs if mistakes.get("label_corrupted") else ids
    labels = torch.where(chosen, source, torch.full_like(ids, -100))
    if mistakes.get("swap"):
        return labels, inputs
    return inputs, labels


def exact_count(ids, vocab_size, mask_id, special_ids, generator):
    """The original BERT's way, in loops: exactly 15% of each row's normal tokens,
    random tokens drawn from the non-special ids."""
    inputs, labels = ids.clone(), torch.full_like(ids, -100)
    special = torch.isin(ids, torch.tensor(list(special_ids)))
    ordinary = [i for i in range(vocab_size) if i not in special_ids]
    for r in range(len(ids)):
        candidates = (~special[r]).nonzero()[:, 0]
        n = round(0.15 * len(candidates))
        picks = candidates[torch.randperm(len(candidates), generator=generator)[:n]]
        for i in picks.tolist():
            labels[r, i] = ids[r, i]
            u = torch.rand(1, generator=generator).item()
            if u < 0.8:
                inputs[r, i] = mask_id
            elif u < 0.9:
                k = torch.randint(len(ordinary), (1,), generator=generator).item()
                inputs[r, i] = ordinary[k]
    return inputs, labels


def one_uniform(ids, vocab_size, mask_id, special_ids, generator):
    """One uniform number decides both: u < 0.15 chooses, u / 0.15 the fate."""
    u = torch.rand(ids.shape, generator=generator, dtype=torch.float64)
    chosen = (u < 0.15) & ~torch.isin(ids, torch.tensor(special_ids))
    fate = u / 0.15
    random_ids = torch.randint(0, vocab_size, ids.shape, generator=generator)
    inputs = torch.where(chosen & (fate < 0.8), mask_id, ids)
    swap = chosen & (fate >= 0.8) & (fate < 0.9)
    inputs = torch.where(swap, random_ids, inputs)
    return [inputs, torch.where(chosen, ids, -100)]  # a list is a pair too


def with_bernoulli(ids, vocab_size, mask_id, special_ids, generator):
    """torch.bernoulli and torch.multinomial, the ordinary ids by a boolean table."""
    ordinary = torch.ones(vocab_size, dtype=torch.bool)
    ordinary[list(special_ids)] = False
    chosen = torch.bernoulli(torch.full(ids.shape, 0.15), generator=generator).bool()
    chosen &= ordinary[ids]
    fate = torch.multinomial(
        torch.tensor([0.8, 0.1, 0.1]), ids.numel(), True, generator=generator
    ).view(ids.shape)
    pool = ordinary.nonzero()[:, 0]
    random_ids = pool[torch.randint(len(pool), ids.shape, generator=generator)]
    inputs = ids.clone()
    inputs[chosen & (fate == 0)] = mask_id
    inputs[chosen & (fate == 1)] = random_ids[chosen & (fate == 1)]
    return inputs, torch.where(chosen, ids, torch.full_like(ids, -100))


def published_solution(ids, vocab_size, mask_id, special_ids, generator):
    special = torch.isin(ids, torch.tensor(list(special_ids)))
    chosen = (torch.rand(ids.shape, generator=generator) < 0.15) & ~special
    fate = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
    inputs = ids.clone()
    inputs[chosen & (fate < 0.8)] = mask_id
    swap = chosen & (fate >= 0.8) & (fate < 0.9)
    inputs[swap] = random_ids[swap]
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    return inputs, labels


@pytest.mark.parametrize(
    "right", [masking, exact_count, one_uniform, with_bernoulli, published_solution]
)
def test_mask_checker_accepts_right_answers(right, capsys):
    assert check_mask_tokens(right) is None
    assert "mask_tokens: all checks passed" in capsys.readouterr().out


def test_the_package_solution_passes_when_it_is_not_forbidden(capsys, monkeypatch):
    import transformer_book.exercises.ch06_variants as ch06

    monkeypatch.setattr(ch06, "forbidden", lambda *a, **k: contextlib.nullcontext())
    assert check_mask_tokens(mask_tokens) is None
    assert check_top_p(through_the_package) is None
    assert capsys.readouterr().out.count("all checks passed") == 2


def with_mistake(**mistake):
    return lambda *args: masking(*args, **mistake)


def own_generator(ids, vocab_size, mask_id, special_ids, generator):
    return masking(
        ids, vocab_size, mask_id, special_ids, torch.Generator().manual_seed(0)
    )


def reseeds(ids, vocab_size, mask_id, special_ids, generator):
    generator.manual_seed(0)
    return masking(ids, vocab_size, mask_id, special_ids, generator)


def global_generator(ids, vocab_size, mask_id, special_ids, generator):
    return masking(ids, vocab_size, mask_id, special_ids, None)


def seeds_the_global_generator(ids, vocab_size, mask_id, special_ids, generator):
    torch.manual_seed(0)
    return masking(ids, vocab_size, mask_id, special_ids, None)


def keeps_the_example_ids(ids, vocab_size, mask_id, special_ids, generator):
    return masking(ids, 60, 2, (0, 1, 2, 3, 4), generator)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (with_mistake(all_tokens=True), "not chosen were changed"),
        (with_mistake(specials=True), "special tokens"),
        (with_mistake(label_everything=True), "-100 at the positions"),
        (with_mistake(label_corrupted=True), "hold the corrupted token"),
        (with_mistake(shares=(1.0, 0.0)), "100.0% became \\[MASK\\]"),
        (with_mistake(shares=(0.1, 0.8)), "became \\[MASK\\]; expected 80%"),
        (with_mistake(shares=(0.8, 0.0)), "replaced by a random token"),
        (with_mistake(shares=(0.8, 0.2)), "replaced by a random token"),
        (with_mistake(rate=0.12), r"1\d\.\d% of the non-special tokens were chosen"),
        (with_mistake(from_batch=True), "come only from the batch"),
        (with_mistake(in_place=True), "in place"),
        (with_mistake(swap=True), "in order"),
        (global_generator, "global random generator"),
        (seeds_the_global_generator, "leave the global one alone"),
        (own_generator, "does not draw from the generator it is given"),
        (reseeds, "seeds the generator"),
        (with_mistake(below_5=True), "special tokens"),
        (with_mistake(fixed_specials=(0, 1, 2, 3, 4)), "special tokens"),
        (
            with_mistake(fixed_mask_id=2),
            "most chosen tokens became id 2, not mask_id=96",
        ),
        (with_mistake(fixed_vocab=60), "rarely reach the top of the vocabulary"),
        (keeps_the_example_ids, "special tokens"),
        (lambda i, v, *a: masking(i, v - 1, *a), "ever id 23 \\(the last id\\)"),
        (lambda i, v, *a: masking(i, v + 9, *a), "outside the vocabulary"),
        (with_mistake(per_column=True), "every row masks the same columns"),
        (with_mistake(per_row=True), "chosen all together or not at all"),
        (with_mistake(fate_per_column=True), "of a column all share one fate"),
        (lambda ids, *args: ids, r"return \(inputs, labels\), in order"),
        (lambda *args: (*masking(*args), None), "got a tuple of 3"),
        (lambda ids, v, m, s, g: mask_tokens(ids, v, m, s, g), "package's mask_tokens"),
        *[(fn, "package's mask_tokens") for fn in disguises(mask_tokens)],
        (models.bert.mask_tokens, "package's mask_tokens"),
    ],
)
def test_mask_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_mask_tokens(wrong)


def test_the_mask_checker_leaves_the_global_generator_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    for fn in (masking, seeds_the_global_generator, global_generator):
        torch.manual_seed(0)
        try:
            check_mask_tokens(fn)
        except AssertionError:
            pass
        assert torch.equal(torch.rand(3), expected), fn.__name__
