"""Chapter 8's head study: the grammar's arcs, the scores on hand-made maps, the
norm-based shares against a direct computation, and the claims over other seeds."""

from __future__ import annotations

import pytest
import torch

from transformer_book.experiments import bert_heads as bh
from transformer_book.models import BERT, BERTConfig
from transformer_book.pretrained import load_minilm


@pytest.fixture(scope="session")  # make seeds runs these tests between others
def minilm():
    return load_minilm()


def tiny_post_norm(seed: int = 0) -> BERT:
    torch.manual_seed(seed)
    cfg = BERTConfig(
        30,
        12,
        d_model=16,
        n_heads=4,
        n_layers=2,
        d_ff=32,
        norm_first=False,
        layer_norm_eps=1e-12,
    )
    return BERT(cfg).eval()


# -- the grammar ---------------------------------------------------------------------


def test_grammar_is_fixed_by_its_seed_and_varies_with_it():
    a, b = bh.syntax_sentences(20, seed=4), bh.syntax_sentences(20, seed=4)
    assert a == b
    assert a != bh.syntax_sentences(20, seed=5)


def test_every_word_is_one_wordpiece(minilm):
    _, tok = minilm
    for p in bh.syntax_sentences(200, seed=0):
        assert len(tok.encode(p.text).ids) == len(p.words) + 2, p.text


def test_arcs_form_a_tree_rooted_at_the_verb():
    nouns = set(bh._AGENTS) | set(bh._OBJECTS) | {t.split()[-1] for t in bh._TIMES}
    for p in bh.syntax_sentences(200, seed=1):
        assert p.relations.count("root") == 1
        root = p.relations.index("root")
        assert p.words[root] in bh._VERBS and p.heads[root] == -1
        assert p.words[-1] == "." and p.text.endswith(f"{p.words[-2]}.")
        for i, (h, r) in enumerate(zip(p.heads, p.relations, strict=True)):
            if r == "root":
                continue
            assert 0 <= h < len(p.words) and h != i
            if r in ("det", "amod"):
                assert p.words[h] in nouns and h > i
            if r in ("nsubj", "dobj", "punct", "advmod", "prep"):
                assert h == root
            if r == "pobj":
                assert p.words[h] in bh._PREPOSITIONS
        # following heads from any word reaches the root without a cycle
        for i in range(len(p.words)):
            seen, j = set(), i
            while j != root:
                assert j not in seen
                seen.add(j)
                j = p.heads[j]


def test_the_documented_parse():
    p = bh.Parsed(
        ("the", "cat", "sat", "."), (1, 2, -1, 2), ("det", "nsubj", "root", "punct")
    )
    assert p.text == "the cat sat."
    assert bh.offset_baseline([p], "det") == (1, 1.0)
    with pytest.raises(ValueError, match="no arc"):
        bh.offset_baseline([p], "dobj")
    with pytest.raises(ValueError, match="relation"):
        bh.offset_baseline([p], "subject")


# -- scores on hand-made maps ---------------------------------------------------------


def _maps_pointing_at(targets: torch.Tensor, T: int, L: int = 2, H: int = 3):
    """(L, N, H, T, T) one-hot maps: query t of sentence n looks at targets[n, t]."""
    one_hot = torch.nn.functional.one_hot(targets, T).float()  # (N, T, T)
    return one_hot[None, :, None].expand(L, -1, H, -1, -1).clone()


def test_positional_scores_on_one_hot_maps():
    N, T = 3, 6
    real = torch.ones(N, T, dtype=torch.bool)
    real[2, 4:] = False  # a shorter sentence: [SEP] at 3
    previous = (torch.arange(T) - 1).clamp(min=0).expand(N, T)
    s = bh.positional_scores(_maps_pointing_at(previous, T), real)
    assert torch.allclose(s["previous"], torch.ones(2, 3))
    on_cls = bh.positional_scores(_maps_pointing_at(torch.zeros(N, T).long(), T), real)
    assert torch.allclose(on_cls["[CLS]"], torch.ones(2, 3))
    sep = (real.sum(1) - 1)[:, None].expand(N, T)
    on_sep = bh.positional_scores(_maps_pointing_at(sep, T), real)
    assert torch.allclose(on_sep["[SEP]"], torch.ones(2, 3))
    assert torch.allclose(on_sep["[CLS]"], torch.zeros(2, 3))
    punct = torch.zeros(N, T, dtype=torch.bool)
    punct[:, 2] = True
    half = 0.5 * (
        _maps_pointing_at(torch.full((N, T), 2), T)
        + _maps_pointing_at(torch.zeros(N, T).long(), T)
    )
    both = bh.positional_scores(half, real, punct)
    assert torch.allclose(both["punctuation"], torch.full((2, 3), 0.5))


def test_positional_scores_reject_mismatched_inputs():
    maps = torch.rand(2, 3, 4, 5, 5)
    with pytest.raises(ValueError, match="real"):
        bh.positional_scores(maps, torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="real"):
        bh.positional_scores(maps, torch.ones(3, 5))
    with pytest.raises(ValueError, match="maps"):
        bh.positional_scores(maps[0], torch.ones(3, 5, dtype=torch.bool))


def _maps_for(parsed, rule):
    """One-hot maps in which word i's query looks at token rule(p, i)."""
    T = max(len(p.words) for p in parsed) + 2
    targets = torch.zeros(len(parsed), T, dtype=torch.long)
    for n, p in enumerate(parsed):
        for i in range(len(p.words)):
            targets[n, i + 1] = rule(p, i)
    return _maps_pointing_at(targets, T)


def test_relation_accuracy_of_a_perfect_and_of_an_offset_head():
    parsed = bh.syntax_sentences(40, seed=2)
    perfect = _maps_for(parsed, lambda p, i: p.heads[i] + 1 if p.heads[i] >= 0 else 0)
    for r in bh.TESTED_RELATIONS:
        assert torch.allclose(
            bh.relation_accuracy(perfect, parsed, r), torch.ones(2, 3)
        )
    next_word = _maps_for(parsed, lambda p, i: i + 2)  # token of word i + 1
    for r in ("det", "amod", "nsubj"):
        offset, share = bh.offset_baseline(parsed, r)
        assert offset == 1
        assert bh.relation_accuracy(next_word, parsed, r)[0, 0].item() == pytest.approx(
            share
        )


def test_relation_accuracy_ignores_cls_and_sep():
    parsed = bh.syntax_sentences(10, seed=3)
    # every query's weight on [CLS], a little on the gold head: the head still wins
    gold = _maps_for(parsed, lambda p, i: p.heads[i] + 1 if p.heads[i] >= 0 else 0)
    cls = _maps_for(parsed, lambda p, i: 0)
    acc = bh.relation_accuracy(0.9 * cls + 0.1 * gold, parsed, "det")
    assert torch.allclose(acc, torch.ones(2, 3))


# -- ablation and the norm-based shares ------------------------------------------------


def test_ablated_silences_heads_and_restores_them():
    model = tiny_post_norm()
    ids = torch.randint(1, 30, (2, 7))
    before = model.encode(ids)
    with bh.ablated(model, {0: [1, 2], 1: [0]}):
        inside = model.encode(ids)
    assert not torch.allclose(inside, before, atol=1e-4)
    assert torch.equal(model.encode(ids), before)
    with pytest.raises(ValueError, match="layer"):
        with bh.ablated(model, {2: [0]}):
            pass
    with pytest.raises(TypeError, match="heads"):
        with bh.ablated(model, [(0, 1)]):
            pass


def test_value_norm_shares_rebuild_the_attention_output():
    model = tiny_post_norm(1)
    ids = torch.randint(1, 30, (3, 8))
    ids[2, 6:] = 0  # padding
    everything = ids != 0
    w, n = bh.value_norm_shares(model, ids, everything)
    assert torch.allclose(w, torch.ones(2, 4)) and torch.allclose(n, torch.ones(2, 4))
    # by hand for layer 0, head 1 and key 0: a_i0 ||f(x_0)|| / sum_j a_ij ||f(x_j)||
    first = torch.zeros_like(everything)
    first[:, 0] = True
    w, n = bh.value_norm_shares(model, ids, first)
    mha, x = (
        model.blocks[0].self_attn,
        model.embed_norm(model.token(ids) + model.position.weight[:8]),
    )
    _, a = mha(x, mask=(ids != 0)[:, None, :], need_weights=True)
    h, dh = 1, mha.d_head
    v = mha.v_proj(x)[..., h * dh : (h + 1) * dh]  # (N, T, Dh)
    f = v @ mha.out_proj.weight[:, h * dh : (h + 1) * dh].T  # (N, T, D)
    size = a[:, h] * f.norm(dim=-1)[:, None, :]  # (N, T, T)
    share = size[..., 0] / size.sum(-1)  # (N, T)
    real = ids != 0
    assert n[0, h].item() == pytest.approx(share[real].mean().item(), abs=1e-6)
    assert w[0, h].item() == pytest.approx(a[:, h, :, 0][real].mean().item(), abs=1e-6)
    with pytest.raises(ValueError, match="key_mask"):
        bh.value_norm_shares(model, ids, first[:, :4])


def test_shuffle_words_keeps_the_words_and_the_full_stop():
    import random

    s = "the quick brown fox jumps over the lazy dog."
    out = bh.shuffle_words(s, random.Random(0))
    assert out.endswith(".") and sorted(out[:-1].split()) == sorted(s[:-1].split())
    assert out != s


# -- the chapter's claims, for other samples ----------------------------------------


@pytest.mark.seeds
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_heads_claims_hold_for_other_samples(minilm, seed):
    model, tok = minilm
    study = bh.run_heads(model, tok, seed)
    claims = bh.heads_claims(study)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}
