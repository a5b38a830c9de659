"""llama-index-e2rag: time- and causality-aware retrieval over long narratives."""

__version__ = "0.1.0"
