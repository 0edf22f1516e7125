"""Chapter 7's experiments: what cheaper attention gives up.

1. ``run_kv_sharing`` (§7.4): what sharing key/value heads costs a GPT.

``run_kv_sharing`` trains Chapter 6's GPT three times on the same batches of
Chapter 6's corpus, with 4, 2 and 1 key/value heads for its 4 query heads
(multi-head, grouped-query and multi-query attention), and measures what each
keeps in its KV cache and how well it predicts the held-out prose. The chapter
runs it with seed 0 and asserts its bounds; ``tests/test_experiments_efficiency.py``
asserts them for seeds 1, 2, 3.

2. ``run_recall_approximations`` and ``run_lookup_approximations`` (§7.5):
Chapter 1's recall task, with the symbol anywhere among ``RECALL_T - 1`` tokens,
read by one attention layer that is exact, restricted to a sliding window,
Linformer's projection or Performer's random features. The task needs one sharp
look at one far position: the test of what each approximation keeps. The look-up
(Chapter 2's task, with more pairs) needs a sharp look at one key among many that
resemble it: associative recall, which kernel approximations such as Performer's
blur.

Shape letters: B batch, T positions, D ``d_model``, H query heads, Hkv key/value
heads, Dh = D / H, L layers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._parallel import map_runs
from .._validate import (
    check_compute_device,
    check_float_input,
    check_has_values,
    check_instance,
    check_int,
    check_like_module,
    check_on,
    check_seed,
    check_tensor,
    check_token_ids,
)
from ..attention import MultiHeadAttention
from ..data import lookup_task, recall_task
from ..device import set_seed
from ..efficient import LinformerAttention, PerformerAttention, sliding_window_mask
from ..models import GPTConfig
from ..tokenizer import get_tokenizer
from ..train import accuracy, train
from .variants import BLOCK_LEN, LR, SIZES, STEPS, WARMUP
from .variants_uses import heldout_perplexity, prose_windows, train_gpt_on_prose

__all__ = [
    "KV_HEADS",
    "KV_PPL_BOUND",
    "KV_PPL_FLOOR",
    "RECALL_BOUNDS",
    "LOOKUP_BOUNDS",
    "kv_cache_bytes",
    "run_kv_sharing",
    "APPROXIMATIONS",
    "RECALL_T",
    "WINDOW",
    "scattered_recall",
    "RecallReader",
    "run_recall_approximations",
    "LOOKUP_SIZES",
    "LookupReader",
    "run_lookup_approximations",
]

RECALL_T = 64  # tokens per sequence: the symbol, 62 fillers, the query
WINDOW = 16  # the sliding window: the query sees itself and the 15 tokens before
APPROXIMATIONS = (
    "exact",
    f"sliding window {WINDOW}",
    "Linformer k=8",
    "Performer m=16",
)
"""The attention layers compared on the recall task (``RecallReader``'s kinds)."""

KV_HEADS = (4, 1)
"""Key/value heads for the 4 query heads that ``run_kv_sharing`` trains by
default: multi-head and multi-query attention (pass (4, 2, 1) for grouped-query
too; the chapter keeps two to stay within its time budget)."""

KV_PPL_BOUND = 0.65
"""The bound the chapter states: every variant's held-out perplexity is at most
this fraction of the unigram model's. Measured with 200 steps, seeds 0-3: 92-202
against the unigram's 373 for 4, 2 and 1 key/value heads, with no ordering that
holds across seeds (multi-query came out best with seed 0, worst with seed 2)."""

KV_PPL_FLOOR = 0.15
"""No variant's held-out perplexity comes below this fraction of the unigram model's
after 200 steps (seeds 0-3: 92 at the lowest, 0.25 x the unigram's 373): Exercise 7.5's
checker holds a reader's table to it, so that losses (about 4.5-5.3 nats) or bits
cannot pass for perplexities."""

# The bounds of §7.5, as measured for seeds 0-3 with margin (n_test = 2000)
RECALL_BOUNDS = {
    "exact": (0.99, 1.0),  # measured 1.0
    f"sliding window {WINDOW}": (0.25, 0.40),  # 0.31-0.35; ceiling (15 + 48/8)/63
    "Linformer k=8": (0.85, 1.0),  # 0.90-1.0
    "Performer m=16": (0.99, 1.0),  # 1.0
}
LOOKUP_BOUNDS = {
    "exact": (0.99, 1.0),  # measured 0.998-1.0
    f"sliding window {WINDOW}": (0.42, 0.56),  # 0.48-0.50; ceiling (15 + 17/16)/32
    "Linformer k=8": (0.0, 0.15),  # 0.055-0.097: chance is 1/16
    "Performer m=16": (0.0, 0.60),  # 0.34-0.41
}


def kv_cache_bytes(cfg: GPTConfig, tokens: int, dtype_bytes: int = 4) -> int:
    """Bytes of a KV cache: 2 (keys and values) x L x Hkv x Dh per token.

    The formula behind ``GPT.forward_cached``'s cache of L pairs (B, Hkv, P, Dh),
    for one sequence of ``tokens`` positions.
    """
    check_instance("cfg", cfg, GPTConfig)
    check_int("tokens", tokens, minimum=0)
    check_int("dtype_bytes", dtype_bytes, minimum=1)
    n_kv = cfg.n_heads if cfg.n_kv_heads is None else cfg.n_kv_heads
    d_head = cfg.d_model // cfg.n_heads
    return 2 * cfg.n_layers * n_kv * d_head * tokens * dtype_bytes


def run_kv_sharing(
    seed: int = 0,
    steps: int = STEPS,
    kv_heads: tuple[int, ...] = KV_HEADS,
    device: torch.device | str | None = None,
) -> dict[int, dict[str, float]]:
    """Train one GPT per entry of ``kv_heads``; what each caches and predicts.

    Every model is Chapter 6's GPT (its sizes, learning rate and warm-up), trained
    for ``steps`` steps on the same windows of the training prose, from weights
    drawn with the same ``seed``. Returns ``{n_kv_heads: {"ppl": held-out
    perplexity, "unigram_ppl": the unigram's, "cache_bytes": KV cache bytes per
    token, "params": parameter count}}``.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    check_seed("seed", seed)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if isinstance(kv_heads, str) or not isinstance(kv_heads, tuple | list):
        raise TypeError(f"kv_heads must be a tuple of ints, got {kv_heads!r}")
    for i, n_kv in enumerate(kv_heads):
        check_int(f"kv_heads[{i}]", n_kv, minimum=1)
    check_compute_device("device", device)
    if not kv_heads:
        raise ValueError("kv_heads must name at least one key/value head count")
    windows = prose_windows(seed, steps, 16)  # steps x (16, T): shared by all
    # the models share nothing but the windows: on a CPU they train side by side
    jobs = [(n_kv, windows, seed, device) for n_kv in kv_heads]
    return dict(zip(kv_heads, map_runs(_kv_run, jobs, device), strict=True))


def _kv_run(n_kv: int, windows: list[Tensor], seed: int, device) -> dict[str, float]:
    """One model of ``run_kv_sharing``: trained, then measured."""
    tok = get_tokenizer()
    cfg = GPTConfig(tok.vocab_size, BLOCK_LEN, n_kv_heads=n_kv, **SIZES)
    model, _ = train_gpt_on_prose(cfg, windows, seed, LR, WARMUP, device)
    ppl, unigram = heldout_perplexity(model, tok)
    return {
        "ppl": ppl,
        "unigram_ppl": unigram,
        "cache_bytes": kv_cache_bytes(cfg, 1),
        "params": sum(p.numel() for p in model.parameters()),
    }


def _check_seed(seed) -> None:
    check_seed("seed", seed)


def scattered_recall(
    batch_size: int, t: int = RECALL_T, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """Chapter 1's recall task with the symbol at a random place: ``[f s f f ?] -> s``.

    ``data.recall_task`` puts the symbol first; here the t - 1 tokens before the
    query are shuffled, row by row, so the symbol sits anywhere among them.

    Shapes: returns tokens (B, t) and targets (B,)
    """
    check_int("t", t, minimum=2)  # the symbol and the query, at least
    batch = recall_task(batch_size, t - 1, generator=generator)  # (B, t)
    order = torch.rand(batch_size, t - 1, generator=generator).argsort(dim=1)
    body = batch.tokens[:, :-1].gather(1, order)  # (B, t - 1), shuffled per row
    return torch.cat([body, batch.tokens[:, -1:]], dim=1), batch.target


class RecallReader(nn.Module):
    """Embed the tokens, one attention layer of ``kind``, classify at the last one.

    ``kind`` is one of :data:`APPROXIMATIONS`. Self-attention over the whole
    sequence (no positions, as in Chapter 1), then the last position's output,
    with its residual, goes to a linear classifier. The defaults fit the recall
    task: 8 symbols, 8 fillers and the query, ``RECALL_T`` tokens.

    Shapes: tokens (B, seq_len) -> logits (B, n_classes)
    """

    def __init__(
        self,
        kind: str,
        vocab_size: int = 17,
        n_classes: int = 8,
        seq_len: int = RECALL_T,
    ):
        super().__init__()
        if kind not in APPROXIMATIONS:
            raise ValueError(f"kind must be one of {APPROXIMATIONS}, got {kind!r}")
        check_int("vocab_size", vocab_size, minimum=1)
        check_int("n_classes", n_classes, minimum=1)
        check_int("seq_len", seq_len, minimum=1)
        d_model, n_heads = 32, 2
        self.kind = kind
        self.embed = nn.Embedding(vocab_size, d_model)
        if kind.startswith("Linformer"):
            self.attn = LinformerAttention(d_model, n_heads, seq_len=seq_len, k=8)
        elif kind.startswith("Performer"):
            self.attn = PerformerAttention(d_model, n_heads, n_features=16)
        else:
            self.attn = MultiHeadAttention(d_model, n_heads)
        window = sliding_window_mask(seq_len, WINDOW)  # (T, T)
        self.register_buffer("window", window, persistent=False)
        self.head = nn.Linear(d_model, n_classes)

    def read(self, x: Tensor) -> Tensor:
        """Attention over x, then classify its last position: (B, T, D) -> (B, C)."""
        d_model = self.embed.embedding_dim
        check_float_input("x", x, f"(B, T, D={d_model})", dim=3)
        if x.shape[1] < 1 or x.shape[2] != d_model:
            raise ValueError(f"x must have shape (B, T, D={d_model}), got {x.shape}")
        check_like_module("x", x, self.embed.weight)
        if self.kind.startswith("sliding"):
            h = self.attn(x, mask=self.window)  # (B, T, D)
        else:
            h = self.attn(x)  # (B, T, D)
        return self.head(x[:, -1] + h[:, -1])  # (B, D) -> (B, C)

    def forward(self, tokens: Tensor) -> Tensor:
        check_token_ids("tokens", tokens, self.embed.num_embeddings, "(B, T)")
        if tokens.shape[1] < 1:
            raise ValueError(f"tokens has no positions: shape {tuple(tokens.shape)}")
        check_on("tokens", tokens, self.embed.weight)
        return self.read(self.embed(tokens))  # (B, T) -> (B, T, D) -> (B, C)


LOOKUP_SIZES = dict(n_pairs=32, n_keys=64, n_values=16)
"""The look-up of §7.5: 32 (key, value) pairs per row, keys drawn from 64."""


class LookupReader(RecallReader):
    """The same attention layer of ``kind`` reading the look-up task.

    Each (key, value) pair is one token, the sum of a key and a value embedding;
    the query key comes last, and the layer's output there names the value.

    Shapes: keys, values (B, N) and query (B,) -> logits (B, n_values)
    """

    def __init__(self, kind: str):
        n_pairs, n_keys, n_values = LOOKUP_SIZES.values()
        super().__init__(kind, n_keys, n_values, seq_len=n_pairs + 1)
        self.value_embed = nn.Embedding(n_values, self.embed.embedding_dim)

    def forward(self, keys: Tensor, values: Tensor, query: Tensor) -> Tensor:
        check_token_ids("keys", keys, self.embed.num_embeddings, "(B, N)")
        check_token_ids("values", values, self.value_embed.num_embeddings, "(B, N)")
        check_tensor("query", query, "int")
        check_has_values("query", query)
        if values.shape != keys.shape or keys.shape[1] < 1:
            raise ValueError(
                f"keys and values must be (B, N) of one shape with N >= 1, got "
                f"{tuple(keys.shape)} and {tuple(values.shape)}"
            )
        if query.shape != keys.shape[:1]:
            raise ValueError(f"query must have shape (B,) = {keys.shape[:1]}")
        for name, x in (("keys", keys), ("values", values), ("query", query)):
            check_on(name, x, self.embed.weight)
        items = self.embed(keys) + self.value_embed(values)  # (B, N, D)
        return self.read(torch.cat([items, self.embed(query)[:, None]], dim=1))


def run_recall_approximations(
    seed: int = 0,
    steps: int = 300,
    n_test: int = 2000,
    kinds: tuple[str, ...] = APPROXIMATIONS,
    device: torch.device | str | None = None,
) -> dict[str, float]:
    """Held-out accuracy of each ``kind`` of :class:`RecallReader` on the task.

    Each model trains ``steps`` steps of AdamW (lr 3e-3) on the same batches of
    64 sequences, from weights drawn with ``seed``. Chance is 1/8; a model that
    sees only the last ``WINDOW`` tokens can at best answer the symbols inside the
    window and guess the rest: (w + (T - 1 - w) / 8) / (T - 1) with w = WINDOW - 1.
    """
    _check_run(seed, steps, n_test, kinds, device)
    gen = torch.Generator().manual_seed(seed + 100)

    def draw(n: int, generator: torch.Generator) -> tuple[tuple, Tensor]:
        tokens, target = scattered_recall(n, generator=generator)
        return (tokens.to(device),), target.to(device)

    return _run_readers(
        RecallReader, draw, gen, seed + 200, steps, n_test, kinds, seed, device
    )


def run_lookup_approximations(
    seed: int = 0,
    steps: int = 300,
    n_test: int = 2000,
    kinds: tuple[str, ...] = APPROXIMATIONS,
    device: torch.device | str | None = None,
) -> dict[str, float]:
    """Held-out accuracy of each ``kind`` of :class:`LookupReader` (chance 1/16).

    The training of :func:`run_recall_approximations`, on look-up rows of
    :data:`LOOKUP_SIZES`. A sliding window sees the last 15 pairs of 32: at best
    (15 + 17 / 16) / 32, about 50%.
    """
    _check_run(seed, steps, n_test, kinds, device)
    gen = torch.Generator().manual_seed(seed + 300)

    def draw(n: int, generator: torch.Generator) -> tuple[tuple, Tensor]:
        b = lookup_task(n, **LOOKUP_SIZES, generator=generator, device=device)
        return (b.keys, b.values, b.query), b.target

    return _run_readers(
        LookupReader, draw, gen, seed + 400, steps, n_test, kinds, seed, device
    )


def _check_run(seed, steps, n_test, kinds, device) -> None:
    _check_seed(seed)
    if isinstance(kinds, str) or not isinstance(kinds, tuple | list):
        raise TypeError(f"kinds must be a tuple of names, got {kinds!r}")
    check_compute_device("device", device)
    for name, value in (("steps", steps), ("n_test", n_test)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    for kind in kinds:
        if kind not in APPROXIMATIONS:
            raise ValueError(f"kinds must come from {APPROXIMATIONS}, got {kind!r}")


def _run_readers(make, draw, gen, test_seed, steps, n_test, kinds, seed, device):
    """Train one ``make(kind)`` per kind on the same batches; held-out accuracies."""
    batches = [draw(64, gen) for _ in range(steps)]
    inputs, target = draw(n_test, torch.Generator().manual_seed(test_seed))
    # one model per kind, sharing only the batches: on a CPU they train side by side
    jobs = [(make, kind, batches, inputs, target, seed, device) for kind in kinds]
    return dict(zip(kinds, map_runs(_reader_run, jobs, device), strict=True))


def _reader_run(make, kind, batches, inputs, target, seed, device) -> float:
    """One model of ``_run_readers``: trained, then its held-out accuracy."""
    set_seed(seed)
    model = make(kind)
    train(
        model,
        batches.__getitem__,
        F.cross_entropy,
        len(batches),
        lr=3e-3,
        device=device,
    )
    model.eval()
    with torch.no_grad():
        return accuracy(model(*inputs), target)
