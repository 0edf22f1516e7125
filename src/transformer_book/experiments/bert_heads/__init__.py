"""What the heads of a real pretrained encoder do (Chapter 8, §8.2).

Chapter 3 found previous-token and "partner" heads in a model trained for seconds.
Clark et al. (2019, "What does BERT look at?") found the same kinds in BERT-base:
heads that look at the previous token, heads that park their attention on [SEP]
and punctuation, and heads whose strongest link from a word goes to its syntactic
head (a determiner to its noun, an object to its verb). This subpackage measures
them in all-MiniLM-L6-v2 (``transformer_book.pretrained``), one file per concept:

============  ==================================================================
module        what it holds
============  ==================================================================
``grammar``   ``syntax_sentences``: English sentences from a small grammar,
              with the gold dependency arcs known by construction (the book
              ships no treebank); ``shuffle_words``
``measures``  ``attention_maps``: every layer's weights, (L, N, H, T, T);
              ``positional_scores``: per head, the mean weight on the previous
              token, on [CLS], on [SEP] and on punctuation;
              ``relation_accuracy``: per head and relation, how often a word's
              most-attended word is its syntactic head, against the best
              fixed-offset baseline (``offset_baseline``); ``ablated``: silence a
              set of heads in every layer at once (``probe.ablate_heads``);
              ``value_norm_shares``: Kobayashi et al. (2020): weight times the
              norm of what a token's value adds, the measurement behind
              "attention is not explanation"
``study``     ``run_heads``: the whole study of Chapter 8, for one seed, and
              ``heads_claims``: the bounds its prose states
============  ==================================================================

Shape letters: L layers, H heads per layer, N sentences, T positions, D width.
"""

from __future__ import annotations

from .grammar import (  # the word lists, for the tests of the grammar
    _AGENTS,  # noqa: F401
    _OBJECTS,  # noqa: F401
    _PREPOSITIONS,  # noqa: F401
    _TIMES,  # noqa: F401
    _VERBS,  # noqa: F401
    RELATIONS,
    Parsed,
    shuffle_words,
    syntax_sentences,
)
from .measures import (
    ablated,
    attention_maps,
    offset_baseline,
    positional_scores,
    relation_accuracy,
    value_norm_shares,
)
from .study import (
    TESTED_RELATIONS,  # noqa: F401  (read by the seeds tests)
    HeadsStudy,
    corpus_texts,
    heads_claims,
    run_heads,
)

__all__ = [
    "corpus_texts",
    "RELATIONS",
    "Parsed",
    "syntax_sentences",
    "shuffle_words",
    "attention_maps",
    "positional_scores",
    "relation_accuracy",
    "offset_baseline",
    "ablated",
    "value_norm_shares",
    "HeadsStudy",
    "run_heads",
    "heads_claims",
]
