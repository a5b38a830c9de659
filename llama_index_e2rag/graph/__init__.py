"""Graph stores: the protocol and the NetworkX default."""

from llama_index_e2rag.graph.base import Direction, GraphStore
from llama_index_e2rag.graph.networkx_store import NetworkXGraphStore

__all__ = ["Direction", "GraphStore", "NetworkXGraphStore"]
