"""Whole-store operations that need the index or the write pipeline: open a store checked
(``load``: ``load_index``), repair it (``repair``), convert a 0.1.0 one (``migrate``).

The store-level parts they run are in ``persist`` (which uses only the layers below it); these
modules wire them to ``E2RAGIndex``, the embedding and the extractors.
"""
