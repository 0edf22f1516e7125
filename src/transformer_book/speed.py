"""Timing the package against PyTorch, and decoding (Chapter 7; ``make bench``).

Times are medians (or the best) of several runs after a warm-up, with the GPU
synchronised around each run. They are figures to print, and to bound only
loosely: machines are noisy.

Shape letters: B batch, V vocabulary size.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn

from ._validate import check_device, check_instance, check_int
from .attention import MultiHeadAttention, causal_mask
from .measure import _profiler_logs_hidden

__all__ = [
    "median_ms",
    "mha_forward_backward_ms",
    "generation_tokens_per_s",
    "kv_cache_speed_up",
    "bench_gpt",
    "batch_tokens_per_s",
    "decode_step_profile",
]

# Names of the profiler's operators, by what they compute
MATRIX_PRODUCTS = ("aten::linear", "aten::matmul", "aten::addmm", "aten::mm")
ATTENTION = "scaled_dot_product"  # aten::scaled_dot_product_attention and kernels


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
    model: nn.Module,
    prompt: torch.Tensor,
    new_tokens: int,
    use_cache: bool,
    repeats: int = 1,
) -> float:
    """Tokens per second of ``model.generate`` (greedy), with or without the cache.

    Counts B x ``new_tokens`` tokens for a prompt of B rows; the median of
    ``repeats`` runs after a warm-up.
    """

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
    seconds = median_ms(
        lambda: model.generate(prompt, new_tokens, temperature=0, use_cache=use_cache),
        repeats=repeats,
        device=prompt.device,
    )
    return prompt.shape[0] * new_tokens / (seconds / 1000)


def bench_gpt(max_len: int = 528, device: torch.device | str = "cpu") -> nn.Module:
    """The untrained GPT that ``make bench`` and Chapter 7 time, in eval mode.

    d_model 128, 4 heads, 2 layers, a vocabulary of 512; ``max_len`` positions.
    Timing needs no training.
    """
    from .models import GPT, GPTConfig  # models import attention: no cycle here

    max_len = check_int("max_len", max_len, minimum=2)
    _check_device(device)
    cfg = GPTConfig(vocab_size=512, max_len=max_len, d_model=128, n_layers=2)
    return GPT(cfg).to(device).eval()


def _prompt(model: nn.Module, batch: int, length: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(model.cfg.vocab_size, (batch, length), generator=gen)
    return prompt.to(model.token.weight.device)  # (B, T)


def kv_cache_speed_up(
    new_tokens: int = 512, device: torch.device | str = "cpu"
) -> tuple[float, float]:
    """Tokens per second of ``bench_gpt`` (a 16-token prompt) generating
    ``new_tokens`` greedily, with and without the KV cache.

    The figure ``make bench`` and ``make gpu-check`` print. Returns (with the
    cache, without).
    """
    new_tokens = check_int("new_tokens", new_tokens, minimum=1)
    _check_device(device)
    model = bench_gpt(new_tokens + 16, device)
    prompt = _prompt(model, 1, 16)
    cached = generation_tokens_per_s(model, prompt, new_tokens, use_cache=True)
    full = generation_tokens_per_s(model, prompt, new_tokens, use_cache=False)
    return cached, full


def batch_tokens_per_s(
    model: nn.Module,
    batches: tuple[int, ...] = (1, 8, 64),
    new_tokens: int = 64,
    prompt_len: int = 16,
    repeats: int = 3,
) -> dict[int, float]:
    """Tokens per second of cached greedy decoding at each batch size in ``batches``.

    Each batch decodes ``new_tokens`` tokens after random prompts of
    ``prompt_len`` tokens; B x ``new_tokens`` tokens over the median time of
    ``repeats`` runs. Returns {batch size: tokens/s}.
    """
    new_tokens = check_int("new_tokens", new_tokens, minimum=1)
    prompt_len = check_int("prompt_len", prompt_len, minimum=1)
    repeats = check_int("repeats", repeats, minimum=1)
    if not isinstance(batches, tuple | list) or not batches:
        raise ValueError(f"batches must be a non-empty tuple of sizes, got {batches!r}")
    for b in batches:
        check_int("batches", b, minimum=1)
    _check_length(model, prompt_len + new_tokens)
    return {
        b: generation_tokens_per_s(
            model, _prompt(model, b, prompt_len), new_tokens, True, repeats
        )
        for b in batches
    }


def decode_step_profile(
    model: nn.Module, batch: int = 1, prompt_len: int = 16, steps: int = 25
) -> dict[str, float]:
    """Where the time of one cached decode step goes, from PyTorch's profiler.

    After a prompt of ``prompt_len`` tokens, ``steps`` single-token steps (each at
    the same position, overwriting it) run under ``torch.autograd.profiler``; the
    shares are the medians over the steps. It runs on one CPU thread (and restores
    the thread count): with several, a busy machine makes each small operator wait
    for its slowest thread. Each step's CPU time is split into the operators that
    multiply matrices (the projections, the feed-forward network and the output
    layer: ``aten::linear``),
    attention (``aten::scaled_dot_product_attention``), and everything else: the
    other operators (norms, GELU, embedding, copies, views) and the Python and
    dispatch time between operators. On a GPU these are the CPU's times, that is,
    the time to launch the work. The profiler adds its own cost to every
    operator, so the shares are indicative.

    Returns the three shares, which add up to 1:
    {"matrix products": ..., "attention": ..., "everything else": ...}.
    """
    from .models.kv_cache import Decoder, prepare_cache

    batch = check_int("batch", batch, minimum=1)
    prompt_len = check_int("prompt_len", prompt_len, minimum=1)
    steps = check_int("steps", steps, minimum=1)
    _check_length(model, prompt_len + 1)
    prompt = _prompt(model, batch, prompt_len)
    token = prompt[:, -1:]  # (B, 1)
    with torch.no_grad():
        decoder = Decoder(model)
        cache = prepare_cache(model, prompt, None, capacity=prompt_len + 1)
        decoder.step(prompt, cache)

        def step():
            decoder.step(token, cache)
            cache.length -= 1  # the next step writes the same position again

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for _ in range(3):  # warm-up
                step()
            with _profiler_logs_hidden(), torch.autograd.profiler.profile() as prof:
                for _ in range(steps):
                    with torch.autograd.profiler.record_function("decode step"):
                        step()
        finally:
            torch.set_num_threads(threads)
    return _shares(prof.function_events)


def _shares(events) -> dict[str, float]:
    """The median over the "decode step" ranges of each kind's share of the range.

    A step's top-level operators are sorted by name; the rest of its time is
    "everything else". The median over steps ignores a step that the operating
    system interrupted; the three medians are scaled to add up to 1.
    """
    steps: dict[int, dict[str, float]] = {}
    for event in events:
        if event.name == "decode step":
            steps.setdefault(id(event), {"matrix products": 0.0, "attention": 0.0})
            steps[id(event)]["total"] = event.cpu_time_total
    for event in events:
        parent = event.cpu_parent
        if parent is None or parent.name != "decode step":
            continue
        if event.name in MATRIX_PRODUCTS:
            steps[id(parent)]["matrix products"] += event.cpu_time_total
        elif ATTENTION in event.name:
            steps[id(parent)]["attention"] += event.cpu_time_total
    shares = {"matrix products": [], "attention": [], "everything else": []}
    for times in steps.values():
        total = times.pop("total")
        times["everything else"] = total - sum(times.values())
        for name, t in times.items():
            shares[name].append(t / total)
    medians = {name: sorted(v)[len(v) // 2] for name, v in shares.items()}
    total = sum(medians.values())
    return {name: m / total for name, m in medians.items()}


def _check_length(model: nn.Module, length: int) -> None:
    if not hasattr(model, "cfg") or not hasattr(model, "generate"):
        raise TypeError(f"model must be a GPT, got {type(model).__name__}")
    if length > model.cfg.max_len:
        raise ValueError(
            f"prompt_len and new_tokens need {length} positions, more than the "
            f"model's max_len={model.cfg.max_len}"
        )
