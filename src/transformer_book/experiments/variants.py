"""BERT, GPT and T5 trained side by side on the same text (Chapter 6, §6.4).

The three families of the lesson's table, at the same tiny size, trained with the
book's ``train`` on the same batches of the same corpus (``corpus``, tokenized by
``tokenizer.get_tokenizer()``) for the same number of steps, each with its own
objective: GPT predicts every next token, BERT the 15% of tokens ``mask_tokens``
chose, T5 the spans ``span_corrupt`` dropped. A quarter of every batch is a small
text-to-text task, the same for the three: "topic:" and a sentence of one of four
topics (``corpus.topic_sentences``), answered by one word naming the topic
(" statements", " debugger", " format", " methods"). Each model writes it its own
way: T5 as source and target, GPT as one sequence (prompt, [SEP], answer), BERT
as the prompt, [SEP] and a [MASK] to fill.

Then the three answer the same three probes (``variants_probes``): (a) fill a
blank in the middle of a held-out sentence, (b) predict the token that continues
the sentence cut at the same place, (c) name the topic of the held-out test
sentences. A seed fixes the weights (``set_seed(seed)`` before each model) and
the batches and corruptions (``Generator().manual_seed(seed + 1)``); the probes
are fixed.

Shape letters: B batch, T block length, S source positions, V vocabulary size.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._validate import (
    check_compute_device,
    check_int,
    check_real,
    check_seed,
    check_tensor,
    check_tokenizer,
)
from ..corpus import CLASSIFICATION_TOPICS, paragraphs, topic_sentences
from ..device import set_seed
from ..models import BERT, GPT, T5, BERTConfig, GPTConfig, T5Config
from ..models.bert import IGNORE_INDEX, mask_tokens
from ..models.t5 import span_corrupt
from ..tokenizer import BPETokenizer, encode_stream, get_tokenizer, random_blocks
from ..train import train
from .variants_probes import ProbeSet, make_probes, score_model

__all__ = [
    "MODELS",
    "BLOCK_LEN",
    "TEXT_ROWS",
    "TASK_ROWS",
    "STEPS",
    "TASK_PREFIX",
    "TASK_LABELS",
    "variant_models",
    "task_pairs",
    "train_stream",
    "probe_set",
    "raw_batches",
    "format_batch",
    "VariantsRun",
    "run_variants",
]

MODELS = ("BERT", "GPT", "T5")
BLOCK_LEN = 64  # T: tokens per window of text, and max_len of the models
TEXT_ROWS = 12  # windows of text per batch
TASK_ROWS = 4  # text-to-text task pairs per batch
STEPS = 200  # training steps of each model
LR = 3e-3  # AdamW's peak rate, reached after WARMUP steps
WARMUP = 20
TASK_PREFIX = "topic:"  # the task prefix, T5-style
TASK_LABELS = (" statements", " debugger", " format", " methods")  # one token each
SIZES = dict(d_model=64, n_heads=4, n_layers=2, d_ff=256)  # the same for the three


def variant_models(vocab_size: int, seed: int = 0) -> dict[str, nn.Module]:
    """The three models, each built right after ``set_seed(seed)``."""
    check_int("vocab_size", vocab_size, minimum=1)
    check_seed("seed", seed)
    builders = {
        "BERT": lambda: BERT(BERTConfig(vocab_size, BLOCK_LEN, **SIZES)),
        "GPT": lambda: GPT(GPTConfig(vocab_size, BLOCK_LEN, **SIZES)),
        "T5": lambda: T5(T5Config(vocab_size, BLOCK_LEN, **SIZES)),
    }
    models = {}
    for name in MODELS:
        set_seed(seed)
        models[name] = builders[name]()
    return models


def task_pairs(tok: BPETokenizer, split: str) -> list[tuple[list[int], list[int]]]:
    """The topic task's (sentence, answer) token pairs of ``split`` ("train"/"test").

    The sentence is cut so that prefix, sentence, [SEP] and answer fit BLOCK_LEN.
    """
    check_tokenizer("tok", tok)
    texts, labels = topic_sentences(split, CLASSIFICATION_TOPICS)
    answers = [tok.encode(label) for label in TASK_LABELS]
    if any(len(a) != 1 for a in answers):
        raise RuntimeError("every topic label must be one token")
    room = BLOCK_LEN - len(tok.encode(TASK_PREFIX)) - 3
    return [
        (tok.encode(t)[:room], answers[y]) for t, y in zip(texts, labels, strict=True)
    ]


@functools.cache
def train_stream() -> Tensor:
    """The training prose as one stream of ids, [EOS] after each paragraph (cached).

    Shapes: returns (N,) int64; do not modify it.
    """
    return encode_stream(get_tokenizer(), [p for _, p in paragraphs("train")])


@functools.cache
def probe_set() -> ProbeSet:
    """The experiment's probes (cached; the same for every seed)."""
    tok = get_tokenizer()
    tasks = task_pairs(tok, "test")
    return make_probes(tok, train_stream(), BLOCK_LEN, TASK_PREFIX, tasks)


def raw_batches(
    tok: BPETokenizer, stream: Tensor, steps: int, seed: int
) -> list[tuple[Tensor, list]]:
    """The raw data of every step, shared by the three models.

    Each step: TEXT_ROWS windows of BLOCK_LEN tokens (TEXT_ROWS, T), and TASK_ROWS
    (sentence, answer) pairs of the topic task.
    """
    check_tokenizer("tok", tok)
    check_int("steps", steps, minimum=1)
    check_seed("seed", seed)
    gen = torch.Generator().manual_seed(seed + 1)
    pairs = task_pairs(tok, "train")
    out = []
    for _ in range(steps):
        text = random_blocks(stream, TEXT_ROWS, BLOCK_LEN, gen)
        picks = torch.randint(len(pairs), (TASK_ROWS,), generator=gen).tolist()
        out.append((text, [pairs[i] for i in picks]))
    return out


def _check_tasks(tasks: object) -> None:
    """A list of (sentence, answer) pairs of token-id lists."""
    if not isinstance(tasks, list | tuple) or not all(
        isinstance(t, list | tuple)
        and len(t) == 2
        and all(isinstance(part, list) for part in t)
        for t in tasks
    ):
        raise TypeError(
            "tasks must be a list of (sentence, answer) pairs of token-id lists, "
            f"got {type(tasks).__name__}"
        )


def _pad(rows: list[list[int]], value: int) -> Tensor:
    length = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (length - len(r)) for r in rows])


def format_batch(
    name: str,
    tok: BPETokenizer,
    text: Tensor,
    tasks: list[tuple[list[int], list[int]]],
    gen: torch.Generator,
    *,
    mask_prob: float = 0.15,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
):
    """One step's (inputs, targets) for ``train``, in model ``name``'s format.

    ``tasks`` holds (sentence, answer) token lists. Targets are IGNORE_INDEX where
    there is nothing to predict. ``mask_prob`` is BERT's share of chosen tokens
    (``mask_tokens``); ``noise_density`` and ``mean_span_length`` set T5's dropped
    spans (``span_corrupt``). The defaults are the papers' and the race's.
    """
    # checked here whatever ``name`` is: no setting is ignored in silence
    check_real("mask_prob", mask_prob, 0.0, 1.0)
    check_real("noise_density", noise_density, 0.0, 1.0, low_open=True, high_open=True)
    check_real("mean_span_length", mean_span_length, low=1.0)
    if name not in MODELS:
        raise ValueError(f"name must be one of {MODELS}, got {name!r}")
    check_tokenizer("tok", tok)
    check_tensor("text", text, "int")
    if text.dim() != 2 or text.shape[1] < 2 or text.is_meta:
        raise ValueError(
            f"text must be (N, T) token windows with T >= 2 on a device that holds "
            f"values, got shape {tuple(text.shape)} on {text.device}"
        )
    _check_tasks(tasks)
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"gen must be a torch.Generator, got {type(gen).__name__}")
    prefix = tok.encode(TASK_PREFIX)
    pad, ign = tok.pad_id, IGNORE_INDEX
    if name == "GPT":  # predict every next token; on task rows, only the answer
        rows = [w.tolist() for w in text] + [
            prefix + x + [tok.sep_id] + y + [tok.eos_id] for x, y in tasks
        ]
        labels = [r[1:] for r in rows[: len(text)]] + [
            [ign] * (len(prefix) + len(x)) + y + [tok.eos_id] for x, y in tasks
        ]
        return _pad([r[:-1] for r in rows], pad), _pad(labels, ign)
    if name == "BERT":  # predict the chosen tokens; on task rows, the answer
        inputs, labels = mask_tokens(
            text, tok.vocab_size, tok.mask_id, tok.special_ids, gen, mask_prob
        )
        rows = inputs.tolist() + [
            prefix + x + [tok.sep_id] + [tok.mask_id] * len(y) for x, y in tasks
        ]
        task_labels = [[ign] * (len(prefix) + len(x) + 1) + y for x, y in tasks]
        return _pad(rows, pad), _pad(labels.tolist() + task_labels, ign)
    if name == "T5":  # text to text: the dropped spans, or the task's answer
        src, tgt = span_corrupt(
            text, tok.sentinel_ids, noise_density, mean_span_length, gen
        )
        sources = src.tolist() + [prefix + x for x, _ in tasks]
        answers = tgt.tolist() + [y for _, y in tasks]
        decoder_in = _pad([[tok.bos_id] + a for a in answers], pad)
        targets = _pad([a + [tok.eos_id] for a in answers], ign)
        return (_pad(sources, pad), decoder_in), targets
    raise ValueError(f"name must be one of {MODELS}, got {name!r}")


def _loss(logits: Tensor, targets: Tensor) -> Tensor:
    return F.cross_entropy(
        logits.transpose(1, 2), targets, ignore_index=IGNORE_INDEX
    )  # (B, T, V) -> (B, V, T)


@dataclass(frozen=True)
class VariantsRun:
    """What ``run_variants`` returns; every dict is keyed by model name."""

    models: dict[str, nn.Module]  # trained, in eval mode
    histories: dict[str, dict]  # train's history: "loss" per step, "seconds"
    parameters: dict[str, int]  # trainable parameters (tied tables counted once)
    tokens_seen: dict[str, int]  # input positions processed (padding left out)
    targets_seen: dict[str, int]  # positions with a loss: a training signal
    seconds: dict[str, float]  # training time on this machine
    scores: dict[str, dict[str, float]]  # probe -> score, from probes.score_model
    baselines: dict[str, float]  # unigram and majority-class baselines
    probes: ProbeSet  # the held-out probe items


def run_variants(
    seed: int = 0,
    steps: int = STEPS,
    device: torch.device | str | None = None,
) -> VariantsRun:
    """Train the three models on the same batches for ``steps`` steps and probe them."""
    check_seed("seed", seed)
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    check_compute_device("device", device)
    return _run_variants(seed, steps, device)


def _run_variants(seed: int, steps: int, device) -> VariantsRun:
    """``run_variants`` after its checks: data, models, training loop, probes."""
    tok = get_tokenizer()
    stream = train_stream()
    data = raw_batches(tok, stream, steps, seed)  # the same text for the three
    probes = probe_set()  # held-out sentences and test pairs
    models = variant_models(tok.vocab_size, seed)  # the same SIZES for the three
    histories, tokens, targets, seconds, scores = {}, {}, {}, {}, {}
    for name, model in models.items():
        # the same raw batches, written in this model's format with its objective
        gen = torch.Generator().manual_seed(seed + 1)
        batches = [format_batch(name, tok, text, task, gen) for text, task in data]
        inputs = [b[0] if isinstance(b[0], tuple) else (b[0],) for b in batches]
        tokens[name] = sum(int((x != tok.pad_id).sum()) for b in inputs for x in b)
        targets[name] = sum(int((b[1] != IGNORE_INDEX).sum()) for b in batches)
        histories[name] = train(
            model,
            _indexer(batches),
            _loss,
            steps,
            lr=LR,
            lr_lambda=lambda step: min(1.0, (step + 1) / WARMUP),
            device=device,
        )
        seconds[name] = histories[name]["seconds"]
        scores[name] = score_model(name, model, tok, probes)  # the three probes
    return VariantsRun(
        models=models,
        histories=histories,
        parameters={
            n: sum(p.numel() for p in m.parameters()) for n, m in models.items()
        },
        tokens_seen=tokens,
        targets_seen=targets,
        seconds=seconds,
        scores=scores,
        baselines=probes.baselines,
        probes=probes,
    )


def _indexer(batches: list) -> Callable[[int], tuple]:
    return lambda step: batches[step]
