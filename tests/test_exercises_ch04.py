"""The Chapter 4 checkers accept right answers and explain wrong ones.

Per checker: right answers written in several ways (float64 among them) pass, and
each wrong answer is rejected with a message that names its mistake.
"""

import math

import pytest
import torch

from transformer_book.exercises import (
    check_alibi_slopes,
    check_rope,
    check_sinusoidal_table,
)
from transformer_book.positional import alibi_slopes, apply_rope, sinusoidal_encoding

# ---------------------------------------------------------------- sinusoidal


def table(positions, d_model, base=10000.0, swap=False, halves=False, exponent="2i",
          ignore_positions=False, ignore_base=False):  # fmt: skip
    p = torch.as_tensor(positions).float()
    if ignore_positions:
        p = torch.arange(len(p)).float()
    base = 10000.0 if ignore_base else base
    i = torch.arange(d_model // 2).float()
    power = 2 * i / d_model if exponent == "2i" else i / d_model
    angle = p[:, None] / base**power  # (T, D/2)
    s, c = (angle.cos(), angle.sin()) if swap else (angle.sin(), angle.cos())
    if halves:
        return torch.cat([s, c], dim=1)
    return torch.stack([s, c], dim=-1).flatten(1)


def book_table(positions, d_model, base=10000.0):
    positions = torch.as_tensor(positions, dtype=torch.float32)
    omega = base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    angle = positions[:, None] * omega  # (T, D/2)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)


def by_assignment(positions, d_model, base=10000.0):
    pe = torch.zeros(len(positions), d_model, dtype=torch.float64)
    i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = positions.double()[:, None] * base ** (-i / d_model)
    pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle.cos()
    return pe


RIGHT_TABLES = {
    "by hand": table,
    "book": book_table,
    "float64": lambda p, d, base=10000.0: table(p, d, base).double(),
    "assignment": by_assignment,
}


@pytest.mark.parametrize("right", RIGHT_TABLES.values(), ids=RIGHT_TABLES.keys())
def test_sinusoidal_checker_accepts_right_answers(right, capsys):
    assert check_sinusoidal_table(right) is None
    assert "all checks passed" in capsys.readouterr().out


def test_sinusoidal_checker_agrees_with_the_package_at_integer_positions():
    torch.testing.assert_close(table(torch.arange(30), 16), sinusoidal_encoding(30, 16))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(swap=True), "swapped"),
        (dict(halves=True), "interleave"),
        (dict(ignore_positions=True), "positions\\[r\\]"),
        (dict(ignore_base=True), "base argument is ignored"),
        (dict(exponent="i"), "frequencies"),
    ],
)
def test_sinusoidal_checker_names_the_mistake(kwargs, message):
    def wrong(positions, d_model, base=10000.0):
        return table(positions, d_model, base, **kwargs)

    with pytest.raises(AssertionError, match=message):
        check_sinusoidal_table(wrong)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda p, d, base=10000.0: table(p, d, base) * 2, "sin² \\+ cos² = 1"),
        (lambda p, d, base=10000.0: table(p, d, base)[:, :-1], "shape"),
        (lambda p, d, base=10000.0: table(p, d, base).long(), "floats"),
        (lambda p, d, base=10000.0: table(p, d, base).tolist(), "tensor"),
        (lambda p, d: table(p, d), "unexpected keyword argument 'base'"),
        (lambda p, d, base=1e4: table(p.long(), d, base), "lost their fractional"),
        (lambda p, d, base=1e4: table(p.round(), d, base), "lost their fractional"),
    ],
)
def test_sinusoidal_checker_catches_other_mistakes(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_sinusoidal_table(wrong)


# ---------------------------------------------------------------------- RoPE


def rope_by_hand(x, positions, sign=1.0, theta_base=10000.0):
    d = x.shape[-1]
    theta = theta_base ** (-torch.arange(0, d, 2).float() / d)
    angle = sign * positions.float()[:, None] * theta  # (T, D/2)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack([x1 * angle.cos() - x2 * angle.sin(),
                       x1 * angle.sin() + x2 * angle.cos()], dim=-1)  # fmt: skip
    return out.flatten(-2)


def neox(x, positions):
    """GPT-NeoX's rotate-half layout: dimension i pairs with i + D/2."""
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2).float() / d)
    angle = positions.float()[:, None] * theta  # (T, D/2)
    cos, sin = angle.cos().repeat(1, 2), angle.sin().repeat(1, 2)  # (T, D)
    rotate_half = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], dim=-1)
    return x * cos + rotate_half * sin


def book_rope(x, positions):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], d // 2, 2))
    rotated = z * torch.polar(torch.ones_like(angle), angle)
    return torch.view_as_real(rotated).flatten(-2).to(x.dtype)


RIGHT_ROPES = {
    "package": apply_rope,
    "sin and cos": rope_by_hand,
    "complex": book_rope,
    "float64": lambda x, p: rope_by_hand(x.double(), p),
}


@pytest.mark.parametrize("right", RIGHT_ROPES.values(), ids=RIGHT_ROPES.keys())
def test_rope_checker_accepts_right_answers(right, capsys):
    assert check_rope(right) is None
    assert "all checks passed" in capsys.readouterr().out


def written_as_halves(x, positions):
    out = rope_by_hand(x, positions)
    return torch.cat([out[..., 0::2], out[..., 1::2]], dim=-1)


def three_axes_only(x, positions):
    B, T, D = x.shape
    return rope_by_hand(x.view(B, T, D), positions)


def rotates_in_place(x, positions):
    x.copy_(rope_by_hand(x, positions))
    return x


def test_neox_helper_really_is_a_different_rotation():
    x, pos = torch.randn(3, 8), torch.tensor([0, 4, 9])
    assert not torch.allclose(neox(x, pos), apply_rope(x, pos))
    torch.testing.assert_close(neox(x, pos).norm(dim=-1), x.norm(dim=-1))


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda x, p: rope_by_hand(x, p, sign=-1.0), "wrong way"),
        (neox, "GPT-NeoX"),
        (lambda x, p: rope_by_hand(x, p, theta_base=100.0), "angles are wrong"),
        (lambda x, p: rope_by_hand(x, p + 1), "position 0"),
        (lambda x, p: rope_by_hand(x, p) * 1.5, "length"),
        (lambda x, p: rope_by_hand(x, p)[..., :4], "shape"),
        (written_as_halves, "two halves"),
        (three_axes_only, r"shape \(2, 3, 5, 8\): your function raised ValueError"),
        (rotates_in_place, "modified x in place"),
    ],
)
def test_rope_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_rope(wrong)


def test_rope_checker_catches_scores_that_depend_on_absolute_position():
    def per_call_angle(x, p):  # right on the first case, then ignores positions
        if x.shape[0] == 1:
            return rope_by_hand(x, p * p)
        return rope_by_hand(x, p)

    with pytest.raises(AssertionError, match="only on the offset"):
        check_rope(per_call_angle)


# --------------------------------------------------------------------- ALiBi


def reference_slopes(n):
    def pow2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return pow2(n)
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + reference_slopes(2 * c)[0::2][: n - c]


def book_slopes(n_heads):
    def power_of_two(n):
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    c = 2 ** math.floor(math.log2(n_heads))
    return torch.tensor(power_of_two(c) + power_of_two(2 * c)[0::2][: n_heads - c])


RIGHT_SLOPES = {
    "package": alibi_slopes,
    "list": reference_slopes,
    "book": book_slopes,
    "float64": lambda n: torch.tensor(reference_slopes(n), dtype=torch.float64),
}


@pytest.mark.parametrize("right", RIGHT_SLOPES.values(), ids=RIGHT_SLOPES.keys())
def test_alibi_checker_accepts_right_answers(right, capsys):
    assert check_alibi_slopes(right) is None
    assert "all checks passed" in capsys.readouterr().out


def first_of_the_double_list(n):
    c = 2 ** math.floor(math.log2(n))
    return reference_slopes(c) + reference_slopes(2 * c)[: n - c]


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda n: [2 ** (-8 * (i + 1) / n) for i in range(n)], "power of two"),
        (lambda n: reference_slopes(n)[::-1], "reverse order; start with the steep"),
        (lambda n: sorted(reference_slopes(n), reverse=True), "sorted steepest first"),
        (
            lambda n: reference_slopes(n)[:: -1 if n == 6 else 1],
            "n_heads=6 are in reverse order; start with the slopes for the largest",
        ),
        (first_of_the_double_list, "every other slope"),
        (lambda n: [2 ** (-(i + 1)) for i in range(n)], "wrong"),
        (lambda n: reference_slopes(n)[:-1], "shape"),
    ],
)
def test_alibi_checker_names_the_mistake(wrong, message):
    with pytest.raises(AssertionError, match=message):
        check_alibi_slopes(wrong)
