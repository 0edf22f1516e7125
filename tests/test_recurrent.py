"""The unrolled RNN and LSTM equal PyTorch's; the measurement helpers are right."""

import math

import pytest
import torch
from torch import nn

from transformer_book.attention import MultiHeadAttention
from transformer_book.recurrent import (
    LSTM,
    AttentionClassifier,
    LSTMClassifier,
    VanillaRNN,
    jacobian_norms,
    lstm_step,
    rescale_spectral_radius,
    rnn_step,
    saved_tensor_bytes,
    spectral_radius,
)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_rnn_step_equals_rnn_cell(nonlinearity):
    torch.manual_seed(0)
    cell = nn.RNNCell(5, 7, nonlinearity=nonlinearity)
    x, h = torch.randn(3, 5), torch.randn(3, 7)
    h_next = rnn_step(
        x, h, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh, nonlinearity
    )
    torch.testing.assert_close(h_next, cell(x, h))


def test_rnn_step_identity_is_linear_and_bias_optional():
    w_ih, w_hh = torch.randn(4, 3), torch.randn(4, 4)
    x, h = torch.randn(2, 3), torch.randn(2, 4)
    out = rnn_step(x, h, w_ih, w_hh, nonlinearity="identity")
    torch.testing.assert_close(out, x @ w_ih.T + h @ w_hh.T)
    with pytest.raises(ValueError, match="nonlinearity"):
        rnn_step(x, h, w_ih, w_hh, nonlinearity="sigmoid")


def test_lstm_step_equals_lstm_cell():
    torch.manual_seed(1)
    cell = nn.LSTMCell(5, 6)
    x, h, c = torch.randn(3, 5), torch.randn(3, 6), torch.randn(3, 6)
    h_next, c_next = lstm_step(
        x, h, c, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh
    )
    expected_h, expected_c = cell(x, (h, c))
    torch.testing.assert_close(h_next, expected_h)
    torch.testing.assert_close(c_next, expected_c)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_vanilla_rnn_equals_nn_rnn(nonlinearity):
    torch.manual_seed(2)
    ref = nn.RNN(4, 6, nonlinearity=nonlinearity, batch_first=True)
    ours = VanillaRNN.from_torch(ref)
    x, h0 = torch.randn(2, 9, 4), torch.randn(2, 6)
    expected_out, expected_h = ref(x, h0[None])
    out, h = ours(x, h0)
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(h, expected_h[0])
    out0, _ = ours(x)  # default h0 = zeros
    torch.testing.assert_close(out0, ref(x)[0])


def test_unrolled_lstm_equals_nn_lstm_including_gradients():
    torch.manual_seed(3)
    ref = nn.LSTM(4, 5, batch_first=True)
    ours = LSTM.from_torch(ref)
    x = torch.randn(2, 8, 4)
    out, (h, c) = ours(x)
    expected_out, (expected_h, expected_c) = ref(x)
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(h, expected_h[0])
    torch.testing.assert_close(c, expected_c[0])
    out.square().sum().backward()
    expected_out.square().sum().backward()
    torch.testing.assert_close(ours.weight_hh.grad, ref.weight_hh_l0.grad)


def test_default_init_matches_pytorch_range():
    rnn = VanillaRNN(3, 16)
    bound = 1 / math.sqrt(16)
    for p in rnn.parameters():
        assert p.abs().max() <= bound
    assert LSTM(3, 16).weight_hh.shape == (64, 16)


def test_from_torch_and_inputs_are_validated():
    with pytest.raises(ValueError, match="batch_first"):
        VanillaRNN.from_torch(nn.RNN(3, 4))
    with pytest.raises(ValueError, match="num_layers"):
        LSTM.from_torch(nn.LSTM(3, 4, num_layers=2, batch_first=True))
    with pytest.raises(ValueError, match="d_input=3"):
        VanillaRNN(3, 4)(torch.randn(2, 5, 4))
    with pytest.raises(ValueError, match="nonlinearity"):
        VanillaRNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="positive"):
        LSTM(0, 4)


def test_jacobian_norms_match_autograd_jacobian():
    torch.manual_seed(4)
    rnn = nn.RNN(3, 4, batch_first=True).double()
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    norms = jacobian_norms(lambda x: rnn(x)[0][:, -1], x)
    assert norms.shape == (6,)
    for b in range(2):
        jac = torch.autograd.functional.jacobian(
            lambda xb: rnn(xb[None])[0][0, -1], x[b]
        )  # (H, T, D)
        expected = jac.pow(2).sum(dim=(0, 2)).sqrt()
        if b == 0:
            total = expected
        else:
            total = total + expected
    torch.testing.assert_close(norms, total / 2)


def test_linear_rnn_jacobian_norms_are_powers_of_the_recurrent_matrix():
    torch.manual_seed(5)
    rnn = VanillaRNN(3, 4, nonlinearity="identity").double()
    x = torch.randn(1, 7, 3, dtype=torch.float64)
    norms = jacobian_norms(lambda x: rnn(x)[1], x)
    w_hh, w_ih = rnn.weight_hh.detach(), rnn.weight_ih.detach()
    for t in range(7):
        expected = torch.linalg.matrix_power(w_hh, 6 - t) @ w_ih  # dh_T/dx_t
        assert math.isclose(norms[t].item(), expected.norm().item(), rel_tol=1e-9)


def test_attention_gradient_does_not_decay_with_distance():
    torch.manual_seed(6)
    mha = MultiHeadAttention(8, 2).double()
    x = torch.randn(4, 64, 8, dtype=torch.float64)
    norms = jacobian_norms(lambda x: mha(x)[:, -1], x)
    far, mid = norms[0].item(), norms[32].item()
    assert 0.2 < far / mid < 5  # the same order of magnitude at any distance


def test_jacobian_norms_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"\(B, T, D\)"):
        jacobian_norms(lambda x: x, torch.randn(3, 4))
    with pytest.raises(ValueError, match="fn"):
        jacobian_norms(lambda x: x, torch.randn(2, 3, 4))


def test_spectral_radius_is_the_largest_eigenvalue_modulus_not_the_norm():
    assert math.isclose(spectral_radius(torch.diag(torch.tensor([0.5, -2.0]))), 2.0)
    rotation = torch.tensor([[0.0, -0.9], [0.9, 0.0]])  # eigenvalues +-0.9i
    assert math.isclose(spectral_radius(rotation), 0.9, rel_tol=1e-6)
    shear = torch.tensor([[0.5, 10.0], [0.0, 0.5]])  # norm ~10, radius 0.5
    assert math.isclose(spectral_radius(shear), 0.5, rel_tol=1e-6)
    with pytest.raises(ValueError, match="square"):
        spectral_radius(torch.randn(2, 3))


def test_rescale_spectral_radius():
    w = torch.randn(6, 6, generator=torch.Generator().manual_seed(7))
    assert math.isclose(
        spectral_radius(rescale_spectral_radius(w, 1.5)), 1.5, rel_tol=1e-5
    )
    with pytest.raises(ValueError, match="non-negative"):
        rescale_spectral_radius(w, -1.0)
    with pytest.raises(ValueError, match="radius 0"):
        rescale_spectral_radius(torch.zeros(3, 3), 1.0)


def test_saved_tensor_bytes_grow_linearly_for_rnn_quadratically_for_attention():
    torch.manual_seed(8)
    rnn, mha = nn.RNN(8, 8, batch_first=True), MultiHeadAttention(8, 1)
    params = [*rnn.parameters(), *mha.parameters()]

    def measure(fn, t):
        x = torch.randn(1, t, 8, requires_grad=True)
        return saved_tensor_bytes(fn, x, exclude=[x, *params])

    def readable(x):
        return mha(x, need_weights=True)[0]  # asking for the weights: readable path

    rnn_128, rnn_256 = (measure(lambda x: rnn(x)[0], t) for t in (128, 256))
    attn_128, attn_256 = (measure(readable, t) for t in (128, 256))
    assert rnn_128 > 0 and 1.8 < rnn_256 / rnn_128 < 2.2
    assert 3.5 < attn_256 / attn_128 < 4.1
    # the (T, T) attention weights are kept: at least 256 * 256 float32 values
    assert attn_256 >= 256 * 256 * 4
    # the fused path (the default) keeps O(T): about twice for twice the length
    fused_128, fused_256 = (measure(mha, t) for t in (128, 256))
    assert 1.8 < fused_256 / fused_128 < 2.2 and fused_256 < attn_256 / 5


def test_saved_tensor_bytes_counts_nothing_without_grad():
    w = torch.randn(3, 3)  # no requires_grad: autograd saves nothing
    assert saved_tensor_bytes(lambda: w @ w) == 0


def test_classifiers_shapes_and_forget_bias():
    tokens = torch.randint(0, 10, (3, 12))
    lstm = LSTMClassifier(10, 4, d_model=8, forget_bias=3.0)
    assert lstm(tokens).shape == (3, 4)
    assert torch.all(lstm.lstm.bias_ih_l0[8:16] == 3.0)
    assert torch.all(lstm.lstm.bias_hh_l0[8:16] == 0.0)
    attn = AttentionClassifier(10, 4, d_model=8, n_heads=2)
    assert attn(tokens).shape == (3, 4)


def test_attention_classifier_answer_depends_on_content_not_position():
    torch.manual_seed(9)
    model = AttentionClassifier(10, 4, d_model=8)
    tokens = torch.randint(0, 9, (2, 6))
    tokens[:, -1] = 9
    shuffled = torch.cat([tokens[:, :-1].flip(1), tokens[:, -1:]], dim=1)
    torch.testing.assert_close(model(tokens), model(shuffled))
