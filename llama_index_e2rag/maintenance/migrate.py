"""``e2rag migrate``: convert a llama-index-e2rag 0.1.0 store in place (``persist.legacy`` reads
the old format; this loads it as an index and saves it in today's layout)."""

from __future__ import annotations

from pathlib import Path

from llama_index.core import load_index_from_storage

from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.persist import legacy

__all__ = ["migrate_store"]


def migrate_store(persist_dir: Path) -> dict[str, dict[str, int]]:
    """Convert a 0.1.0 persist directory in place, or finish a conversion killed after its
    commit (``legacy.Conversion``); returns node counts and vectors per kind."""
    persist_dir = Path(persist_dir)
    if legacy.is_legacy(persist_dir):
        index = load_index_from_storage(legacy.legacy_storage(persist_dir, fast=True))
    elif legacy.conversion_pending(persist_dir):
        index = load_index(persist_dir)  # converted; its persist removes what is left of 0.1.0
    else:
        raise E2RAGError(
            f"{persist_dir} holds no llama-index-e2rag 0.1.0 store (its index_store.json keeps "
            "no 0.1.0 graph) and no unfinished conversion of one"
        )
    if not isinstance(index, E2RAGIndex):
        raise E2RAGError(f"{persist_dir} holds a {type(index).__name__}, not an e2rag index")
    index.storage_context.persist(str(persist_dir))
    vectors = index.stores.vectors
    kinds = {k for k in index.graph_store.counts()["nodes"]}
    return {
        "nodes": index.graph_store.counts()["nodes"],
        "vectors": {k: vectors.count(k) for k in sorted(kinds) if vectors.count(k)},
    }
