"""``budget_words=`` for every retriever: ranked ``NodeWithScore``s cut to a word budget.

The rule itself (no sentence twice, last piece cut at a sentence end) is ``ranking.budget``;
this adapts llama-index nodes to it. A node's character offsets are trusted only when they
describe its text (``end - start == len(text)``): chunks and sentences qualify, ChronoRAG's
assembled fact lists do not and are deduplicated by their sentences' text instead.
"""

from __future__ import annotations

from typing import Optional, Sequence

from llama_index.core.schema import NodeWithScore

from llama_index_e2rag.context.keys import TRIMMED_KEY
from llama_index_e2rag.ranking.budget import Piece, budget_depth, fill_budget


def check_budget(budget_words: Optional[int]) -> None:
    if budget_words is not None and budget_words < 1:
        raise ValueError(f"budget_words must be at least 1, got {budget_words}")


def within_budget(
    nodes: Sequence[NodeWithScore], budget_words: Optional[int]
) -> list[NodeWithScore]:
    """The ranked nodes that fit ``budget_words`` (all of them, without repeats, for ``None``)."""
    pieces = [Piece(item, _doc_id(item), _offset(item), item.node.get_content()) for item in nodes]
    results = []
    for kept in fill_budget(pieces, budget_words):
        item: NodeWithScore = kept.piece.key
        if not kept.trimmed:
            results.append(item)
            continue
        node = item.node.model_copy(deep=True)
        node.set_content(kept.text)
        if kept.start is not None:
            node.start_char_idx, node.end_char_idx = kept.start, kept.end
        node.metadata[TRIMMED_KEY] = True
        if TRIMMED_KEY not in node.excluded_llm_metadata_keys:
            node.excluded_llm_metadata_keys = [*node.excluded_llm_metadata_keys, TRIMMED_KEY]
            node.excluded_embed_metadata_keys = [*node.excluded_embed_metadata_keys, TRIMMED_KEY]
        results.append(NodeWithScore(node=node, score=item.score))
    return results


def _doc_id(item: NodeWithScore) -> str:
    return str(item.node.metadata.get("doc_id") or item.node.ref_doc_id or "")


def _offset(item: NodeWithScore) -> Optional[int]:
    node = item.node
    start, end = getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None)
    if start is None or end is None or end - start != len(node.get_content()):
        return None
    return int(start)


__all__ = ["TRIMMED_KEY", "budget_depth", "check_budget", "within_budget"]
