"""Train Chapter 6's BERT, GPT and T5 far longer than the race, and save them.

    python scripts/pretrain_variants.py --model GPT            # the full run
    python scripts/pretrain_variants.py --model GPT --steps 20 --out /tmp/x

The same corpus, batches and objectives as the chapter's 200-step race
(``experiments.variants``: ``raw_batches``, ``format_batch``, the book's ``train``),
with wider models (``LONG_SIZES``), weight decay and a warm-up + cosine schedule
suited to a long run, and a plan per model (``PLANS``): its steps, its dropout and
its objective's corruption rate. Deterministic: one CPU thread, fixed seeds; the
schedule depends on the plan's steps only, so ``--steps N`` re-runs exactly the
first N steps of the full run. Writes ``<model>.safetensors`` (float16 weights, through
``checkpoints.save_checkpoint``) and ``<model>.json`` (config, plan, schedule, seed,
wall time, the loss of every step, the held-out probes' scores every PROBE_EVERY
steps) to ``--out``, by default the package's
``transformer_book/weights``: the files the package ships.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import torch

from transformer_book.checkpoints import save_checkpoint
from transformer_book.device import set_seed
from transformer_book.experiments.variants import (
    BLOCK_LEN,
    MODELS,
    _loss,
    format_batch,
    probe_set,
    raw_batches,
    train_stream,
)
from transformer_book.experiments.variants_probes import score_model
from transformer_book.models import BERT, GPT, T5, BERTConfig, GPTConfig, T5Config
from transformer_book.tokenizer import get_tokenizer
from transformer_book.train import train

OUT = Path(__file__).resolve().parent.parent / "src" / "transformer_book" / "weights"
LONG_SIZES = dict(d_model=128, n_heads=4, n_layers=2, d_ff=384)
# Each model's full run (the schedule is laid out over its steps), dropout and
# corruption (``format_batch``'s keywords). GPT gets a target at every position and
# leaves the unigram plateau within the race's budget. BERT gets one only at the
# tokens it masks: at the race's 15% it stayed on the plateau, so it masks 40% and
# trains longer. T5 must learn two halves of one circuit at once (the encoder
# gathering a dropped span's neighbours at its sentinel, the decoder finding that
# sentinel): it drops 30% of the text and needs the longest run. BERT and T5 train
# without dropout: the runs of theirs that left the plateau had none.
PLANS = {
    "BERT": dict(steps=8000, dropout=0.0, corruption=dict(mask_prob=0.4)),
    "GPT": dict(steps=3500, dropout=0.1, corruption={}),
    "T5": dict(
        steps=20000,
        dropout=0.0,
        corruption=dict(noise_density=0.3, mean_span_length=3.0),
    ),
}
SEED = 0
LR = 2e-3  # AdamW's peak rate
WARMUP = 200  # linear warm-up steps, then a cosine decay to MIN_LR_FACTOR * LR
MIN_LR_FACTOR = 0.1
WEIGHT_DECAY = 0.1
PROBE_EVERY = 500  # the held-out probes are scored every PROBE_EVERY steps
STORAGE = "float16"  # the shipped files' dtype: under 2 MB each
BUILDERS = {"BERT": (BERT, BERTConfig), "GPT": (GPT, GPTConfig), "T5": (T5, T5Config)}


def lr_factor(step: int, total: int) -> float:
    """The multiplier of LR at ``step`` of a ``total``-step run: warm-up, then cosine
    to MIN_LR_FACTOR."""
    if step < WARMUP:
        return (step + 1) / WARMUP
    done = min(1.0, (step - WARMUP) / (total - WARMUP))
    return MIN_LR_FACTOR + (1 - MIN_LR_FACTOR) * 0.5 * (1 + math.cos(math.pi * done))


def pretrain(
    name: str,
    steps: int | None = None,
    seed: int = SEED,
    lr: float = LR,
    probe_every: int = PROBE_EVERY,
):
    """Train model ``name`` for the first ``steps`` steps of its plan (all of them
    by default); returns (model, history).

    ``history["probes"]`` holds the held-out probes' scores (``score_model``) every
    ``probe_every`` steps and at the end: the curve of learning, not just its end.
    Run it on one thread (``main`` does) for the recorded losses to the last digits.
    """
    plan = PLANS[name]
    steps = plan["steps"] if steps is None else steps
    tok = get_tokenizer()
    data = raw_batches(tok, train_stream(), steps, seed)  # the race's batches
    model_cls, config_cls = BUILDERS[name]
    set_seed(seed)
    config = config_cls(
        tok.vocab_size, BLOCK_LEN, dropout=plan["dropout"], **LONG_SIZES
    )
    model = model_cls(config)
    gen = torch.Generator().manual_seed(seed + 1)
    batches = [
        format_batch(name, tok, text, task, gen, **plan["corruption"])
        for text, task in data
    ]
    probes = probe_set()
    curve = []

    def measure(step: int) -> None:
        curve.append({"step": step, **score_model(name, model, tok, probes)})
        model.train()  # score_model left it in eval mode

    def get_batch(step: int):
        if step and step % probe_every == 0:
            measure(step)  # the model after `step` updates
        return batches[step]

    history = train(
        model,
        get_batch,
        _loss,
        steps,
        lr=lr,
        weight_decay=WEIGHT_DECAY,
        lr_lambda=lambda step: lr_factor(step, plan["steps"]),
        device="cpu",
        progress=False,
    )
    measure(steps)
    history["probes"] = curve
    return model.eval(), history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, required=True)
    parser.add_argument("--steps", type=int, help="the first steps only")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    plan = PLANS[args.model]
    args.steps = plan["steps"] if args.steps is None else args.steps
    if not 1 <= args.steps <= plan["steps"]:
        parser.error(f"--steps must be between 1 and {plan['steps']}")
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    start = time.perf_counter()
    model, history = pretrain(args.model, args.steps)
    seconds = time.perf_counter() - start
    stem = args.out / args.model.lower()
    save_checkpoint(model, stem.with_suffix(".safetensors"), STORAGE, steps=args.steps)
    record = {
        "model": args.model,
        "config": dict(
            vocab_size=model.cfg.vocab_size,
            max_len=BLOCK_LEN,
            dropout=plan["dropout"],
            **LONG_SIZES,
        ),
        "corruption": plan["corruption"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": args.steps,
        "seed": SEED,
        "lr": LR,
        "schedule": f"linear warm-up over {WARMUP} steps, then cosine to "
        f"{MIN_LR_FACTOR} * lr at step {plan['steps']}",
        "warmup": WARMUP,
        "schedule_steps": plan["steps"],
        "min_lr_factor": MIN_LR_FACTOR,
        "weight_decay": WEIGHT_DECAY,
        "storage_dtype": STORAGE,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "seconds": round(seconds, 1),
        "probe_every": PROBE_EVERY,
        "probes": history["probes"],
        "loss": history["loss"],
    }
    stem.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    print(
        f"{args.model}: {args.steps} steps in {seconds:.0f} s, "
        f"final loss {history['loss'][-1]:.3f}"
    )


if __name__ == "__main__":
    main()
