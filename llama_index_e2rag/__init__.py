"""llama-index-e2rag: time- and causality-aware retrieval over long narratives.

Exports are lazy (PEP 562): importing the package, or any module of it, loads no model and
neither llama-index nor the index. It does one thing: ``E2RAGIndex`` joins llama-index's index
registries (lazily, see ``registration``), so that after ``import llama_index_e2rag``
``load_index_from_storage`` opens our stores, whichever of the two packages came first.
"""

from __future__ import annotations

from llama_index_e2rag import registration
from llama_index_e2rag.lazy import lazy_exports

__version__ = "0.1.0"

_LAZY = {
    "E2RAGIndex": "llama_index_e2rag.index",
    "load_index": "llama_index_e2rag.maintenance.load",
    "EmbeddedVectors": "llama_index_e2rag.vectors.embedded",
    "LlamaIndexVectors": "llama_index_e2rag.vectors.external",
    "SQLiteGraphStore": "llama_index_e2rag.graph",
    "PostgresGraphStore": "llama_index_e2rag.graph.postgres_store",
    "Stores": "llama_index_e2rag.stores.port",
    "ChronoLayerMissingError": "llama_index_e2rag.retrievers.chrono",
    "Passage": "llama_index_e2rag.context.evidence",
    "VectorChunkRetriever": "llama_index_e2rag.retrievers.vector",
    "assemble_context": "llama_index_e2rag.context.evidence",
    "ChronoLayerBuilder": "llama_index_e2rag.extract.chrono",
    "ChronoRetriever": "llama_index_e2rag.retrievers.chrono",
    "ContextBundle": "llama_index_e2rag.context.evidence",
    "EdgeKind": "llama_index_e2rag.schema",
    "EntityEventExtractor": "llama_index_e2rag.extract.e2rag",
    "EntityEventRetriever": "llama_index_e2rag.retrievers.entity_event",
    "EventGraphBuilder": "llama_index_e2rag.extract.event_graph.builder",
    "EventGraphRetriever": "llama_index_e2rag.retrievers.event_graph",
    "ExtractiveSynthesizer": "llama_index_e2rag.answer.extractive",
    "GraphEdge": "llama_index_e2rag.schema",
    "GraphNode": "llama_index_e2rag.schema",
    "GraphStore": "llama_index_e2rag.graph",
    "GroundedExtractor": "llama_index_e2rag.extract.grounded",
    "GroundedGraphRetriever": "llama_index_e2rag.retrievers.grounded",
    "LLMRunner": "llama_index_e2rag.llm.runner",
    "MiniLMEmbedding": "llama_index_e2rag.embeddings",
    "NetworkXGraphStore": "llama_index_e2rag.graph",
    "NoLLM": "llama_index_e2rag.llm.no_llm",
    "NodeKind": "llama_index_e2rag.schema",
    "ResponseCache": "llama_index_e2rag.llm.runner",
    "SentenceGraphBuilder": "llama_index_e2rag.extract.sentence_graph.builder",
    "SentenceGraphMissingError": "llama_index_e2rag.retrievers.sentence_graph",
    "SentenceGraphRetriever": "llama_index_e2rag.retrievers.sentence_graph",
}

__all__ = ["__version__", *sorted(_LAZY)]

# heavy components are imported only when a user asks for them
__getattr__ = lazy_exports(globals(), _LAZY)

registration.install()
