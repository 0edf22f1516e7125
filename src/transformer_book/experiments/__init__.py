"""Each chapter's headline experiment as a function of its seed.

A chapter calls its experiment here with seed 0 and asserts the bounds its prose
states; ``tests/test_experiments_*.py`` (``make seeds``) run the same functions with
other seeds and assert the same bounds, so that what the book claims is a property of
the experiment, not of one lucky run on one machine. One module per experiment:

=================  ======================================================  =======
module             experiment                                              chapter
=================  ======================================================  =======
``recall``         LSTMs against one attention layer: recall at 4-64       1
``lookup``         dictionary look-up, attention against a uniform average 2
``heads``          one head against two; head kinds and ablations          3
``extrapolation``  positional schemes trained short, tested long           4
``translation``    the encoder-decoder on the toy translation task         5
``variants``       GPT, BERT and T5 on the same corpus and probes          6
``variants_uses``  what each trained model is used for: perplexity,        6
                   sentence vectors, a fine-tuned text-to-text task
``efficiency``     KV sharing; what sparse and linear attention give up    7
``bert_heads``     the heads of the pretrained MiniLM: kinds, ablations    8
``pretraining``    sample efficiency: pretrained probe against scratch     8
``vision``         a ViT against an MLP and a CNN on handwritten digits    8
``scaling``        four sizes of GPT on one corpus; a fitted power law     8
``one_page``       the appendix's listings: GPT sorts, Transformer         app.
                   reverses digits
=================  ======================================================  =======

The Decision Transformer of Chapter 8 is in ``transformer_book.decision``.
"""
