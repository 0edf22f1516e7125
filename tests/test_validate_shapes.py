"""``_validate.broadcast_shape``, the checks' fast broadcast, against PyTorch's own."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_book._validate import broadcast_shape

# sizes 0-3 (0 and 1 are the special cases), up to 4 axes, 1-3 shapes
shapes = st.lists(
    st.lists(st.integers(0, 3), max_size=4).map(tuple), min_size=1, max_size=3
)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(shapes)
def test_broadcast_shape_is_torchs(shape_list):
    """The same shape as torch.broadcast_shapes, or a RuntimeError where it raises."""
    try:
        expected = tuple(torch.broadcast_shapes(*shape_list))
    except RuntimeError:
        with pytest.raises(RuntimeError, match="do not broadcast"):
            broadcast_shape(*shape_list)
    else:
        assert broadcast_shape(*shape_list) == expected


@pytest.mark.parametrize(
    ("shape_list", "expected"),
    [
        (((2, 1, 5), (4, 1)), (2, 4, 5)),  # axes matched from the right
        (((1,), (0,)), (0,)),  # a size-1 axis broadcasts to an empty one
        ((torch.Size([3, 1]), torch.Size([])), (3, 1)),  # a scalar's shape
        ((), ()),  # no shapes: a scalar's shape, as torch.broadcast_shapes()
    ],
)
def test_broadcast_shape_cases(shape_list, expected):
    assert broadcast_shape(*shape_list) == expected
    assert tuple(torch.broadcast_shapes(*shape_list)) == expected


@pytest.mark.parametrize(
    "shape_list", [((2, 3), (3, 3, 2)), ((0,), (2,)), ((3,), (-1,))]
)
def test_broadcast_shape_refuses(shape_list):
    with pytest.raises(RuntimeError):
        broadcast_shape(*shape_list)
    with pytest.raises(RuntimeError):
        torch.broadcast_shapes(*shape_list)
