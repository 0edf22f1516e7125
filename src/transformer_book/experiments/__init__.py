"""Each chapter's headline experiment as a function of its seed.

A chapter calls its experiment here with seed 0 and asserts the bounds its prose
states; ``tests/test_experiments_*.py`` (``make seeds``) run the same functions with
other seeds and assert the same bounds, so that what the book claims is a property of
the experiment, not of one lucky run on one machine. One module per experiment:

=================  ======================================================  =======
module             experiment                                              chapter
=================  ======================================================  =======
=================  ======================================================  =======
"""
