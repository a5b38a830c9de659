"""Framework-free scoring shared by both packages (no llama-index imports below this folder).

``e2rag``: E²RAG's seeds → hop → rank; ``temporal``: *after / before / when* anchors;
``narrative``: lexical + dense + graph fusion; ``budget``: filling a word budget without repeats.
"""

from llama_index_e2rag.ranking.e2rag import (
    EVENT_WEIGHT,
    MENTION_POOL,
    SEED_TOP_K,
    E2RAGRanking,
    E2RAGSource,
    clean_cues,
    e2rag_ranking,
    find_seeds,
    mention_events,
    one_hop,
    rank_chunks,
    rerank_mentions,
)

__all__ = [
    "EVENT_WEIGHT", "MENTION_POOL", "SEED_TOP_K", "E2RAGRanking", "E2RAGSource", "clean_cues",
    "e2rag_ranking", "find_seeds", "mention_events", "one_hop", "rank_chunks", "rerank_mentions",
]
