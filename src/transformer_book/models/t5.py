"""T5: the encoder-decoder, trained text-to-text on span corruption (Chapter 6).

Raffel et al. (2020). Every task is text in, text out: "summarize: ...",
"translate English to German: ...", and pre-training itself. Its objective, span
corruption, drops about 15% of the tokens in spans of about 3; the input keeps the
rest with a sentinel <extra_id_k> where span k was, and the target lists each
sentinel followed by the tokens it hides:

    original: The cat sat on the mat .
    input:    The <extra_id_0> on the <extra_id_1> .
    target:   <extra_id_0> cat sat <extra_id_1> mat

**Reused from Chapter 5**, unchanged: ``EncoderDecoder`` (encode, decode, greedy
decoding, the shared vocabulary and the tied output layer), ``EncoderBlock`` and
``DecoderBlock``, and Chapter 4's ``RelativePositionBias``.
**What changed**, as in T5: (1) no absolute positions: the embedding is the token
table alone (times sqrt(D)); (2) instead, every self-attention adds a learned bias
per head and bucket of relative distance to its scores, one table shared by all
encoder layers (bidirectional buckets) and one by all decoder layers (causal
buckets); cross-attention has none; (3) pre-norm blocks by default. T5's RMSNorm
and its bias-free linear layers are left out.

Shape letters: B batch, S source positions, T target positions, D ``d_model``,
H heads, Dh = D / H, N noise (dropped) tokens, K spans.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .._validate import (
    check_generator,
    check_has_values,
    check_id_list,
    check_instance,
    check_int,
    check_real,
    check_tensor,
)
from ..attention import MultiHeadAttention, scaled_dot_product_attention
from ..positional import RelativePositionBias
from .encoder_decoder import EncoderDecoder, EncoderDecoderConfig

__all__ = ["T5Config", "T5", "RelativeSelfAttention", "span_corrupt", "span_restore"]


@dataclass(frozen=True)
class T5Config(EncoderDecoderConfig):
    """``EncoderDecoderConfig`` plus T5's relative position buckets; pre-norm."""

    norm_first: bool = True  # T5 normalises before each sub-layer
    num_buckets: int = 32  # relative-distance buckets per direction pair (T5: 32)
    max_distance: int = 128  # farther keys share the last bucket (T5: 128)

    def __post_init__(self):
        super().__post_init__()
        check_int("num_buckets", self.num_buckets, minimum=1)
        check_int("max_distance", self.max_distance, minimum=1)


class RelativeSelfAttention(MultiHeadAttention):
    """Multi-head self-attention whose scores get T5's relative position bias.

    scores[h, i, j] = q_i . k_j / sqrt(Dh) + b[h, bucket(j - i)]

    ``position_bias`` is one module shared by several layers. The call signature is
    ``MultiHeadAttention``'s, so it replaces ``self_attn`` in Chapter 5's blocks.

    Shapes: query (B, T, D), mask broadcastable to (B, H, T, T) -> (B, T, D)
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float,
        position_bias: RelativePositionBias,
    ):
        super().__init__(d_model, n_heads, dropout)
        check_instance("position_bias", position_bias, RelativePositionBias)
        self.position_bias = position_bias

    def forward(self, query, key=None, value=None, mask=None, need_weights=False):
        if (key is not None and key is not query) or (
            value is not None and value is not query
        ):
            raise ValueError("RelativeSelfAttention is self-attention: pass query only")
        self._check_inputs(query, query, query, mask)
        if mask is not None and mask.dim() == 3:
            mask = mask[:, None]  # (B, T, T) -> (B, 1, T, T), shared by the heads
        q = self.split_heads(self.q_proj(query))  # (B, T, D) -> (B, H, T, Dh)
        k = self.split_heads(self.k_proj(query))  # (B, T, D) -> (B, H, T, Dh)
        v = self.split_heads(self.v_proj(query))  # (B, T, D) -> (B, H, T, Dh)
        bias = self.position_bias(query.shape[1])  # (H, T, T)
        dropout_p = self.dropout if self.training else 0.0
        heads, weights = scaled_dot_product_attention(
            q, k, v, mask=mask, bias=bias, dropout_p=dropout_p
        )
        out = self.out_proj(self.merge_heads(heads))  # (B, H, T, Dh) -> (B, T, D)
        return (out, weights) if need_weights else out


class _TokenOnlyEmbedding(nn.Module):
    """Token embedding times sqrt(D), without positions (the bias carries them)."""

    def __init__(self, vocab_size: int, d_model: int, dropout: float):
        super().__init__()
        self.d_model = d_model
        self.token = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.token.weight, std=d_model**-0.5)
        self.dropout = nn.Dropout(dropout)

    def forward(self, idx: Tensor) -> Tensor:
        return self.dropout(self.token(idx) * math.sqrt(self.d_model))  # (B, T, D)


class T5(EncoderDecoder):
    """Chapter 5's ``EncoderDecoder`` with T5's relative position bias.

    Shapes: src (B, S), tgt (B, T) -> logits (B, T, V), as ``EncoderDecoder``.
    """

    def __init__(self, cfg: T5Config):
        if not isinstance(cfg, T5Config):
            raise TypeError(f"cfg must be a T5Config, got {type(cfg).__name__}")
        super().__init__(cfg)
        self.embed = _TokenOnlyEmbedding(cfg.vocab_size, cfg.d_model, cfg.dropout)
        if cfg.tie_weights:
            self.output.weight = self.embed.token.weight
        buckets = dict(num_buckets=cfg.num_buckets, max_distance=cfg.max_distance)
        self.encoder_bias = RelativePositionBias(cfg.n_heads, True, **buckets)
        self.decoder_bias = RelativePositionBias(cfg.n_heads, False, **buckets)
        for blocks, bias in (
            (self.encoder, self.encoder_bias),
            (self.decoder, self.decoder_bias),
        ):
            for block in blocks:
                block.self_attn = RelativeSelfAttention(
                    cfg.d_model, cfg.n_heads, cfg.dropout, bias
                )


def _compositions(n: int, k: int, rows: int, generator) -> Tensor:
    """``rows`` random splits of n items into k non-empty runs: (rows, k) lengths."""
    cuts = torch.rand(rows, n - 1, generator=generator).argsort(dim=1)[:, : k - 1] + 1
    edges = torch.cat(
        [
            torch.zeros(rows, 1, dtype=torch.long),
            cuts.sort(dim=1).values,
            torch.full((rows, 1), n),
        ],
        dim=1,
    )  # (rows, k + 1)
    return edges.diff(dim=1)  # (rows, k)


def span_corrupt(
    ids: Tensor,
    sentinel_ids: Sequence[int],
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """T5's span corruption: (inputs, targets) from a sequence of T tokens.

    N = round(T * noise_density) tokens are dropped, in K = round(N /
    mean_span_length) spans of random lengths, at random places (T5's
    ``random_spans_noise_mask``: kept and dropped runs alternate, the first run
    kept). The input replaces span k by ``sentinel_ids[k]``; the target is each
    sentinel followed by its span. Every row of a batch has the same N and K, so
    the outputs are rectangular. ``span_restore`` inverts it.

    Shapes: ids (T,) or (B, T) -> inputs (..., T - N + K), targets (..., N + K)
    """
    if not isinstance(ids, Tensor) or ids.dim() not in (1, 2):
        raise ValueError("ids must be a (T,) or (B, T) tensor of token ids")
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise ValueError(f"ids must hold integer token ids, got {ids.dtype}")
    check_has_values("ids", ids)
    check_real("noise_density", noise_density, 0.0, 1.0, low_open=True, high_open=True)
    check_real("mean_span_length", mean_span_length, low=1.0)  # NaN, inf refused
    check_generator("generator", generator)
    sentinel_ids = check_id_list("sentinel_ids", sentinel_ids)
    rows = ids if ids.dim() == 2 else ids[None]  # (B, T)
    B, T = rows.shape
    if T < 2:
        raise ValueError(f"ids must have at least 2 positions, got {T}")
    sentinels = torch.as_tensor(list(sentinel_ids), dtype=torch.long)
    if torch.isin(rows.cpu(), sentinels).any():
        raise ValueError("ids already hold sentinel tokens")
    n_noise = min(max(round(T * noise_density), 1), T - 1)
    n_spans = min(max(round(n_noise / mean_span_length), 1), n_noise, T - n_noise)
    if n_spans > len(sentinels):
        raise ValueError(
            f"sentinel_ids has {len(sentinels)} sentinels, {n_spans} spans need them"
        )
    noise_lengths = _compositions(n_noise, n_spans, B, generator)  # (B, K)
    kept_lengths = _compositions(T - n_noise, n_spans, B, generator)  # (B, K)
    runs = torch.stack([kept_lengths, noise_lengths], dim=2).view(B, 2 * n_spans)
    ends = runs.cumsum(dim=1)  # (B, 2K): where each run ends
    run_of = torch.searchsorted(
        ends, torch.arange(T).expand(B, T).contiguous(), right=True
    )
    noise = (run_of % 2 == 1).to(rows.device)  # (B, T): odd runs are dropped
    span = (run_of // 2).to(rows.device)  # (B, T): the span (or kept run) index
    first = torch.ones_like(noise)
    first[:, 1:] = run_of[:, 1:].to(rows.device) != run_of[:, :-1].to(rows.device)
    sentinel = sentinels.to(rows.device)[span]  # (B, T)
    # Input: kept tokens, and each span's first position becomes its sentinel.
    inputs = torch.where(noise & first, sentinel, rows)[~noise | first]
    # Target: dropped tokens, and each kept run's first position becomes the
    # sentinel of the span after it (the one the input has there).
    targets = torch.where(~noise & first, sentinel, rows)[noise | (~noise & first)]
    inputs = inputs.view(B, T - n_noise + n_spans)  # (B, T - N + K)
    targets = targets.view(B, n_noise + n_spans)  # (B, N + K)
    return (inputs, targets) if ids.dim() == 2 else (inputs[0], targets[0])


def span_restore(inputs: Tensor, targets: Tensor, sentinel_ids: Sequence[int]):
    """The original sequence from ``span_corrupt``'s (inputs, targets).

    Each sentinel in the input is replaced by the tokens that follow the same
    sentinel in the target (up to the next sentinel or the end).

    Shapes: inputs (S,) or (B, S), targets (T,) or (B, T) -> (..., S - K + N)
    """
    for name, x in (("inputs", inputs), ("targets", targets)):
        check_tensor(name, x, "int")
        check_has_values(name, x)
        if x.dim() not in (1, 2):
            raise ValueError(
                f"{name} must have shape (S,) or (B, S), got {tuple(x.shape)}"
            )
    if inputs.dim() != targets.dim() or (
        inputs.dim() == 2 and inputs.shape[0] != targets.shape[0]
    ):
        raise ValueError(
            f"inputs {tuple(inputs.shape)} and targets {tuple(targets.shape)} must "
            "have the same rank and batch size"
        )
    sentinel_ids = check_id_list("sentinel_ids", sentinel_ids)
    if inputs.dim() == 2:
        return torch.stack(
            [
                span_restore(i, t, sentinel_ids)
                for i, t in zip(inputs, targets, strict=True)
            ]
        )
    sentinels = set(int(s) for s in sentinel_ids)
    spans: dict[int, list[int]] = {}
    current = None
    for token in targets.tolist():
        if token in sentinels:
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    out: list[int] = []
    for token in inputs.tolist():
        if token in sentinels:
            if token not in spans:
                raise ValueError(f"sentinel {token} of inputs is not in targets")
            out += spans[token]
        else:
            out.append(token)
    return torch.tensor(out, dtype=inputs.dtype, device=inputs.device)
