"""What a head does, measured on attention maps (Chapter 8, §8.2): positional
scores, syntactic relations against a fixed-offset baseline, ablations, and the
norm-weighted shares of Kobayashi et al. (2020).

Shape letters: L layers, H heads per layer, N sentences, T positions, D width.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence

import torch
from torch import Tensor

from ..._validate import check_has_values, check_instance, check_tensor
from ...models import BERT
from ...probe import ablate_heads
from .grammar import RELATIONS, Parsed

__all__ = [
    "attention_maps",
    "positional_scores",
    "relation_accuracy",
    "offset_baseline",
    "ablated",
    "value_norm_shares",
]


@torch.no_grad()
def attention_maps(model: BERT, ids: Tensor) -> Tensor:
    """Every head's weights for a padded batch: (L, N, H, T, T).

    Padded keys get no weight (the model's padding mask); padded queries' rows
    are returned as computed and must be left out by the caller.
    """
    if not isinstance(model, BERT):
        raise TypeError(f"model must be a models.BERT, got {type(model).__name__}")
    _check_ids(ids)
    device = next(model.parameters()).device
    _, weights = model.encode(ids.to(device), need_weights=True)
    return torch.stack(weights).cpu()  # L x (N, H, T, T) -> (L, N, H, T, T)


def _check_ids(ids: object) -> None:
    check_tensor("ids", ids, "int")
    check_has_values("ids", ids)
    if ids.dim() != 2 or 0 in ids.shape:
        raise ValueError(f"ids must have shape (N, T) with N, T >= 1, got {ids.shape}")


def _check_parsed(parsed: object) -> None:
    if isinstance(parsed, str) or not isinstance(parsed, Sequence):
        raise TypeError(f"parsed must be a list of Parsed, got {type(parsed).__name__}")
    for i, p in enumerate(parsed):
        check_instance(f"parsed[{i}]", p, Parsed)


def _check_map_tensor(maps: object) -> None:
    check_tensor("maps", maps, "float")
    check_has_values("maps", maps)
    if maps.dim() != 5 or 0 in maps.shape or maps.shape[-1] != maps.shape[-2]:
        raise ValueError(
            f"maps must be (L, N, H, T, T) attention weights, got {tuple(maps.shape)}"
        )


def _check_maps(maps: Tensor, real: Tensor) -> None:
    _check_map_tensor(maps)
    if not isinstance(real, Tensor) or real.dtype != torch.bool:
        raise TypeError("real must be a bool tensor (N, T)")
    check_has_values("real", real)
    if real.shape != (maps.shape[1], maps.shape[3]):
        raise ValueError(
            f"real has shape {tuple(real.shape)}, maps need (N, T) = "
            f"{(maps.shape[1], maps.shape[3])}"
        )


def positional_scores(
    maps: Tensor, real: Tensor, punctuation: Tensor | None = None
) -> dict[str, Tensor]:
    """Per head, where the weight goes on average, over the real queries.

    ``"previous"``: on the token just before (queries from position 2 on: the
    first word's previous token is [CLS]); ``"[CLS]"``: on position 0;
    ``"[SEP]"``: on the last real token; ``"punctuation"``: on the tokens marked
    in ``punctuation`` (N, T) bool, if given. The sentences must have [CLS] first
    and [SEP] last, as the tokenizer makes them.

    Shapes: maps (L, N, H, T, T), real (N, T) bool -> each value (L, H)
    """
    _check_maps(maps, real)
    if punctuation is not None:
        check_tensor("punctuation", punctuation, "bool")
        check_has_values("punctuation", punctuation)
        if punctuation.shape != real.shape:
            raise ValueError(
                f"punctuation must have real's shape {tuple(real.shape)}, got "
                f"{tuple(punctuation.shape)}"
            )
    L, N, H, T, _ = maps.shape
    q = real.to(maps.dtype)  # (N, T): which queries count
    count = q.sum()

    def mean_over_queries(per_query: Tensor) -> Tensor:  # (L, N, H, T) -> (L, H)
        return (per_query * q[None, :, None, :]).sum(dim=(1, 3)) / count

    sep = real.sum(dim=1) - 1  # (N,): [SEP]'s position
    on_sep = maps.gather(-1, sep.view(1, N, 1, 1, 1).expand(L, N, H, T, 1))[..., 0]
    previous = maps.diagonal(offset=-1, dim1=-2, dim2=-1)  # (L, N, H, T-1): i -> i-1
    after_first = q[:, 2:]  # queries 2..T-1 (their previous is a word)
    prev = (previous[..., 1:] * after_first[None, :, None, :]).sum(dim=(1, 3))
    scores = {
        "previous": prev / after_first.sum(),
        "[CLS]": mean_over_queries(maps[..., 0]),
        "[SEP]": mean_over_queries(on_sep),
    }
    if punctuation is not None:
        if punctuation.shape != real.shape or punctuation.dtype != torch.bool:
            raise ValueError("punctuation must be a bool tensor shaped like real")
        on_punct = (maps * punctuation[None, :, None, None, :].to(maps.dtype)).sum(-1)
        scores["punctuation"] = mean_over_queries(on_punct)
    return scores


def _arcs(parsed: Sequence[Parsed], relation: str) -> tuple[Tensor, Tensor, Tensor]:
    """(sentence, dependent token, head token) of every arc of ``relation``.

    Token = word + 1: [CLS] comes first and every word is one WordPiece.
    """
    rows = [
        (n, i + 1, h + 1)
        for n, p in enumerate(parsed)
        for i, (h, r) in enumerate(zip(p.heads, p.relations, strict=True))
        if r == relation
    ]
    if not rows:
        raise ValueError(f"relation {relation!r} has no arc in these sentences")
    return tuple(torch.tensor(c) for c in zip(*rows, strict=True))


def relation_accuracy(maps: Tensor, parsed: Sequence[Parsed], relation: str) -> Tensor:
    """Per head, the share of ``relation``'s dependents whose most-attended word is
    their syntactic head (Clark et al.'s measure; [CLS] and [SEP] left out).

    Shapes: maps (L, N, H, T, T) of the tokenized ``parsed`` -> (L, H)
    """
    _check_map_tensor(maps)
    _check_parsed(parsed)
    if maps.shape[1] != len(parsed):
        raise ValueError(
            f"maps hold {maps.shape[1]} sentences but parsed has {len(parsed)}"
        )
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
    n, dep, head = _arcs(parsed, relation)
    rows = maps[:, n, :, dep, :].clone()  # (A, L, H, T): each dependent's row
    rows[..., 0] = -1.0  # [CLS] is not a word
    lengths = torch.tensor([len(p.words) for p in parsed])[n]  # (A,)
    beyond = torch.arange(maps.shape[-1])[None, :] > lengths[:, None]  # [SEP], pad
    rows = rows.masked_fill(beyond[:, None, None, :], -1.0)
    picked = rows.argmax(dim=-1)  # (A, L, H)
    return (picked == head[:, None, None]).float().mean(dim=0)  # (L, H)


def offset_baseline(parsed: Sequence[Parsed], relation: str) -> tuple[int, float]:
    """The best fixed offset for ``relation``: (offset, accuracy).

    Predicting "the head is ``offset`` words away" for every dependent; the
    most common offset in the data is the best such rule.
    """
    _check_parsed(parsed)
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
    _, dep, head = _arcs(parsed, relation)
    offsets = (head - dep).tolist()
    best = max(set(offsets), key=offsets.count)
    return best, offsets.count(best) / len(offsets)


def _check_heads(model: BERT, heads: Mapping[int, Iterable[int]]) -> None:
    check_instance("model", model, BERT)
    if not isinstance(heads, Mapping):
        raise TypeError("heads must map a layer index to a list of head indices")
    for layer in heads:
        if not isinstance(layer, int) or not 0 <= layer < len(model.blocks):
            raise ValueError(
                f"heads: layer {layer!r} is not in 0..{len(model.blocks) - 1}"
            )


@contextlib.contextmanager
def ablated(model: BERT, heads: Mapping[int, Iterable[int]]) -> Iterator[BERT]:
    """Inside the ``with`` block, the chosen heads of every layer output zeros.

    ``heads``: {layer: [head, ...]}; the model is yielded for convenience.
    """
    _check_heads(model, heads)
    with contextlib.ExitStack() as stack:
        for layer, chosen in heads.items():
            stack.enter_context(ablate_heads(model.blocks[layer].self_attn, chosen))
        yield model


@torch.no_grad()
def value_norm_shares(
    model: BERT, ids: Tensor, key_mask: Tensor
) -> tuple[Tensor, Tensor]:
    """How much of each head's weight, and of its output, comes from chosen keys.

    A head's output at query i is sum_j a_ij f(x_j), with f(x_j) = x_j's value
    vector through the head's slice of W^O. The weight share is the mean over
    real queries of sum_{j in keys} a_ij; the norm share (Kobayashi et al. 2020)
    replaces a_ij by ||a_ij f(x_j)||, normalised over j. A head can put most of
    its weight on [SEP] while [SEP]'s vector is so short that it adds little.

    Shapes: ids (N, T), key_mask (N, T) bool (e.g. True at [SEP]) ->
    (weight share (L, H), norm share (L, H))
    """
    check_instance("model", model, BERT)
    _check_ids(ids)
    if not isinstance(key_mask, Tensor) or key_mask.dtype != torch.bool:
        raise TypeError("key_mask must be a bool tensor (N, T)")
    check_has_values("key_mask", key_mask)
    if key_mask.shape != ids.shape:
        raise ValueError(f"key_mask must have ids's shape {tuple(ids.shape)}")
    device = next(model.parameters()).device
    ids, key_mask = ids.to(device), key_mask.to(device)
    inputs = []  # what each block's attention reads, (N, T, D)
    hooks = [
        block.self_attn.register_forward_pre_hook(
            lambda module, args: inputs.append(args[0])
        )
        for block in model.blocks
    ]
    try:
        _, weights = model.encode(ids, need_weights=True)  # L x (N, H, T, T)
    finally:
        for h in hooks:
            h.remove()
    inputs = inputs[0::2]  # each layer's first call: the one that gave its weights
    real = (ids != model.cfg.pad_id).to(weights[0].dtype)[:, None, :]  # (N, 1, T)
    chosen = key_mask.to(weights[0].dtype)[:, None, None, :]  # (N, 1, 1, T)

    def mean_on_chosen(share: Tensor) -> Tensor:  # (N, H, T, T) -> (H,)
        per_query = (share * chosen).sum(dim=-1)  # (N, H, T)
        return (per_query * real).sum(dim=(0, 2)) / real.sum()

    weight_share, norm_share = [], []
    for block, x, a in zip(model.blocks, inputs, weights, strict=True):
        mha = block.self_attn
        v = mha.split_heads(mha.v_proj(x))  # (N, T, D) -> (N, H, T, Dh)
        w_o = mha.out_proj.weight.view(mha.d_model, mha.n_heads, mha.d_head)  # D,H,Dh
        f = torch.einsum("nhtk,dhk->nhtd", v, w_o)  # (N, H, T, D): f(x_j) per head
        size = a * f.norm(dim=-1)[:, :, None, :]  # (N, H, T, T): ||a_ij f(x_j)||
        size = size / size.sum(dim=-1, keepdim=True).clamp_min(1e-12)
        weight_share.append(mean_on_chosen(a))
        norm_share.append(mean_on_chosen(size))
    return torch.stack(weight_share).cpu(), torch.stack(norm_share).cpu()


# -- the whole study, as Chapter 8 runs it and the seeds tests repeat it ----------
