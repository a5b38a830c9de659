"""The base of every retriever over ``Stores``: one retrieval sees one state of the store.

A retrieval reads the graph, the vectors and the chunks many times; a commit landing between two
of those reads would mix two states (a node found by search whose rows are gone, say). Each
``retrieve`` therefore holds the stores' read lock (``locks.py``): commits of this or another
process wait until it returns, and it waits for a commit under way.

It is also the one place where what every mode shares happens to the results: ``filters``
(``filters.py``: each retriever restricts its candidates to the allowed documents before
ranking; this base drops whatever graph expansion still brought in from other documents), the
source's ``file_name`` / ``title`` on every result, and the score on the 0-1 scale of
``ranking.scores`` (``_calibrate``; the mode's raw score stays in ``signals["raw_score"]``, the
order of the results is the mode's own).
"""

from __future__ import annotations

from typing import Optional

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryType
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_e2rag.context.keys import RAW_SCORE_KEY, SIGNALS_KEY
from llama_index_e2rag.retrievers.filters import (
    DocScope,
    check_filters,
    resolve_scope,
    result_doc_id,
    with_source,
)
from llama_index_e2rag.ranking.scores import cosine_score
from llama_index_e2rag.stores.port import Stores


class StoresRetriever(BaseRetriever):
    """``BaseRetriever`` whose public calls run under the stores' read lock (subclasses set
    ``self._stores`` and may set ``self.filters`` through ``_set_filters``)."""

    _stores: Stores
    filters: Optional[MetadataFilters] = None

    def _set_filters(self, filters: Optional[MetadataFilters]) -> None:
        """Check ``filters`` now (a bad operator fails at construction, in one line)."""
        self.filters = check_filters(filters)

    def _scope(self) -> Optional[DocScope]:
        """The documents this retrieval may use (``None``: all); resolved per retrieval, since
        documents come and go."""
        return resolve_scope(self._stores, self.filters)

    def _calibrate(self, raw: float, signals: dict[str, float]) -> float:
        """The 0-1 score of a raw score (default: a cosine, clipped); ``signals`` is the
        result's ``metadata["signals"]``, for modes whose calibration needs more than ``raw``."""
        return cosine_score(raw)

    def _finish(self, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
        scope = self._scope()
        if scope is not None:
            nodes = [item for item in nodes if scope.allows(result_doc_id(item))]
        for item in nodes:
            if item.score is not None:
                signals = _signals_of(item)
                signals[RAW_SCORE_KEY] = item.score
                item.score = self._calibrate(item.score, signals)
        return with_source(self._stores, nodes)

    def retrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        with self._stores.reading():
            return self._finish(super().retrieve(str_or_query_bundle))

    async def aretrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        async with self._stores.areading():
            return self._finish(await super().aretrieve(str_or_query_bundle))


def _signals_of(item: NodeWithScore) -> dict[str, float]:
    """The result's ``signals`` dict (created when the mode records none), kept out of what
    the LLM reads and what is embedded, like the rest of the bookkeeping."""
    node = item.node
    for excluded in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
        if SIGNALS_KEY not in excluded:
            excluded.append(SIGNALS_KEY)
    return node.metadata.setdefault(SIGNALS_KEY, {})
