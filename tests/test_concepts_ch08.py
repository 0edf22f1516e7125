"""The computable answers of Chapter 8's concept checks, computed with the package."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_book.concepts.ch08 import CHECKS
from transformer_book.pretrained import load_minilm, tokenize
from transformer_book.vision import ViT, ViTConfig, patchify


def marked(key: str, index: int = 0) -> str:
    question = CHECKS[key][index]
    return question.options[question.answer]


def test_folding_segment_a_is_exact_and_dropping_it_is_not():
    transformers = pytest.importorskip("transformers")
    from transformer_book.pretrained import bert_config_from_hf, bert_from_hf

    torch.manual_seed(0)
    hf = transformers.BertModel(
        transformers.BertConfig(
            vocab_size=40,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=12,
        )
    ).eval()
    cfg = bert_config_from_hf(hf.config.to_dict())
    state = hf.state_dict()
    ids = torch.randint(1, 40, (2, 9))
    ref = hf(input_ids=ids).last_hidden_state
    folded = bert_from_hf(state, cfg).encode(ids)
    assert (folded - ref).abs().max() < 1e-5
    dropped = dict(state)
    dropped["embeddings.token_type_embeddings.weight"] = torch.zeros(2, 16)
    assert (bert_from_hf(dropped, cfg).encode(ids) - ref).abs().max() > 1e-2
    assert marked("8.1").startswith("Every token of a single sentence is in segment A")


def test_cls_gets_weight_but_gives_little_output():
    from transformer_book.experiments.bert_heads import value_norm_shares

    model, tok = load_minilm()
    ids, real = tokenize(
        tok,
        ["The loop runs until the test is false.", "A suite is a group of statements."],
    )
    cls = torch.zeros_like(real)
    cls[:, 0] = True
    weight, norm = value_norm_shares(model, ids, cls)
    assert weight[1:].mean() > 0.3 and norm[1:].mean() < 0.5 * weight[1:].mean()
    assert "short" in marked("8.2")


def test_a_linear_probe_on_384_dimensions_for_10_topics():
    n = sum(p.numel() for p in nn.Linear(384, 10).parameters())
    assert marked("8.3") == f"{n:,}"


def test_tokens_of_the_chapter_vit():
    cfg = ViTConfig()
    assert (cfg.image_size, cfg.patch) == (8, 2)
    patches = patchify(torch.zeros(1, 1, 8, 8), cfg.patch)
    _, weights = ViT(cfg)(torch.zeros(1, 1, 8, 8), need_weights=True)
    tokens = weights[0].shape[-1]
    assert marked("8.4") == f"{tokens} tokens; {patches.shape[-1]} numbers per patch"


def test_exact_match_of_ten_tokens():
    scores = [p**10 for p in (0.5, 0.7, 0.9)]
    assert [round(s, 3) for s in scores] == [0.001, 0.028, 0.349]
    shown = marked("8.6").split(":")[0].removeprefix("About ").split(", ")
    assert [float(s) for s in shown] == pytest.approx(scores, abs=0.006)
