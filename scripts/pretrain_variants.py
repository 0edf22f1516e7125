"""Train Chapter 6's BERT, GPT and T5 far longer than the race, and save them.

    python scripts/pretrain_variants.py --model GPT            # the full run
    python scripts/pretrain_variants.py --model GPT --steps 20 --out /tmp/x

The same corpus, batches and objectives as the chapter's 200-step race
(``experiments.variants``: ``raw_batches``, ``format_batch``, the book's ``train``),
with wider models (``LONG_SIZES``), dropout, weight decay and a warm-up + cosine
schedule suited to a long run. Deterministic: one CPU thread, fixed seeds; the
schedule depends on ``LONG_STEPS`` only, so ``--steps N`` re-runs exactly the first
N steps of the full run. Writes ``<model>.safetensors`` (float16 weights, through
``checkpoints.save_checkpoint``) and ``<model>.json`` (config, schedule, seed, wall
time, the loss of every step) to ``--out``, by default the package's
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
    raw_batches,
    train_stream,
)
from transformer_book.models import BERT, GPT, T5, BERTConfig, GPTConfig, T5Config
from transformer_book.tokenizer import get_tokenizer
from transformer_book.train import train

OUT = Path(__file__).resolve().parent.parent / "src" / "transformer_book" / "weights"
LONG_SIZES = dict(d_model=128, n_heads=4, n_layers=2, d_ff=384, dropout=0.1)
LONG_STEPS = 3500  # the full run; the schedule is laid out over these steps
SEED = 0
LR = 2e-3  # AdamW's peak rate
WARMUP = 200  # linear warm-up steps, then a cosine decay to MIN_LR_FACTOR * LR
MIN_LR_FACTOR = 0.1
WEIGHT_DECAY = 0.1
STORAGE = "float16"  # the shipped files' dtype: under 2 MB each
BUILDERS = {"BERT": (BERT, BERTConfig), "GPT": (GPT, GPTConfig), "T5": (T5, T5Config)}


def lr_factor(step: int) -> float:
    """The multiplier of LR at ``step``: warm-up, then cosine to MIN_LR_FACTOR."""
    if step < WARMUP:
        return (step + 1) / WARMUP
    done = min(1.0, (step - WARMUP) / (LONG_STEPS - WARMUP))
    return MIN_LR_FACTOR + (1 - MIN_LR_FACTOR) * 0.5 * (1 + math.cos(math.pi * done))


def pretrain(name: str, steps: int = LONG_STEPS, seed: int = SEED, lr: float = LR):
    """Train model ``name`` for the first ``steps`` steps; returns (model, history).

    Run it on one thread (``main`` does) for the recorded losses to the last digits.
    """
    tok = get_tokenizer()
    data = raw_batches(tok, train_stream(), steps, seed)  # the race's batches
    model_cls, config_cls = BUILDERS[name]
    set_seed(seed)
    model = model_cls(config_cls(tok.vocab_size, BLOCK_LEN, **LONG_SIZES))
    gen = torch.Generator().manual_seed(seed + 1)
    batches = [format_batch(name, tok, text, task, gen) for text, task in data]
    history = train(
        model,
        lambda step: batches[step],
        _loss,
        steps,
        lr=lr,
        weight_decay=WEIGHT_DECAY,
        lr_lambda=lr_factor,
        device="cpu",
        progress=False,
    )
    return model, history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, required=True)
    parser.add_argument("--steps", type=int, default=LONG_STEPS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if not 1 <= args.steps <= LONG_STEPS:
        parser.error(f"--steps must be between 1 and {LONG_STEPS}")
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
            vocab_size=model.cfg.vocab_size, max_len=BLOCK_LEN, **LONG_SIZES
        ),
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": args.steps,
        "seed": SEED,
        "lr": LR,
        "schedule": f"linear warm-up over {WARMUP} steps, then cosine to "
        f"{MIN_LR_FACTOR} * lr at step {LONG_STEPS}",
        "warmup": WARMUP,
        "schedule_steps": LONG_STEPS,
        "min_lr_factor": MIN_LR_FACTOR,
        "weight_decay": WEIGHT_DECAY,
        "storage_dtype": STORAGE,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "seconds": round(seconds, 1),
        "loss": history["loss"],
    }
    stem.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    print(
        f"{args.model}: {args.steps} steps in {seconds:.0f} s, "
        f"final loss {history['loss'][-1]:.3f}"
    )


if __name__ == "__main__":
    main()
