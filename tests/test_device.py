import random

import numpy as np
import pytest
import torch

from transformer_book.device import autocast, get_device, set_seed


def test_get_device_prefers_cuda_then_cpu():
    device = get_device()
    assert isinstance(device, torch.device)
    if torch.cuda.is_available():
        assert device.type == "cuda"
    elif not torch.backends.mps.is_available():
        assert device.type == "cpu"
    torch.zeros(1, device=device)  # usable


def test_set_seed_makes_every_generator_repeat():
    set_seed(123)
    first = (random.random(), np.random.rand(), torch.rand(3))
    set_seed(123)
    second = (random.random(), np.random.rand(), torch.rand(3))
    assert first[0] == second[0] and first[1] == second[1]
    assert torch.equal(first[2], second[2])
    set_seed(124)
    assert not torch.equal(torch.rand(3), second[2])


def test_set_seed_rejects_non_integers():
    with pytest.raises(TypeError):
        set_seed(1.5)


def test_autocast_is_a_no_op_on_the_cpu():
    a = torch.randn(4, 4)
    with autocast("cpu"):
        assert (a @ a).dtype == torch.float32


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_autocast_uses_bfloat16_on_cuda():
    a = torch.randn(4, 4, device="cuda")
    with autocast("cuda"):
        assert (a @ a).dtype == torch.bfloat16
