"""Whole models built from the blocks, one file per family.

Every model takes one frozen config dataclass and returns logits. Chapter 5's
token embedding (scaled by sqrt(d_model), plus sinusoidal positions) serves the
paper's encoder-decoder; GPT and BERT learn a position table, and T5 has no
absolute positions (a relative bias in its attention instead).

==========================  =====================================  =======
module                      model                                  chapter
==========================  =====================================  =======
``embedding``               ``TokenEmbedding``                     5
``encoder_decoder``         ``EncoderDecoder`` (the paper's)       5
``gpt``                     ``GPT``: decoder-only, KV cache        6
``bert``                    ``BERT``: encoder-only, masked LM      6
``t5``                      ``T5``: text-to-text, relative bias    6
``sampling``                temperature, top-k, top-p filtering    6
==========================  =====================================  =======
"""

from .bert import BERT, BERTConfig, mask_tokens
from .embedding import TokenEmbedding
from .encoder_decoder import EncoderDecoder, EncoderDecoderConfig
from .gpt import GPT, GPTConfig
from .sampling import sample_next, top_k_filter, top_p_filter
from .t5 import T5, T5Config, span_corrupt, span_restore

__all__ = [
    "TokenEmbedding",
    "EncoderDecoderConfig",
    "EncoderDecoder",
    "GPTConfig",
    "GPT",
    "BERTConfig",
    "BERT",
    "mask_tokens",
    "T5Config",
    "T5",
    "span_corrupt",
    "span_restore",
    "top_k_filter",
    "top_p_filter",
    "sample_next",
]
