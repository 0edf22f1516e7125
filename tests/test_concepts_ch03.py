"""The Chapter 3 concept checks: the answers marked right are the computed ones."""

import json
import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from transformer_book.attention import MultiHeadAttention, causal_mask
from transformer_book.concepts.ch03 import CHECKS

NOTEBOOK = Path(__file__).parents[1] / "book" / "03_multi_head.ipynb"


def right(question):
    return question.options[question.answer]


def test_keys_are_sections_of_the_chapter():
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    text = "\n".join(markdown)
    sections = set(re.findall(r"^## (3\.\d+) ", text, flags=re.MULTILINE))
    assert set(CHECKS) <= sections, (sorted(CHECKS), sorted(sections))
    questions = [q for qs in CHECKS.values() for q in qs]
    assert 4 <= len(questions) <= 5
    assert all(3 <= len(q.options) <= 4 for q in questions)


def test_3_1_only_separate_heads_concatenated_tell_the_swap_apart():
    (q,) = CHECKS["3.1"]
    sequences = torch.tensor([0, 1, 2, 3]), torch.tensor([0, 3, 2, 1])
    half_half = torch.tensor([0.0, 0.5, 0.0, 0.5])
    on_1, on_3 = torch.eye(4)[1], torch.eye(4)[3]

    def head(tokens, weights):  # (T,) weights @ (T, 4) one-hot values -> (4,)
        return weights @ F.one_hot(tokens, num_classes=4).float()

    setups = [  # in the order of the options
        lambda s: head(s, half_half),
        lambda s: torch.cat([head(s, half_half), head(s, half_half)]),
        lambda s: head(s, on_1) + head(s, on_3),
        lambda s: torch.cat([head(s, on_1), head(s, on_3)]),
    ]
    assert len(setups) == len(q.options)
    differ = [
        i for i, f in enumerate(setups) if not torch.equal(*(f(s) for s in sequences))
    ]
    assert differ == [q.answer], differ

    def text(vector):
        return str([int(v) if v == int(v) else float(v) for v in vector.tolist()])

    for i in (0, 2, 3):  # the vectors that the explanations quote
        for vector in (setups[i](s) for s in sequences):
            assert text(vector) in q.why[i], (i, text(vector))


def test_3_3_an_uninverted_mask_blocks_the_past_and_gives_nan():
    (q,) = CHECKS["3.3"]
    torch.manual_seed(0)
    torch_mha = nn.MultiheadAttention(8, 2, batch_first=True)
    mha = MultiHeadAttention.from_torch(torch_mha)
    x = torch.randn(2, 5, 8)
    causal = causal_mask(5)
    with torch.no_grad():
        try:
            theirs, _ = torch_mha(x, x, x, attn_mask=causal)
        except ValueError:
            outcome = 2
        else:
            nan_rows = theirs.isnan().any(dim=-1)  # (B, T)
            later_only = mha(x, mask=~causal)  # True strictly above the diagonal
            if torch.allclose(theirs, mha(x, mask=causal), atol=1e-6):
                outcome = 0
            elif nan_rows.all():
                outcome = 3
            elif nan_rows[:, -1].all() and not nan_rows[:, :-1].any():
                assert torch.allclose(theirs[:, :-1], later_only[:, :-1], atol=1e-6)
                outcome = 1
            else:
                raise AssertionError(f"unexpected pattern of NaN rows: {nan_rows}")
    assert right(q) == q.options[outcome]


class MatmulFlops(TorchFunctionMode):
    """Counts the FLOPs of the matrix products, 2 per multiply-add, as PyTorch's
    `FlopCounterMode` does (which imports torch._dynamo: seconds, not milliseconds)."""

    def __init__(self):
        super().__init__()
        self.flops = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if name == "linear":  # x (..., in) @ weight.T (in, out)
            self.flops += 2 * out.numel() * args[1].shape[1]
        elif name in ("matmul", "__matmul__", "bmm"):
            self.flops += 2 * out.numel() * args[0].shape[-1]
        return out


def test_matmul_flops_counts_what_the_chapter_counted():
    # §3.4: 0.671 GFLOP at d_model = 512, T = 256, for any number of heads
    x = torch.randn(1, 256, 512)
    with torch.no_grad(), MatmulFlops() as counter:
        MultiHeadAttention(512, 8)(x, need_weights=True)  # readable: every product
    assert counter.flops == 4 * 2 * 256 * 512**2 + 2 * 2 * 256**2 * 512
    assert round(counter.flops / 1e9, 3) == 0.671


def test_3_4_more_heads_cost_the_same_but_hold_more_weights():
    (q,) = CHECKS["3.4"]
    x = torch.randn(1, 128, 256)
    counts = {}
    for h in (4, 16):
        m = MultiHeadAttention(256, h)
        with torch.no_grad(), MatmulFlops() as counter:
            _, weights = m(x, need_weights=True)
        params = sum(p.numel() for p in m.parameters())
        counts[h] = (params, counter.flops, weights[0].numel())
    ratios = tuple(round(b / a) for a, b in zip(counts[4], counts[16], strict=True))
    options = {(1, 1, 1): 0, (1, 1, 4): 1, (1, 4, 4): 2, (4, 4, 4): 3}
    assert right(q) == q.options[options[ratios]], (counts, ratios)
    for _, _, n_weights in counts.values():  # quoted in the explanation of option A
        assert f"{n_weights:,}" in q.why[0]
