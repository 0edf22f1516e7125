"""The shared code of the interactive textbook on the Transformer and attention.

Every chapter imports its building blocks from here, so that what the book shows is
what the tests check. One module per concept:

=================  ===========================================  ========
module             what it holds                                chapter
=================  ===========================================  ========
``device``         device choice and seeding                    all
``attention``      scaled dot-product and multi-head attention  2, 3
``data``           toy tasks generated on the fly               1-5
``train``          a short training loop and its history        1-5
``plot``           figures in one style (CJK labels included)   all
``source``         show a package object's source in a notebook all
``exercises``      checkers for the coding exercises            all
=================  ===========================================  ========
"""

__version__ = "0.1.0"
