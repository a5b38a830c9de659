"""Names of the retrieval modes and HyDE variants, importable without llama-index (the CLI's
argument parser and ``e2rag show`` need them; the classes load only when a mode is used)."""

#: mode -> (module, class) of its retriever
RETRIEVER_CLASSES = {
    "narrative": ("llama_index_e2rag.retrievers.narrative", "NarrativeRetriever"),
    "entity_event": ("llama_index_e2rag.retrievers.entity_event", "EntityEventRetriever"),
    "grounded": ("llama_index_e2rag.retrievers.grounded", "GroundedGraphRetriever"),
    "chrono": ("llama_index_e2rag.retrievers.chrono", "ChronoRetriever"),
    "vector": ("llama_index_e2rag.retrievers.vector", "VectorChunkRetriever"),
    "sentence_graph": (
        "llama_index_e2rag.retrievers.sentence_graph", "SentenceGraphRetriever"
    ),
    "event_graph": ("llama_index_e2rag.retrievers.event_graph", "EventGraphRetriever"),
}
RETRIEVER_MODES = tuple(RETRIEVER_CLASSES)
#: The mode of ``as_retriever()`` / ``as_query_engine()`` / ``e2rag query`` without one.
DEFAULT_MODE = "narrative"
#: E²RAG's hypothetical-response variants (``entity_event`` only).
HYDE_VARIANTS = ("comb_extraction", "hyp_extraction", "comb_embedding", "hyp_embedding")
