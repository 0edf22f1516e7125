"""The KV cache of a GPT: preallocated, written in place (Chapters 6 and 7).

Decoding appends one position at a time. Growing each layer's keys and values with
``torch.cat`` copies the whole cache at every step (O(T^2) bytes over a
generation); ``KVCache`` allocates its buffers once, for as many positions as the
generation will need, and each step writes its keys and values into the next free
slot. Read as a list, it still looks like the cache of Chapter 6: L pairs
(keys, values) of the positions stored so far, each (B, Hkv, P, Dh).

``Decoder.step`` is the cached forward pass behind ``GPT.forward_cached`` and
``GPT.generate``. It checks nothing: those two public methods check their
arguments once per call, and the work per layer and per token runs unchecked,
with PyTorch's functional operations and no module that does nothing in eval
mode (dropout with p = 0). A single new token needs no mask: it may see every
cached position and itself.

Shape letters: B batch, T new positions, P cached positions, C capacity,
L layers, H query heads, Hkv key/value heads, Dh = D / H, D ``d_model``,
V ``vocab_size``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._validate import autocast_enabled, check_device, check_int

__all__ = ["KVCache"]


class KVCache:
    """Keys and values of every layer in preallocated buffers of ``capacity`` positions.

    ``cache[i]`` is layer i's (keys, values), views of the ``length`` positions
    written so far, each (B, Hkv, P, Dh); ``len(cache)`` is L. ``Decoder.step``
    writes new positions in place; past the capacity, the buffers are reallocated
    twice as large (an amortised O(1) copy per position).

    Shapes: buffer (L, 2, B, Hkv, C, Dh); cache[i] 2 x (B, Hkv, P, Dh)
    """

    def __init__(
        self,
        n_layers: int,
        batch: int,
        n_kv_heads: int,
        d_head: int,
        capacity: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ):
        sizes = {"n_layers": n_layers, "n_kv_heads": n_kv_heads}
        sizes |= {"d_head": d_head, "capacity": capacity}
        for name, value in sizes.items():
            check_int(name, value, minimum=1)
        check_int("batch", batch, minimum=0)  # an empty batch decodes to nothing
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        check_device("device", device)
        shape = (n_layers, 2, batch, n_kv_heads, capacity, d_head)
        self.buffer = _allocate("capacity", shape, dtype, device)
        self.length = 0  # P: positions written
        self._views()

    @classmethod
    def _from_pairs(cls, pairs, capacity: int) -> KVCache:
        """A cache holding a copy of L (keys, values) pairs, each (B, Hkv, P, Dh)."""
        keys = pairs[0][0]
        L, (B, n_kv, P, d_head) = len(pairs), keys.shape
        cache = cls(L, B, n_kv, d_head, max(capacity, P), keys.dtype, keys.device)
        for layer, (k, v) in zip(cache.layers, pairs, strict=True):
            layer[0][:, :, :P] = k
            layer[1][:, :, :P] = v
        cache.length = P
        return cache

    def _views(self) -> None:
        # One (keys, values) pair of (B, Hkv, C, Dh) buffers per layer, made once
        buffer = self.buffer
        self.layers = [(buffer[i, 0], buffer[i, 1]) for i in range(buffer.shape[0])]

    @property
    def capacity(self) -> int:
        return self.buffer.shape[4]

    @property
    def batch(self) -> int:
        return self.buffer.shape[2]

    def reserve(self, length: int) -> None:
        """Room for ``length`` positions: reallocate, at least doubling, if needed."""
        check_int("length", length, minimum=1)
        if length <= self.capacity:
            return
        old = self.buffer
        shape = (*old.shape[:4], max(length, 2 * self.capacity), old.shape[5])
        self.buffer = _allocate("length", shape, old.dtype, old.device)
        self.buffer[:, :, :, :, : self.length] = old[:, :, :, :, : self.length]
        self._views()

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, i: int | slice):
        """Layer ``i``'s (keys, values); a slice gives a list of such pairs."""
        if isinstance(i, slice):
            return [self[j] for j in range(len(self))[i]]
        keys, values = self.layers[i]
        return keys[:, :, : self.length], values[:, :, : self.length]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        L, _, B, n_kv, C, d_head = self.buffer.shape
        return (
            f"KVCache({L} layers, batch {B}, {n_kv} key/value heads of {d_head}, "
            f"{self.length} of {C} positions, {self.buffer.dtype})"
        )


def _allocate(name: str, shape: tuple[int, ...], dtype, device) -> Tensor:
    """An empty buffer of ``shape``; ValueError naming ``name`` if it cannot be had."""
    try:
        return torch.empty(shape, dtype=dtype, device=device)
    except RuntimeError as err:  # more elements than an index holds, or no memory
        raise ValueError(
            f"{name}: a cache of shape {shape} (L, 2, B, Hkv, C, Dh) cannot be "
            f"allocated: {err}"
        ) from err


class Decoder:
    """A GPT's weights as plain tensors, read once per public call, and its step.

    Reading a weight through modules (``block.self_attn.q_proj.weight``) costs a
    few dictionary look-ups each time; a step of a small model at batch 1 reads
    about forty, so ``GPT.forward_cached`` and ``GPT.generate`` collect them here
    once, and ``step`` runs unchecked on them. Dropout applies only in training mode.
    """

    def __init__(self, model: nn.Module):
        self.table, self.positions = model.token.weight, model.position.weight
        self.norm = _norm(model.norm)
        self.drop = model.cfg.dropout if model.training else 0.0
        attn = model.blocks[0].self_attn
        self.heads = (attn.n_heads, attn.n_kv_heads, attn.d_head)
        self.layers = [
            (
                _norm(b.norm1),
                _linear(b.self_attn.q_proj),
                _linear(b.self_attn.k_proj),
                _linear(b.self_attn.v_proj),
                _linear(b.self_attn.out_proj),
                _norm(b.norm2),
                _linear(b.feed_forward.linear1),
                _linear(b.feed_forward.linear2),
            )
            for b in model.blocks
        ]

    def step(self, idx: Tensor, cache: KVCache) -> Tensor:
        """Logits of ``idx``, the positions after the cache's, which it writes in place.

        Unchecked: ``idx`` must be valid ids, and the cache must fit the model and
        have room for them (``KVCache.reserve``).

        Shapes: idx (B, T), cache of P positions -> logits (B, T, V), cache of P + T
        """
        T, P, drop = idx.shape[1], cache.length, self.drop
        x = F.embedding(idx, self.table) + self.positions[P : P + T]  # (B, T, D)
        if drop:
            x = F.dropout(x, drop)
        # T = 1: no mask. A prompt (P = 0): the causal kernel. Else: a (T, P+T) block
        mask = None
        if T > 1 and P > 0:  # new position i (absolute P + i) sees keys 0..P + i
            mask = torch.ones(T, P + T, dtype=torch.bool, device=idx.device).tril(P)
        for weights, layer in zip(self.layers, cache.layers, strict=True):
            x = self._layer(x, weights, layer, P, mask)
        cache.length = P + T
        x = F.layer_norm(x, *self.norm)
        return F.linear(x, self.table)  # (B, T, D) -> (B, T, V), the tied table

    def _layer(self, x: Tensor, weights, layer, P: int, mask: Tensor | None):
        """One pre-norm block (``blocks.EncoderBlock``) on T new positions, cached.

        Shapes: x (B, T, D), layer 2 x (B, Hkv, C, Dh) -> (B, T, D)
        """
        norm1, wq, wk, wv, wo, norm2, w1, w2 = weights
        (H, n_kv, d_head), drop = self.heads, self.drop
        B, T, D = x.shape
        h = F.layer_norm(x, *norm1)
        q = F.linear(h, *wq)  # (B, T, D)
        keys, values = layer[0][:, :, : P + T], layer[1][:, :, : P + T]  # views
        keys[:, :, P:] = F.linear(h, *wk).view(B, T, n_kv, d_head).transpose(1, 2)
        values[:, :, P:] = F.linear(h, *wv).view(B, T, n_kv, d_head).transpose(1, 2)
        if T == 1:  # a group of query heads shares a key/value head: read it once
            q = q.view(B, n_kv, H // n_kv, d_head)  # (B,1,D) -> (B, Hkv, H/Hkv, Dh)
            heads = F.scaled_dot_product_attention(q, keys, values, dropout_p=drop)
            heads = heads.reshape(B, 1, D)  # (B, Hkv, H/Hkv, Dh) -> (B, 1, D)
        else:
            q = q.view(B, T, H, d_head).transpose(1, 2)  # (B,T,D) -> (B,H,T,Dh)
            if H > n_kv:  # (B, Hkv, P+T, Dh) -> (B, H, P+T, Dh)
                keys = keys.repeat_interleave(H // n_kv, dim=1)
                values = values.repeat_interleave(H // n_kv, dim=1)
            heads = F.scaled_dot_product_attention(
                q, keys, values, mask, dropout_p=drop, is_causal=mask is None
            )  # (B, H, T, Dh)
            heads = heads.transpose(1, 2).reshape(B, T, D)  # -> (B, T, D)
        out = F.linear(heads, *wo)
        x = x + (F.dropout(out, drop) if drop else out)
        hidden = F.gelu(F.linear(F.layer_norm(x, *norm2), *w1))  # (B, T, F)
        if drop:
            hidden = F.dropout(hidden, drop)
        out = F.linear(hidden, *w2)  # (B, T, F) -> (B, T, D)
        return x + (F.dropout(out, drop) if drop else out)


def _norm(norm: nn.LayerNorm) -> tuple:
    return norm.normalized_shape, norm.weight, norm.bias, norm.eps


def _linear(linear: nn.Linear) -> tuple:
    return linear.weight, linear.bias


def prepare_cache(
    model: nn.Module, idx: Tensor, cache: object, capacity: int = 0
) -> KVCache:
    """The ``KVCache`` to decode ``idx`` into; ValueError/TypeError naming ``cache``.

    None gives a new cache with room for ``idx`` (or ``capacity`` positions); a
    ``KVCache`` is checked and used as it is; a list of L (keys, values) pairs is
    checked and copied.
    """
    attn = model.blocks[0].self_attn
    L, B, T = len(model.blocks), idx.shape[0], idx.shape[1]
    dims = (attn.n_kv_heads, attn.d_head)
    dtype, device = compute_dtype(model), model.token.weight.device
    if cache is None:
        size = max(T, capacity)
        return KVCache(L, B, *dims, capacity=size, dtype=dtype, device=device)
    if isinstance(cache, KVCache):
        shape, got = (L, 2, B, *dims), cache.buffer.shape
        if (*got[:4], got[5]) != shape:
            raise ValueError(
                f"cache has buffers {tuple(got)}, the model and idx need "
                f"(L, 2, B, Hkv, C, Dh) = ({L}, 2, {B}, {dims[0]}, C, {dims[1]})"
            )
        _check_cache_tensor(cache.buffer, dtype, device)
        return cache
    if not isinstance(cache, list | tuple):
        raise TypeError(
            f"cache must be None, a KVCache or a list of (keys, values) pairs, got "
            f"{type(cache).__name__}"
        )
    if len(cache) != L:
        raise ValueError(f"cache has {len(cache)} layers, the model has {L}")
    first = None
    for i, pair in enumerate(cache):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise ValueError(f"cache[{i}] must be a pair (keys, values)")
        for t in pair:
            if not isinstance(t, Tensor) or t.dim() != 4:
                raise ValueError(f"cache[{i}] must hold 4-D tensors (B, Hkv, P, Dh)")
            first = t.shape if first is None else first
            if t.shape != first or (t.shape[0], t.shape[1], t.shape[3]) != (B, *dims):
                raise ValueError(
                    f"cache[{i}] holds a tensor of shape {tuple(t.shape)}; every "
                    f"layer's keys and values must be (B, Hkv, P, Dh) = ({B}, "
                    f"{dims[0]}, P, {dims[1]}) with one P, here {first[2]}"
                )
            _check_cache_tensor(t, dtype, device)
    return KVCache._from_pairs(cache, capacity=first[2] + T)


def _check_cache_tensor(t: Tensor, dtype: torch.dtype, device: torch.device) -> None:
    mixed = t.is_floating_point() and autocast_enabled(device.type)  # autocast casts
    if (t.dtype != dtype and not mixed) or t.device != device:
        raise ValueError(
            f"cache holds {t.dtype} on {t.device}; the model computes in {dtype} "
            f"on {device}"
        )


def compute_dtype(model: nn.Module) -> torch.dtype:
    """The dtype of the keys and values: the weights', or autocast's if it is on."""
    weight = model.token.weight
    kind = weight.device.type
    if not autocast_enabled(kind) or weight.dtype != torch.float32:
        return weight.dtype
    try:
        return torch.get_autocast_dtype(kind)
    except AttributeError:  # torch < 2.4
        cpu = kind == "cpu"
        return torch.get_autocast_cpu_dtype() if cpu else torch.get_autocast_gpu_dtype()
