"""The three probes of Chapter 6's comparison, on held-out text (§6.4).

(a) **blank**: a held-out sentence with its middle token hidden; the model sees
    both sides (GPT, being causal, can only use the left one);
(b) **next**: the same sentence cut before that token; the model predicts it
    from the left side alone: the same targets as (a), less context;
(c) **task**: "reverse:" and 3 to 6 tokens of held-out text, answered by the same
    tokens in reverse order, decoded greedily.

Each model answers in its own way: GPT reads the logits one position earlier;
BERT puts [MASK] at the position (and, for (b), nothing after it); T5 puts the
sentinel <extra_id_0> there and decodes "<extra_id_0> token". Scores are top-1
accuracy and perplexity for (a) and (b), token accuracy and exact match for (c).

Shape letters: N probe sentences, L their padded length, V vocabulary size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..corpus import sentences
from ..tokenizer import BPETokenizer

__all__ = ["ProbeSet", "make_probes", "score_model", "MIN_TOKENS"]

MIN_TOKENS = 12  # shortest held-out sentence used, in tokens


@dataclass(frozen=True)
class ProbeSet:
    """The held-out items every model is scored on."""

    ids: Tensor  # (N, L) held-out sentences, right-padded with [PAD]
    position: Tensor  # (N,) the hidden position, the middle of each sentence
    target: Tensor  # (N,) the token there
    prefix: list[int]  # the task prefix's token ids
    task_inputs: list[list[int]]  # (c): token runs to reverse
    baselines: dict[str, float]  # scores that need no model


def make_probes(
    tok: BPETokenizer,
    train_stream: Tensor,
    max_len: int,
    prefix: str,
    task_lengths: tuple[int, int],
) -> ProbeSet:
    """The probes from the held-out sentences; the same on every call."""
    rows = [tok.encode(s)[:max_len] for s in sentences("heldout")]
    rows = [r for r in rows if len(r) >= MIN_TOKENS]
    ids = torch.full((len(rows), max_len), tok.pad_id)  # (N, L)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    lengths = torch.tensor([len(r) for r in rows])
    position = lengths // 2  # (N,)
    target = ids[torch.arange(len(rows)), position]  # (N,)
    gen = torch.Generator().manual_seed(0)  # fixed: the probes do not follow the seed
    lo, hi = task_lengths
    task_inputs = []
    for i, r in enumerate(rows):
        n = lo + i % (hi - lo + 1)
        start = int(torch.randint(len(r) - n + 1, (1,), generator=gen))
        task_inputs.append(r[start : start + n])
    # Baselines: the training text's most frequent token, its unigram distribution
    counts = torch.bincount(train_stream, minlength=tok.vocab_size).double()
    counts[list(tok.special_ids)] = 0
    unigram = (counts + 1) / (counts + 1).sum()  # add-one: no zero probability
    copied = [sum(a == b for a, b in zip(x, x[::-1], strict=True)) for x in task_inputs]
    baselines = {
        "unigram_acc": (target == counts.argmax()).double().mean().item(),
        "unigram_ppl": math.exp(-unigram[target].log().mean().item()),
        "copy_task_acc": sum(copied) / sum(len(x) for x in task_inputs),
    }
    return ProbeSet(ids, position, target, tok.encode(prefix), task_inputs, baselines)


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
def _task_answers(name: str, model: nn.Module, tok, probes: ProbeSet) -> list:
    """Each model's greedy answer to every task input, grouped by length."""
    device = next(model.parameters()).device
    answers: dict[int, list[int]] = {}
    by_length: dict[int, list[int]] = {}
    for i, x in enumerate(probes.task_inputs):
        by_length.setdefault(len(x), []).append(i)
    for n, items in by_length.items():
        prompts = [probes.prefix + probes.task_inputs[i] for i in items]
        if name == "GPT":
            idx = torch.tensor([p + [tok.sep_id] for p in prompts], device=device)
            out = model.generate(idx, n, temperature=0)[:, -n:]
        elif name == "BERT":
            idx = torch.tensor(
                [p + [tok.sep_id] + [tok.mask_id] * n for p in prompts], device=device
            )
            out = model(idx)[:, -n:].argmax(dim=-1)
        elif name == "T5":
            src = torch.tensor(prompts, device=device)
            out = model.greedy_decode(src, tok.bos_id, tok.eos_id, n)[:, 1:]
        else:
            raise ValueError(f"unknown model name {name!r}")
        for i, row in zip(items, out.tolist(), strict=True):
            answers[i] = row
    return [answers[i] for i in range(len(probes.task_inputs))]


def score_model(name: str, model: nn.Module, tok, probes: ProbeSet) -> dict:
    """The scores of model ``name`` ("BERT", "GPT" or "T5") on the three probes.

    Returns blank_acc, blank_ppl, next_acc, next_ppl, task_acc (token accuracy)
    and task_exact (sequences reversed exactly).
    """
    model.eval()
    scores = {}
    for probe, cut in (("blank", False), ("next", True)):
        logits = _logits_at(name, model, tok, probes, cut).float().cpu()  # (N, V)
        log_probs = logits.log_softmax(dim=-1)
        nll = -log_probs.gather(1, probes.target[:, None]).mean().item()
        right = logits.argmax(dim=-1) == probes.target
        scores[f"{probe}_acc"] = right.double().mean().item()
        scores[f"{probe}_ppl"] = math.exp(nll)
    answers = _task_answers(name, model, tok, probes)
    right = [
        [a == b for a, b in zip(answer + [-1] * len(x), x[::-1], strict=False)]
        for answer, x in zip(answers, probes.task_inputs, strict=True)
    ]
    scores["task_acc"] = sum(map(sum, right)) / sum(map(len, right))
    scores["task_exact"] = sum(map(all, right)) / len(right)
    return scores
