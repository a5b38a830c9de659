"""Graph stores: the protocol, the SQLite default, PostgreSQL, and NetworkX (in memory).

Exports are lazy (PEP 562): a module reading a SQLite store (``e2rag show``) does not pay for
importing NetworkX (~0.3 s).
"""

from llama_index_e2rag.lazy import lazy_exports

_LAZY = {
    "Direction": "llama_index_e2rag.graph.base",
    "GraphStore": "llama_index_e2rag.graph.base",
    "NetworkXGraphStore": "llama_index_e2rag.graph.networkx_store",
    "SQLiteGraphStore": "llama_index_e2rag.graph.sqlite_store",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_exports(globals(), _LAZY)
