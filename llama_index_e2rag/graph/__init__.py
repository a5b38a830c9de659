"""Graph stores: the protocol, the SQLite default, PostgreSQL, and NetworkX (in memory)."""

from llama_index_e2rag.graph.base import Direction, GraphStore
from llama_index_e2rag.graph.networkx_store import NetworkXGraphStore
from llama_index_e2rag.graph.sqlite_store import SQLiteGraphStore

__all__ = ["Direction", "GraphStore", "NetworkXGraphStore", "SQLiteGraphStore"]
