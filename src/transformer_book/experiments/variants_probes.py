"""The three probes of Chapter 6's comparison, on held-out text (§6.4).

(a) **blank**: a held-out sentence with its middle token hidden; the model sees
    both sides (GPT, being causal, can only use the left one);
(b) **next**: the same sentence cut before that token; the model predicts it
    from the left side alone: the same targets as (a), less context;
(c) **task**: "topic:" and a test sentence of ``corpus.topic_sentences``,
    answered by the one token that names its topic.

Each model answers in its own way: GPT reads the logits one position earlier (for
(c), at the [SEP] after the sentence); BERT puts [MASK] at the position (and, for
(b), nothing after it); T5 puts the sentinel <extra_id_0> there and decodes
"<extra_id_0> token" (for (c), the first token it decodes). Scores are top-1
accuracy and perplexity for (a) and (b), accuracy for (c).

Shape letters: N probe sentences, L their padded length, V vocabulary size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._validate import (
    check_has_values,
    check_instance,
    check_int,
    check_tensor,
    check_tokenizer,
)
from ..corpus import sentences
from ..tokenizer import BPETokenizer

__all__ = ["ProbeSet", "make_probes", "score_model", "top_guesses", "MIN_TOKENS"]

MIN_TOKENS = 12  # shortest held-out sentence used, in tokens


@dataclass(frozen=True)
class ProbeSet:
    """The held-out items every model is scored on."""

    ids: Tensor  # (N, L) held-out sentences, right-padded with [PAD]
    position: Tensor  # (N,) the hidden position, the middle of each sentence
    target: Tensor  # (N,) the token there
    prefix: list[int]  # the task prefix's token ids
    tasks: list[tuple[list[int], list[int]]]  # (c): (sentence, one-token answer)
    baselines: dict[str, float]  # scores that need no model


def make_probes(
    tok: BPETokenizer,
    train_stream: Tensor,
    max_len: int,
    prefix: str,
    tasks: list[tuple[list[int], list[int]]],
) -> ProbeSet:
    """The probes from the held-out sentences and the ``tasks`` test pairs."""
    check_tokenizer("tok", tok)
    check_tensor("train_stream", train_stream, "int")
    check_has_values("train_stream", train_stream)
    if train_stream.dim() != 1 or train_stream.numel() == 0:
        raise ValueError(
            "train_stream must be a non-empty 1-D stream of token ids, got shape "
            f"{tuple(train_stream.shape)}"
        )
    check_int("max_len", max_len, minimum=MIN_TOKENS)
    check_instance("prefix", prefix, str)
    if not isinstance(tasks, list | tuple) or not tasks:
        raise TypeError(
            "tasks must be a non-empty list of (sentence, answer) token-id pairs, "
            f"got {type(tasks).__name__}"
        )
    if not all(isinstance(t, list | tuple) and len(t) == 2 for t in tasks):
        raise ValueError("tasks must hold (sentence, answer) pairs")
    rows = [tok.encode(s)[:max_len] for s in sentences("heldout")]
    rows = [r for r in rows if len(r) >= MIN_TOKENS]
    ids = torch.full((len(rows), max_len), tok.pad_id)  # (N, L)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    lengths = torch.tensor([len(r) for r in rows])
    position = lengths // 2  # (N,)
    target = ids[torch.arange(len(rows)), position]  # (N,)
    if any(len(y) != 1 for _, y in tasks):
        raise ValueError("tasks: every answer must be one token")
    # Baselines: the training text's most frequent token, its unigram distribution,
    # and the most frequent answer of the task.
    counts = torch.bincount(train_stream, minlength=tok.vocab_size).double()
    counts[list(tok.special_ids)] = 0
    unigram = (counts + 1) / (counts + 1).sum()  # add-one: no zero probability
    answers = torch.tensor([y[0] for _, y in tasks])
    majority = torch.bincount(answers).max().item() / len(answers)
    baselines = {
        "unigram_acc": (target == counts.argmax()).double().mean().item(),
        "unigram_ppl": math.exp(-unigram[target].log().mean().item()),
        "majority_task_acc": majority,
    }
    return ProbeSet(ids, position, target, tok.encode(prefix), tasks, baselines)


@torch.no_grad()
def _logits_at(name: str, model: nn.Module, tok, probes: ProbeSet, cut: bool):
    """(N, V) logits for the hidden token; ``cut`` drops the right context."""
    device = next(model.parameters()).device
    ids, position = probes.ids.to(device), probes.position.to(device)
    n, length = ids.shape
    rows = torch.arange(n, device=device)
    after = torch.arange(length, device=device)[None, :] > position[:, None]  # (N, L)
    if name == "GPT":  # causal: the right context is never seen anyway
        return model(ids)[rows, position - 1]
    x = ids.masked_fill(after, tok.pad_id) if cut else ids.clone()
    if name == "BERT":
        x[rows, position] = tok.mask_id
        return model(x)[rows, position]
    if name == "T5":
        s0 = tok.sentinel_ids[0]
        x[rows, position] = s0
        decoder_in = torch.tensor([tok.bos_id, s0], device=device).expand(n, 2)
        return model(x, decoder_in)[:, 1]  # the token after "<extra_id_0>"
    raise ValueError(f"unknown model name {name!r}")


@torch.no_grad()
def _task_logits(name: str, model: nn.Module, tok, probes: ProbeSet) -> Tensor:
    """(N, V) logits for the one-token answer of every task item, in one pass."""
    device = next(model.parameters()).device
    prompts = [probes.prefix + x for x, _ in probes.tasks]
    ends = torch.tensor([len(p) for p in prompts], device=device)  # [SEP] goes here
    rows = torch.arange(len(prompts), device=device)
    if name == "T5":
        src = _padded(prompts, tok.pad_id, device)  # (N, S)
        decoder_in = torch.full((len(prompts), 1), tok.bos_id, device=device)
        return model(src, decoder_in)[:, 0]
    answer = tok.sep_id if name == "GPT" else tok.mask_id
    idx = _padded([p + [tok.sep_id, answer] for p in prompts], tok.pad_id, device)
    if name == "GPT":  # the logits at [SEP] predict the answer
        return model(idx[:, :-1])[rows, ends]
    if name == "BERT":  # the [MASK] after [SEP]
        return model(idx)[rows, ends + 1]
    raise ValueError(f"unknown model name {name!r}")


def _padded(rows: list[list[int]], pad: int, device) -> Tensor:
    length = max(len(r) for r in rows)
    return torch.tensor([r + [pad] * (length - len(r)) for r in rows], device=device)


def top_guesses(
    name: str, model: nn.Module, tok, probes: ProbeSet, cut: bool = False
) -> Tensor:
    """(N,) model ``name``'s most probable token for each probe item: the blank
    probe's, or with ``cut`` the next probe's. What a model on the unigram plateau
    predicts shows here: one and the same token for most items."""
    _check_scored(name, model, tok, probes)
    model.eval()
    return _logits_at(name, model, tok, probes, cut).argmax(dim=-1).cpu()


def score_model(name: str, model: nn.Module, tok, probes: ProbeSet) -> dict:
    """The scores of model ``name`` ("BERT", "GPT" or "T5") on the three probes.

    Returns blank_acc, blank_ppl, next_acc, next_ppl and task_acc.
    """
    _check_scored(name, model, tok, probes)
    model.eval()
    scores = {}
    for probe, cut in (("blank", False), ("next", True)):
        logits = _logits_at(name, model, tok, probes, cut).float().cpu()  # (N, V)
        log_probs = logits.log_softmax(dim=-1)
        nll = -log_probs.gather(1, probes.target[:, None]).mean().item()
        right = logits.argmax(dim=-1) == probes.target
        scores[f"{probe}_acc"] = right.double().mean().item()
        scores[f"{probe}_ppl"] = math.exp(nll)
    answers = torch.tensor([y[0] for _, y in probes.tasks])
    predicted = _task_logits(name, model, tok, probes).argmax(dim=-1).cpu()
    scores["task_acc"] = (predicted == answers).double().mean().item()
    return scores


def _check_scored(name: str, model: object, tok: object, probes: object) -> None:
    if name not in ("BERT", "GPT", "T5"):
        raise ValueError(f"name must be 'BERT', 'GPT' or 'T5', got {name!r}")
    check_instance("model", model, nn.Module)
    check_tokenizer("tok", tok)
    check_instance("probes", probes, ProbeSet)
