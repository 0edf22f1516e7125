"""The whole Transformer in two self-contained listings, one file each.

``gpt.py`` is a decoder-only GPT and ``transformer.py`` the encoder-decoder
Transformer of Vaswani et al. (2017). Each is one file that imports only ``torch``
and ``math``, so a reader can paste it into an empty notebook. They hold the same
parameters as the package's ``models.GPT`` and ``models.EncoderDecoder`` and
compute the same logits (``tests/test_listings.py``); the package's classes add
the input checks, the KV cache and the sampling options that a listing leaves out.
The listings check no input by design, so they are not part of the package's
public API contract.
"""
