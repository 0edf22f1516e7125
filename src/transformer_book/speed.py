"""Timing the package against PyTorch, and the KV cache (Chapter 7; ``make bench``).

Times are medians of several runs after a warm-up, with the GPU synchronised
around each run. They are figures to print, never to assert: machines are noisy.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn

from ._validate import check_device, check_instance, check_int
from .attention import MultiHeadAttention, causal_mask

__all__ = [
    "median_ms",
    "mha_forward_backward_ms",
    "generation_tokens_per_s",
    "kv_cache_speed_up",
]


def _check_device(device: object) -> None:
    if device is None:  # timing needs a device: no None here
        raise TypeError("device must be a torch.device or a string such as 'cpu'")
    check_device("device", device)


def median_ms(
    fn: Callable[[], object], repeats: int = 5, device: torch.device | str = "cpu"
) -> float:
    """Median milliseconds of ``fn()`` over ``repeats`` runs, after one warm-up."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    repeats = check_int("repeats", repeats, minimum=1)
    _check_device(device)
    cuda = torch.device(device).type == "cuda"
    fn()
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(1000 * (time.perf_counter() - start))
    return sorted(times)[len(times) // 2]


def mha_forward_backward_ms(
    t: int,
    causal: bool = False,
    batch: int = 8,
    d_model: int = 256,
    n_heads: int = 8,
    repeats: int = 5,
    device: torch.device | str = "cpu",
) -> tuple[float, float]:
    """Forward + backward of the package's MultiHeadAttention and of PyTorch's.

    The two modules hold the same weights (``from_torch``) and run on the same
    input, alternately, so that both see the same machine load. PyTorch's gets the
    inverted mask (True = blocked) and ``need_weights=False``, its fast setting.

    Returns (package ms, nn.MultiheadAttention ms).
    """
    t = check_int("t", t, minimum=1)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    check_int("batch", batch, minimum=1)
    check_int("d_model", d_model, minimum=1)
    check_int("n_heads", n_heads, minimum=1)
    check_int("repeats", repeats, minimum=1)
    _check_device(device)
    if d_model % n_heads:  # nn.MultiheadAttention would raise an AssertionError
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    torch_mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True).to(device)
    ours = MultiHeadAttention.from_torch(torch_mha)
    x = torch.randn(batch, t, d_model, device=device, requires_grad=True)
    mask = causal_mask(t, device=device) if causal else None
    blocked = None if mask is None else ~mask

    def step_ours():
        ours(x, mask=mask).sum().backward()

    def step_torch():
        torch_mha(x, x, x, attn_mask=blocked, need_weights=False)[0].sum().backward()

    ours_ms, torch_ms = [], []
    for _ in range(repeats):  # alternate, so both see the same load
        ours_ms.append(median_ms(step_ours, 1, device))
        torch_ms.append(median_ms(step_torch, 1, device))
    middle = len(ours_ms) // 2
    return sorted(ours_ms)[middle], sorted(torch_ms)[middle]


def generation_tokens_per_s(
    model: nn.Module, prompt: torch.Tensor, new_tokens: int, use_cache: bool
) -> float:
    """Tokens per second of ``model.generate`` (greedy), with or without the cache."""
    from .models import GPT  # models import attention: no cycle here
    from .models._validation import check_ids

    check_instance("model", model, GPT)
    new_tokens = check_int("new_tokens", new_tokens, minimum=1)
    cfg = model.cfg
    check_ids("prompt", prompt, cfg.vocab_size, cfg.max_len, model.token.weight)
    if prompt.shape[1] + new_tokens > cfg.max_len:
        raise ValueError(
            f"new_tokens={new_tokens} after a prompt of {prompt.shape[1]} tokens "
            f"exceeds max_len={cfg.max_len}"
        )
    if not isinstance(use_cache, bool):
        raise TypeError(f"use_cache must be a bool, got {use_cache!r}")
    device = prompt.device
    seconds = median_ms(
        lambda: model.generate(prompt, new_tokens, temperature=0, use_cache=use_cache),
        repeats=1,
        device=device,
    )
    return new_tokens / (seconds / 1000)


def kv_cache_speed_up(
    new_tokens: int = 512, device: torch.device | str = "cpu"
) -> tuple[float, float]:
    """Tokens per second of an untrained GPT (d_model 128, 2 layers, a 16-token
    prompt) generating ``new_tokens`` greedily, with and without the KV cache.

    The figure ``make bench`` and ``make gpu-check`` print; timing needs no
    training. Returns (with the cache, without).
    """
    from .models import GPT, GPTConfig  # models import attention: no cycle here

    new_tokens = check_int("new_tokens", new_tokens, minimum=1)
    _check_device(device)
    cfg = GPTConfig(vocab_size=512, max_len=new_tokens + 16, d_model=128, n_layers=2)
    model = GPT(cfg).to(device).eval()
    prompt = torch.randint(0, cfg.vocab_size, (1, 16), device=device)
    cached = generation_tokens_per_s(model, prompt, new_tokens, use_cache=True)
    full = generation_tokens_per_s(model, prompt, new_tokens, use_cache=False)
    return cached, full
