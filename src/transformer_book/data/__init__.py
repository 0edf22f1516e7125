"""Toy tasks, generated on the fly: no downloads, any size, any seed.

Shape letters: B batch, T sequence length, N number of items.

Each generator takes a ``torch.Generator`` (or ``None`` for the global one), so a
chapter can draw the same data again, and a ``device`` to create tensors on.

===============  ==========================================================  =======
module           tasks                                                       chapter
===============  ==========================================================  =======
``tasks``        look-up, two relations, long-range recall, lag copy         1-4
``translation``  a made-up language pair with a held-out test split          5
===============  ==========================================================  =======
"""

from .tasks import (
    IGNORE_INDEX,
    LagCopyBatch,
    LookupBatch,
    RecallBatch,
    TwoRelationBatch,
    lag_copy_task,
    lookup_task,
    recall_task,
    two_relation_task,
)
from .translation import ToyTranslation, TranslationBatch

__all__ = [
    "LookupBatch",
    "lookup_task",
    "TranslationBatch",
    "ToyTranslation",
    "TwoRelationBatch",
    "two_relation_task",
    "IGNORE_INDEX",
    "RecallBatch",
    "recall_task",
    "LagCopyBatch",
    "lag_copy_task",
]
