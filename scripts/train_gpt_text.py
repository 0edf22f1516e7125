"""Run Appendix B's own cells for more steps, and ship the model they train.

    python scripts/train_gpt_text.py                      # the full run
    python scripts/train_gpt_text.py --steps 20 --out /tmp/x

The code is not copied here: ``page_namespace`` runs the cells of
``book/appendix_gpt_text.ipynb`` tagged ``gpt-text`` (the imports, the data, the
windows, the model, the sampler and the training loop ``train_gpt``) as they stand,
so the page and this script cannot drift apart. The run differs from the page's only
in its steps (the schedule is laid out over them) and its dropout (0.1: many passes
over the text). Deterministic: one CPU thread, fixed seeds. Writes
``gpt_text.safetensors`` (float16, through ``checkpoints.save_checkpoint``, as the
package's ``GPT``: the listing holds its parameters under the same names) and
``gpt_text.json`` (steps, seconds, machine, the held-out loss every EVAL_EVERY
steps, the samples) to ``--out``, by default the package's ``transformer_book/weights``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "book" / "appendix_gpt_text.ipynb"
TAG = "gpt-text"
OUT = ROOT / "src" / "transformer_book" / "weights"
STEPS = 1500
BATCH = 16  # windows per step, as on the page
SEED = 0
DROPOUT = 0.1
EVAL_EVERY = 50  # as on the page, so the curve holds the page's step count
SAMPLE_AT = (50, 150, 300, 750, 1500)
PROMPT = "The"


def page_namespace() -> dict:
    """The names the page's ``gpt-text`` cells define, after running them in order."""
    namespace: dict = {}
    cells = json.loads(PAGE.read_text())["cells"]
    tagged = [c for c in cells if TAG in c["metadata"].get("tags", [])]
    if not tagged:
        raise RuntimeError(f"{PAGE.name} has no cell tagged {TAG!r}")
    for cell in tagged:
        exec(compile("".join(cell["source"]), str(PAGE), "exec"), namespace)  # noqa: S102
    return namespace


def run(steps: int = STEPS, seed: int = SEED, dropout: float = DROPOUT):
    """Train the page's model with the page's loop for ``steps`` steps: returns
    (namespace, model, history)."""
    page = page_namespace()
    model = page["new_model"](seed, dropout=dropout)
    batches = torch.Generator().manual_seed(seed)

    def write(model):
        g = torch.Generator().manual_seed(0)
        return page["sample"](model, PROMPT, 24, 0.8, generator=g)

    history = page["train_gpt"](
        model,
        lambda step: page["random_windows"](page["train_ids"], BATCH, batches),
        steps,
        heldout=page["heldout"],
        eval_every=EVAL_EVERY,
        sample_at=SAMPLE_AT,
        write=write,
    )
    return page, model, history


def main() -> None:
    from transformer_book.checkpoints import load_checkpoint, save_checkpoint
    from transformer_book.models import GPT, GPTConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    torch.set_num_threads(1)
    start = time.perf_counter()
    page, model, history = run(args.steps)
    seconds = time.perf_counter() - start
    sizes = page["SIZES"]
    package = GPT(
        GPTConfig(page["tok"].vocab_size, page["T"], dropout=DROPOUT, **sizes)
    )
    package.load_state_dict(model.state_dict())  # strict: the same names
    path = save_checkpoint(
        package, args.out / "gpt_text.safetensors", dtype="float16",
        steps=args.steps, seed=SEED,
    )  # fmt: skip
    stored = load_checkpoint(path, model="GPT")
    reloaded = page["new_model"](SEED)
    reloaded.load_state_dict(stored.state_dict())
    record = {
        "page": "book/appendix_gpt_text.ipynb",
        "sizes": sizes,
        "T": page["T"],
        "steps": args.steps,
        "batch": BATCH,
        "seed": SEED,
        "dropout": DROPOUT,
        "storage_dtype": "float16",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "processor": platform.processor(),
        "seconds": round(seconds, 1),
        "eval_every": EVAL_EVERY,
        "heldout": history["heldout"],
        "heldout_float16": page["heldout_loss"](reloaded, *page["heldout"]),
        "loss": history["loss"],
        "samples": {str(k): v for k, v in history["samples"].items()},
        "prompt": PROMPT,
    }
    (args.out / "gpt_text.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path} and gpt_text.json: {seconds:.0f} s")


if __name__ == "__main__":
    main()
