"""The shared code of the interactive textbook on the Transformer and attention.

Every chapter imports its building blocks from here, so that what the book shows is
what the tests check. One module per concept:

================  ================================================  =======
module            what it holds                                     chapter
================  ================================================  =======
``device``        device choice, seeding, bfloat16 autocast         all
``recurrent``     readable RNN/LSTM, unrolled step by step          1
``measure``       gradient norms, spectral radius, saved and peak   1, 7
                  memory
``classifiers``   the LSTM and attention classifiers of recall      1
``attention``     scaled dot-product and multi-head attention       2, 3
``probe``         an attention-only model, head recording/ablation  3
``positional``    sinusoidal, learned, T5, RoPE and ALiBi           4
``position_lm``   a small language model with a switchable scheme   4
``blocks``        encoder and decoder blocks, feed-forward          5
``models``        the encoder-decoder; GPT, BERT, T5; sampling      5, 6
``corpus``        pydoc_data's English prose, a fixed shipped copy  6
``tokenizer``     byte-level BPE and characters, token blocks       6
``efficient``     tiled attention, sparse masks, linear attention   7
``speed``         timing against PyTorch; the KV cache's speed-up   7
``distributed``   one training step under DDP, two processes        7
``concepts``      the concept checks after each chapter's sections  all
``data``          toy tasks generated on the fly                    1-5
``train``         a short training loop, its history, schedules     1-5
``plot``          figures in one style (CJK labels included)        all
``source``        show a package object's source in a notebook      all
``exercises``     checkers for the coding exercises                 all
``alt_text``      the text alternatives of the chapters' figures    all
================  ================================================  =======

**The promise.** Every public function and class returns the right result or
raises a ``ValueError`` or ``TypeError`` whose message names the argument;
``tests/test_public_api.py`` holds every public name to it, with bad values derived
from each annotation.

**Dtypes.** One policy per entry point, for inputs of float16, bfloat16 or float64
given to weights in float32 (``tests/test_public_api.py`` checks each):

=================================================  ==========================
entry point                                        policy
=================================================  ==========================
``attention.scaled_dot_product_attention``,        follow: computes in the
``attention.fused_scaled_dot_product_attention``,  inputs' dtype (scores and
``efficient.blockwise_attention``,                 softmax in at least
``efficient.performer_attention``,                 float32), returns it
``positional.apply_rope``
``MultiHeadAttention``, ``FeedForward``,           refuse: a TypeError naming
``EncoderBlock``, ``DecoderBlock``,                the input and both dtypes
``LinformerAttention``, ``PerformerAttention``,    (convert the module, e.g.
``RelativeSelfAttention``,                         ``module.to(x.dtype)``, or
``PositionalSelfAttention``,                       run under autocast)
``LearnedPositionalEmbedding``, ``VanillaRNN``,
``LSTM``
``vision.ViT``, ``MLPBaseline``, ``CNNBaseline``,  cast: the images (returns)
``decision.DecisionTransformer``                   are data, cast to the
                                                   weights' dtype; the output
                                                   has the weights' dtype
``GPT``, ``BERT``, ``T5``, ``EncoderDecoder``,     token ids: int64 or int32;
``PositionLM``, ``AttentionOnlyClassifier``        any other dtype is refused
=================================================  ==========================
"""

__version__ = "0.1.0"
