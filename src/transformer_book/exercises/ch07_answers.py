"""Checkers of Chapter 7's answers that are numbers or a table (Exercises 7.3-7.6).

``check_kv_cache_answer(...)``: a large model's cache, in bytes and sequences.
``check_t_squared_answer(...)``: the length from which T² dominates a layer.
``check_kv_sharing_answer(...)``: the reader's perplexities over random seeds, and
the two conclusions they support.
``check_tiling_threshold_answer(...)``: the on-chip memory from which tiling moves
fewer bytes.

Each accepts the right value within a stated tolerance and names the classic
mistakes (a factor 2 forgotten, bytes confused with numbers, bits with bytes...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..efficient import attention_flops, attention_memory_traffic
from ._checking import (
    TODO_NUMBERS,
    as_number,
    attempted,
    checker,
    expect_bool,
    expect_number,
    shown_keys,
)

__all__ = [
    "check_kv_cache_answer",
    "check_t_squared_answer",
    "check_kv_sharing_answer",
    "check_tiling_threshold_answer",
]


# -- Exercise 7.3: the cache of a large model ---------------------------------------


def _large_model_cache() -> dict[str, int]:
    """Exercise 7.3's figures, from the package's ``kv_cache_bytes``."""
    from ..experiments.efficiency import kv_cache_bytes
    from ..models import GPTConfig

    figures = {}
    for label, n_kv in (("mha", 64), ("gqa", 8)):
        cfg = GPTConfig(vocab_size=32000, max_len=4096, d_model=8192, n_heads=64,
                        n_layers=80, n_kv_heads=n_kv)  # fmt: skip
        per_token = kv_cache_bytes(cfg, 1, dtype_bytes=2)
        figures[f"per_token_{label}"] = per_token
        figures[f"sequences_{label}"] = 40 * 2**30 // (per_token * 4096)
    return figures


def _per_token_mistakes(right: int, heads: str) -> list[tuple[float, str]]:
    if heads == "gqa":
        first = [
            (
                right * 8,
                "that is the cache of the 64 query heads (or bits): "
                "the cache holds the 8 key/value heads, in bytes",
            )
        ]
        decimal = [(320e3, "320 KiB is 320 x 2^10 bytes, not 320,000")]
    else:
        first = [(right * 8, "that is bits; the question asks for bytes")]
        decimal = [(2.5e6, "2.5 MiB is 2.5 x 2^20 bytes, not 2,500,000")]
    return [
        *first,
        *decimal,
        (right / 2, "a cache holds a key AND a value per head and layer (the "
         "factor 2), and a float16 number takes 2 bytes: one of the two is missing"),
        (right / 4, "that counts numbers of keys only; a cache holds keys and "
         "values, 2 bytes each in float16"),
        (right * 2, "that is float32 (4 bytes a number); the cache is float16"),
        (right / 80, "that is one layer; every one of the 80 layers keeps its cache"),
    ]  # fmt: skip


def _sequence_mistakes(per_token: int) -> list[tuple[float, str]]:
    per_sequence = per_token * 4096
    return [
        (40e9 / per_sequence, "a GiB is 2^30 bytes, not 10^9; and only whole "
         "sequences fit"),
        (40e9 // per_sequence, "a GiB is 2^30 bytes, not 10^9"),
        (40 * 2**30 // (per_sequence // 2), "with half the bytes per token: "
         "count both keys and values, 2 bytes each"),
    ]  # fmt: skip


@checker("kv_cache_answer", todo=TODO_NUMBERS)
def check_kv_cache_answer(
    per_token_mha, per_token_gqa, sequences_mha, sequences_gqa
) -> None:
    """Exercise 7.3: bytes per token of the cache with 64 and 8 key/value heads,
    and whole sequences of 4,096 tokens in 40 GiB. Bytes within 0.1%
    (2.5 MiB written as 2.5 * 2**20 is exact); sequences exactly."""
    right = _large_model_cache()
    expect_number(per_token_mha, right["per_token_mha"],
                  "the bytes per token with multi-head attention", rel=1e-3,
                  wrong=_per_token_mistakes(right["per_token_mha"], "mha"))  # fmt: skip
    expect_number(per_token_gqa, right["per_token_gqa"],
                  "the bytes per token with 8 key/value heads", rel=1e-3,
                  wrong=_per_token_mistakes(right["per_token_gqa"], "gqa"))  # fmt: skip
    expect_number(sequences_mha, right["sequences_mha"],
                  "the sequences in 40 GiB with multi-head attention",
                  wrong=_sequence_mistakes(right["per_token_mha"]))  # fmt: skip
    expect_number(sequences_gqa, right["sequences_gqa"],
                  "the sequences in 40 GiB with 8 key/value heads",
                  wrong=_sequence_mistakes(right["per_token_gqa"]))  # fmt: skip


# -- Exercise 7.4: when does T² dominate a whole layer? ------------------------------


def layer_share(t: int, d_model: int, feed_forward: int = 16) -> float:
    """The T² products' share of a layer's FLOPs; ``feed_forward`` x T D² FLOPs."""
    flops = attention_flops(t, d_model)
    return flops["attention"] / (flops["total"] + feed_forward * t * d_model**2)


@checker("t_squared_answer", todo=TODO_NUMBERS)
def check_t_squared_answer(t_64, t_768, t_4096, share) -> None:
    """Exercise 7.4: the length from which the T² products cost more than the rest
    of the layer, for D = 64, 768 and 4,096 (within 0.1%; 6 D + 1, where they cost
    strictly more, too, at every D), and their share of the layer's FLOPs at
    T = 2048, D = 768, as a fraction (within 1%: 0.31 passes)."""
    for answer, d in ((t_64, 64), (t_768, 768), (t_4096, 4096)):
        # 4 T² D = 8 T D² + 16 T D² at T = 6 D (tests check it on the counter)
        expect_number(answer, 6 * d, f"the crossover length for D = {d}", rel=1e-3,
                      also=[6 * d + 1], wrong=[
                          (2 * d, "that is where the T² products overtake the "
                           "projections alone; the feed-forward network's "
                           "16 T D² FLOPs are part of the layer too"),
                          (4 * d, "the feed-forward network counted as 8 T D²: "
                           "each multiply-add is 2 FLOPs, so its two products "
                           "cost 2 · 2 · T · D · 4D = 16 T D²"),
                          (3 * d, "the T² products counted twice: they cost "
                           "4 T² D (scores and weighted sum, 2 FLOPs per "
                           "multiply-add each)"),
                          (12 * d, "that counts only the scores Q K^T; the "
                           "weighted sum of the values is a T² product too "
                           "(4 T² D in all)"),
                      ])  # fmt: skip
    right = layer_share(2048, 768)
    expect_number(share, right, "the share at T = 2048, D = 768", rel=0.01,
                  wrong=[
                      (right * 100, "a share is a fraction of 1 (0.31), not a "
                       "percentage"),
                      (layer_share(2048, 768, feed_forward=0), "without the "
                       "feed-forward network's 16 T D² FLOPs"),
                      (layer_share(2048, 768, feed_forward=8), "the "
                       "feed-forward network counted as 8 T D² instead of 16"),
                      (4 * 2048 / (24 * 768), "that divides by the rest of the "
                       "layer; a share divides by the whole layer, T² part "
                       "included"),
                  ])  # fmt: skip


# -- Exercise 7.5: grouped-query attention over random seeds -------------------------

SEEDS = (0, 1, 2, 3)
KV_HEADS = (4, 2, 1)  # multi-head, grouped-query, multi-query
_NAMES = {4: "multi-head (4)", 2: "grouped-query (2)", 1: "multi-query (1)"}


def _perplexity_table(table) -> dict[int, dict[int, float]]:
    """The reader's ``{seed: {n_kv: ppl}}``: a mapping (or a list, by seed) of
    mappings, whose values may be ``run_kv_sharing``'s own dicts (``"ppl"``)."""
    attempted(table, "perplexities")
    if isinstance(table, Sequence) and not isinstance(table, str):
        table = dict(enumerate(table))
    if not isinstance(table, Mapping) or set(table) != set(SEEDS):
        raise AssertionError(
            "perplexities should map each random seed 0, 1, 2, 3 to its row; got "
            f"{shown_keys(table)}"
        )
    rows = {}
    for seed in SEEDS:
        row = table[seed]
        if not isinstance(row, Mapping) or set(row) != set(KV_HEADS):
            raise AssertionError(
                f"the row of seed {seed} should map the key/value heads 4, 2 and 1 "
                f"to a perplexity, as run_kv_sharing's result does; got "
                f"{shown_keys(row)}"
            )
        rows[seed] = {}
        for n_kv in KV_HEADS:
            what = f"the perplexity of seed {seed}, {n_kv} key/value heads"
            entry = row[n_kv]
            if isinstance(entry, Mapping):
                if "ppl" not in entry:
                    raise AssertionError(
                        f"{what}: a dict without 'ppl' (it has {shown_keys(entry)}); "
                        "pass run_kv_sharing's result, or its 'ppl' values"
                    )
                entry = entry["ppl"]
            rows[seed][n_kv] = as_number(entry, what)
    if all(row == rows[SEEDS[0]] for row in rows.values()):
        raise AssertionError(
            "the rows of the four seeds are identical: each seed trains its own "
            "models, so pass seed=0, 1, 2, 3 to run_kv_sharing, one run each"
        )
    return rows


def _kv_bounds(rows: dict[int, dict[int, float]]) -> None:
    """The bound §7.4 asserts: every model beats the unigram model's perplexity
    by the factor KV_PPL_BOUND; and none comes below KV_PPL_FLOOR x the unigram's
    (a loss or a number of bits would)."""
    from ..experiments.efficiency import KV_PPL_BOUND, KV_PPL_FLOOR
    from ..experiments.variants_uses import unigram_perplexity
    from ..tokenizer import get_tokenizer

    unigram = unigram_perplexity(get_tokenizer())
    for seed, row in rows.items():
        for n_kv, ppl in row.items():
            if not KV_PPL_FLOOR * unigram <= ppl <= KV_PPL_BOUND * unigram:
                raise AssertionError(
                    f"seed {seed}, {n_kv} key/value heads: a perplexity of "
                    f"{ppl:.4g} is not what run_kv_sharing measures (every model "
                    f"lands between {KV_PPL_FLOOR} and {KV_PPL_BOUND} x the "
                    f"unigram's {unigram:.0f}; §7.4 checks the upper bound); pass "
                    f"the held-out perplexities, run['ppl'], not losses or "
                    f"accuracies"
                )


@checker("kv_sharing_answer", todo="Replace each `...` with your table or answer")
def check_kv_sharing_answer(perplexities, always_between, spread_wins) -> None:
    """Exercise 7.5: the reader's held-out perplexities ``{seed: {4: ppl, 2: ppl,
    1: ppl}}`` for the random seeds 0-3 (each within the bounds §7.4 asserts),
    and two conclusions, which must follow from that table:

    - ``always_between``: is grouped-query's perplexity between the other two
      (inclusive) for every seed?
    - ``spread_wins``: is the largest spread over seeds of one variant (max - min)
      larger than the largest gap between two variants' means over the seeds?
    """
    rows = _perplexity_table(perplexities)
    _kv_bounds(rows)
    outside = [
        seed
        for seed, row in rows.items()
        if not min(row[4], row[1]) <= row[2] <= max(row[4], row[1])
    ]
    if expect_bool(always_between, "always_between") != (not outside):
        if outside:
            row = rows[outside[0]]
            raise AssertionError(
                f"always_between does not follow from your table: with seed "
                f"{outside[0]}, grouped-query's {row[2]:.0f} is outside "
                f"[{min(row[4], row[1]):.0f}, {max(row[4], row[1]):.0f}]"
            )
        raise AssertionError(
            "always_between does not follow from your table: there, grouped-query "
            "lies between the other two with every seed"
        )
    spread = {n: max(r[n] for r in rows.values()) - min(r[n] for r in rows.values())
              for n in KV_HEADS}  # fmt: skip
    means = {n: sum(r[n] for r in rows.values()) / len(rows) for n in KV_HEADS}
    gap = max(means.values()) - min(means.values())
    widest = max(spread, key=spread.get)
    if expect_bool(spread_wins, "spread_wins") != (spread[widest] > gap):
        raise AssertionError(
            f"spread_wins does not follow from your table: {_NAMES[widest]} spreads "
            f"over {spread[widest]:.0f} across the seeds, and the variants' means "
            f"lie {gap:.0f} apart"
        )


# -- Exercise 7.6: when tiling moves more bytes -------------------------------------


def _threshold_bytes(d_head: int, t: int = 4096, dtype_bytes: int = 4) -> int:
    """The smallest on-chip memory, in bytes, from which tiling moves fewer."""
    kib = tiling_threshold_kib(d_head, t, dtype_bytes)
    size = (kib - 1) * 1024  # at kib - 1 KiB it does not yet: search the last KiB
    while True:
        traffic = attention_memory_traffic(t, d_head, size + 1, dtype_bytes)
        if traffic["tiled"] < traffic["standard"]:
            return size + 1
        size += 1


def tiling_threshold_kib(d_head: int, t: int = 4096, dtype_bytes: int = 4) -> int:
    """The smallest on-chip memory, in whole KiB, from which
    ``attention_memory_traffic``'s tiled algorithm moves fewer bytes."""
    kib = 1
    while True:
        traffic = attention_memory_traffic(t, d_head, kib * 1024, dtype_bytes)
        if traffic["tiled"] < traffic["standard"]:
            return kib
        kib += 1


@checker("tiling_threshold_answer", todo=TODO_NUMBERS)
def check_tiling_threshold_answer(kib_64, kib_128) -> None:
    """Exercise 7.6: the smallest on-chip memory, in whole KiB, from which tiling
    moves fewer bytes at T = 4096 in float32, for d = 64 and 128. Right, exactly:
    the threshold ``attention_memory_traffic`` gives (32 and 127 KiB), or the
    formula's 2 d² elements of 4 bytes (32 and 128 KiB); and the byte-exact
    threshold in KiB (31.004 and 126.004), within 0.0005 KiB."""
    for answer, d in ((kib_64, 64), (kib_128, 128)):
        exact = _threshold_bytes(d) / 1024
        if abs(as_number(answer, f"the threshold for d = {d}") - exact) <= 5e-4:
            continue  # a search byte by byte, not KiB by KiB
        right = tiling_threshold_kib(d)
        formula = 2 * d * d * 4 // 1024
        wrong = [(formula // 4, "that counts elements; a float32 element takes 4 "
                  "bytes"),
                 (formula // 2, "that is float16 (2 bytes an element); the "
                  "question asks for float32"),
                 (right * 1024, "that is bytes; the question asks for KiB"),
                 (formula * 1024, "that is bytes; the question asks for KiB"),
                 (right - 1, "at that size tiling still moves at least as many "
                  "bytes; the question asks for the smallest size at which it "
                  "moves fewer")]  # fmt: skip
        if d == 128:
            wrong.insert(0, (tiling_threshold_kib(64) * 2, "the threshold grows "
                             "as d², not as d: heads twice as wide need about "
                             "four times the memory"))  # fmt: skip
        expect_number(answer, right, f"the threshold for d = {d}", also=[formula],
                      wrong=wrong)  # fmt: skip
