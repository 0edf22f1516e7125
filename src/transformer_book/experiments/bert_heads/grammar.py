"""English sentences from a small grammar, with their gold dependency arcs known
by construction (Chapter 8, §8.2): the book ships no treebank.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..._validate import check_instance, check_int, check_seed

# The grammar: DET ADJ* NOUN (ADV) VERB DET ADJ* NOUN (PREP (DET) NOUN) "."
# with zero to two adjectives, so that no relation sits at one fixed offset.
# Every word is one WordPiece of MiniLM's vocabulary (tests/test_bert_heads.py).
_DETERMINERS = ("the", "a", "this", "that", "every")
_ADJECTIVES = ("big", "small", "red", "quiet", "tired", "young", "happy", "brown")
_AGENTS = ("farmer", "teacher", "doctor", "child", "woman", "pilot", "student", "nurse")
_VERBS = (
    "sold",
    "bought",
    "found",
    "painted",
    "moved",
    "watched",
    "cleaned",
    "carried",
)

__all__ = [
    "RELATIONS",
    "Parsed",
    "syntax_sentences",
    "shuffle_words",
]
_OBJECTS = ("car", "house", "box", "book", "table", "picture", "boat", "letter")
_ADVERBS = ("quickly", "slowly", "carefully", "finally", "quietly")
_PREPOSITIONS = ("during", "after", "before")
_TIMES = ("the storm", "the meeting", "lunch", "the war", "the game", "dinner")

# Each relation: the dependent's part -> its head's part (Universal Dependencies
# names, with Clark et al.'s "dobj" and "pobj").
RELATIONS = ("det", "amod", "nsubj", "advmod", "dobj", "prep", "pobj", "punct")


@dataclass(frozen=True)
class Parsed:
    """A sentence with its gold arcs: ``heads[i]`` is word i's head (-1: the root)."""

    words: tuple[str, ...]
    heads: tuple[int, ...]
    relations: tuple[str, ...]  # relations[i]: word i's arc to heads[i] ("root")

    @property
    def text(self) -> str:
        return " ".join(self.words[:-1]) + self.words[-1]  # "... storm."


def _noun_phrase(rng: random.Random, nouns: Sequence[str], start: int):
    """(words, heads, relations, noun index) of DET ADJ* NOUN from word ``start``.

    The noun's own arc is left as "root" for the caller to set.
    """
    adjectives = rng.sample(_ADJECTIVES, rng.choice((0, 0, 1, 2)))
    noun = start + 1 + len(adjectives)
    words = [rng.choice(_DETERMINERS), *adjectives, rng.choice(nouns)]
    heads = [noun] * (1 + len(adjectives)) + [-1]
    relations = ["det"] + ["amod"] * len(adjectives) + ["root"]
    return words, heads, relations, noun


def syntax_sentences(n: int = 64, seed: int = 0) -> list[Parsed]:
    """``n`` sentences of the grammar, each with its dependency arcs.

    "the tired pilot painted a boat after lunch." parses as det(the, pilot),
    amod(tired, pilot), nsubj(pilot, painted), det(a, boat), dobj(boat, painted),
    prep(after, painted), pobj(lunch, after), punct(., painted).
    """
    check_int("n", n, minimum=1)
    check_seed("seed", seed)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words, heads, rels, subj = _noun_phrase(rng, _AGENTS, 0)
        if rng.random() < 0.3:
            words.append(rng.choice(_ADVERBS))
            heads.append(len(words))  # the verb comes next
            rels.append("advmod")
        verb = len(words)
        words.append(rng.choice(_VERBS))
        heads.append(-1)
        rels.append("root")
        w, h, r, obj = _noun_phrase(rng, _OBJECTS, len(words))
        words, heads, rels = words + w, heads + h, rels + r
        if rng.random() < 0.7:
            prep = len(words)
            words.append(rng.choice(_PREPOSITIONS))
            heads.append(verb)
            rels.append("prep")
            time = rng.choice(_TIMES).split()
            if len(time) == 2:
                words.append(time[0])
                heads.append(prep + 2)
                rels.append("det")
            words.append(time[-1])
            heads.append(prep)
            rels.append("pobj")
        words.append(".")
        heads.append(verb)
        rels.append("punct")
        heads[subj], rels[subj] = verb, "nsubj"
        heads[obj], rels[obj] = verb, "dobj"
        out.append(Parsed(tuple(words), tuple(heads), tuple(rels)))
    return out


def shuffle_words(text: str, rng: random.Random) -> str:
    """The sentence's words in a random order, its final full stop kept last."""
    check_instance("text", text, str)
    check_instance("rng", rng, random.Random)
    words = text.removesuffix(".").split()
    rng.shuffle(words)
    return " ".join(words) + "."
