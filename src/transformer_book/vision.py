"""Images as tokens: the Vision Transformer and its baselines (Chapter 8).

Dosovitskiy et al. (2021), "An image is worth 16x16 words": cut an image into
P x P patches, flatten each patch into a vector, and a Transformer encoder reads
the patches as it reads tokens. Nothing in the blocks knows about images: the
patches are the tokens, learned position embeddings say where each one was, and a
learned [CLS] token in front collects what the classifier reads.

The data are scikit-learn's bundled hand-written digits (8 x 8 grey images, no
download); the baselines an MLP on the raw pixels and a small CNN.

Shape letters: B batch, C channels, Hi x Wi image height and width, P patch side,
N = (Hi / P)(Wi / P) patches, T = 1 + N tokens ([CLS] first), D ``d_model``,
H heads, L layers, K classes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ._validate import check_int, check_on, check_real, check_tensor
from .blocks import encoder_stack

__all__ = [
    "TEST_EVERY",
    "load_digit_images",
    "patchify",
    "unpatchify",
    "ViTConfig",
    "ViT",
    "attention_rollout",
    "MLPBaseline",
    "CNNBaseline",
]

TEST_EVERY = 5
"""The split: of each digit's images, in the dataset's order, every 5th (the 5th,
10th, ...) is a test image. 1,442 training and 355 test images, each digit
34-36 times in the test split; the same on every machine (no random draw)."""


@functools.cache
def _digits() -> tuple[Tensor, Tensor, Tensor]:
    """All 1,797 images (N, 1, 8, 8) in [0, 1], labels (N,), and the test flags."""
    from sklearn.datasets import load_digits  # bundled with scikit-learn

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32)[:, None] / 16.0
    labels = torch.tensor(digits.target, dtype=torch.long)
    rank = torch.zeros_like(labels)  # rank[i]: images of labels[i]'s digit before i
    for digit in range(10):
        where = (labels == digit).nonzero()[:, 0]
        rank[where] = torch.arange(len(where))
    return images, labels, rank % TEST_EVERY == TEST_EVERY - 1


def load_digit_images(split: str) -> tuple[Tensor, Tensor]:
    """The hand-written digits of ``sklearn.datasets.load_digits``, one split.

    1,797 grey 8 x 8 images (values 0..16, scaled here to [0, 1]) of the digits
    0-9. ``split`` is "train" (1,442 images) or "test" (355): see
    :data:`TEST_EVERY`. Loaded once; every call returns fresh tensors.

    Shapes: returns images (N, 1, 8, 8) float32 and labels (N,) long
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    images, labels, is_test = _digits()
    keep = is_test if split == "test" else ~is_test
    return images[keep], labels[keep]  # boolean indexing copies: the cache is safe


def _check_patch(images: Tensor, patch: object) -> int:
    """``images`` is (B, C, Hi, Wi) and ``patch`` divides Hi and Wi."""
    check_tensor("images", images)
    if images.dim() != 4:
        raise ValueError(
            f"images must have shape (B, C, Hi, Wi), got {tuple(images.shape)}"
        )
    patch = check_int("patch", patch, minimum=1)
    height, width = images.shape[-2:]
    if height % patch or width % patch:
        raise ValueError(
            f"patch={patch} does not divide the image size {height} x {width}"
        )
    return patch


def patchify(images: Tensor, patch: int) -> Tensor:
    """Cut images into P x P patches and flatten each one: the ViT's tokens.

    The patches come in row-major order (left to right, then top to bottom): patch
    n = r * (Wi / P) + c covers rows r*P..r*P+P-1 and columns c*P..c*P+P-1. Each
    patch is flattened channel first, then row by row: element
    ch * P * P + i * P + j of patch n is ``images[b, ch, r*P + i, c*P + j]``.

    Shapes: images (B, C, Hi, Wi) -> (B, N, C*P*P), N = (Hi / P) * (Wi / P)
    """
    P = _check_patch(images, patch)
    B, C, Hi, Wi = images.shape
    x = images.reshape(B, C, Hi // P, P, Wi // P, P)  # (B, C, r, i, c, j)
    x = x.permute(0, 2, 4, 1, 3, 5)  # -> (B, r, c, C, i, j)
    return x.reshape(B, (Hi // P) * (Wi // P), C * P * P)  # -> (B, N, C*P*P)


def unpatchify(patches: Tensor, patch: int, height: int, width: int) -> Tensor:
    """The inverse of :func:`patchify`: put the patches back into images.

    Shapes: patches (B, N, C*P*P) -> images (B, C, height, width)
    """
    check_tensor("patches", patches)
    P = check_int("patch", patch, minimum=1)
    Hi, Wi = check_int("height", height, 1), check_int("width", width, 1)
    if Hi % P or Wi % P:
        raise ValueError(f"patch={P} does not divide the image size {Hi} x {Wi}")
    n = (Hi // P) * (Wi // P)
    if patches.dim() != 3 or patches.shape[1] != n or patches.shape[2] % (P * P):
        raise ValueError(
            f"patches must have shape (B, N={n}, C*{P}*{P}) for {Hi} x {Wi} images, "
            f"got {tuple(patches.shape)}"
        )
    B, C = patches.shape[0], patches.shape[2] // (P * P)
    x = patches.reshape(B, Hi // P, Wi // P, C, P, P)  # (B, r, c, C, i, j)
    x = x.permute(0, 3, 1, 4, 2, 5)  # -> (B, C, r, i, c, j)
    return x.reshape(B, C, Hi, Wi)


_CONFIG_SIZES = (
    "image_size",
    "patch",
    "channels",
    "n_classes",
    "d_model",
    "n_heads",
    "n_layers",
    "d_ff",
)


@dataclass(frozen=True)
class ViTConfig:
    """A Vision Transformer at any size; the defaults are Chapter 8's tiny one."""

    image_size: int = 8  # Hi = Wi: square images (the digits are 8 x 8)
    patch: int = 2  # P: side of a square patch; N = (image_size / P)^2 tokens
    channels: int = 1  # C: 1 for grey images, 3 for colour
    n_classes: int = 10  # K: outputs of the classification head
    d_model: int = 32  # D: width of every token vector (ViT-Base: 768)
    n_heads: int = 4  # H: attention heads per block (ViT-Base: 12)
    n_layers: int = 2  # L: encoder blocks (ViT-Base: 12)
    d_ff: int = 64  # hidden width of the feed-forward network (ViT-Base: 4 * D)
    dropout: float = 0.0  # on embeddings and sub-layers (ViT-Base: 0.1)

    def __post_init__(self):
        for name in _CONFIG_SIZES:
            check_int(name, getattr(self, name), minimum=1)
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
            )
        check_real("dropout", self.dropout, 0.0, 1.0, high_open=True)
        if self.image_size % self.patch:
            raise ValueError(
                f"patch={self.patch} does not divide image_size={self.image_size}"
            )

    @property
    def n_patches(self) -> int:
        """N: the number of patch tokens (the [CLS] token comes on top)."""
        return (self.image_size // self.patch) ** 2


def _check_classifier_sizes(image_size, channels, n_classes) -> None:
    check_int("image_size", image_size, minimum=1)
    check_int("channels", channels, minimum=1)
    check_int("n_classes", n_classes, minimum=1)


def _as_model_input(images: Tensor, channels: int, image_size: int, weight) -> Tensor:
    """``images`` (B, C, Hi, Wi), C = channels, Hi = Wi = image_size, on the
    model's device, cast to the dtype of its weights.

    The dtype policy of the three image classifiers: images are data, so float16,
    bfloat16 or float64 pixels are cast to the weights' dtype (float32 by default),
    and the logits come in the weights' dtype, as with any preprocessing.
    """
    expected = (channels, image_size, image_size)
    check_tensor("images", images, "float")
    if images.dim() != 4 or tuple(images.shape[1:]) != expected:
        raise ValueError(
            f"images must have shape (B, {', '.join(map(str, expected))}), got "
            f"{tuple(images.shape)}"
        )
    check_on("images", images, weight)
    return images.to(weight.dtype)


class ViT(nn.Module):
    """Patch embedding, [CLS], learned positions, L pre-norm blocks, LN, linear head.

    z_0 = [x_cls; x_1 E; ...; x_N E] + E_pos,  z_l = Block(z_{l-1}),
    logits = LN(z_L[0]) W_head   (Dosovitskiy et al., 2021, eq. 1-4)

    Shapes:
        images: (B, C, Hi, Wi) with C = channels, Hi = Wi = image_size
        returns logits (B, K); with ``need_weights`` also each block's attention
        weights, a list of L tensors (B, H, T, T), [CLS] at index 0
    """

    def __init__(self, cfg: ViTConfig):
        super().__init__()
        if not isinstance(cfg, ViTConfig):
            raise TypeError(f"cfg must be a ViTConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        patch_dim = cfg.channels * cfg.patch * cfg.patch
        self.patch_embed = nn.Linear(patch_dim, cfg.d_model)  # E: one patch -> D
        self.cls_token = nn.Parameter(torch.randn(1, 1, cfg.d_model) * 0.02)
        self.position = nn.Parameter(  # E_pos: one vector per token, [CLS] included
            torch.randn(1, 1 + cfg.n_patches, cfg.d_model) * 0.02
        )
        self.dropout = nn.Dropout(cfg.dropout)
        self.blocks = encoder_stack(cfg)  # pre-norm GELU blocks, as ViT's
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.n_classes)

    def embed(self, images: Tensor) -> Tensor:
        """The input tokens z_0: [CLS], then the embedded patches, plus positions.

        Shapes: images (B, C, Hi, Wi) -> (B, T, D)
        """
        cfg = self.cfg
        images = _as_model_input(
            images, cfg.channels, cfg.image_size, self.patch_embed.weight
        )
        x = self.patch_embed(patchify(images, cfg.patch))  # (B, N, C*P*P) -> (B,N,D)
        cls = self.cls_token.expand(x.shape[0], -1, -1)  # (1, 1, D) -> (B, 1, D)
        x = torch.cat([cls, x], dim=1) + self.position  # (B, T, D)
        return self.dropout(x)

    def forward(
        self, images: Tensor, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        x = self.embed(images)  # (B, C, Hi, Wi) -> (B, T, D)
        weights = []
        for block in self.blocks:
            if need_weights:  # the block's own steps, attention on the readable path
                attn, w = block.self_attn(block.norm1(x), need_weights=True)
                x = x + block.dropout1(attn)
                x = x + block.dropout2(block.feed_forward(block.norm2(x)))
                weights.append(w)  # (B, H, T, T)
            else:
                x = block(x)  # the fused kernel
        logits = self.head(self.norm(x[:, 0]))  # [CLS]: (B, D) -> (B, K)
        return (logits, weights) if need_weights else logits


def attention_rollout(weights: Sequence[Tensor], residual: float = 0.5) -> Tensor:
    """How much each output token draws on each input token, through all layers.

    Abnar & Zuidema (2020): average each layer's heads, A = mean_h W_h; add the
    residual connection, A' = residual * I + (1 - residual) * A; renormalise each
    row to sum 1; multiply the layers, the first on the right:
    rollout = A'_L ... A'_2 A'_1. Row i of the result spreads output token i
    over the input tokens (for a ViT, row 0 is the [CLS] token's map).

    Shapes: weights L x (B, H, T, T) -> (B, T, T)
    """
    if isinstance(weights, Tensor) or not isinstance(weights, Sequence):
        raise TypeError(
            f"weights must be a list of (B, H, T, T) tensors, got "
            f"{type(weights).__name__}"
        )
    if len(weights) == 0:
        raise ValueError("weights must hold at least one layer, got an empty list")
    first = weights[0]
    for i, w in enumerate(weights):
        check_tensor(f"weights[{i}]", w, "float")
        if w.dim() != 4 or w.shape[-1] != w.shape[-2] or w.shape != first.shape:
            raise ValueError(
                f"weights[{i}] must have shape (B, H, T, T) like weights[0] "
                f"{tuple(first.shape)}, got {tuple(w.shape)}"
            )
        if w.dtype != first.dtype:
            raise TypeError(
                f"weights[{i}] has dtype {w.dtype}, weights[0] {first.dtype}"
            )
    residual = check_real("residual", residual, 0.0, 1.0)
    T = first.shape[-1]
    eye = torch.eye(T, dtype=first.dtype, device=first.device)  # (T, T)
    rollout = eye.expand(first.shape[0], T, T)  # (B, T, T): no layer yet
    for w in weights:
        a = residual * eye + (1.0 - residual) * w.mean(dim=1)  # (B,H,T,T) -> (B,T,T)
        a = a / a.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(a.dtype).tiny)
        rollout = a @ rollout  # this layer on the left of the ones below it
    return rollout


class MLPBaseline(nn.Module):
    """The pixels as one flat vector, one hidden ReLU layer: no notion of space.

    For 8 x 8 grey digits, 64 -> 128 -> 10: 9,610 parameters.

    Shapes: images (B, C, Hi, Wi) -> logits (B, K)
    """

    def __init__(
        self,
        image_size: int = 8,
        channels: int = 1,
        n_classes: int = 10,
        hidden: int = 128,
    ):
        super().__init__()
        _check_classifier_sizes(image_size, channels, n_classes)
        check_int("hidden", hidden, minimum=1)
        self.image_size, self.channels = image_size, channels
        self.net = nn.Sequential(
            nn.Flatten(),  # (B, C, Hi, Wi) -> (B, C*Hi*Wi)
            nn.Linear(channels * image_size * image_size, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n_classes),  # (B, hidden) -> (B, K)
        )

    def forward(self, images: Tensor) -> Tensor:
        weight = next(self.parameters())
        images = _as_model_input(images, self.channels, self.image_size, weight)
        return self.net(images)


class CNNBaseline(nn.Module):
    """Two 3 x 3 convolutions, each followed by ReLU and 2 x 2 max-pooling, then a
    linear layer: locality and translation equivariance built in.

    For 8 x 8 grey digits, 1 -> 16 -> 32 channels, 8 x 8 -> 4 x 4 -> 2 x 2, then
    128 -> 10: 6,090 parameters.

    Shapes: images (B, C, Hi, Wi), Hi divisible by 4 -> logits (B, K)
    """

    def __init__(
        self,
        image_size: int = 8,
        channels: int = 1,
        n_classes: int = 10,
        widths: tuple[int, int] = (16, 32),
    ):
        super().__init__()
        _check_classifier_sizes(image_size, channels, n_classes)
        if image_size % 4:
            raise ValueError(f"image_size={image_size} must be divisible by 4")
        if isinstance(widths, str) or not isinstance(widths, Sequence):
            raise TypeError(f"widths must be a pair of ints, got {widths!r}")
        if len(widths) != 2:
            raise ValueError(f"widths must hold two channel counts, got {widths!r}")
        w1, w2 = (check_int("widths", w, minimum=1) for w in widths)
        self.image_size, self.channels = image_size, channels
        self.net = nn.Sequential(
            nn.Conv2d(channels, w1, 3, padding=1),  # (B, C, Hi, Wi) -> (B, w1, Hi, Wi)
            nn.ReLU(),
            nn.MaxPool2d(2),  # -> (B, w1, Hi/2, Wi/2)
            nn.Conv2d(w1, w2, 3, padding=1),  # -> (B, w2, Hi/2, Wi/2)
            nn.ReLU(),
            nn.MaxPool2d(2),  # -> (B, w2, Hi/4, Wi/4)
            nn.Flatten(),  # -> (B, w2 * Hi/4 * Wi/4)
            nn.Linear(w2 * (image_size // 4) ** 2, n_classes),  # -> (B, K)
        )

    def forward(self, images: Tensor) -> Tensor:
        weight = next(self.parameters())
        images = _as_model_input(images, self.channels, self.image_size, weight)
        return self.net(images)
