"""Bad input to every public function and class: a TypeError (wrong type or dtype) or
a ValueError (wrong value or shape) whose message names the argument as the caller
wrote it. One table per module; every case asserts the type and the name.

Right results at the edges (empty batches, zero-length sequences, rows of -inf,
float16 extremes) are in ``test_edge_cases.py``.
"""

import math

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from transformer_book import data, device, plot, source, train
from transformer_book.attention import (
    MultiHeadAttention,
    causal_mask,
    fused_scaled_dot_product_attention,
    padding_mask,
    scaled_dot_product_attention,
)
from transformer_book.blocks import DecoderBlock, EncoderBlock, FeedForward
from transformer_book.models import (
    EncoderDecoder,
    EncoderDecoderConfig,
    TokenEmbedding,
)
from transformer_book.position_lm import (
    PositionalSelfAttention,
    PositionLM,
    PositionLMConfig,
)
from transformer_book.positional import (
    LearnedPositionalEmbedding,
    RelativePositionBias,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    relative_position_bucket,
    sinusoidal_encoding,
)
from transformer_book.probe import (
    AttentionOnlyClassifier,
    ProbeConfig,
    ablate_heads,
    attention_on,
    record_heads,
)
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


def bad(case_id, call, error, match):
    return pytest.param(call, error, match, id=case_id)


def expect(call, error, match):
    with pytest.raises(error, match=match):
        call()


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)


def bools(*shape):
    return torch.ones(*shape, dtype=torch.bool)


# ---------------------------------------------------------------- attention
Q, K, V = randn(2, 5, 8), randn(2, 7, 8), randn(2, 7, 6)
MHA = MultiHeadAttention(16, 4)
X16, MEM16 = randn(2, 5, 16), randn(2, 7, 16)


def sdpa(**kw):
    args = {"q": Q, "k": K, "v": V} | kw
    return lambda: scaled_dot_product_attention(**args)


def fused(**kw):
    args = {"q": Q, "k": K, "v": V} | kw
    return lambda: fused_scaled_dot_product_attention(**args)


ATTENTION = [
    bad("int-q", sdpa(q=Q.long()), TypeError, r"q must be a floating-point .*int64"),
    bad("bool-v", sdpa(v=V > 0), TypeError, r"v must be a floating-point .*bool"),
    bad("list-k", sdpa(k=K.tolist()), TypeError, "k must be a torch.Tensor"),
    bad("mixed-dtypes", sdpa(q=Q.half()), TypeError, r"q, k and v .*float16"),
    bad("q-1d", sdpa(q=randn(8)), ValueError, r"q must have shape \(\.\.\., T, D\)"),
    bad("d_k", sdpa(k=randn(2, 7, 4)), ValueError, r"q and k .* \(2, 7, 4\)"),
    bad("t_k", sdpa(v=randn(2, 6, 6)), ValueError, r"k and v .* \(2, 6, 6\)"),
    bad("batch", sdpa(k=randn(3, 7, 8)), ValueError, r"batch dimensions of q"),
    bad("float-mask", sdpa(mask=torch.ones(5, 7)), TypeError, r"mask must be a bool"),
    bad("int-mask", sdpa(mask=torch.ones(5, 7).long()), TypeError, "mask .*int64"),
    bad("mask-shape", sdpa(mask=bools(5, 6)), ValueError, r"mask of shape \(5, 6\)"),
    bad("mask-4d", sdpa(mask=bools(2, 1, 1, 7)), ValueError, r"mask .*\(2, 1, 1, 7\)"),
    bad("bool-bias", sdpa(bias=bools(5, 7)), TypeError, r"bias must be a floating"),
    bad("int-bias", sdpa(bias=torch.ones(5, 7).long()), TypeError, "bias .*int64"),
    bad("bias-shape", sdpa(bias=torch.zeros(4, 5, 7)), ValueError, r"bias of shape"),
    bad("dropout<0", sdpa(dropout_p=-0.1), ValueError, r"dropout_p must be in \[0"),
    bad("dropout>1", sdpa(dropout_p=1.5), ValueError, r"dropout_p .*1\.5"),
    bad("dropout-nan", sdpa(dropout_p=math.nan), ValueError, r"dropout_p .*nan"),
    bad("dropout-str", sdpa(dropout_p="0.1"), TypeError, r"dropout_p must be a real"),
    bad("fused-int-q", fused(q=Q.int()), TypeError, r"q must be a floating-point"),
    bad("fused-mask", fused(mask=torch.ones(5, 7)), TypeError, r"mask must be a bool"),
    bad("fused-shape", fused(mask=bools(4, 7)), ValueError, r"mask of shape \(4, 7\)"),
    bad("fused-dropout", fused(dropout_p=-1.0), ValueError, r"dropout_p"),
    bad("causal-0", lambda: causal_mask(0), ValueError, r"t must be positive"),
    bad("causal-float", lambda: causal_mask(2.5), TypeError, r"t must be an int"),
    bad("causal-bool", lambda: causal_mask(True), TypeError, r"t must be an int"),
    bad("causal-device", lambda: causal_mask(3, "gpu0"), ValueError, r"device='gpu0'"),
    bad(
        "padding-float",
        lambda: padding_mask(torch.tensor([2.5, 1.0])),
        TypeError,
        r"lengths must be an integer tensor",
    ),
    bad(
        "padding-2d",
        lambda: padding_mask(torch.tensor([[1]])),
        ValueError,
        r"lengths must have shape \(B,\)",
    ),
    bad(
        "padding-empty",
        lambda: padding_mask(torch.tensor([], dtype=torch.long)),
        ValueError,
        r"lengths is empty: pass max_len",
    ),
    bad(
        "padding-long",
        lambda: padding_mask(torch.tensor([5]), max_len=4),
        ValueError,
        r"lengths must lie in \[0, 4\]",
    ),
    bad(
        "padding-negative",
        lambda: padding_mask(torch.tensor([-1, 2])),
        ValueError,
        r"lengths must lie in",
    ),
    bad(
        "padding-max_len",
        lambda: padding_mask(torch.tensor([1]), max_len=2.0),
        TypeError,
        r"max_len must be an int",
    ),
    bad("heads-0", lambda: MultiHeadAttention(16, 0), ValueError, r"n_heads must be"),
    bad("d_model-float", lambda: MultiHeadAttention(16.0, 4), TypeError, r"d_model"),
    bad("indivisible", lambda: MultiHeadAttention(10, 4), ValueError, r"divisible"),
    bad(
        "dropout-1.5",
        lambda: MultiHeadAttention(16, 4, dropout=1.5),
        ValueError,
        r"dropout must be in \[0, 1\], got 1\.5",
    ),
    bad(
        "dropout-negative",
        lambda: MultiHeadAttention(16, 4, dropout=-0.1),
        ValueError,
        r"dropout must be",
    ),
    bad("query-2d", lambda: MHA(randn(5, 16)), ValueError, r"query must have shape"),
    bad("query-int", lambda: MHA(X16.long()), TypeError, r"query must be a floating"),
    bad("key-width", lambda: MHA(X16, randn(2, 7, 8)), ValueError, r"key must have"),
    bad(
        "value-length",
        lambda: MHA(X16, MEM16, randn(2, 6, 16)),
        ValueError,
        r"key \(2, 7, 16\) and value \(2, 6, 16\)",
    ),
    bad(
        "batch-mismatch",
        lambda: MHA(X16, randn(3, 7, 16)),
        ValueError,
        r"query \(2, 5, 16\) and key \(3, 7, 16\) have different batch sizes",
    ),
    bad(
        "query-float64",
        lambda: MHA(X16.double()),
        TypeError,
        r"query has dtype torch.float64 but the module's parameters are torch.float32",
    ),
    bad(
        "mask-caller-shape",
        lambda: MHA(X16, mask=causal_mask(4)),
        ValueError,
        r"mask of shape \(4, 4\) does not broadcast to \(B, H, T, S\) = \(2, 4, 5, 5\)",
    ),
    bad(
        "mask-3d-batch",
        lambda: MHA(X16, mask=bools(3, 5, 5)),
        ValueError,
        r"mask of shape \(3, 5, 5\) does not broadcast to \(B, T, S\)",
    ),
    bad("mha-float-mask", lambda: MHA(X16, mask=torch.ones(5, 5)), TypeError, "mask"),
    bad("mask-5d", lambda: MHA(X16, mask=bools(1, 2, 4, 5, 5)), ValueError, "mask"),
    bad(
        "from_torch-type",
        lambda: MultiHeadAttention.from_torch(nn.Linear(4, 4)),
        TypeError,
        r"m must be an nn.MultiheadAttention, got Linear",
    ),
    bad(
        "from_torch-kdim",
        lambda: MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=4)),
        ValueError,
        r"from_torch supports",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), ATTENTION)
def test_attention(call, error, match):
    expect(call, error, match)


# ---------------------------------------------------------------- positional
LEARNED = LearnedPositionalEmbedding(4, 8)
RPB = RelativePositionBias(2, bidirectional=False, num_buckets=8, max_distance=16)
X8 = randn(2, 5, 8)

POSITIONAL = [
    bad("sin-d0", lambda: sinusoidal_encoding(4, 0), ValueError, r"d_model must be"),
    bad("sin-odd", lambda: sinusoidal_encoding(4, 5), ValueError, r"d_model=5 .*even"),
    bad("sin-len0", lambda: sinusoidal_encoding(0, 4), ValueError, r"max_len must be"),
    bad("sin-float", lambda: sinusoidal_encoding(4.0, 4), TypeError, r"max_len"),
    bad("sin-d-float", lambda: sinusoidal_encoding(4, 8.0), TypeError, r"d_model"),
    bad(
        "learned-0",
        lambda: LearnedPositionalEmbedding(0, 4),
        ValueError,
        r"max_len must be positive",
    ),
    bad(
        "learned-float",
        lambda: LearnedPositionalEmbedding(4, 2.5),
        TypeError,
        r"d_model must be an int",
    ),
    bad("learned-int-x", lambda: LEARNED(X8.long()), TypeError, r"x must be a float"),
    bad("learned-width", lambda: LEARNED(randn(2, 3, 6)), ValueError, r"x must have"),
    bad("learned-1d", lambda: LEARNED(randn(8)), ValueError, r"x must have shape"),
    bad("learned-long", lambda: LEARNED(X8), ValueError, r"exceeds max_len=4"),
    bad("rope-int", lambda: apply_rope(X8.long()), TypeError, r"x must be a float"),
    bad("rope-bool", lambda: apply_rope(X8 > 0), TypeError, r"x must be a float"),
    bad("rope-odd", lambda: apply_rope(randn(3, 7)), ValueError, r"D=7 must be even"),
    bad("rope-1d", lambda: apply_rope(randn(8)), ValueError, r"x must have shape"),
    bad(
        "rope-positions-t",
        lambda: apply_rope(X8, torch.arange(4)),
        ValueError,
        r"positions of shape \(4,\) do not match T=5",
    ),
    bad(
        "rope-positions-enlarge",
        lambda: apply_rope(randn(1, 5, 8), torch.zeros(3, 5)),
        ValueError,
        r"positions of shape \(3, 5\) do not broadcast to x's \(\.\.\., T\)",
    ),
    bad(
        "rope-positions-0d",
        lambda: apply_rope(X8, torch.tensor(3)),
        ValueError,
        r"positions of shape \(\)",
    ),
    bad(
        "rope-positions-bool",
        lambda: apply_rope(X8, bools(5)),
        TypeError,
        r"positions must be an integer or float tensor",
    ),
    bad("rope-base-0", lambda: apply_rope(X8, base=0.0), ValueError, r"base must be"),
    bad("rope-base<0", lambda: apply_rope(X8, base=-1.0), ValueError, r"base .*-1"),
    bad("rope-base-nan", lambda: apply_rope(X8, base=math.nan), ValueError, r"base"),
    bad("rope-base-inf", lambda: apply_rope(X8, base=math.inf), ValueError, r"base"),
    bad("rope-base-str", lambda: apply_rope(X8, base="1e4"), TypeError, r"base must"),
    bad(
        "bucket-float",
        lambda: relative_position_bucket(torch.tensor([1.5])),
        TypeError,
        r"relative_position must be an integer tensor",
    ),
    bad(
        "bucket-bool",
        lambda: relative_position_bucket(bools(3)),
        TypeError,
        r"relative_position must be an integer",
    ),
    bad(
        "bucket-few",
        lambda: relative_position_bucket(torch.arange(3), num_buckets=2),
        ValueError,
        r"num_buckets=2 is too small",
    ),
    bad(
        "bucket-float-n",
        lambda: relative_position_bucket(torch.arange(3), num_buckets=32.0),
        TypeError,
        r"num_buckets must be an int",
    ),
    bad(
        "bucket-distance",
        lambda: relative_position_bucket(torch.arange(3), max_distance=8),
        ValueError,
        r"max_distance=8 must exceed",
    ),
    bad(
        "bucket-distance-float",
        lambda: relative_position_bucket(torch.arange(3), max_distance=128.5),
        TypeError,
        r"max_distance must be an int",
    ),
    bad("rpb-0", lambda: RelativePositionBias(0), ValueError, r"n_heads must be"),
    bad("rpb-float", lambda: RelativePositionBias(2.0), TypeError, r"n_heads"),
    bad("rpb-buckets", lambda: RelativePositionBias(2, True, 3), ValueError, r"buck"),
    bad("rpb-t_q<0", lambda: RPB(-1), ValueError, r"t_q must be non-negative"),
    bad("rpb-t_q-float", lambda: RPB(2.5), TypeError, r"t_q must be an int"),
    bad("rpb-t_k<0", lambda: RPB(2, -2), ValueError, r"t_k must be"),
    bad("rpb-offset<0", lambda: RPB(2, 4, -1), ValueError, r"query_offset must be"),
    bad(
        "rpb-offset-float",
        lambda: RPB(2, 4, query_offset=1.5),
        TypeError,
        r"query_offset must be an int",
    ),
    bad("slopes-0", lambda: alibi_slopes(0), ValueError, r"n_heads must be positive"),
    bad("slopes-float", lambda: alibi_slopes(2.0), TypeError, r"n_heads must be an"),
    bad("slopes-bool", lambda: alibi_slopes(True), TypeError, r"n_heads .*bool"),
    bad("alibi-t_q", lambda: alibi_bias(4, -1), ValueError, r"t_q must be"),
    bad("alibi-t_k", lambda: alibi_bias(4, 3, 2.0), TypeError, r"t_k must be an int"),
    bad(
        "alibi-offset",
        lambda: alibi_bias(4, 3, query_offset=-1),
        ValueError,
        r"query_offset must be non-negative",
    ),
    bad("alibi-heads", lambda: alibi_bias(0, 3), ValueError, r"n_heads must be"),
    bad(
        "alibi-device",
        lambda: alibi_bias(4, 3, device="nowhere"),
        ValueError,
        r"device='nowhere'",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), POSITIONAL)
def test_positional(call, error, match):
    expect(call, error, match)


# ---------------------------------------------------------------- blocks
FF = FeedForward(8, 16)
ENC = EncoderBlock(16, 4, 32)
DEC = DecoderBlock(16, 4, 32)
X_MEM = (X16, MEM16)


def torch_layer(kind, **kw):
    return kind(16, 4, 32, dropout=0.0, batch_first=True, **kw)


BLOCKS = [
    bad("ff-d_model", lambda: FeedForward(0, 8), ValueError, r"d_model must be"),
    bad("ff-d_ff", lambda: FeedForward(8, 0), ValueError, r"d_ff must be positive"),
    bad("ff-d_ff-float", lambda: FeedForward(8, 16.0), TypeError, r"d_ff must be an"),
    bad("ff-dropout", lambda: FeedForward(8, 16, 2.0), ValueError, r"dropout must be"),
    bad(
        "ff-activation",
        lambda: FeedForward(8, 16, activation="tanh"),
        ValueError,
        r"activation must be 'relu' or 'gelu', got 'tanh'",
    ),
    bad(
        "ff-width",
        lambda: FF(randn(2, 3, 6)),
        ValueError,
        r"x must have shape \(\.\.\., d_model=8\), got \(2, 3, 6\)",
    ),
    bad("ff-int", lambda: FF(randn(2, 8).long()), TypeError, r"x must be a floating"),
    bad("ff-float64", lambda: FF(randn(2, 8).double()), TypeError, r"x has dtype"),
    bad("enc-indivisible", lambda: EncoderBlock(16, 3, 32), ValueError, r"divisible"),
    bad("enc-heads", lambda: EncoderBlock(16, 0, 32), ValueError, r"n_heads must be"),
    bad(
        "enc-dropout",
        lambda: EncoderBlock(16, 4, 32, dropout=-1.0),
        ValueError,
        r"dropout must be in \[0, 1\]",
    ),
    bad(
        "enc-eps",
        lambda: EncoderBlock(16, 4, 32, layer_norm_eps=-1e-5),
        ValueError,
        r"layer_norm_eps must be non-negative",
    ),
    bad(
        "enc-eps-nan",
        lambda: EncoderBlock(16, 4, 32, layer_norm_eps=math.nan),
        ValueError,
        r"layer_norm_eps",
    ),
    bad("enc-2d", lambda: ENC(randn(5, 16)), ValueError, r"x must have shape \(B, T"),
    bad("enc-int", lambda: ENC(X16.long()), TypeError, r"x must be a floating"),
    bad("enc-half", lambda: ENC(X16.half()), TypeError, r"x has dtype torch.float16"),
    bad(
        "enc-mask",
        lambda: ENC(X16, mask=bools(2, 1, 4)),
        ValueError,
        r"mask of shape \(2, 1, 4\) does not broadcast to \(B, T, S\)",
    ),
    bad("enc-float-mask", lambda: ENC(X16, torch.ones(5, 5)), TypeError, r"mask"),
    bad(
        "enc-from-decoder",
        lambda: EncoderBlock.from_torch(torch_layer(nn.TransformerDecoderLayer)),
        TypeError,
        r"m must be an nn.TransformerEncoderLayer, got TransformerDecoderLayer",
    ),
    bad(
        "enc-from-no-bias",
        lambda: EncoderBlock.from_torch(
            torch_layer(nn.TransformerEncoderLayer, bias=False)
        ),
        ValueError,
        r"bias=True",
    ),
    bad("dec-memory", lambda: DEC(X16, randn(2, 7, 8)), ValueError, r"memory must"),
    bad("dec-memory-int", lambda: DEC(X16, MEM16.long()), TypeError, r"memory must"),
    bad(
        "dec-batch",
        lambda: DEC(X16, randn(3, 7, 16)),
        ValueError,
        r"x \(2, 5, 16\) and memory \(3, 7, 16\) have different batch sizes",
    ),
    bad(
        "dec-self_mask",
        lambda: DEC(*X_MEM, self_mask=causal_mask(4)),
        ValueError,
        r"self_mask of shape \(4, 4\) does not broadcast to \(B, H, T, S\)",
    ),
    bad(
        "dec-memory_mask",
        lambda: DEC(*X_MEM, memory_mask=bools(2, 1, 5)),
        ValueError,
        r"memory_mask of shape \(2, 1, 5\) does not broadcast to \(B, T, S\) = "
        r"\(2, 5, 7\)",
    ),
    bad(
        "dec-float-memory_mask",
        lambda: DEC(*X_MEM, memory_mask=torch.ones(5, 7)),
        TypeError,
        r"memory_mask must be a bool",
    ),
    bad(
        "dec-from-encoder",
        lambda: DecoderBlock.from_torch(torch_layer(nn.TransformerEncoderLayer)),
        TypeError,
        r"m must be an nn.TransformerDecoderLayer",
    ),
    bad(
        "dec-from-activation",
        lambda: DecoderBlock.from_torch(
            torch_layer(nn.TransformerDecoderLayer, activation=torch.tanh)
        ),
        ValueError,
        r"from_torch supports relu and gelu",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), BLOCKS)
def test_blocks(call, error, match):
    expect(call, error, match)


# ---------------------------------------------------------------- models
def translator():
    torch.manual_seed(0)
    cfg = EncoderDecoderConfig(13, 6, d_model=16, n_heads=2, n_layers=1, d_ff=32)
    return EncoderDecoder(cfg)


SRC = torch.randint(1, 13, (2, 5), generator=torch.Generator().manual_seed(0))
EMBED = TokenEmbedding(13, 16, 6, 0.0)

MODELS = [
    bad(
        "config-float",
        lambda: EncoderDecoderConfig(13.0, 6),
        TypeError,
        r"vocab_size must be an int",
    ),
    bad("config-0", lambda: EncoderDecoderConfig(13, 0), ValueError, r"max_len must"),
    bad(
        "config-pad", lambda: EncoderDecoderConfig(13, 6, pad_id=13), ValueError, "pad"
    ),
    bad("config-type", lambda: EncoderDecoder({"vocab_size": 3}), TypeError, r"cfg"),
    bad(
        "src-float",
        lambda: translator()(SRC.float(), SRC),
        TypeError,
        r"src must be \(B, S\) integer token ids",
    ),
    bad(
        "tgt-range",
        lambda: translator()(SRC, SRC + 12),
        ValueError,
        r"tgt holds token ids outside \[0, vocab_size=13\)",
    ),
    bad(
        "tgt-empty",
        lambda: translator()(SRC, SRC[:, :0]),
        ValueError,
        r"tgt has 0 positions, outside \[1, max_len=6\]",
    ),
    bad(
        "src-long",
        lambda: translator()(SRC.repeat(1, 2), SRC),
        ValueError,
        r"src has 10 positions",
    ),
    bad("batch", lambda: translator()(SRC, SRC[:1]), ValueError, r"different batch"),
    bad(
        "decode-memory",
        lambda: translator().decode(SRC, randn(2, 4, 16), SRC),
        ValueError,
        r"memory must have shape \(B, S, d_model\) = \(2, 5, 16\)",
    ),
    bad(
        "greedy-bos",
        lambda: translator().greedy_decode(SRC, 13, 2),
        ValueError,
        r"bos_id=13 is not a token id",
    ),
    bad(
        "greedy-steps",
        lambda: translator().greedy_decode(SRC, 1, 2, max_new_tokens=2.5),
        TypeError,
        r"max_new_tokens must be an int",
    ),
    bad(
        "embed-dropout",
        lambda: TokenEmbedding(13, 16, 6, 1.5),
        ValueError,
        r"dropout must be in \[0, 1\]",
    ),
    bad("embed-range", lambda: EMBED(SRC - 13), ValueError, r"idx holds token ids"),
    bad(
        "embed-long",
        lambda: EMBED(SRC.repeat(1, 2)),
        ValueError,
        r"idx has 10 positions, more than max_len=6",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), MODELS)
def test_models(call, error, match):
    expect(call, error, match)


# ---------------------------------------------------------------- position_lm
def lm(position="alibi", **kw):
    torch.manual_seed(0)
    cfg = PositionLMConfig(11, position, d_model=16, n_heads=2, n_layers=1, **kw)
    return PositionLM(cfg)


IDS = torch.randint(11, (2, 6), generator=torch.Generator().manual_seed(0))
PSA = PositionalSelfAttention(16, 2)

POSITION_LM = [
    bad("vocab-0", lambda: PositionLMConfig(0), ValueError, r"vocab_size must be"),
    bad("d_model-float", lambda: PositionLMConfig(5, d_model=64.0), TypeError, "d_m"),
    bad(
        "scheme",
        lambda: PositionLMConfig(5, "absolute"),
        ValueError,
        r"position='absolute' is not one of",
    ),
    bad(
        "indivisible",
        lambda: PositionLMConfig(5, d_model=30, n_heads=4),
        ValueError,
        r"d_model=30 is not divisible by n_heads=4",
    ),
    bad(
        "rope-odd-head",
        lambda: PositionLMConfig(5, "rope", d_model=12, n_heads=4),
        ValueError,
        r"d_head = d_model / n_heads = 3 must be even",
    ),
    bad(
        "t5-buckets",
        lambda: lm("t5", num_buckets=1),
        ValueError,
        r"num_buckets=1 is too small",
    ),
    bad("cfg-type", lambda: PositionLM({"vocab_size": 5}), TypeError, r"cfg must be"),
    bad("idx-float", lambda: lm()(IDS.float()), TypeError, r"idx must be an integer"),
    bad("idx-1d", lambda: lm()(IDS[0]), ValueError, r"idx must have shape \(B, T\)"),
    bad(
        "idx-too-big",
        lambda: lm()(IDS + 11),
        ValueError,
        r"idx holds token ids outside \[0, vocab_size=11\)",
    ),
    bad("idx-negative", lambda: lm()(IDS - 11), ValueError, r"idx holds token ids"),
    bad("idx-empty", lambda: lm()(IDS[:, :0]), ValueError, r"idx has no positions"),
    bad(
        "learned-long",
        lambda: lm("learned", max_len=4)(IDS),
        ValueError,
        r"sequence length 6 exceeds max_len=4",
    ),
    bad(
        "psa-width",
        lambda: PSA(randn(2, 5, 8)),
        ValueError,
        r"x must have shape \(B, T, d_model=16\)",
    ),
    bad("psa-int", lambda: PSA(X16.long()), TypeError, r"x must be a floating"),
    bad(
        "psa-bias-shape",
        lambda: PSA(X16, bias=torch.zeros(3, 5, 5)),
        ValueError,
        r"bias of shape \(3, 5, 5\) does not broadcast to \(B, H, T, T\)",
    ),
    bad("psa-bias-bool", lambda: PSA(X16, bias=bools(5, 5)), TypeError, r"bias must"),
]


@pytest.mark.parametrize(("call", "error", "match"), POSITION_LM)
def test_position_lm(call, error, match):
    expect(call, error, match)


# ---------------------------------------------------------------- probe
def probe_model():
    torch.manual_seed(0)
    return AttentionOnlyClassifier(ProbeConfig((5, 6), 8, 3, d_model=16, n_heads=2))


TOKENS = (torch.zeros(2, 4, dtype=torch.long), torch.ones(2, 4, dtype=torch.long))


def ablate(heads, mean=None, x=X16):
    def call():
        with ablate_heads(MHA, heads, mean):
            MHA(x)

    return call


WEIGHTS = torch.full((2, 3, 4, 4), 0.25)

PROBE = [
    bad("vocab-empty", lambda: ProbeConfig((), 4, 2), ValueError, r"vocab_sizes must"),
    bad("vocab-0", lambda: ProbeConfig((3, 0), 4, 2), ValueError, r"vocab_sizes\[1\]"),
    bad("vocab-float", lambda: ProbeConfig((3.0,), 4, 2), TypeError, r"vocab_sizes\["),
    bad("vocab-int", lambda: ProbeConfig(5, 4, 2), TypeError, r"vocab_sizes must be"),
    bad("max_len", lambda: ProbeConfig((3,), 0, 2), ValueError, r"max_len must be"),
    bad(
        "indivisible",
        lambda: ProbeConfig((3,), 4, 2, d_model=32, n_heads=3),
        ValueError,
        r"not divisible",
    ),
    bad("layers", lambda: ProbeConfig((3,), 4, 2, n_layers=0), ValueError, r"n_layers"),
    bad("cfg", lambda: AttentionOnlyClassifier("cfg"), TypeError, r"cfg must be a"),
    bad(
        "streams",
        lambda: probe_model()(TOKENS[0]),
        ValueError,
        r"expected 2 token tensors",
    ),
    bad(
        "float-ids",
        lambda: probe_model()(TOKENS[0].float(), TOKENS[1]),
        TypeError,
        r"tokens\[0\] must be an integer tensor",
    ),
    bad(
        "ids-range",
        lambda: probe_model()(TOKENS[0], TOKENS[1] + 5),
        ValueError,
        r"tokens\[1\] holds token ids outside \[0, vocab_size=6\)",
    ),
    bad(
        "ids-shapes",
        lambda: probe_model()(TOKENS[0], TOKENS[1][:, :3]),
        ValueError,
        r"tokens\[1\] has shape \(2, 3\), tokens\[0\] has \(2, 4\)",
    ),
    bad(
        "too-long",
        lambda: probe_model()(*(t.repeat(1, 3) for t in TOKENS)),
        ValueError,
        r"sequence length 12 exceeds max_len=8",
    ),
    bad(
        "no-positions",
        lambda: probe_model()(*(t[:, :0] for t in TOKENS)),
        ValueError,
        r"tokens have no positions",
    ),
    bad(
        "weights-ids",
        lambda: probe_model().attention_weights(TOKENS[0] - 1, TOKENS[1]),
        ValueError,
        r"tokens\[0\] holds token ids",
    ),
    bad(
        "record-type",
        lambda: record_heads(nn.Linear(2, 2)).__enter__(),
        TypeError,
        r"mha must be a MultiHeadAttention, got Linear",
    ),
    bad("head-range", ablate([4]), ValueError, r"head indices \[4\] out of range"),
    bad("head-float", ablate([0.5]), TypeError, r"heads must be an int"),
    bad("head-scalar", ablate(1), TypeError, r"heads must be an iterable"),
    bad("mean-int", ablate([0], torch.zeros(4, 1, 4).long()), TypeError, r"mean must"),
    bad(
        "mean-width",
        ablate([0], torch.zeros(4, 1, 3)),
        ValueError,
        r"mean of shape \(4, 1, 3\) does not broadcast to \(B, H=4, T, Dh=4\)",
    ),
    bad(
        "mean-length",
        ablate([0], torch.zeros(4, 3, 4)),
        ValueError,
        r"mean of shape \(4, 3, 4\) does not broadcast to the heads' outputs",
    ),
    bad(
        "on-3d",
        lambda: attention_on(WEIGHTS[0], torch.arange(4)),
        ValueError,
        r"weights must be \(B, H, T, S\)",
    ),
    bad(
        "on-int",
        lambda: attention_on(WEIGHTS.long(), torch.arange(4)),
        TypeError,
        r"weights must be a floating",
    ),
    bad(
        "on-float-index",
        lambda: attention_on(WEIGHTS, torch.arange(4.0)),
        TypeError,
        r"key_index must be an integer",
    ),
    bad(
        "on-index-shape",
        lambda: attention_on(WEIGHTS, torch.arange(5)),
        ValueError,
        r"key_index of shape \(5,\) does not broadcast to \(B, T\)",
    ),
    bad(
        "on-index-all-out",
        lambda: attention_on(WEIGHTS, -torch.ones(4, dtype=torch.long)),
        ValueError,
        r"key_index leaves out every query",
    ),
    bad(
        "on-index-range",
        lambda: attention_on(WEIGHTS, torch.arange(4) + 1),
        ValueError,
        r"key_index holds 4, but weights has only S=4 keys",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), PROBE)
def test_probe(call, error, match):
    expect(call, error, match)


# ---------------------------------------------------------------- recurrent
XT, HT = randn(2, 3), randn(2, 4)
W_IH, W_HH, B_H = randn(4, 3), randn(4, 4), randn(4)
RNN, UNROLLED_LSTM = VanillaRNN(3, 4), LSTM(3, 4)
SEQ = randn(2, 5, 3)


def step(**kw):
    args = {"x_t": XT, "h_prev": HT, "weight_ih": W_IH, "weight_hh": W_HH} | kw
    return lambda: rnn_step(**args)


def lstm(**kw):
    args = {
        "x_t": XT,
        "h_prev": HT,
        "c_prev": HT,
        "weight_ih": randn(16, 3),
        "weight_hh": randn(16, 4),
    } | kw
    return lambda: lstm_step(**args)


RECURRENT = [
    bad("step-int", step(x_t=XT.long()), TypeError, r"x_t must be a floating"),
    bad("step-1d", step(x_t=randn(3)), ValueError, r"x_t must have shape \(B, width"),
    bad("step-h-batch", step(h_prev=randn(3, 4)), ValueError, r"h_prev must have"),
    bad(
        "step-w_ih",
        step(weight_ih=randn(4, 5)),
        ValueError,
        r"weight_ih must have shape \(H, D\) = \(4, 3\) .* got \(4, 5\)",
    ),
    bad("step-w_hh", step(weight_hh=randn(4, 3)), ValueError, r"weight_hh must have"),
    bad("step-bias", step(bias_ih=randn(5)), ValueError, r"bias_ih must have shape"),
    bad(
        "step-dtype",
        step(weight_ih=W_IH.double()),
        TypeError,
        r"weight_ih has dtype torch.float64, x_t has torch.float32",
    ),
    bad(
        "step-nonlinearity",
        step(nonlinearity="sigmoid"),
        ValueError,
        r"nonlinearity must be one of",
    ),
    bad("lstm-c", lstm(c_prev=randn(2, 5)), ValueError, r"c_prev must have shape"),
    bad(
        "lstm-gates",
        lstm(weight_ih=W_IH),
        ValueError,
        r"weight_ih must have shape \(4H, D\) = \(16, 3\)",
    ),
    bad("rnn-0", lambda: VanillaRNN(0, 4), ValueError, r"d_input must be positive"),
    bad("rnn-float", lambda: VanillaRNN(3, 4.0), TypeError, r"d_hidden must be an"),
    bad(
        "rnn-nonlinearity",
        lambda: VanillaRNN(3, 4, "sigmoid"),
        ValueError,
        r"nonlinearity must be",
    ),
    bad(
        "rnn-width",
        lambda: RNN(randn(2, 5, 4)),
        ValueError,
        r"x must have shape \(B, T, d_input=3\)",
    ),
    bad("rnn-int", lambda: RNN(SEQ.long()), TypeError, r"x must be a floating"),
    bad("rnn-float64", lambda: RNN(SEQ.double()), TypeError, r"x has dtype"),
    bad(
        "rnn-h0",
        lambda: RNN(SEQ, randn(3, 4)),
        ValueError,
        r"h0 must have shape \(B, H\) = \(2, 4\)",
    ),
    bad("lstm-state", lambda: UNROLLED_LSTM(SEQ, HT), TypeError, r"state must be a"),
    bad(
        "lstm-state-c",
        lambda: UNROLLED_LSTM(SEQ, (HT, randn(2, 5))),
        ValueError,
        r"state\[1\] must have shape \(B, H\)",
    ),
    bad(
        "from-wrong-kind",
        lambda: VanillaRNN.from_torch(nn.LSTM(3, 4, batch_first=True)),
        TypeError,
        r"m must be an nn.RNN, got LSTM",
    ),
    bad(
        "from-layers",
        lambda: VanillaRNN.from_torch(nn.RNN(3, 4, 2, batch_first=True)),
        ValueError,
        r"num_layers=2",
    ),
    bad(
        "from-batch-first",
        lambda: LSTM.from_torch(nn.LSTM(3, 4)),
        ValueError,
        r"batch_first=False",
    ),
    bad("jac-fn", lambda: jacobian_norms(3, SEQ), TypeError, r"fn must be callable"),
    bad(
        "jac-int",
        lambda: jacobian_norms(lambda x: x[:, -1], SEQ.long()),
        TypeError,
        r"x must be a floating",
    ),
    bad(
        "jac-2d",
        lambda: jacobian_norms(lambda x: x, SEQ[0]),
        ValueError,
        r"x must have shape \(B, T, D\)",
    ),
    bad(
        "jac-empty",
        lambda: jacobian_norms(lambda x: x[:, -1], SEQ[:0]),
        ValueError,
        r"x has an empty batch",
    ),
    bad(
        "jac-output",
        lambda: jacobian_norms(lambda x: x, SEQ),
        ValueError,
        r"fn\(x\) must have shape \(B=2, K\)",
    ),
    bad(
        "radius-square",
        lambda: spectral_radius(randn(3, 4)),
        ValueError,
        r"weight must be a non-empty square matrix, got \(3, 4\)",
    ),
    bad("radius-empty", lambda: spectral_radius(randn(0, 0)), ValueError, r"weight"),
    bad(
        "radius-nan",
        lambda: spectral_radius(torch.full((2, 2), math.nan)),
        ValueError,
        r"weight holds NaN or inf",
    ),
    bad(
        "radius-int",
        lambda: spectral_radius(torch.eye(2).long()),
        TypeError,
        r"weight must be a floating",
    ),
    bad(
        "rescale-negative",
        lambda: rescale_spectral_radius(W_HH, -1.0),
        ValueError,
        r"radius must be non-negative",
    ),
    bad(
        "rescale-nan",
        lambda: rescale_spectral_radius(W_HH, math.nan),
        ValueError,
        r"radius must be",
    ),
    bad(
        "rescale-zero",
        lambda: rescale_spectral_radius(torch.zeros(3, 3), 1.0),
        ValueError,
        r"weight has spectral radius 0",
    ),
    bad("saved-fn", lambda: saved_tensor_bytes(None), TypeError, r"fn must be callab"),
    bad(
        "saved-exclude",
        lambda: saved_tensor_bytes(lambda: None, exclude=[1]),
        TypeError,
        r"exclude\[0\] must be a torch.Tensor",
    ),
    bad("lstm-clf-0", lambda: LSTMClassifier(0, 4), ValueError, r"vocab_size must"),
    bad(
        "lstm-clf-bias",
        lambda: LSTMClassifier(10, 4, forget_bias=math.nan),
        ValueError,
        r"forget_bias must be finite",
    ),
    bad(
        "lstm-clf-float",
        lambda: LSTMClassifier(10, 4)(torch.zeros(2, 3)),
        TypeError,
        r"tokens must be an integer tensor",
    ),
    bad(
        "lstm-clf-range",
        lambda: LSTMClassifier(10, 4)(torch.full((2, 3), 10)),
        ValueError,
        r"tokens holds token ids outside \[0, vocab_size=10\)",
    ),
    bad(
        "lstm-clf-empty",
        lambda: LSTMClassifier(10, 4)(torch.zeros(2, 0, dtype=torch.long)),
        ValueError,
        r"tokens has no positions",
    ),
    bad(
        "attn-clf-indivisible",
        lambda: AttentionClassifier(10, 4, d_model=30, n_heads=4),
        ValueError,
        r"divisible",
    ),
    bad(
        "attn-clf-negative",
        lambda: AttentionClassifier(10, 4)(torch.full((2, 3), -1)),
        ValueError,
        r"tokens holds token ids",
    ),
    bad(
        "attn-clf-empty",
        lambda: AttentionClassifier(10, 4)(torch.zeros(2, 0, dtype=torch.long)),
        ValueError,
        r"tokens has no positions",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), RECURRENT)
def test_recurrent(call, error, match):
    expect(call, error, match)


# ---------------------------------------------------------------- data
TASK = data.ToyTranslation()
GEN = torch.Generator().manual_seed(0)

DATA = [
    bad("lookup-batch", lambda: data.lookup_task(0, 2, 4, 3), ValueError, r"batch_s"),
    bad("lookup-float", lambda: data.lookup_task(2, 2.0, 4, 3), TypeError, r"n_pairs"),
    bad(
        "lookup-keys",
        lambda: data.lookup_task(2, 5, 4, 3),
        ValueError,
        r"n_pairs=5 needs at least as many keys, got n_keys=4",
    ),
    bad(
        "lookup-generator",
        lambda: data.lookup_task(2, 2, 4, 3, generator=0),
        TypeError,
        r"generator must be a torch.Generator",
    ),
    bad(
        "lookup-device",
        lambda: data.lookup_task(2, 2, 4, 3, device="nowhere"),
        ValueError,
        r"device='nowhere'",
    ),
    bad(
        "two-values",
        lambda: data.two_relation_task(2, 2, 4, 0),
        ValueError,
        r"n_values must be positive",
    ),
    bad(
        "two-keys-float",
        lambda: data.two_relation_task(2, 2, 4.0, 3),
        TypeError,
        r"n_keys must be an int",
    ),
    bad("recall-0", lambda: data.recall_task(2, 0), ValueError, r"distance must be"),
    bad("recall-float", lambda: data.recall_task(2, 2.5), TypeError, r"distance"),
    bad(
        "recall-generator",
        lambda: data.recall_task(2, 3, generator="seed"),
        TypeError,
        r"generator must be",
    ),
    bad("lag-0", lambda: data.lag_copy_task(2, 4, 5, lag=0), ValueError, r"lag must"),
    bad("lag-length", lambda: data.lag_copy_task(2, 4.0, 5), TypeError, r"length"),
    bad(
        "words-many",
        lambda: data.ToyTranslation(n_words=23),
        ValueError,
        r"n_words must lie in \[1, 22\]",
    ),
    bad(
        "words-float",
        lambda: data.ToyTranslation(n_words=2.0),
        TypeError,
        r"n_words must be an int",
    ),
    bad(
        "lengths",
        lambda: data.ToyTranslation(min_len=5, max_len=3),
        ValueError,
        r"min_len=5, max_len=3",
    ),
    bad("sample-0", lambda: TASK.sample(0), ValueError, r"batch_size must be"),
    bad("sample-float", lambda: TASK.sample(2.0), TypeError, r"batch_size must be an"),
    bad("sample-split", lambda: TASK.sample(2, "dev"), ValueError, r"split must be"),
    bad(
        "sample-empty-split",
        lambda: data.ToyTranslation(1, 1, 1).sample(2, "test"),
        ValueError,
        r"the 'test' split of .* is empty",
    ),
    bad(
        "sample-generator",
        lambda: TASK.sample(2, generator=3),
        TypeError,
        r"generator must be",
    ),
    bad(
        "text-2d",
        lambda: TASK.to_text(torch.zeros(2, 3, dtype=torch.long)),
        ValueError,
        r"ids must be one sequence \(T,\)",
    ),
    bad("text-float", lambda: TASK.to_text(torch.zeros(3)), TypeError, r"ids must be"),
    bad(
        "text-range",
        lambda: TASK.to_text(torch.tensor([1, 23])),
        ValueError,
        r"ids holds token ids outside \[0, vocab_size=23\)",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), DATA)
def test_data(call, error, match):
    expect(call, error, match)


# ---------------------------------------------------------------- train
LINEAR = nn.Linear(2, 1)


def batch(step):
    return torch.ones(4, 2), torch.zeros(4, 1)


def fit(model=LINEAR, get_batch=batch, loss_fn=nn.functional.mse_loss, **kw):
    return lambda: train.train(model, get_batch, loss_fn, **({"steps": 1} | kw))


LOGITS, TARGETS = randn(3, 4), torch.tensor([1, 0, 3])

TRAIN = [
    bad("model", fit(model=lambda x: x), TypeError, r"model must be an nn.Module"),
    bad("no-params", fit(model=nn.ReLU()), ValueError, r"model has no parameters"),
    bad("get_batch", fit(get_batch=[batch]), TypeError, r"get_batch must be callable"),
    bad("loss_fn", fit(loss_fn="mse"), TypeError, r"loss_fn must be callable"),
    bad("steps-0", fit(steps=0), ValueError, r"steps must be positive"),
    bad("steps-float", fit(steps=2.5), TypeError, r"steps must be an int"),
    bad("lr-negative", fit(lr=-1.0), ValueError, r"lr must be non-negative"),
    bad("lr-nan", fit(lr=math.nan), ValueError, r"lr must be"),
    bad("weight_decay", fit(weight_decay=-0.1), ValueError, r"weight_decay must be"),
    bad("max_grad_norm", fit(max_grad_norm=0.0), ValueError, r"max_grad_norm must"),
    bad("lr_lambda", fit(lr_lambda=0.5), TypeError, r"lr_lambda must be callable"),
    bad("device", fit(device="nowhere"), ValueError, r"device='nowhere'"),
    bad(
        "batch-format",
        fit(get_batch=lambda step: torch.ones(4, 2)),
        TypeError,
        r"get_batch\(0\) must return \(inputs, targets\)",
    ),
    bad(
        "loss-shape",
        fit(loss_fn=lambda out, t: (out - t).abs()),
        ValueError,
        r"loss_fn must return a scalar tensor, got \(4, 1\)",
    ),
    bad(
        "acc-shapes",
        lambda: train.accuracy(LOGITS, TARGETS[:2]),
        ValueError,
        r"logits \(3, 4\) and targets \(2,\) do not match",
    ),
    bad(
        "acc-float-targets",
        lambda: train.accuracy(LOGITS, TARGETS.float()),
        TypeError,
        r"targets must be an integer tensor",
    ),
    bad(
        "acc-empty",
        lambda: train.accuracy(LOGITS[:0], TARGETS[:0]),
        ValueError,
        r"no position to score: targets \(0,\)",
    ),
    bad(
        "acc-all-ignored",
        lambda: train.accuracy(LOGITS, torch.full((3,), -100), ignore_index=-100),
        ValueError,
        r"every target equals ignore_index=-100",
    ),
    bad(
        "acc-ignore-float",
        lambda: train.accuracy(LOGITS, TARGETS, ignore_index=1.5),
        TypeError,
        r"ignore_index must be an int",
    ),
    bad("noam-0", lambda: train.noam_lr_lambda(0, 10), ValueError, r"d_model must be"),
    bad("noam-warmup", lambda: train.noam_lr_lambda(64, 2.5), TypeError, r"warmup"),
    bad("noam-scale", lambda: train.noam_lr_lambda(64, 10, 0.0), ValueError, r"scale"),
    bad(
        "seq-float",
        lambda: train.sequence_accuracy(torch.zeros(2, 3), TARGETS[None], 0),
        TypeError,
        r"predicted must be an integer tensor",
    ),
    bad(
        "seq-batch",
        lambda: train.sequence_accuracy(TARGETS[None], TARGETS[None].repeat(2, 1), 0),
        ValueError,
        r"must be \(B, T\) with the same B",
    ),
    bad(
        "seq-empty",
        lambda: train.sequence_accuracy(TARGETS[None][:0], TARGETS[None][:0], 0),
        ValueError,
        r"no sequence to score",
    ),
    bad(
        "seq-pad",
        lambda: train.sequence_accuracy(TARGETS[None], TARGETS[None], 0.5),
        TypeError,
        r"pad_id must be an int",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), TRAIN)
def test_train(call, error, match):
    expect(call, error, match)


# ---------------------------------------------------------------- device, plot, source
DEVICE_PLOT_SOURCE = [
    bad("seed-float", lambda: device.set_seed(1.5), TypeError, r"seed must be an int"),
    bad("seed-str", lambda: device.set_seed("1"), TypeError, r"seed must be an int"),
    bad("seed-bool", lambda: device.set_seed(True), TypeError, r"seed .*bool"),
    bad("autocast-name", lambda: device.autocast("gpu9"), ValueError, r"device='gpu9"),
    bad("autocast-none", lambda: device.autocast(None), TypeError, r"device must be"),
    bad("autocast-float", lambda: device.autocast(3.5), TypeError, r"device must be"),
    bad(
        "heatmap-3d",
        lambda: plot.attention_heatmap(torch.zeros(2, 3, 3)),
        ValueError,
        r"weights must be a non-empty \(Tq, Tk\) matrix, got shape \(2, 3, 3\)",
    ),
    bad(
        "heatmap-empty",
        lambda: plot.attention_heatmap(torch.zeros(0, 3)),
        ValueError,
        r"weights must be a non-empty",
    ),
    bad(
        "heatmap-nan",
        lambda: plot.attention_heatmap(torch.full((2, 2), math.nan)),
        ValueError,
        r"weights holds NaN or inf",
    ),
    bad(
        "heatmap-strings",
        lambda: plot.attention_heatmap([["a", "b"]]),
        TypeError,
        r"weights must be a tensor, an array or a list of numbers",
    ),
    bad(
        "heatmap-complex",
        lambda: plot.attention_heatmap(torch.zeros(2, 2, dtype=torch.complex64)),
        TypeError,
        r"weights must hold real numbers",
    ),
    bad(
        "heatmap-query-tokens",
        lambda: plot.attention_heatmap(torch.eye(2), query_tokens=["a"]),
        ValueError,
        r"query_tokens has 1 labels for 2",
    ),
    bad(
        "heatmap-key-tokens",
        lambda: plot.attention_heatmap(torch.eye(2), key_tokens=["a", "b", "c"]),
        ValueError,
        r"key_tokens has 3 labels",
    ),
    bad(
        "heatmap-vmax",
        lambda: plot.attention_heatmap(torch.eye(2), vmax=-1.0),
        ValueError,
        r"vmax must be positive",
    ),
    bad(
        "lines-ys",
        lambda: plot.plot_lines([1, 2], [[1, 2]], "x", "y"),
        TypeError,
        r"ys must map labels to values",
    ),
    bad(
        "lines-shape",
        lambda: plot.plot_lines([1, 2], {"a": [1, 2, 3]}, "x", "y"),
        ValueError,
        r"'a' has shape \(3,\), x has shape \(2,\)",
    ),
    bad(
        "lines-x",
        lambda: plot.plot_lines(["a", "b"], {"a": [1, 2]}, "x", "y"),
        TypeError,
        r"x must be a tensor",
    ),
    bad(
        "source-object",
        lambda: source.source_of(1),
        ValueError,
        r"cannot find the source of 1",
    ),
    bad(
        "source-builtin",
        lambda: source.show_source(len),
        ValueError,
        r"cannot find the source of <built-in function len>",
    ),
    bad("source-text", lambda: source.Source(3), TypeError, r"text must be a str"),
]


@pytest.mark.parametrize(("call", "error", "match"), DEVICE_PLOT_SOURCE)
def test_device_plot_source(call, error, match):
    try:
        expect(call, error, match)
    finally:
        plt.close("all")
