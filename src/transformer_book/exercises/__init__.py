"""Checkers for the exercises, one submodule per chapter.

A checker of a coding exercise takes the reader's function; a checker of an
answer (``chNN_answers``) takes numbers, a function of t or a measured table
and the conclusions drawn from it. Every checker prints "not attempted yet"
while the stub still raises ``NotImplementedError`` or holds ``...``, raises
``AssertionError`` naming what is wrong, and prints one line on success.
"""

from .ch01_rnn import (
    check_gradient_ratio,
    check_rnn_step,
    check_spectral_radius,
)
from .ch02_attention import (
    check_causal_mask,
    check_masked_softmax,
    check_scaled_dot_product_attention,
)
from .ch03_multi_head import (
    check_causal_multi_head_attention,
    check_previous_token_score,
    check_split_heads,
)
from .ch04_answers import check_lag2_answer, check_rope_symmetry
from .ch04_positional import (
    check_alibi_slopes,
    check_rope,
    check_sinusoidal_table,
)
from .ch05_beam_search import check_beam_search
from .ch05_transformer import (
    check_decoder_block_forward,
    check_decoder_masks,
    check_noam_lr,
)
from .ch06_answers import (
    check_bert_cache_answer,
    check_finetune_answer,
    check_targets_answer,
    check_vocabulary_answer,
)
from .ch06_variants import check_mask_tokens, check_top_p
from .ch07_answers import (
    check_kv_cache_answer,
    check_kv_sharing_answer,
    check_t_squared_answer,
    check_tiling_threshold_answer,
)
from .ch07_efficient import check_online_softmax_update, check_sliding_window_mask
from .ch08_answers import check_gpt2_convert, check_head_drift
from .ch08_decision import check_power_law_fit, check_returns_to_go
from .ch08_vision import check_attention_rollout, check_patchify

__all__ = [
    "check_gradient_ratio",
    "check_rnn_step",
    "check_spectral_radius",
    "check_causal_mask",
    "check_masked_softmax",
    "check_scaled_dot_product_attention",
    "check_causal_multi_head_attention",
    "check_previous_token_score",
    "check_split_heads",
    "check_alibi_slopes",
    "check_rope",
    "check_sinusoidal_table",
    "check_rope_symmetry",
    "check_lag2_answer",
    "check_noam_lr",
    "check_decoder_masks",
    "check_decoder_block_forward",
    "check_beam_search",
    "check_top_p",
    "check_mask_tokens",
    "check_targets_answer",
    "check_bert_cache_answer",
    "check_vocabulary_answer",
    "check_finetune_answer",
    "check_online_softmax_update",
    "check_sliding_window_mask",
    "check_kv_cache_answer",
    "check_t_squared_answer",
    "check_kv_sharing_answer",
    "check_tiling_threshold_answer",
    "check_patchify",
    "check_attention_rollout",
    "check_returns_to_go",
    "check_power_law_fit",
    "check_gpt2_convert",
    "check_head_drift",
]
