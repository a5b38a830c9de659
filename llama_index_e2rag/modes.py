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

#: A mode that reads a document layer -> (what the layer is called, the builder class that adds
#: it, the ``e2rag index`` flag that adds it). ``e2rag timeline`` and ``index.entity_timeline``
#: read the event graph too.
LAYER_OF_MODE = {
    "chrono": ("ChronoRAG layers", "ChronoLayerBuilder", "--chrono"),
    "sentence_graph": ("sentence graph", "SentenceGraphBuilder", "--sentence-graph"),
    "event_graph": ("event graph", "EventGraphBuilder", "--event-graph"),
}


def layer_missing_python(mode: str, needed_by: str) -> str:
    """Why ``needed_by`` fails on an index without ``mode``'s layer, and the call that adds it
    to the documents already indexed (a rebuild would extract them all again)."""
    what, builder, flag = LAYER_OF_MODE[mode]
    return (
        f"this index has no {what} (needed by {needed_by}); add the layer to the documents "
        f"already indexed, extracting nothing again: index.add_layers([{builder}()]) (from "
        f"llama_index_e2rag import {builder}), then index.storage_context.persist(DIR) to keep "
        f"it; from a shell: e2rag index --store DIR {flag}"
    )


def layer_missing_cli(mode: str, store: object, needed_by: str) -> str:
    """``layer_missing_python`` for the command line: the ``e2rag index`` run that adds the
    layer to ``store`` (short: the CLI cuts an error line at 300 characters)."""
    what, _, flag = LAYER_OF_MODE[mode]
    return (
        f"{store} has no {what} (needed by {needed_by}); add the layer, extracting nothing "
        f"again: e2rag index --store {store} {flag}"
    )
