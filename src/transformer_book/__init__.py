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
================  ================================================  =======
"""

__version__ = "0.1.0"
