"""A store's life on disk: save, open, check, repair, info, checksums, llama-index files and
the legacy (0.1.0) format.

Only the layers below (stores, graph, vectors, disk, schema) are used here; what needs the index
or the write pipeline (``load_index``, re-embedding and re-extraction in ``e2rag repair``, the
0.1.0 conversion's re-save) is in ``llama_index_e2rag.maintenance``.
"""
