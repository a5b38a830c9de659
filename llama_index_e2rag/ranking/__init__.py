"""Framework-free scoring shared by both packages (no llama-index imports below this folder).

``e2rag``: E²RAG's seeds → hop → rank; ``temporal``: *after / before / when* anchors;
``narrative``: lexical + dense + graph fusion; ``budget``: filling a word budget without repeats.
"""

from llama_index_e2rag.ranking.e2rag import (
    E2RAGSource,
    find_seeds,
    mention_events,
    one_hop,
    rank_chunks,
    rerank_mentions,
)

__all__ = [
    "E2RAGSource", "find_seeds", "mention_events", "one_hop", "rank_chunks", "rerank_mentions"
]
