"""The table of ``test_public_api.py``: one valid call per public name.

An ``Entry`` gives the call and its valid arguments; the test derives the bad
values. ``accepts`` lists the (argument, bad-value label) pairs that are right on
purpose, each with its reason; ``skip`` lists arguments not fuzzed, with the reason
(duck-typed objects whose only check is that they work). ``slow`` says why a valid
call is not run here (then the test still sends every bad value, which must be
refused at once). Records (result dataclasses) are listed in ``RECORDS``.
"""

from __future__ import annotations

import functools
import inspect
import math
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

import transformer_book.models.kv_cache  # noqa: F401  (M.kv_cache below)
from transformer_book import (
    alt_text,
    attention,
    blocks,
    checkpoints,
    classifiers,
    concepts,
    corpus,
    data,
    decision,
    device,
    distributed,
    efficient,
    exercises,
    measure,
    models,
    plot,
    position_lm,
    positional,
    pretrained,
    probe,
    recurrent,
    source,
    speed,
    tokenizer,
    train,
    vision,
)
from transformer_book.experiments import (
    bert_heads,
    efficiency,
    extrapolation,
    feed_forward,
    heads,
    lookup,
    one_page,
    pretraining,
    recall,
    scaling,
    translation,
    variants,
    variants_probes,
    variants_uses,
)
from transformer_book.experiments import vision as exp_vision


@dataclass
class Entry:
    target: Callable  # whose signature gives the annotations
    call: Callable  # called with the keyword arguments
    args: Callable[[], dict]  # fresh valid keyword arguments
    accepts: dict = field(default_factory=dict)  # (arg, label) -> why it is right
    skip: dict = field(default_factory=dict)  # arg -> why it is not fuzzed
    slow: str | None = None  # why the valid call is not run here
    valid_call_only: str | None = None  # why no bad values are generated
    time: float = 60.0  # seconds allowed for the valid call (a loaded machine)

    def none_default(self) -> set[str]:
        """The arguments whose default is None (so None is a valid value)."""
        target = self.target
        if isinstance(target, classmethod | staticmethod):
            target = target.__func__
        params = inspect.signature(target).parameters
        return {name for name, p in params.items() if p.default is None}

    def hints(self) -> dict[str, str]:
        target = self.target
        if isinstance(target, classmethod | staticmethod):
            target = target.__func__
        params = inspect.signature(target).parameters
        return {
            name: p.annotation if isinstance(p.annotation, str) else ""
            for name, p in params.items()
            if p.annotation is not inspect.Parameter.empty
        }


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, generator=gen())


def ids(*shape, high: int = 10) -> torch.Tensor:
    return torch.randint(high, shape, generator=gen())


def fn(target, accepts=None, skip=None, slow=None, only=None, time=60.0, **kwargs):
    """An entry for a function (or class) called with ``kwargs``."""
    return Entry(
        target,
        target,
        lambda: {k: (v() if isinstance(v, Lazy) else v) for k, v in kwargs.items()},
        accepts or {},
        skip or {},
        slow,
        only,
        time,
    )


def method(cls, name, make, accepts=None, skip=None, slow=None, only=None, **kwargs):
    """An entry for ``make().name(**kwargs)``; ``make`` builds the object."""
    target = inspect.getattr_static(cls, name)

    def call(**kw):
        return getattr(make(), name)(**kw)

    return Entry(
        target,
        call,
        lambda: {k: (v() if isinstance(v, Lazy) else v) for k, v in kwargs.items()},
        accepts or {},
        skip or {},
        slow,
        only,
    )


class Lazy:
    """A value built at its first call (too slow to build at import), then kept:
    every bad value is derived from it, never written into it."""

    def __init__(self, make):
        self.make = make

    @functools.cache  # noqa: B019 - one value per Lazy, for the whole session
    def __call__(self):
        return self.make()


# ---------------------------------------------------------------- shared objects


@functools.cache
def tiny_gpt() -> models.GPT:
    torch.manual_seed(0)
    return models.GPT(models.GPTConfig(vocab_size=11, max_len=8, d_model=8, n_heads=2))


@functools.cache
def tiny_bert() -> models.BERT:
    torch.manual_seed(0)
    return models.BERT(
        models.BERTConfig(vocab_size=11, max_len=8, d_model=8, n_heads=2)
    )


@functools.cache
def tiny_encdec() -> models.EncoderDecoder:
    torch.manual_seed(0)
    cfg = models.EncoderDecoderConfig(vocab_size=11, max_len=8, d_model=8, n_heads=2)
    return models.EncoderDecoder(cfg)


@functools.cache
def tiny_t5() -> models.T5:
    torch.manual_seed(0)
    return models.T5(models.T5Config(vocab_size=11, max_len=8, d_model=8, n_heads=2))


@functools.cache
def bpe():
    return tokenizer.get_tokenizer()


@functools.cache
def chars():
    return tokenizer.char_tokenizer()


@functools.cache
def minilm():
    return pretrained.load_minilm()


@functools.cache
def tiny_vit() -> vision.ViT:
    torch.manual_seed(0)
    return vision.ViT(vision.ViTConfig())


@functools.cache
def tiny_dt() -> decision.DecisionTransformer:
    torch.manual_seed(0)
    return decision.DecisionTransformer(decision.DecisionConfig(d_model=8, d_ff=8))


@functools.cache
def tiny_probe():
    torch.manual_seed(0)
    return probe.AttentionOnlyClassifier(
        probe.ProbeConfig(vocab_sizes=(5, 6), max_len=4, n_classes=3)
    )


def mha() -> attention.MultiHeadAttention:
    torch.manual_seed(0)
    return attention.MultiHeadAttention(8, 2)


SEEDS_TEST = "trains for seconds: run by tests/test_experiments_{}.py (make seeds)"
RESULT = object()  # stands for a slow run's result record (the valid call is slow)


def stub(*args, **kwargs):
    raise NotImplementedError


IMAGES = torch.rand(2, 1, 8, 8, generator=gen())
X = randn(2, 5, 8)  # (B, T, D)
Q, K, V = randn(2, 5, 4), randn(2, 6, 4), randn(2, 6, 3)
Q4, K4, V4 = randn(1, 2, 5, 4), randn(1, 2, 6, 4), randn(1, 2, 6, 4)
STREAM = torch.arange(40) % 11
SEED0 = {("seed", "zero"): "seed 0 is a seed"}
ANY_SEED = {**SEED0, ("seed", "negative"): "any int seeds a generator (mod 2**32)"}
ZERO_OK = "0 is in the documented domain"
EMPTY_T = "no positions: an empty bias of the right shape"
EMPTY_BATCH = "an empty batch gives an empty result of the right shape"
PASSED_ON = "an argument passed on to fn: fn checks it"
NO_DEVICE = "builds tensors on the given device; meta is a device"


def batched(*names, empty=("v",)):
    """(..., T, D) arguments: leading batch axes broadcast, so a tensor with one
    more or one fewer of them is another valid call; an empty value width (Dv = 0)
    gives an empty output."""
    out = {
        (n, r): "(..., T, D): leading batch axes broadcast"
        for n in names
        for r in ("rank+1", "rank-1")
    }
    out.update({(n, "empty"): "Dv = 0 gives an empty output" for n in empty})
    return out


def rewrite(*labels):
    return {lab: "owned by the decode rewrite (issue 28)" for lab in labels}


# ---------------------------------------------------------------- records

RECORDS = {
    name: "a result record: fields are written by the function that returns it"
    for name in (
        "data.tasks.LookupBatch",
        "data.tasks.TwoRelationBatch",
        "data.tasks.RecallBatch",
        "data.tasks.LagCopyBatch",
        "data.translation.TranslationBatch",
        "decision.corridor.Trajectories",
        "decision.training.DecisionRun",
        "distributed.StepResult",
        "experiments.bert_heads.grammar.Parsed",
        "experiments.bert_heads.study.HeadsStudy",
        "experiments.extrapolation.ExtrapolationResult",
        "experiments.feed_forward.FFNResult",
        "experiments.heads.HeadsResult",
        "experiments.lookup.LookupResult",
        "experiments.one_page.ToyRun",
        "experiments.pretraining.TopicData",
        "experiments.pretraining.SampleEfficiency",
        "experiments.scaling.PowerLawFit",
        "experiments.scaling.OffsetPowerLawFit",
        "experiments.scaling.ScalingRow",
        "experiments.scaling.ScalingRun",
        "experiments.translation.TranslationRun",
        "experiments.variants.VariantsRun",
        "experiments.variants_probes.ProbeSet",
        "experiments.vision.DigitsResult",
        "experiments.vision.ClsMaps",
        "source.Source",
    )
}

# ---------------------------------------------------------------- the table

TABLE: dict[str, Entry] = {}


def add(key, entry):
    assert key not in TABLE, key
    TABLE[key] = entry


def custom(target, call, accepts=None, skip=None, slow=None, only=None, **kwargs):
    """An entry whose call is not ``target(**kwargs)`` (varargs, a context manager)."""
    entry = fn(target, accepts, skip, slow, only, **kwargs)
    entry.call = call
    return entry


def entered(cm_factory):
    """Call a context-manager factory and enter and leave what it returns."""

    def call(**kw):
        with cm_factory(**kw):
            pass

    return call


A = attention
MHA = attention.MultiHeadAttention
MASK_TS = torch.ones(5, 6, dtype=torch.bool)
RESHAPE_ANY = {
    (a, r): "a reshape: any dtype, size or device"
    for a in ("images", "patches")
    for r in ("dtype torch.int64", "empty", "meta device")
}
RESHAPE = {("x", "meta device"): "a reshape: no module parameter is read"}
MASK_OK = {
    (m, r): "a mask of one more axis (read as (B, T, S)) or one fewer broadcasts"
    for m in ("mask", "self_mask", "memory_mask")
    for r in ("rank+1", "rank-1")
}

# ---- attention (Chapters 2, 3)
add(
    "attention.scaled_dot_product_attention",
    fn(
        A.scaled_dot_product_attention,
        q=Q,
        k=K,
        v=V,
        mask=MASK_TS,
        bias=torch.zeros(5, 6),
        dropout_p=0.0,
        accepts=batched("q", "k", "v", "mask", "bias"),
    ),
)
add(
    "attention.fused_scaled_dot_product_attention",
    fn(
        A.fused_scaled_dot_product_attention,
        q=Q,
        k=K,
        v=V,
        mask=MASK_TS,
        accepts=batched("q", "k", "v", "mask"),
    ),
)
add("attention.causal_mask", fn(A.causal_mask, t=4, device="cpu"))
add(
    "attention.padding_mask",
    fn(
        A.padding_mask,
        lengths=torch.tensor([2, 3]),
        max_len=4,
        accepts={
            ("lengths", "list"): "converted with torch.as_tensor (documented)",
            ("lengths", "empty"): "no sequences: a (0, 1, max_len) mask",
        },
    ),
)
add(
    "attention.MultiHeadAttention",
    fn(
        MHA,
        d_model=8,
        n_heads=2,
        dropout=0.1,
        n_kv_heads=1,
        accepts={("dropout", "zero"): ZERO_OK},
    ),
)
add(
    "attention.MultiHeadAttention.split_heads",
    method(MHA, "split_heads", mha, x=X, n_heads=2, accepts=RESHAPE),
)
add(
    "attention.MultiHeadAttention.attend",
    method(
        MHA,
        "attend",
        mha,
        q=Q4,
        k=K4,
        v=V4,
        mask=torch.ones(5, 6, dtype=torch.bool),
        need_weights=False,
        accepts=MASK_OK,
    ),
)
add(
    "attention.MultiHeadAttention.merge_heads",
    method(MHA, "merge_heads", mha, x=randn(2, 2, 5, 4), accepts=RESHAPE),
)
add(
    "attention.MultiHeadAttention.forward",
    method(
        MHA,
        "forward",
        mha,
        query=X,
        key=randn(2, 6, 8),
        value=randn(2, 6, 8),
        mask=MASK_TS,
        accepts={
            ("mask", "rank+1"): "(1, T, S) is read as (B, T, S) and broadcasts",
            ("mask", "rank-1"): "(S,) broadcasts to (B, H, T, S)",
        },
    ),
)
add(
    "attention.MultiHeadAttention.from_torch",
    method(MHA, "from_torch", lambda: MHA, m=nn.MultiheadAttention(8, 2)),
)

# ---- blocks (Chapter 5)
B = blocks
add(
    "blocks.FeedForward",
    fn(
        B.FeedForward,
        d_model=8,
        d_ff=16,
        dropout=0.1,
        activation="gelu",
        accepts={("dropout", "zero"): ZERO_OK},
    ),
)
add(
    "blocks.FeedForward.forward",
    method(
        B.FeedForward,
        "forward",
        lambda: B.FeedForward(8, 16),
        x=X,
        accepts=batched("x", empty=()),
    ),
)
ENC = dict(
    d_model=8, n_heads=2, d_ff=16, dropout=0.1, activation="gelu", layer_norm_eps=1e-5
)
add(
    "blocks.EncoderBlock",
    fn(B.EncoderBlock, n_kv_heads=1, **ENC, accepts={("dropout", "zero"): ZERO_OK}),
)
add(
    "blocks.EncoderBlock.forward",
    method(
        B.EncoderBlock,
        "forward",
        lambda: B.EncoderBlock(8, 2, 16),
        x=X,
        mask=torch.ones(5, 5, dtype=torch.bool),
        accepts=MASK_OK,
    ),
)
add(
    "blocks.EncoderBlock.from_torch",
    method(
        B.EncoderBlock,
        "from_torch",
        lambda: B.EncoderBlock,
        m=nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
    ),
)
add(
    "blocks.DecoderBlock",
    fn(B.DecoderBlock, **ENC, accepts={("dropout", "zero"): ZERO_OK}),
)
add(
    "blocks.DecoderBlock.forward",
    method(
        B.DecoderBlock,
        "forward",
        lambda: B.DecoderBlock(8, 2, 16),
        x=X,
        memory=randn(2, 6, 8),
        self_mask=torch.ones(5, 5, dtype=torch.bool),
        memory_mask=MASK_TS,
        accepts=MASK_OK,
    ),
)
add(
    "blocks.DecoderBlock.from_torch",
    method(
        B.DecoderBlock,
        "from_torch",
        lambda: B.DecoderBlock,
        m=nn.TransformerDecoderLayer(8, 2, 16, batch_first=True),
    ),
)
add(
    "blocks.encoder_stack",
    fn(
        B.encoder_stack,
        cfg=models.GPTConfig(vocab_size=5, max_len=4, d_model=8, n_heads=2),
    ),
)

# ---- classifiers (Chapter 1)
add(
    "classifiers.LSTMClassifier",
    fn(
        classifiers.LSTMClassifier,
        vocab_size=5,
        n_classes=3,
        d_model=8,
        forget_bias=1.0,
        accepts={("forget_bias", "zero"): ZERO_OK},
    ),
)
add(
    "classifiers.LSTMClassifier.forward",
    method(
        classifiers.LSTMClassifier,
        "forward",
        lambda: classifiers.LSTMClassifier(5, 3, 8),
        tokens=ids(2, 4, high=5),
    ),
)
add(
    "classifiers.AttentionClassifier",
    fn(
        classifiers.AttentionClassifier, vocab_size=5, n_classes=3, d_model=8, n_heads=2
    ),
)
add(
    "classifiers.AttentionClassifier.forward",
    method(
        classifiers.AttentionClassifier,
        "forward",
        lambda: classifiers.AttentionClassifier(5, 3, 8, 2),
        tokens=ids(2, 4, high=5),
    ),
)

# ---- concepts
add(
    "concepts.Question",
    fn(
        concepts.Question,
        prompt="Which?",
        options=("a", "b"),
        answer=0,
        why=("yes", "no"),
        accepts={
            ("prompt", "unknown str"): "any question",
            ("answer", "zero"): "option 0",
        },
    ),
)
add("concepts.concept_check", fn(concepts.concept_check, section="2.1", lang="en"))
add("concepts.all_checks", fn(concepts.all_checks))
add("concepts.reader_texts", fn(concepts.reader_texts))

# ---- corpus (Chapter 6)
add("corpus.load_topics", fn(corpus.load_topics))
add("corpus.paragraphs", fn(corpus.paragraphs, split="heldout"))
add("corpus.corpus_text", fn(corpus.corpus_text, split="heldout"))
add("corpus.sentences", fn(corpus.sentences, split="heldout", min_words=3))
add(
    "corpus.topic_sentences",
    fn(
        corpus.topic_sentences,
        split="test",
        topics=("compound", "debugger"),
        min_words=3,
    ),
)

# ---- data (Chapters 1-5)
TASK = dict(
    batch_size=2, n_pairs=3, n_keys=5, n_values=4, generator=gen(), device="cpu"
)
add("data.tasks.lookup_task", fn(data.lookup_task, **TASK))
add("data.tasks.two_relation_task", fn(data.two_relation_task, **TASK))
add(
    "data.tasks.recall_task",
    fn(
        data.recall_task,
        batch_size=2,
        distance=3,
        n_symbols=4,
        n_fillers=4,
        generator=gen(),
        device="cpu",
    ),
)
add(
    "data.tasks.lag_copy_task",
    fn(
        data.lag_copy_task,
        batch_size=2,
        length=5,
        vocab_size=4,
        lag=1,
        generator=gen(),
        device="cpu",
    ),
)
add(
    "data.translation.ToyTranslation",
    fn(data.ToyTranslation, n_words=5, min_len=2, max_len=4),
)
add(
    "data.translation.TranslationBatch.teacher_forcing",
    method(
        data.TranslationBatch,
        "teacher_forcing",
        lambda: data.ToyTranslation().sample(2, generator=gen()),
    ),
)
add(
    "data.translation.ToyTranslation.to_text",
    method(
        data.ToyTranslation,
        "to_text",
        data.ToyTranslation,
        ids=data.ToyTranslation().sample(2, generator=gen()).src[0],
        accepts={("ids", "empty"): "an empty sequence is no tokens: []"},
    ),
)
add(
    "data.translation.ToyTranslation.sample",
    method(
        data.ToyTranslation,
        "sample",
        data.ToyTranslation,
        batch_size=2,
        generator=gen(),
        split="train",
        device="cpu",
    ),
)

# ---- decision (Chapter 8)
D = decision
add("decision.corridor.max_return", fn(D.max_return, length=5, horizon=13))
add(
    "decision.corridor.optimal_expected_return",
    fn(
        D.optimal_expected_return,
        length=5,
        horizon=3,
        slip=0.1,
        accepts={("slip", "zero"): "no slip: the deterministic corridor"},
    ),
)
add(
    "decision.corridor.corridor_step",
    fn(
        D.corridor_step,
        positions=torch.tensor([0, 4]),
        actions=torch.tensor([2, 0]),
        generator=gen(),
        slip=0.1,
        length=5,
        accepts={("slip", "zero"): "no slip"},
    ),
)
add(
    "decision.corridor.returns_to_go",
    fn(
        D.returns_to_go,
        rewards=torch.tensor([[0.0, 1.0, 1.0]]),
        gamma=0.9,
        accepts={
            **batched("rewards", empty=()),
            ("rewards", "empty"): "no steps: no returns",
        },
    ),
)
add(
    "decision.corridor.offline_dataset",
    fn(
        D.offline_dataset,
        n_trajectories=4,
        seed=0,
        random_share=0.5,
        accepts={**SEED0, ("random_share", "zero"): "no random policy: all scripted"},
    ),
)
add(
    "decision.model.DecisionConfig",
    fn(
        D.DecisionConfig,
        n_states=5,
        n_actions=3,
        horizon=13,
        return_scale=10.0,
        d_model=8,
        n_heads=2,
        n_layers=1,
        d_ff=8,
        dropout=0.1,
        accepts={("dropout", "zero"): ZERO_OK},
    ),
)
add(
    "decision.model.DecisionTransformer",
    fn(D.DecisionTransformer, cfg=D.DecisionConfig(d_model=8, d_ff=8)),
)
RTG = torch.tensor([[2.0, 1.0, 1.0]])
add(
    "decision.model.DecisionTransformer.forward",
    method(
        D.DecisionTransformer,
        "forward",
        tiny_dt,
        returns_to_go=RTG,
        states=torch.tensor([[0, 1, 2]]),
        actions=torch.tensor([[2, 2, 2]]),
        timesteps=torch.tensor([[0, 1, 2]]),
    ),
)
add(
    "decision.training.train_decision_transformer",
    fn(
        D.train_decision_transformer,
        seed=0,
        steps=2,
        data=Lazy(lambda: D.offline_dataset(8)),
        batch_size=2,
        lr=1e-3,
        cfg=D.DecisionConfig(d_model=8, d_ff=8),
        device="cpu",
        accepts=SEED0,
    ),
)
add(
    "decision.training.rollout",
    fn(
        D.rollout,
        model=Lazy(tiny_dt),
        target_return=[2.0, 4.0],
        n_episodes=1,
        seed=0,
        accepts=SEED0,
        slow="plays whole episodes: tests/test_decision.py",
    ),
)
add(
    "decision.training.rank_correlation",
    fn(
        D.rank_correlation,
        x=torch.tensor([1.0, 2.0, 3.0]),
        y=torch.tensor([1.0, 3.0, 2.0]),
    ),
)
add(
    "decision.training.run_decision",
    fn(
        D.run_decision,
        seed=0,
        steps=2,
        targets=(2.0, 4.0),
        n_episodes=2,
        device="cpu",
        slow=SEEDS_TEST.format("decision"),
        accepts=SEED0,
    ),
)
add(
    "decision.training.decision_claims",
    fn(
        D.decision_claims,
        run=RESULT,
        slow=SEEDS_TEST.format("decision"),
    ),
)

# ---- device
add("device.get_device", fn(device.get_device))
add("device.set_seed", fn(device.set_seed, seed=0, accepts=ANY_SEED))
add("device.autocast", custom(device.autocast, entered(device.autocast), device="cpu"))

# ---- distributed (Chapter 7)
add("distributed.tiny_gpt", fn(distributed.tiny_gpt))
add(
    "distributed.token_batch",
    fn(
        distributed.token_batch,
        batch_size=2,
        seed=0,
        cfg=distributed.TINY_GPT,
        accepts=SEED0,
    ),
)
add(
    "distributed.next_token_loss",
    fn(
        distributed.next_token_loss,
        model=Lazy(distributed.tiny_gpt),
        batch=Lazy(distributed.token_batch),
    ),
)
add(
    "distributed.ddp_step",
    fn(
        distributed.ddp_step,
        model_fn=distributed.tiny_gpt,
        batch=Lazy(distributed.token_batch),
        world_size=2,
        lr=0.1,
        seed=0,
        loss_fn=distributed.next_token_loss,
        dtype=torch.float32,
        timeout=60.0,
        slow="starts two processes (tests/test_distributed.py)",
        accepts=SEED0,
    ),
)
add(
    "distributed.single_process_step",
    fn(
        distributed.single_process_step,
        model_fn=distributed.tiny_gpt,
        batch=Lazy(distributed.token_batch),
        lr=0.1,
        seed=0,
        loss_fn=distributed.next_token_loss,
        dtype=torch.float32,
        accepts=SEED0,
    ),
)

# ---- efficient (Chapter 7)
E = efficient
ROWS = dict(
    row_max=torch.full((2, 5, 1), -math.inf),
    row_sum=torch.zeros(2, 5, 1),
    acc=torch.zeros(2, 5, 3),
    scores=randn(2, 5, 6),
    v_block=V,
)
add(
    "efficient.tiled.online_softmax_update",
    fn(
        E.online_softmax_update,
        **ROWS,
        accepts=batched("row_max", "row_sum", "acc", "scores", "v_block", empty=()),
    ),
)
add(
    "efficient.tiled.blockwise_attention",
    fn(
        E.blockwise_attention,
        q=Q,
        k=K,
        v=V,
        mask=MASK_TS,
        block_size=2,
        accepts={
            **batched("q", "k", "v", "mask"),
            ("block_size", "int"): "one size for both",
        },
    ),
)
add(
    "efficient.sparse.sliding_window_mask",
    fn(E.sliding_window_mask, t=5, window=2, device="cpu"),
)
add(
    "efficient.sparse.block_sparse_mask",
    fn(
        E.block_sparse_mask,
        t=8,
        block=2,
        n_global=1,
        causal=True,
        device="cpu",
        accepts={("n_global", "zero"): "no global tokens"},
    ),
)
add(
    "efficient.linformer.LinformerAttention",
    fn(E.LinformerAttention, d_model=8, n_heads=2, seq_len=6, k=3),
)
add(
    "efficient.linformer.LinformerAttention.forward",
    method(
        E.LinformerAttention,
        "forward",
        lambda: E.LinformerAttention(8, 2, 6, 3),
        x=randn(2, 6, 8),
    ),
)
add(
    "efficient.performer.orthogonal_random_features",
    fn(E.orthogonal_random_features, n_features=6, d=4, generator=gen(), device="cpu"),
)
FEAT = E.orthogonal_random_features(6, 4, gen())
add(
    "efficient.performer.positive_random_features",
    fn(E.positive_random_features, x=Q, features=FEAT, accepts=batched("x", empty=())),
)
add(
    "efficient.performer.performer_attention",
    fn(
        E.performer_attention,
        q=Q,
        k=K,
        v=V,
        features=FEAT,
        causal=False,
        accepts=batched("q", "k", "v"),
    ),
)
add(
    "efficient.performer.PerformerAttention",
    fn(
        E.PerformerAttention,
        d_model=8,
        n_heads=2,
        n_features=6,
        causal=True,
        seed=0,
        accepts=ANY_SEED,
    ),
)
add(
    "efficient.performer.PerformerAttention.redraw",
    method(
        E.PerformerAttention,
        "redraw",
        lambda: E.PerformerAttention(8, 2, 6),
        seed=1,
        accepts=ANY_SEED,
    ),
)
add(
    "efficient.performer.PerformerAttention.forward",
    method(E.PerformerAttention, "forward", lambda: E.PerformerAttention(8, 2, 6), x=X),
)
add("efficient.cost.attention_flops", fn(E.attention_flops, t=8, d_model=8, n_heads=2))
add(
    "efficient.cost.flash_block_sizes",
    fn(E.flash_block_sizes, sram_bytes=4096, d_head=8, dtype_bytes=2),
)
add(
    "efficient.cost.attention_memory_traffic",
    fn(E.attention_memory_traffic, t=8, d_head=4, sram_bytes=4096, dtype_bytes=2),
)
add(
    "efficient.cost.blockwise_attention_traffic",
    fn(
        E.blockwise_attention_traffic,
        q=Q,
        k=K,
        v=V,
        mask=MASK_TS,
        block_size=2,
        accepts={
            **batched("q", "k", "v", "mask"),
            ("block_size", "int"): "one size for both",
        },
    ),
)

# ---- exercises: each checker takes the reader's function
# (the answer checkers take numbers, tables and conclusions: their valid and wrong
# answers are their own tests', tests/test_exercises_*.py)
for _name in exercises.__all__:
    _check = getattr(exercises, _name)
    _key = f"{_check.__module__.removeprefix('transformer_book.')}.{_name}"
    _params = list(inspect.signature(_check).parameters)
    if _params == ["fn"]:
        add(_key, fn(_check, fn=stub))
    else:
        _entry = fn(_check, **dict.fromkeys(_params, ...))
        _entry.valid_call_only = "a reader's answers: tests/test_exercises_*.py"
        add(_key, _entry)

# ---- experiments: each chapter's headline experiment. The runs take seconds to
# minutes: their valid calls are the seeds tests (tests/test_experiments_*.py);
# here every bad value must be refused before any training starts.
EF = efficiency
add(
    "experiments.efficiency.kv_cache_bytes",
    fn(
        EF.kv_cache_bytes,
        cfg=models.GPTConfig(vocab_size=5, max_len=4),
        tokens=8,
        dtype_bytes=2,
        accepts={("tokens", "zero"): "an empty cache holds 0 bytes"},
    ),
)
add(
    "experiments.efficiency.run_kv_sharing",
    fn(
        EF.run_kv_sharing,
        seed=0,
        steps=1,
        kv_heads=(4, 1),
        device="cpu",
        slow=SEEDS_TEST.format("efficiency"),
        accepts=SEED0,
    ),
)
add(
    "experiments.efficiency.scattered_recall",
    fn(EF.scattered_recall, batch_size=2, t=16, generator=gen()),
)
add(
    "experiments.efficiency.RecallReader",
    fn(EF.RecallReader, kind="exact", vocab_size=17, n_classes=8, seq_len=16),
)
add(
    "experiments.efficiency.RecallReader.read",
    method(
        EF.RecallReader,
        "read",
        lambda: EF.RecallReader("exact", seq_len=16),
        x=randn(2, 16, 32),
    ),
)
add(
    "experiments.efficiency.RecallReader.forward",
    method(
        EF.RecallReader,
        "forward",
        lambda: EF.RecallReader("exact", seq_len=16),
        tokens=ids(2, 16, high=17),
    ),
)
add("experiments.efficiency.LookupReader", fn(EF.LookupReader, kind="exact"))
add(
    "experiments.efficiency.LookupReader.forward",
    method(
        EF.LookupReader,
        "forward",
        lambda: EF.LookupReader("exact"),
        keys=ids(2, 3, high=5),
        values=ids(2, 3, high=5),
        query=ids(2, high=5),
        slow="its sizes are the lookup task's (tests/test_experiments_efficiency.py)",
    ),
)
for _run in ("run_recall_approximations", "run_lookup_approximations"):
    add(
        f"experiments.efficiency.{_run}",
        fn(
            getattr(EF, _run),
            seed=0,
            steps=1,
            n_test=2,
            kinds=("exact",),
            device="cpu",
            slow=SEEDS_TEST.format("efficiency"),
            accepts=SEED0,
        ),
    )
EX = extrapolation
add(
    "experiments.extrapolation.ExtrapolationConfig",
    fn(
        EX.ExtrapolationConfig,
        train_len=8,
        test_factors=(1, 2),
        vocab_size=8,
        lag=1,
        d_model=8,
        n_heads=2,
        n_layers=1,
        d_ff=8,
        num_buckets=4,
        steps=1,
        batch_size=2,
        lr=1e-3,
        n_eval=2,
    ),
)
TINY_EX = EX.ExtrapolationConfig(
    train_len=8,
    test_factors=(1, 2),
    d_model=8,
    n_heads=2,
    n_layers=1,
    d_ff=8,
    num_buckets=4,
    steps=1,
    batch_size=2,
    n_eval=2,
)
add(
    "experiments.extrapolation.ExtrapolationConfig.model_config",
    method(EX.ExtrapolationConfig, "model_config", lambda: TINY_EX, position="rope"),
)
add(
    "experiments.extrapolation.train_scheme",
    fn(
        EX.train_scheme,
        position="rope",
        seed=0,
        cfg=TINY_EX,
        device="cpu",
        accepts=SEED0,
    ),
)
add(
    "experiments.extrapolation.evaluate_lengths",
    fn(
        EX.evaluate_lengths,
        model=Lazy(lambda: EX.train_scheme("rope", cfg=TINY_EX)[0]),
        seed=0,
        cfg=TINY_EX,
        accepts=SEED0,
    ),
)
add(
    "experiments.extrapolation.run_extrapolation",
    fn(
        EX.run_extrapolation,
        seed=0,
        schemes=("rope",),
        cfg=TINY_EX,
        device="cpu",
        accepts=SEED0,
    ),
)
FF = feed_forward
add("experiments.feed_forward.neighbour_table", fn(FF.neighbour_table, n_values=4))
add(
    "experiments.feed_forward.neighbour_batch",
    fn(FF.neighbour_batch, batch_size=2, generator=gen(), table=FF.neighbour_table(4)),
)
add(
    "experiments.feed_forward.AttentionOnlyBlock",
    fn(FF.AttentionOnlyBlock, d_model=8, n_heads=2),
)
add(
    "experiments.feed_forward.AttentionOnlyBlock.forward",
    method(FF.AttentionOnlyBlock, "forward", lambda: FF.AttentionOnlyBlock(8, 2), x=X),
)
add(
    "experiments.feed_forward.MixThenMap",
    fn(FF.MixThenMap, block=nn.Identity(), d_model=8, n_values=5),
)
add(
    "experiments.feed_forward.MixThenMap.forward",
    method(
        FF.MixThenMap,
        "forward",
        lambda: FF.MixThenMap(nn.Identity(), 8, 5),
        x=ids(2, 4, high=5),
    ),
)
add("experiments.feed_forward.make_model", fn(FF.make_model, name="with FFN"))
add(
    "experiments.feed_forward.run_feed_forward",
    fn(
        FF.run_feed_forward,
        seed=0,
        steps=1,
        device="cpu",
        slow=SEEDS_TEST.format("feed_forward"),
        accepts=SEED0,
    ),
)
H = heads
add(
    "experiments.heads.make_test_set",
    fn(H.make_test_set, n_rows=4, seed=1, accepts=SEED0),
)
add("experiments.heads.make_model", fn(H.make_model, n_heads=2, n_layers=1))
add(
    "experiments.heads.fit",
    fn(H.fit, n_heads=2, n_layers=1, steps=1, seed=0, device="cpu", accepts=SEED0),
)
_TEST = Lazy(lambda: H.make_test_set(8))
_MODEL = Lazy(lambda: H.make_model(2))
add("experiments.heads.evaluate", fn(H.evaluate, model=_MODEL, test=_TEST))
add("experiments.heads.maps_of", fn(H.maps_of, model=_MODEL, test=_TEST))
_MAPS = Lazy(lambda: H.maps_of(H.make_model(2), H.make_test_set(8)))
_MAPS1 = Lazy(lambda: _MAPS()[0])  # one layer's: (B, H, T, T)
add("experiments.heads.relation_scores", fn(H.relation_scores, maps=_MAPS1, test=_TEST))
add(
    "experiments.heads.classify_heads",
    fn(
        H.classify_heads,
        maps=_MAPS,
        test=_TEST,
        threshold=0.5,
        accepts={("threshold", "zero"): ZERO_OK},
    ),
)
add(
    "experiments.heads.evaluate_without",
    fn(H.evaluate_without, model=_MODEL, test=_TEST, heads=[(0, 1)], means=None),
)
add("experiments.heads.head_means", fn(H.head_means, model=_MODEL, test=_TEST))
add(
    "experiments.heads.run_heads",
    fn(
        H.run_heads,
        seed=0,
        steps=1,
        device="cpu",
        slow=SEEDS_TEST.format("heads"),
        accepts=SEED0,
    ),
)
LK = lookup
add(
    "experiments.lookup.LookupAttention",
    fn(LK.LookupAttention, n_keys=5, n_values=4, d_half=4, d_k=4),
)
add(
    "experiments.lookup.UniformAverage",
    fn(LK.UniformAverage, n_keys=5, n_values=4, d_half=4, d_k=4),
)
_LB = data.lookup_task(2, 3, 5, 4, gen())
_LA = Lazy(lambda: LK.LookupAttention(5, 4, 4, 4))
add(
    "experiments.lookup.LookupAttention.items",
    method(
        LK.LookupAttention,
        "items",
        lambda: LK.LookupAttention(5, 4, 4, 4),
        keys=_LB.keys,
        values=_LB.values,
    ),
)
add(
    "experiments.lookup.LookupAttention.attend",
    method(
        LK.LookupAttention,
        "attend",
        lambda: LK.LookupAttention(5, 4, 4, 4),
        keys=_LB.keys,
        values=_LB.values,
        query=_LB.query,
    ),
)
add(
    "experiments.lookup.UniformAverage.attend",
    method(
        LK.UniformAverage,
        "attend",
        lambda: LK.UniformAverage(5, 4, 4, 4),
        keys=_LB.keys,
        values=_LB.values,
        query=_LB.query,
    ),
)
add(
    "experiments.lookup.LookupAttention.forward",
    method(
        LK.LookupAttention,
        "forward",
        lambda: LK.LookupAttention(5, 4, 4, 4),
        keys=_LB.keys,
        values=_LB.values,
        query=_LB.query,
    ),
)
add(
    "experiments.lookup.lookup_batches",
    fn(LK.lookup_batches, seed=0, batch_size=2, accepts=SEED0),
)
add(
    "experiments.lookup.train_lookup",
    fn(
        LK.train_lookup,
        model_class=LK.LookupAttention,
        seed=0,
        steps=1,
        lr=1e-3,
        batch_size=2,
        device="cpu",
        accepts=SEED0,
    ),
)
add("experiments.lookup.half_norms", fn(LK.half_norms, model=_LA))
add(
    "experiments.lookup.run_lookup",
    fn(
        LK.run_lookup,
        seed=0,
        steps=1,
        lr=1e-3,
        batch_size=2,
        n_test=2,
        device="cpu",
        slow=SEEDS_TEST.format("lookup"),
        accepts=SEED0,
    ),
)
PT = pretraining
add(
    "experiments.pretraining.topic_data",
    fn(PT.topic_data, tokenizer=Lazy(lambda: minilm()[1])),
)
add(
    "experiments.pretraining.label_subset",
    fn(PT.label_subset, n_pool=10, n=3, seed=0, accepts=SEED0),
)
add(
    "experiments.pretraining.train_probe",
    fn(
        PT.train_probe,
        features=randn(6, 4),
        labels=torch.tensor([0, 1, 2, 0, 1, 2]),
        n_classes=3,
        seed=0,
        steps=1,
        accepts=SEED0,
    ),
)
add(
    "experiments.pretraining.ScratchClassifier",
    fn(PT.ScratchClassifier, vocab_size=11, n_classes=3, d_model=8),
)
add(
    "experiments.pretraining.ScratchClassifier.forward",
    method(
        PT.ScratchClassifier,
        "forward",
        lambda: PT.ScratchClassifier(11, 3, 8),
        ids=ids(2, 5),
    ),
)
add(
    "experiments.pretraining.train_scratch",
    fn(
        PT.train_scratch,
        ids=ids(6, 5),
        labels=torch.tensor([0, 1, 2, 0, 1, 2]),
        vocab_size=11,
        n_classes=3,
        seed=0,
        steps=1,
        batch_size=2,
        accepts=SEED0,
    ),
)
add(
    "experiments.pretraining.finetune_step_seconds",
    fn(PT.finetune_step_seconds, model=Lazy(tiny_bert), ids=ids(2, 5), repeats=1),
)
add(
    "experiments.pretraining.topic_features",
    fn(
        PT.topic_features,
        model=Lazy(lambda: minilm()[0]),
        tokenizer=Lazy(lambda: minilm()[1]),
        slow=SEEDS_TEST.format("pretraining"),
    ),
)
_TOPIC = Lazy(lambda: PT.topic_data(minilm()[1]))
add(
    "experiments.pretraining.run_sample_efficiency",
    fn(
        PT.run_sample_efficiency,
        data=_TOPIC,
        train_features=Lazy(lambda: randn(len(_TOPIC().train_labels), 8)),
        test_features=Lazy(lambda: randn(len(_TOPIC().test_labels), 8)),
        seed=0,
        label_counts=(2,),
        slow=SEEDS_TEST.format("pretraining"),
        accepts=SEED0,
    ),
)
add(
    "experiments.pretraining.sample_efficiency_claims",
    fn(
        PT.sample_efficiency_claims,
        result=PT.SampleEfficiency(
            (16, 64, 256, 1024), [0.5, 0.6, 0.7, 0.8], [0.3, 0.4, 0.5, 0.6], 0.25
        ),
    ),
)
add(
    "experiments.pretraining.MiniLMClassifier",
    fn(PT.MiniLMClassifier, encoder=Lazy(tiny_bert), head=nn.Linear(8, 3)),
)
add(
    "experiments.pretraining.MiniLMClassifier.forward",
    method(
        PT.MiniLMClassifier,
        "forward",
        lambda: PT.MiniLMClassifier(tiny_bert(), nn.Linear(8, 3)),
        ids=ids(2, 5),
    ),
)
add(
    "experiments.pretraining.finetune_minilm",
    fn(
        PT.finetune_minilm,
        model=Lazy(lambda: minilm()[0]),
        data=_TOPIC,
        n=4,
        seed=0,
        steps=2,
        batch_size=2,
        lr=5e-5,
        warmup=1,
        slow=SEEDS_TEST.format("pretraining"),
        accepts={**SEED0, ("warmup", "zero"): "no warm-up: the rate starts at lr"},
    ),
)
add(
    "experiments.pretraining.topic_accuracy",
    fn(
        PT.topic_accuracy,
        model=Lazy(lambda: PT.MiniLMClassifier(minilm()[0], nn.Linear(384, 10))),
        data=_TOPIC,
        batch_size=64,
        slow=SEEDS_TEST.format("pretraining"),
    ),
)
add(
    "experiments.pretraining.finetune_claims",
    fn(PT.finetune_claims, probe=0.45, finetuned=0.48, scratch=0.28),
)
OP = one_page
for _run, _length in ((OP.run_sort, "n_digits"), (OP.run_reverse, "max_len")):
    add(
        f"experiments.one_page.{_run.__name__}",
        fn(
            _run, seed=0, steps=1, **{_length: 3}, n_test=2, device="cpu", accepts=SEED0
        ),
    )
RC = recall
add(
    "experiments.recall.make_model",
    fn(RC.make_model, kind="attention", n_symbols=4, n_fillers=4, d_model=8),
)
add(
    "experiments.recall.recall_accuracy",
    fn(
        RC.recall_accuracy,
        kind="attention",
        distance=4,
        seed=0,
        steps=1,
        lr=1e-3,
        n_test=2,
        device="cpu",
        accepts=SEED0,
    ),
)
add(
    "experiments.recall.run_recall",
    fn(
        RC.run_recall,
        seed=0,
        kinds=("attention",),
        distances=(4,),
        steps=1,
        lr=1e-3,
        n_test=2,
        device="cpu",
        accepts=SEED0,
    ),
)
SC = scaling
add(
    "experiments.scaling.non_embedding_parameters",
    fn(SC.non_embedding_parameters, model=Lazy(tiny_gpt)),
)
add(
    "experiments.scaling.training_flops",
    fn(
        SC.training_flops,
        n_params=10,
        tokens=100,
        accepts={("n_params", "zero"): ZERO_OK, ("tokens", "zero"): ZERO_OK},
    ),
)
add(
    "experiments.scaling.PowerLawFit.predict",
    method(SC.PowerLawFit, "predict", lambda: SC.PowerLawFit(2.0, -0.5, 1.0), x=4.0),
)
add(
    "experiments.scaling.OffsetPowerLawFit.predict",
    method(
        SC.OffsetPowerLawFit,
        "predict",
        lambda: SC.OffsetPowerLawFit(1.0, 2.0, -0.5, 1.0),
        x=4.0,
    ),
)
add(
    "experiments.scaling.fit_power_law",
    fn(SC.fit_power_law, x=[1.0, 2.0, 4.0], y=[4.0, 2.9, 2.0]),
)
add(
    "experiments.scaling.fit_power_law_offset",
    fn(
        SC.fit_power_law_offset, x=[1.0, 2.0, 4.0, 8.0], y=[4.0, 3.0, 2.5, 2.2], grid=10
    ),
)
add(
    "experiments.scaling.run_scaling",
    fn(
        SC.run_scaling,
        seed=0,
        steps=1,
        sizes=((8, 1), (16, 2)),
        device="cpu",
        slow=SEEDS_TEST.format("scaling"),
        accepts=SEED0,
    ),
)
add(
    "experiments.scaling.scaling_claims",
    fn(
        SC.scaling_claims,
        run=RESULT,
        slow=SEEDS_TEST.format("scaling"),
    ),
)
TR = translation
add(
    "experiments.translation.translation_config",
    fn(TR.translation_config, task=data.ToyTranslation()),
)
add(
    "experiments.translation.smoothed_loss",
    fn(TR.smoothed_loss, logits=randn(2, 3, 5), targets=ids(2, 3, high=5)),
)
add(
    "experiments.translation.label_smoothing_floor",
    fn(
        TR.label_smoothing_floor,
        vocab_size=5,
        eps=0.1,
        accepts={("eps", "zero"): "no smoothing: the floor is 0"},
    ),
)
add(
    "experiments.translation.translation_batches",
    fn(
        TR.translation_batches,
        task=data.ToyTranslation(),
        batch_size=2,
        generator=gen(),
        device="cpu",
    ),
)
add("experiments.translation.our_schedule", fn(TR.our_schedule, steps=10))
add(
    "experiments.translation.train_translation",
    fn(
        TR.train_translation,
        seed=0,
        steps=1,
        lr_lambda=None,
        device="cpu",
        accepts=SEED0,
        slow=SEEDS_TEST.format("translation"),
    ),
)
add(
    "experiments.translation.cross_attention_shares",
    fn(
        TR.cross_attention_shares,
        model=Lazy(lambda: models.EncoderDecoder(TR.translation_config())),
        batch=Lazy(lambda: data.ToyTranslation().sample(2, generator=gen())),
    ),
)
add(
    "experiments.translation.run_translation",
    fn(
        TR.run_translation,
        seed=0,
        steps=10,
        n_test=2,
        device="cpu",
        slow=SEEDS_TEST.format("translation"),
        accepts=SEED0,
    ),
)
# §5.3's deep model, one placement or both: the same small run
DEEP = dict(
    seed=0,
    n_layers=1,
    steps=10,
    lr=1e-3,
    device="cpu",
    accepts=SEED0,
    slow=SEEDS_TEST.format("translation"),
)
add("experiments.translation.run_deep", fn(TR.run_deep, norm_first=True, **DEEP))
add("experiments.translation.run_norm_placement", fn(TR.run_norm_placement, **DEEP))
add(
    "experiments.translation.input_blind_loss",
    fn(TR.input_blind_loss, n=10, seed=0, accepts=SEED0),
)
VA = variants
add(
    "experiments.variants.variant_models",
    fn(VA.variant_models, vocab_size=11, seed=0, accepts=SEED0),
)
add(
    "experiments.variants.task_pairs",
    fn(VA.task_pairs, tok=Lazy(bpe), split="test"),
)
add(
    "experiments.variants.raw_batches",
    fn(
        VA.raw_batches,
        tok=Lazy(bpe),
        stream=Lazy(VA.train_stream),
        steps=1,
        seed=0,
        accepts=SEED0,
    ),
)
add(
    "experiments.variants.format_batch",
    fn(
        VA.format_batch,
        name="GPT",
        tok=Lazy(bpe),
        text=Lazy(lambda: VA.raw_batches(bpe(), VA.train_stream(), 1, 0)[0][0]),
        tasks=Lazy(lambda: VA.raw_batches(bpe(), VA.train_stream(), 1, 0)[0][1]),
        gen=gen(),
    ),
)
add(
    "experiments.variants.run_variants",
    fn(
        VA.run_variants,
        seed=0,
        steps=1,
        device="cpu",
        slow=SEEDS_TEST.format("variants"),
        accepts=SEED0,
    ),
)
VP = variants_probes
add(
    "experiments.variants_probes.make_probes",
    fn(
        VP.make_probes,
        tok=Lazy(bpe),
        train_stream=Lazy(VA.train_stream),
        max_len=64,
        prefix=VA.TASK_PREFIX,
        tasks=Lazy(lambda: VA.task_pairs(bpe(), "test")),
        accepts={("prefix", "unknown str"): "any text is a task prefix"},
        slow=SEEDS_TEST.format("variants"),
    ),
)
add(
    "experiments.variants_probes.score_model",
    fn(
        VP.score_model,
        name="GPT",
        model=Lazy(lambda: VA.variant_models(bpe().vocab_size)["GPT"]),
        tok=Lazy(bpe),
        probes=Lazy(VA.probe_set),
        slow=SEEDS_TEST.format("variants"),
    ),
)
add(
    "experiments.variants_probes.top_guesses",
    fn(
        VP.top_guesses,
        name="GPT",
        model=Lazy(lambda: VA.variant_models(bpe().vocab_size)["GPT"]),
        tok=Lazy(bpe),
        probes=Lazy(VA.probe_set),
        cut=False,
    ),
)
VU = variants_uses
add(
    "experiments.variants_uses.heldout_perplexity",
    fn(
        VU.heldout_perplexity,
        model=Lazy(lambda: VA.variant_models(bpe().vocab_size)["GPT"]),
        tok=Lazy(bpe),
        slow=SEEDS_TEST.format("variants"),
    ),
)
add(
    "experiments.variants_uses.unigram_perplexity",
    fn(
        VU.unigram_perplexity,
        tok=Lazy(bpe),
        held=None,
        slow=SEEDS_TEST.format("variants"),
    ),
)
add(
    "experiments.variants_uses.pooled_topic_accuracy",
    fn(
        VU.pooled_topic_accuracy,
        model=Lazy(lambda: VA.variant_models(bpe().vocab_size)["BERT"]),
        tok=Lazy(bpe),
        how="mean",
        steps=1,
        slow=SEEDS_TEST.format("variants"),
    ),
)
add(
    "experiments.variants_uses.finetune_topic",
    fn(
        VU.finetune_topic,
        model=Lazy(lambda: VA.variant_models(bpe().vocab_size)["T5"]),
        tok=Lazy(bpe),
        steps=1,
        seed=0,
        device="cpu",
        slow=SEEDS_TEST.format("variants"),
        accepts=SEED0,
    ),
)
add(
    "experiments.variants_uses.prose_windows",
    fn(VU.prose_windows, seed=0, steps=1, batch_size=2, accepts=SEED0),
)
add(
    "experiments.variants_uses.train_gpt_on_prose",
    fn(
        VU.train_gpt_on_prose,
        cfg=models.GPTConfig(
            vocab_size=bpe().vocab_size,
            max_len=64,
            d_model=8,
            n_heads=2,
            n_layers=1,
            d_ff=8,
        ),
        windows=Lazy(lambda: VU.prose_windows(0, 1, 2)),
        seed=0,
        lr=1e-3,
        warmup=1,
        device="cpu",
        accepts=SEED0,
    ),
)
EV = exp_vision
add("experiments.vision.make_model", fn(EV.make_model, kind="ViT"))
add("experiments.vision.n_parameters", fn(EV.n_parameters, model=Lazy(tiny_vit)))
add(
    "experiments.vision.train_classifier",
    fn(
        EV.train_classifier,
        model=Lazy(tiny_vit),
        seed=0,
        steps=1,
        batch_size=2,
        lr=1e-3,
        device="cpu",
        accepts=SEED0,
    ),
)
add(
    "experiments.vision.test_accuracy",
    fn(
        EV.test_accuracy,
        model=Lazy(tiny_vit),
        split="test",
        slow=SEEDS_TEST.format("vision"),
    ),
)
add(
    "experiments.vision.run_digits",
    fn(
        EV.run_digits,
        seed=0,
        steps=1,
        batch_size=2,
        lr=1e-3,
        device="cpu",
        slow=SEEDS_TEST.format("vision"),
        accepts=SEED0,
    ),
)
add(
    "experiments.vision.cls_attention_maps",
    fn(
        EV.cls_attention_maps,
        model=Lazy(tiny_vit),
        images=IMAGES,
        residual=0.5,
        accepts={("residual", "zero"): "no residual: the raw product"},
    ),
)
_CLS = Lazy(lambda: EV.cls_attention_maps(tiny_vit(), IMAGES))
add("experiments.vision.ink_share", fn(EV.ink_share, maps=_CLS, which="rollout"))
add(
    "experiments.vision.top_patch_ink",
    fn(EV.top_patch_ink, maps=_CLS, which="last_layer"),
)
BH = bert_heads
add(
    "experiments.bert_heads.grammar.syntax_sentences",
    fn(BH.syntax_sentences, n=3, seed=0, accepts=SEED0),
)
add(
    "experiments.bert_heads.grammar.shuffle_words",
    fn(
        BH.shuffle_words,
        text="the cat sat.",
        rng=random.Random(0),
        accepts={("text", "unknown str"): "any sentence may be shuffled"},
    ),
)
_MINI_IDS = Lazy(lambda: pretrained.tokenize(minilm()[1], ["the cat sat."])[0])
add(
    "experiments.bert_heads.measures.attention_maps",
    fn(BH.attention_maps, model=Lazy(tiny_bert), ids=ids(2, 5)),
)
_BH_MAPS = Lazy(lambda: torch.softmax(randn(2, 2, 2, 5, 5), -1))
add(
    "experiments.bert_heads.measures.positional_scores",
    fn(
        BH.positional_scores,
        maps=_BH_MAPS,
        real=torch.ones(2, 5, dtype=torch.bool),
        punctuation=torch.zeros(2, 5, dtype=torch.bool),
    ),
)
_PARSED = BH.syntax_sentences(2, seed=0)
add(
    "experiments.bert_heads.measures.relation_accuracy",
    fn(
        BH.relation_accuracy,
        maps=Lazy(
            lambda: torch.softmax(
                randn(
                    2,
                    2,
                    2,
                    max(len(p.words) for p in _PARSED) + 2,
                    max(len(p.words) for p in _PARSED) + 2,
                ),
                -1,
            )
        ),
        parsed=_PARSED,
        relation="det",
    ),
)
add(
    "experiments.bert_heads.measures.offset_baseline",
    fn(BH.offset_baseline, parsed=_PARSED, relation="det"),
)
add(
    "experiments.bert_heads.measures.ablated",
    custom(BH.ablated, entered(BH.ablated), model=Lazy(tiny_bert), heads={0: [1]}),
)
add(
    "experiments.bert_heads.measures.value_norm_shares",
    fn(
        BH.value_norm_shares,
        model=Lazy(tiny_bert),
        ids=ids(2, 5),
        key_mask=torch.ones(2, 5, dtype=torch.bool),
    ),
)
add(
    "experiments.bert_heads.study.run_heads",
    fn(
        BH.run_heads,
        model=Lazy(lambda: minilm()[0]),
        tokenizer=Lazy(lambda: minilm()[1]),
        seed=0,
        n_random=1,
        slow=SEEDS_TEST.format("bert_heads"),
        accepts=SEED0,
    ),
)
add(
    "experiments.bert_heads.study.corpus_texts",
    fn(
        BH.corpus_texts,
        tokenizer=Lazy(lambda: minilm()[1]),
        seed=0,
        accepts=SEED0,
    ),
)
add(
    "experiments.bert_heads.study.heads_claims",
    fn(
        BH.heads_claims,
        study=RESULT,
        slow=SEEDS_TEST.format("bert_heads"),
    ),
)

# ---- measure (Chapters 1, 7)
add(
    "measure.jacobian_norms",
    fn(
        measure.jacobian_norms,
        fn=lambda x: x.tanh().sum(dim=1),
        x=randn(1, 3, 2),
        accepts={
            ("x", "empty"): "D = 0: every norm is 0",
            ("x", "meta device"): "computes on x's device",
        },
    ),
)
add("measure.spectral_radius", fn(measure.spectral_radius, weight=randn(3, 3)))
add(
    "measure.rescale_spectral_radius",
    fn(measure.rescale_spectral_radius, weight=randn(3, 3), radius=0.9),
)
add(
    "measure.saved_tensor_bytes",
    custom(
        measure.saved_tensor_bytes,
        lambda fn, x, exclude: measure.saved_tensor_bytes(fn, x, exclude=exclude),
        fn=torch.tanh,
        x=randn(2, 3).requires_grad_(),
        exclude=(),
        skip={"x": PASSED_ON},
    ),
)
add(
    "measure.peak_memory",
    custom(
        measure.peak_memory,
        lambda fn, x: measure.peak_memory(fn, x),
        fn=torch.tanh,
        x=randn(2, 3),
        skip={"x": PASSED_ON},
    ),
)

# ---- models (Chapters 5, 6)
M = models
CFG = dict(
    vocab_size=11, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=8, dropout=0.1
)
ACC_DROPOUT = {("dropout", "zero"): ZERO_OK}
add(
    "models.embedding.TokenEmbedding",
    fn(
        M.TokenEmbedding,
        vocab_size=11,
        d_model=8,
        max_len=8,
        dropout=0.1,
        accepts=ACC_DROPOUT,
    ),
)
add(
    "models.embedding.TokenEmbedding.forward",
    method(
        M.TokenEmbedding,
        "forward",
        lambda: M.TokenEmbedding(11, 8, 8, 0.0),
        idx=ids(2, 5),
        accepts={("idx", "empty"): EMPTY_BATCH},
    ),
)
add(
    "models.encoder_decoder.EncoderDecoderConfig",
    fn(
        M.EncoderDecoderConfig,
        **CFG,
        norm_first=True,
        pad_id=1,
        tie_weights=False,
        accepts={**ACC_DROPOUT, ("pad_id", "zero"): "id 0 is a token"},
    ),
)
add(
    "models.encoder_decoder.EncoderDecoder",
    fn(M.EncoderDecoder, cfg=M.EncoderDecoderConfig(**CFG)),
)
SRC, TGT = ids(2, 5, high=10) + 1, ids(2, 4, high=10) + 1
add(
    "models.encoder_decoder.EncoderDecoder.source_mask",
    method(M.EncoderDecoder, "source_mask", tiny_encdec, src=SRC),
)
add(
    "models.encoder_decoder.EncoderDecoder.encode",
    method(M.EncoderDecoder, "encode", tiny_encdec, src=SRC),
)
add(
    "models.encoder_decoder.EncoderDecoder.decode",
    method(
        M.EncoderDecoder,
        "decode",
        tiny_encdec,
        tgt=TGT,
        memory=randn(2, 5, 8),
        src=SRC,
        need_weights=False,
    ),
)
add(
    "models.encoder_decoder.EncoderDecoder.forward",
    method(M.EncoderDecoder, "forward", tiny_encdec, src=SRC, tgt=TGT),
)
add(
    "models.encoder_decoder.EncoderDecoder.greedy_decode",
    method(
        M.EncoderDecoder,
        "greedy_decode",
        tiny_encdec,
        src=SRC,
        bos_id=1,
        eos_id=2,
        max_new_tokens=3,
        accepts={
            ("bos_id", "zero"): "id 0 is a token",
            ("eos_id", "zero"): "id 0 is a token",
        },
    ),
)
add("models.gpt.GPTConfig", fn(M.GPTConfig, **CFG, n_kv_heads=1, accepts=ACC_DROPOUT))
add("models.gpt.GPT", fn(M.GPT, cfg=M.GPTConfig(**CFG)))
add(
    "models.gpt.GPT.embed",
    method(
        M.GPT,
        "embed",
        tiny_gpt,
        idx=ids(2, 5),
        start=1,
        accepts={("start", "zero"): "positions from 0"},
    ),
)
add("models.gpt.GPT.forward", method(M.GPT, "forward", tiny_gpt, idx=ids(2, 5)))
add(
    "models.gpt.GPT.forward_cached",
    method(
        M.GPT,
        "forward_cached",
        tiny_gpt,
        idx=ids(2, 2),
        cache=Lazy(lambda: tiny_gpt().forward_cached(ids(2, 3))[1]),
    ),
)
add(
    "models.gpt.GPT.generate",
    method(
        M.GPT,
        "generate",
        tiny_gpt,
        idx=ids(2, 3),
        max_new_tokens=2,
        temperature=0.8,
        top_k=3,
        top_p=0.9,
        use_cache=True,
        generator=gen(),
        accepts={
            ("max_new_tokens", "zero"): "returns the prompt",
            ("temperature", "zero"): "greedy decoding",
        },
    ),
)
add(
    "models.kv_cache.KVCache",
    fn(
        M.kv_cache.KVCache,
        n_layers=2,
        batch=2,
        n_kv_heads=2,
        d_head=4,
        capacity=4,
        dtype=torch.float32,
        device="cpu",
        accepts={("batch", "zero"): "an empty batch decodes to nothing (issue 44)"},
    ),
)
add(
    "models.kv_cache.KVCache.reserve",
    method(
        M.kv_cache.KVCache,
        "reserve",
        lambda: M.kv_cache.KVCache(2, 2, 2, 4, 4),
        length=6,
    ),
)
add(
    "models.gpt.gpt2_init_",
    fn(M.gpt.gpt2_init_, model=Lazy(lambda: nn.Linear(2, 2)), n_layers=2),
)
add(
    "models.bert.BERTConfig",
    fn(
        M.BERTConfig,
        **CFG,
        pad_id=1,
        norm_first=False,
        layer_norm_eps=1e-12,
        accepts={**ACC_DROPOUT, ("pad_id", "zero"): "id 0"},
    ),
)
add("models.bert.BERT", fn(M.BERT, cfg=M.BERTConfig(**CFG)))
add(
    "models.bert.BERT.padding_mask",
    method(M.BERT, "padding_mask", tiny_bert, idx=ids(2, 5)),
)
_PAD_MASK = torch.ones(2, 1, 5, dtype=torch.bool)
add(
    "models.bert.BERT.encode",
    method(
        M.BERT,
        "encode",
        tiny_bert,
        idx=ids(2, 5),
        mask=_PAD_MASK,
        need_weights=False,
        accepts=MASK_OK,
    ),
)
add(
    "models.bert.BERT.forward",
    method(
        M.BERT, "forward", tiny_bert, idx=ids(2, 5), mask=_PAD_MASK, accepts=MASK_OK
    ),
)
add(
    "models.bert.BERT.pooled",
    method(
        M.BERT,
        "pooled",
        tiny_bert,
        idx=ids(2, 5),
        how="mean",
        mask=_PAD_MASK,
        accepts=MASK_OK,
    ),
)
add(
    "models.bert.mask_tokens",
    fn(
        M.mask_tokens,
        ids=ids(2, 5),
        vocab_size=11,
        mask_id=2,
        special_ids=[0, 1, 2],
        generator=gen(),
        mask_prob=0.15,
        accepts={
            ("ids", "rank-1"): "(T,) is documented",
            ("ids", "empty"): EMPTY_BATCH,
            ("mask_id", "zero"): "id 0 may be the mask",
        },
    ),
)
add(
    "models.t5.T5Config",
    fn(
        M.T5Config,
        **CFG,
        norm_first=True,
        pad_id=0,
        tie_weights=True,
        num_buckets=4,
        max_distance=8,
        accepts={**ACC_DROPOUT, ("pad_id", "zero"): "id 0"},
    ),
)
add("models.t5.T5", fn(M.T5, cfg=M.T5Config(**CFG)))
add(
    "models.t5.RelativeSelfAttention",
    fn(
        M.t5.RelativeSelfAttention,
        d_model=8,
        n_heads=2,
        dropout=0.1,
        position_bias=positional.RelativePositionBias(2),
        accepts=ACC_DROPOUT,
    ),
)
add(
    "models.t5.RelativeSelfAttention.forward",
    method(
        M.t5.RelativeSelfAttention,
        "forward",
        lambda: M.t5.RelativeSelfAttention(
            8, 2, 0.0, positional.RelativePositionBias(2)
        ),
        query=X,
        mask=torch.ones(5, 5, dtype=torch.bool),
        accepts=MASK_OK,
    ),
)
add(
    "models.t5.span_corrupt",
    fn(
        M.span_corrupt,
        ids=ids(2, 8, high=5) + 5,
        sentinel_ids=[1, 2, 3, 4],
        noise_density=0.3,
        mean_span_length=2.0,
        generator=gen(),
        accepts={("ids", "rank-1"): "(T,) is documented"},
    ),
)
_SPANS = M.span_corrupt(ids(2, 8, high=5) + 5, [1, 2, 3, 4], 0.3, 2.0, gen())
add(
    "models.t5.span_restore",
    fn(
        M.span_restore,
        inputs=_SPANS[0],
        targets=_SPANS[1],
        sentinel_ids=[1, 2, 3, 4],
        accepts={("inputs", "empty"): "no tokens: nothing to restore"},
    ),
)
FILTER_OK = batched("logits", empty=())
LOGITS = randn(2, 11)
add(
    "models.sampling.top_k_filter",
    fn(M.top_k_filter, logits=LOGITS, k=3, accepts=FILTER_OK),
)
add(
    "models.sampling.top_p_filter",
    fn(M.top_p_filter, logits=LOGITS, p=0.9, accepts=FILTER_OK),
)
add(
    "models.sampling.sample_next",
    fn(
        M.sample_next,
        logits=LOGITS,
        temperature=0.8,
        top_k=3,
        top_p=0.9,
        generator=gen(),
        accepts={("temperature", "zero"): "greedy"},
    ),
)

# The decode rewrite (issue 28) owns these: their entries follow the current
# signatures, and their failing cases are expected failures, recorded here only.
OWNED_BY_DECODE_REWRITE = {
    "models.gpt.GPT.forward_cached",
    "models.gpt.GPT.generate",
    "models.sampling.top_k_filter",
    "models.sampling.top_p_filter",
    "models.sampling.sample_next",
}
_REWRITE = "fixed by the decode rewrite (issue 28)"
DECODE_REWRITE_XFAIL: dict[tuple[str, str, str], str] = {}  # the rewrite landed
_DECODE_REWRITE_XFAIL_BEFORE: dict[tuple[str, str, str], str] = {
    (key, arg, label): _REWRITE
    for key, cases in {
        "models.gpt.GPT.forward_cached": {"cache": ("str", "int")},
        "models.gpt.GPT.generate": {
            "max_new_tokens": ("bool",),
            "temperature": ("nan", "inf"),
        },
        "models.sampling.sample_next": {
            "logits": ("empty", "meta device"),
            "temperature": ("nan", "inf"),
        },
        "models.sampling.top_k_filter": {
            "logits": ("empty",),
            "k": ("bool", "float", "str", "zero", "negative", "None"),
        },
        "models.sampling.top_p_filter": {
            "logits": ("empty",),
            "p": ("bool", "str", "nan", "inf", "-inf", "None"),
        },
    }.items()
    for arg, labels in cases.items()
    for label in labels
}

# Entries known to fail a generated case, each an expected failure with its reason
# until its function is fixed; the test fails once one passes, so that it leaves
# this list. Empty since issue 44 (its 93 entries fixed): a new entry needs a
# reason a reviewer would accept, and fixing is preferred to listing.
GAPS: dict[str, str] = {}

# ---- alt_text
# One figure stands for all: alt_text checks the name and the results' names, and
# turns a builder's failure on results that are not its figure's into a ValueError
# naming them (tests/test_alt_text.py sends None to every builder)
add(
    "alt_text.alt_text",
    fn(
        alt_text.alt_text,
        figure="rnn_recall",
        distances=[1, 8, 16, 32, 64],
        attention={1: 1.0, 8: 1.0, 16: 1.0, 32: 0.98, 64: 0.97},
        lstm={1: 1.0, 8: 0.9, 16: 0.3, 32: 0.15, 64: 0.12},
        opened={1: 1.0, 8: 1.0, 16: 0.9, 32: 0.8, 64: 0.5},
        n_symbols=8,
    ),
)

# ---- plot
P = plot
ANY_ALT = {
    ("alt", "unknown str"): "any text states a finding",
    ("alt", "empty"): "an empty alt marks a decorative figure",
}
add("plot.use_book_style", fn(P.use_book_style))
add(
    "plot.head_score_maps",
    fn(
        P.head_score_maps,
        scores={"a": torch.rand(2, 3), "b": torch.rand(2, 3)},
        title="on {}",
        columns=2,
        accepts={
            ("title", "unknown str"): "any title",
            ("title", "empty"): "an empty title is allowed",
            ("scores", "dict"): "a mapping is what it takes",
        },
    ),
)
add(
    "plot.attention_heatmap",
    fn(
        P.attention_heatmap,
        weights=torch.softmax(randn(3, 4), -1),
        query_tokens=["a", "b", "c"],
        key_tokens=["a", "b", "c", "d"],
        ax=None,
        title="t",
        annotate=True,
        vmax=1.0,
        colorbar=True,
        accepts={
            ("title", "int"): "any printable title",
            ("title", "unknown str"): "any title",
            ("weights", "list"): "converted with numpy (documented)",
            ("weights", "dtype torch.int64"): "integer weights draw too",
        },
    ),
)
add(
    "plot.plot_lines",
    fn(
        P.plot_lines,
        x=[1, 2, 3],
        ys={"a": [1.0, 2.0, 3.0]},
        xlabel="x",
        ylabel="y",
        title="t",
        ax=None,
        logx=False,
        logy=False,
        marker="o",
        accepts={
            (a, v): "matplotlib prints any label (None: none)"
            for a in ("xlabel", "ylabel", "title")
            for v in ("unknown str", "int", "None")
        },
    ),
)
add(
    "plot.series_style",
    fn(
        P.series_style,
        label="GPT",
        index=1,
        accepts={
            ("label", "unknown str"): "any series label",
            ("index", "zero"): ZERO_OK,
        },
    ),
)


def _dropdown():
    import ipywidgets

    return ipywidgets.Dropdown(options=["a", "b"])


add(
    "plot.linked_stack",
    fn(
        P.linked_stack,
        control=Lazy(_dropdown),
        children=Lazy(
            lambda: [P.figure_view(P.plt.figure(), alt="a view") for _ in range(2)]
        ),
    ),
)
add(
    "plot.linked_views",
    fn(
        P.linked_views,
        controls=Lazy(lambda: [_dropdown()]),
        render=lambda a: P.figure_view(P.plt.figure(), alt="a view"),
    ),
)
add(
    "plot.figure_view",
    fn(
        P.figure_view,
        fig=Lazy(P.plt.figure),
        alt="a figure",
        dpi=50,
        accepts=ANY_ALT,
    ),
)
add(
    "plot.show",
    fn(
        P.show,
        fig=Lazy(P.plt.figure),
        alt="a figure",
        accepts=ANY_ALT,
    ),
)

# ---- position_lm (Chapter 4)
PL = position_lm
add(
    "position_lm.PositionLMConfig",
    fn(
        PL.PositionLMConfig,
        vocab_size=11,
        position="alibi",
        d_model=8,
        n_heads=2,
        n_layers=1,
        d_ff=8,
        max_len=16,
        num_buckets=4,
        max_distance=8,
    ),
)
_PLM = Lazy(lambda: PL.PositionLM(PL.PositionLMConfig(11, "t5", 8, 2, 1, 8, 16)))
add(
    "position_lm.PositionLM",
    fn(PL.PositionLM, cfg=PL.PositionLMConfig(11, "rope", 8, 2, 1, 8, 16)),
)
add(
    "position_lm.PositionLM.position_bias",
    method(
        PL.PositionLM,
        "position_bias",
        _PLM,
        t=5,
        device="cpu",
        accepts={
            ("t", "zero"): EMPTY_T,
            ("device", "None"): "None is torch's default device, as in torch.zeros",
            ("device", "meta"): NO_DEVICE,
        },
    ),
)
add(
    "position_lm.PositionLM.forward",
    method(PL.PositionLM, "forward", _PLM, idx=ids(2, 5)),
)
add(
    "position_lm.PositionalSelfAttention",
    fn(
        PL.PositionalSelfAttention,
        d_model=8,
        n_heads=2,
        dropout=0.1,
        n_kv_heads=1,
        accepts=ACC_DROPOUT,
    ),
)
add(
    "position_lm.PositionalSelfAttention.forward",
    method(
        PL.PositionalSelfAttention,
        "forward",
        lambda: PL.PositionalSelfAttention(8, 2),
        x=X,
        bias=randn(2, 5, 5),
        rope=True,
        accepts=batched("bias", empty=()),
    ),
)

# ---- positional (Chapter 4)
PO = positional
add("positional.sinusoidal_encoding", fn(PO.sinusoidal_encoding, max_len=4, d_model=6))
add(
    "positional.LearnedPositionalEmbedding",
    fn(PO.LearnedPositionalEmbedding, max_len=8, d_model=4),
)
add(
    "positional.LearnedPositionalEmbedding.forward",
    method(
        PO.LearnedPositionalEmbedding,
        "forward",
        lambda: PO.LearnedPositionalEmbedding(8, 8),
        x=X,
        accepts=batched("x", empty=()),
    ),
)
add(
    "positional.apply_rope",
    fn(
        PO.apply_rope,
        x=Q,
        positions=torch.arange(5),
        base=100.0,
        accepts={
            **batched("x", empty=("x",)),
            ("x", "meta device"): "computes on x's device",
            ("positions", "list"): "converted with torch.as_tensor",
            (
                "positions",
                "dtype torch.float32",
            ): "fractional positions turn by fractional angles",
            ("positions", "rank+1"): "positions broadcast over the batch",
        },
    ),
)
add(
    "positional.relative_position_bucket",
    fn(
        PO.relative_position_bucket,
        relative_position=torch.arange(-3, 4),
        bidirectional=True,
        num_buckets=8,
        max_distance=16,
        accepts={
            ("relative_position", r): "elementwise: any shape, list or device"
            for r in ("list", "rank+1", "rank-1", "empty", "meta device")
        },
    ),
)
add(
    "positional.RelativePositionBias",
    fn(
        PO.RelativePositionBias,
        n_heads=2,
        bidirectional=False,
        num_buckets=8,
        max_distance=16,
    ),
)
add(
    "positional.RelativePositionBias.forward",
    method(
        PO.RelativePositionBias,
        "forward",
        lambda: PO.RelativePositionBias(2),
        t_q=2,
        t_k=4,
        query_offset=2,
        accepts={
            ("query_offset", "zero"): ZERO_OK,
            ("t_q", "zero"): EMPTY_T,
            ("t_k", "zero"): EMPTY_T,
        },
    ),
)
add("positional.alibi_slopes", fn(PO.alibi_slopes, n_heads=3))
add(
    "positional.alibi_bias",
    fn(
        PO.alibi_bias,
        n_heads=2,
        t_q=2,
        t_k=4,
        device="cpu",
        query_offset=2,
        accepts={
            ("query_offset", "zero"): ZERO_OK,
            ("t_q", "zero"): EMPTY_T,
            ("t_k", "zero"): EMPTY_T,
            ("device", "meta"): NO_DEVICE,
        },
    ),
)

# ---- pretrained (Chapter 8)
PR = pretrained
add("pretrained.minilm_archive", fn(PR.minilm_archive))
add(
    "pretrained.read_safetensors",
    fn(
        PR.read_safetensors,
        data=Lazy(lambda: PR._minilm_files()[2][:0] + _safetensors_bytes()),
    ),
)


def _safetensors_bytes() -> bytes:
    import json
    import struct

    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})
    raw = header.encode()
    return struct.pack("<Q", len(raw)) + raw + torch.ones(2).numpy().tobytes()


HF_CONFIG = {
    "model_type": "bert",
    "vocab_size": 11,
    "max_position_embeddings": 8,
    "hidden_size": 8,
    "num_attention_heads": 2,
    "num_hidden_layers": 1,
    "intermediate_size": 8,
    "hidden_dropout_prob": 0.1,
    "pad_token_id": 0,
    "layer_norm_eps": 1e-12,
    "hidden_act": "gelu",
}
add(
    "pretrained.bert_config_from_hf",
    fn(
        PR.bert_config_from_hf,
        config=HF_CONFIG,
        dropout=0.0,
        accepts={("dropout", "zero"): ZERO_OK},
    ),
)


def _hf_state():
    model = M.BERT(PR.bert_config_from_hf(HF_CONFIG))
    names = {
        "token.weight": "embeddings.word_embeddings.weight",
        "position.weight": "embeddings.position_embeddings.weight",
        "embed_norm.weight": "embeddings.LayerNorm.weight",
        "embed_norm.bias": "embeddings.LayerNorm.bias",
    }
    for ours, theirs in PR._LAYER_NAMES.items():
        for kind in ("weight", "bias"):
            names[f"blocks.0.{ours}.{kind}"] = f"encoder.layer.0.{theirs}.{kind}"
    state = model.state_dict()
    return {theirs: state[ours] for ours, theirs in names.items()}


add(
    "pretrained.bert_from_hf",
    fn(
        PR.bert_from_hf, state=Lazy(_hf_state), config=PR.bert_config_from_hf(HF_CONFIG)
    ),
)
add("pretrained.load_minilm", fn(PR.load_minilm, device="cpu"))
add(
    "pretrained.tokenize",
    fn(
        PR.tokenize,
        tokenizer=Lazy(lambda: minilm()[1]),
        texts=["a cat.", "the dog sat."],
        pad_id=0,
        accepts={("pad_id", "zero"): "[PAD] is id 0"},
    ),
)
add(
    "pretrained.sentence_embeddings",
    fn(
        PR.sentence_embeddings,
        model=Lazy(lambda: minilm()[0]),
        tokenizer=Lazy(lambda: minilm()[1]),
        texts=["a cat.", "the dog sat."],
        batch_size=1,
    ),
)

# ---- probe (Chapter 3)
add(
    "probe.ProbeConfig",
    fn(
        probe.ProbeConfig,
        vocab_sizes=(5, 6),
        max_len=4,
        n_classes=3,
        n_outputs=1,
        d_model=8,
        n_heads=2,
        n_layers=1,
    ),
)
add(
    "probe.AttentionOnlyClassifier",
    fn(
        probe.AttentionOnlyClassifier,
        cfg=probe.ProbeConfig(vocab_sizes=(5, 6), max_len=4, n_classes=3),
    ),
)
# *tokens: the arguments are named as the messages name them, tokens[0], tokens[1]
_TOKENS = {"tokens[0]": ids(2, 4, high=5), "tokens[1]": ids(2, 4, high=6)}
for _m in ("embed", "forward", "attention_weights"):
    add(
        f"probe.AttentionOnlyClassifier.{_m}",
        custom(
            getattr(probe.AttentionOnlyClassifier, _m),
            lambda _m=_m, **kw: getattr(tiny_probe(), _m)(*kw.values()),
            **_TOKENS,
        ),
    )
add(
    "probe.record_heads",
    custom(probe.record_heads, entered(probe.record_heads), mha=Lazy(mha)),
)
add(
    "probe.ablate_heads",
    custom(
        probe.ablate_heads,
        entered(probe.ablate_heads),
        mha=Lazy(mha),
        heads=[1],
        mean=randn(4),
        accepts={("mean", "rank+1"): "(1, Dh) still broadcasts to (B, H, T, Dh)"},
    ),
)
add(
    "probe.attention_on",
    fn(
        probe.attention_on,
        weights=torch.softmax(randn(2, 2, 3, 4), -1),
        key_index=torch.tensor([[0, 3, 1], [2, 0, 3]]),
        accepts={
            ("key_index", "list"): "converted by torch.as_tensor (a range is fine)",
            ("key_index", "rank-1"): "(T,): one key per query, for every example",
        },
    ),
)

# ---- recurrent (Chapter 1)
R = recurrent
add(
    "recurrent.rnn_step",
    fn(
        R.rnn_step,
        x_t=randn(2, 3),
        h_prev=randn(2, 4),
        weight_ih=randn(4, 3),
        weight_hh=randn(4, 4),
        bias_ih=randn(4),
        bias_hh=randn(4),
        nonlinearity="relu",
    ),
)
add(
    "recurrent.lstm_step",
    fn(
        R.lstm_step,
        x_t=randn(2, 3),
        h_prev=randn(2, 4),
        c_prev=randn(2, 4),
        weight_ih=randn(16, 3),
        weight_hh=randn(16, 4),
        bias_ih=randn(16),
        bias_hh=randn(16),
    ),
)
add(
    "recurrent.VanillaRNN",
    fn(R.VanillaRNN, d_input=3, d_hidden=4, nonlinearity="tanh", bias=True),
)
add(
    "recurrent.VanillaRNN.forward",
    method(
        R.VanillaRNN,
        "forward",
        lambda: R.VanillaRNN(3, 4),
        x=randn(2, 5, 3),
        h0=randn(2, 4),
    ),
)
add(
    "recurrent.VanillaRNN.from_torch",
    method(
        R.VanillaRNN,
        "from_torch",
        lambda: R.VanillaRNN,
        m=nn.RNN(3, 4, batch_first=True),
    ),
)
add("recurrent.LSTM", fn(R.LSTM, d_input=3, d_hidden=4, bias=True))
add(
    "recurrent.LSTM.forward",
    method(
        R.LSTM,
        "forward",
        lambda: R.LSTM(3, 4),
        x=randn(2, 5, 3),
        state=(randn(2, 4), randn(2, 4)),
    ),
)
add(
    "recurrent.LSTM.from_torch",
    method(R.LSTM, "from_torch", lambda: R.LSTM, m=nn.LSTM(3, 4, batch_first=True)),
)

# ---- source
add("source.source_of", fn(source.source_of, obj=attention.causal_mask))
add("source.show_source", fn(source.show_source, obj=attention.causal_mask))

# ---- speed (Chapter 7)
S = speed
add("speed.median_ms", fn(S.median_ms, fn=lambda: None, repeats=2, device="cpu"))
add(
    "speed.mha_forward_backward_ms",
    fn(
        S.mha_forward_backward_ms,
        t=4,
        causal=True,
        batch=1,
        d_model=8,
        n_heads=2,
        repeats=1,
        device="cpu",
    ),
)
add(
    "speed.generation_tokens_per_s",
    fn(
        S.generation_tokens_per_s,
        model=Lazy(tiny_gpt),
        prompt=ids(1, 2),
        new_tokens=2,
        use_cache=True,
    ),
)
add(
    "speed.kv_cache_speed_up",
    fn(
        S.kv_cache_speed_up,
        new_tokens=4,
        device="cpu",
        slow="times two generations: tests/test_speed.py",
    ),
)

add(
    "speed.bench_gpt",
    fn(S.bench_gpt, max_len=8, device="cpu"),
)
add(
    "speed.batch_tokens_per_s",
    fn(
        S.batch_tokens_per_s,
        model=Lazy(tiny_gpt),
        batches=(1, 2),
        new_tokens=2,
        prompt_len=2,
        repeats=1,
    ),
)
add(
    "speed.decode_step_profile",
    fn(S.decode_step_profile, model=Lazy(tiny_gpt), batch=1, prompt_len=2, steps=2),
)

# ---- tokenizer (Chapter 6)
TK = tokenizer
add("tokenizer.Tokenizer", fn(TK.Tokenizer))
for _cls, _make in ((TK.BPETokenizer, bpe), (TK.CharTokenizer, chars)):
    _k = f"tokenizer.{_cls.__name__}"
    add(f"{_k}.token_to_id", method(_cls, "token_to_id", _make, token="[PAD]"))
    add(
        f"{_k}.encode",
        method(
            _cls,
            "encode",
            _make,
            text="attention is all",
            accepts={("text", "unknown str"): "any text encodes"},
        ),
    )
    add(
        f"{_k}.decode",
        method(_cls, "decode", _make, ids=[30, 40, 50], skip_special=True),
    )
    add(f"{_k}.tokens", method(_cls, "tokens", _make, ids=[30, 40, 50]))
add("tokenizer.BPETokenizer", fn(TK.BPETokenizer, hf_tokenizer=Lazy(lambda: bpe().hf)))
add("tokenizer.BPETokenizer.merges", method(TK.BPETokenizer, "merges", bpe))
add(
    "tokenizer.CharTokenizer",
    fn(
        TK.CharTokenizer,
        text="abc",
        accepts={("text", "unknown str"): "any text has characters"},
    ),
)
add(
    "tokenizer.Tokenizer.token_to_id",
    method(TK.Tokenizer, "token_to_id", bpe, token="[PAD]"),
)
add(
    "tokenizer.Tokenizer.encode",
    method(
        TK.Tokenizer,
        "encode",
        bpe,
        text="attention",
        accepts={("text", "unknown str"): "any text encodes"},
    ),
)
add(
    "tokenizer.Tokenizer.decode",
    method(TK.Tokenizer, "decode", bpe, ids=[30, 40], skip_special=False),
)
add(
    "tokenizer.Tokenizer.encode_batch",
    method(TK.Tokenizer, "encode_batch", bpe, texts=["a b", "c"], length=8),
)
add("tokenizer.train_bpe", fn(TK.train_bpe, texts=["abc abd", "abc"], vocab_size=300))
add(
    "tokenizer.encode_stream",
    fn(
        TK.encode_stream,
        tokenizer=Lazy(bpe),
        texts=["a b", "c"],
    ),
)
add(
    "tokenizer.blocks",
    fn(
        TK.blocks,
        stream=STREAM,
        block_len=4,
        accepts={("stream", "meta device"): "a view: any device"},
    ),
)
add(
    "tokenizer.random_blocks",
    fn(
        TK.random_blocks,
        stream=STREAM,
        batch_size=2,
        block_len=4,
        generator=gen(),
    ),
)

# ---- train (Chapters 1-5)
add(
    "train.train",
    fn(
        train.train,
        model=Lazy(lambda: nn.Linear(3, 2)),
        get_batch=lambda step: (randn(4, 3), torch.tensor([0, 1, 0, 1])),
        loss_fn=nn.functional.cross_entropy,
        steps=1,
        lr=1e-3,
        weight_decay=0.0,
        lr_lambda=None,
        max_grad_norm=1.0,
        device="cpu",
        progress=False,
        accepts={("weight_decay", "zero"): ZERO_OK},
    ),
)
add(
    "train.accuracy",
    fn(
        train.accuracy,
        logits=randn(4, 3),
        targets=torch.tensor([0, 1, 2, 0]),
        ignore_index=2,
        accepts={
            ("logits", "dtype torch.int64"): "integer scores have an arg-max too",
            ("ignore_index", "zero"): "class 0 may be ignored",
            ("ignore_index", "negative"): "-100 is the usual ignored label",
        },
    ),
)
add("train.progress_enabled", fn(train.progress_enabled))
add("train.noam_lr_lambda", fn(train.noam_lr_lambda, d_model=8, warmup=4, scale=1.0))
add(
    "train.sequence_accuracy",
    fn(
        train.sequence_accuracy,
        predicted=ids(2, 4),
        targets=ids(2, 4),
        pad_id=0,
        accepts={
            ("pad_id", "zero"): "[PAD] is id 0",
            ("pad_id", "negative"): "-100, the ignored label, pads too",
            ("predicted", "empty"): "a decoder that stopped at once: all padding",
            ("targets", "empty"): "empty targets: all padding",
        },
    ),
)

# ---- vision (Chapter 8)
VI = vision
add("vision.load_digit_images", fn(VI.load_digit_images, split="test"))
add("vision.patchify", fn(VI.patchify, images=IMAGES, patch=2, accepts=RESHAPE_ANY))
add(
    "vision.unpatchify",
    fn(
        VI.unpatchify,
        patches=VI.patchify(IMAGES, 2),
        patch=2,
        height=8,
        width=8,
        accepts=RESHAPE_ANY,
    ),
)
add(
    "vision.ViTConfig",
    fn(
        VI.ViTConfig,
        image_size=8,
        patch=2,
        channels=1,
        n_classes=10,
        d_model=8,
        n_heads=2,
        n_layers=1,
        d_ff=8,
        dropout=0.1,
        accepts=ACC_DROPOUT,
    ),
)
add("vision.ViT", fn(VI.ViT, cfg=VI.ViTConfig(d_model=8, d_ff=8)))
add("vision.ViT.embed", method(VI.ViT, "embed", tiny_vit, images=IMAGES))
add(
    "vision.ViT.forward",
    method(VI.ViT, "forward", tiny_vit, images=IMAGES, need_weights=False),
)
add(
    "vision.attention_rollout",
    fn(
        VI.attention_rollout,
        weights=[torch.softmax(randn(2, 2, 5, 5), -1)] * 2,
        residual=0.5,
        accepts={("residual", "zero"): "no residual"},
    ),
)
add(
    "vision.MLPBaseline",
    fn(VI.MLPBaseline, image_size=8, channels=1, n_classes=10, hidden=16),
)
add(
    "vision.MLPBaseline.forward",
    method(VI.MLPBaseline, "forward", VI.MLPBaseline, images=IMAGES),
)
add(
    "vision.CNNBaseline",
    fn(VI.CNNBaseline, image_size=8, channels=1, n_classes=10, widths=(4, 8)),
)
add(
    "vision.CNNBaseline.forward",
    method(VI.CNNBaseline, "forward", VI.CNNBaseline, images=IMAGES),
)

# ---------------------------------------------------------------- dtype policy
# entry point -> (policy, () -> (call(x), the argument's name, a float32 input)).
# "follow": a function without weights computes in its inputs' dtype (scores and
# softmax in at least float32). "refuse": a module whose weights meet an input of
# another dtype raises a TypeError naming it (convert the module, or use autocast),
# as nn.Linear does, but with the argument's name. "cast": a model whose input is
# data (pixels, returns) casts it to its weights' dtype, as preprocessing does.
_QKV = (K, V)


def _function(f):
    return lambda: (lambda x: f(x, *(t.to(x.dtype) for t in _QKV)), "q", Q)


def _module(make, arg="x", x=X, **kw):
    def build():
        torch.manual_seed(0)
        module = make()
        return (lambda y: module(y, **kw)), arg, x

    return build


_DT_CFG = decision.DecisionConfig(d_model=8, d_ff=8)
_SAR = dict(states=torch.tensor([[0, 1, 2]]), actions=torch.tensor([[2, 2, 2]]))
DTYPE_POLICY = {
    "attention.scaled_dot_product_attention": (
        "follow",
        _function(lambda q, k, v: A.scaled_dot_product_attention(q, k, v)[0]),
    ),
    "attention.fused_scaled_dot_product_attention": (
        "follow",
        _function(A.fused_scaled_dot_product_attention),
    ),
    "efficient.tiled.blockwise_attention": (
        "follow",
        _function(lambda q, k, v: E.blockwise_attention(q, k, v, block_size=2)),
    ),
    "efficient.performer.performer_attention": (
        "follow",
        _function(lambda q, k, v: E.performer_attention(q, k, v[..., :4], FEAT)),
    ),
    "positional.apply_rope": ("follow", lambda: (PO.apply_rope, "x", Q)),
    "attention.MultiHeadAttention.forward": (
        "refuse",
        _module(lambda: MHA(8, 2), "query"),
    ),
    "blocks.FeedForward.forward": ("refuse", _module(lambda: B.FeedForward(8, 16))),
    "blocks.EncoderBlock.forward": (
        "refuse",
        _module(lambda: B.EncoderBlock(8, 2, 16)),
    ),
    "blocks.DecoderBlock.forward": (
        "refuse",
        _module(lambda: B.DecoderBlock(8, 2, 16), memory=randn(2, 4, 8)),
    ),
    "efficient.linformer.LinformerAttention.forward": (
        "refuse",
        _module(lambda: E.LinformerAttention(8, 2, 5, 3)),
    ),
    "efficient.performer.PerformerAttention.forward": (
        "refuse",
        _module(lambda: E.PerformerAttention(8, 2, 6)),
    ),
    "models.t5.RelativeSelfAttention.forward": (
        "refuse",
        _module(
            lambda: M.t5.RelativeSelfAttention(8, 2, 0.0, PO.RelativePositionBias(2)),
            "query",
        ),
    ),
    "position_lm.PositionalSelfAttention.forward": (
        "refuse",
        _module(lambda: PL.PositionalSelfAttention(8, 2)),
    ),
    "positional.LearnedPositionalEmbedding.forward": (
        "refuse",
        _module(lambda: PO.LearnedPositionalEmbedding(8, 8)),
    ),
    "recurrent.VanillaRNN.forward": ("refuse", _module(lambda: R.VanillaRNN(8, 4))),
    "recurrent.LSTM.forward": ("refuse", _module(lambda: R.LSTM(8, 4))),
    "vision.ViT.forward": (
        "cast",
        _module(lambda: VI.ViT(VI.ViTConfig(d_model=8, d_ff=8)), "images", IMAGES),
    ),
    "vision.MLPBaseline.forward": ("cast", _module(VI.MLPBaseline, "images", IMAGES)),
    "vision.CNNBaseline.forward": ("cast", _module(VI.CNNBaseline, "images", IMAGES)),
    "decision.model.DecisionTransformer.forward": (
        "cast",
        _module(
            lambda: decision.DecisionTransformer(_DT_CFG), "returns_to_go", RTG, **_SAR
        ),
    ),
}

# ---- checkpoints (Chapter 6's long-trained models)
CK = checkpoints


def _checkpoint_path() -> Path:
    """A checkpoint of the tiny GPT, written once to a temporary folder."""
    path = Path(tempfile.mkdtemp()) / "tiny.safetensors"
    return CK.save_checkpoint(tiny_gpt(), path)


add(
    "checkpoints.save_checkpoint",
    fn(
        CK.save_checkpoint,
        model=Lazy(tiny_gpt),
        path=Lazy(lambda: Path(tempfile.mkdtemp()) / "m.safetensors"),
        dtype="float16",
    ),
)
add("checkpoints.load_checkpoint", fn(CK.load_checkpoint, path=Lazy(_checkpoint_path)))
add("checkpoints.shipped_checkpoint", fn(CK.shipped_checkpoint, name="GPT"))
add("checkpoints.shipped_record", fn(CK.shipped_record, name="GPT"))
