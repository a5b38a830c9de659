"""``filters=MetadataFilters(...)`` for every retriever: which documents a retrieval may draw from.

The keys a LlamaIndex user filters on (``doc_id``, ``file_name``, any metadata of the source
``Document``) are properties of a document, not of a graph node, so a filter is resolved once to
the set of allowed documents (``DocScope``) and every retriever restricts its candidates to them
*before* ranking and budget filling: ``similarity_top_k`` and ``budget_words`` are still filled,
from the allowed documents, instead of post-filtering a ranking down to fewer results.

A document's metadata is its chunks' user metadata (llama-index copies the ``Document``'s metadata
onto every chunk; chunk ``TextNode``s ride in the graph), plus ``doc_id`` / ``ref_doc_id``. The
same table names each result's source (``with_source``): every result of every mode carries the
document's ``file_name`` / ``title`` when the document has one.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable, Mapping, Optional, Sequence

import numpy as np
from llama_index.core.schema import NodeWithScore
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llama_index_e2rag.context.keys import INTERNAL_METADATA_KEYS, RESULT_SOURCE_KEYS
from llama_index_e2rag.context.story_position import document_chunks
from llama_index_e2rag.schema import NodeKind
from llama_index_e2rag.stores import kind_search
from llama_index_e2rag.stores.state_cache import StateCache
from llama_index_e2rag.stores.port import Stores
from llama_index_e2rag.vectors.base import VectorHit
_ORDERED: dict[FilterOperator, Callable[[Any, Any], bool]] = {
    FilterOperator.GT: operator.gt,
    FilterOperator.GTE: operator.ge,
    FilterOperator.LT: operator.lt,
    FilterOperator.LTE: operator.le,
}


def check_filters(filters: Optional[MetadataFilters]) -> Optional[MetadataFilters]:
    """``filters`` as given, refused in one line (at retriever construction, not at the first
    query) when it is not a ``MetadataFilters`` or uses an operator/condition we cannot apply."""
    if filters is None:
        return None
    if not isinstance(filters, MetadataFilters):
        raise TypeError(
            "filters must be llama_index.core.vector_stores.types.MetadataFilters, got "
            f"{type(filters).__name__}"
        )
    for item in _walk(filters):
        if isinstance(item, MetadataFilters):
            condition = item.condition or FilterCondition.AND
            if condition not in (FilterCondition.AND, FilterCondition.OR, FilterCondition.NOT):
                raise ValueError(f"unknown filter condition {condition!r}; use and, or, not")
        elif item.operator not in _OPERATORS:  # str-valued enum: "==" finds EQ too
            raise ValueError(
                f"unknown filter operator {item.operator!r} on key {item.key!r}; use one of "
                f"{', '.join(op.value for op in _OPERATORS)}"
            )
    return filters


def _walk(filters: MetadataFilters) -> Iterable[Any]:
    yield filters
    for item in filters.filters:
        if isinstance(item, MetadataFilters):
            yield from _walk(item)
        else:
            yield item


def matches(filters: MetadataFilters, metadata: Mapping[str, Any]) -> bool:
    """Whether a document with ``metadata`` passes ``filters`` (nested and/or/not)."""
    results = (
        matches(item, metadata) if isinstance(item, MetadataFilters) else _match(item, metadata)
        for item in filters.filters
    )
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.OR:
        return any(results)
    if condition == FilterCondition.NOT:  # llama-index's NOT: none of the filters holds
        return not any(results)
    return all(results)


def _match(item: MetadataFilter, metadata: Mapping[str, Any]) -> bool:
    return _OPERATORS[item.operator](metadata.get(item.key), item.value)


def _ordered(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    """A comparison that is false (not an error) when the document's value is missing or of
    another type than the filter's: ``year > 1900`` skips a document without a year."""

    def compare(value: Any, wanted: Any) -> bool:
        try:
            return value is not None and bool(op(value, wanted))
        except TypeError:
            return False

    return compare


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]


def _contains(value: Any, wanted: Any) -> bool:
    """A list holding ``wanted``, or a string holding it as a substring."""
    if isinstance(value, str):
        return isinstance(wanted, str) and wanted in value
    return wanted in _as_list(value)


_OPERATORS: dict[FilterOperator, Callable[[Any, Any], bool]] = {
    FilterOperator.EQ: lambda value, wanted: value is not None and value == wanted,
    FilterOperator.NE: lambda value, wanted: value != wanted,
    **{op: _ordered(fn) for op, fn in _ORDERED.items()},
    FilterOperator.IN: lambda value, wanted: value is not None and value in _as_list(wanted),
    FilterOperator.NIN: lambda value, wanted: value not in _as_list(wanted),
    FilterOperator.ANY: lambda value, wanted: bool(set(_as_list(value)) & set(_as_list(wanted))),
    FilterOperator.ALL: lambda value, wanted: set(_as_list(wanted)) <= set(_as_list(value)),
    FilterOperator.CONTAINS: _contains,
    FilterOperator.TEXT_MATCH: lambda value, wanted: (
        isinstance(value, str) and str(wanted) in value
    ),
    FilterOperator.TEXT_MATCH_INSENSITIVE: lambda value, wanted: (
        isinstance(value, str) and str(wanted).lower() in value.lower()
    ),
    FilterOperator.IS_EMPTY: lambda value, wanted: value in (None, "", [], ()),
}


# -- the documents' metadata ----------------------------------------------------------------------
def _documents(stores: Stores, state: Hashable) -> dict[str, dict[str, Any]]:
    """doc id -> its user metadata (from its first chunk) plus ``doc_id`` / ``ref_doc_id``."""
    found: dict[str, dict[str, Any]] = {doc_id: {} for doc_id in stores.graph.doc_ids()}
    first = [document_chunks(stores, doc_id).first_chunk for doc_id in found]
    for node, chunk in stores.chunk_pairs([c for c in first if c is not None]):
        found[node.doc_id] = {
            k: v for k, v in chunk.metadata.items() if k not in INTERNAL_METADATA_KEYS
        }
    return {
        doc_id: {**meta, "doc_id": doc_id, "ref_doc_id": doc_id} for doc_id, meta in found.items()
    }


_DOCUMENTS: StateCache[dict[str, dict[str, Any]]] = StateCache(_documents)


def document_metadata(stores: Stores) -> dict[str, dict[str, Any]]:
    """Every document's metadata, by doc id (cached per content state)."""
    return _DOCUMENTS.get(stores)


# -- the scope of one retrieval -------------------------------------------------------------------
@dataclass(frozen=True)
class DocScope:
    """The documents a filtered retrieval may draw from, and candidate search within them."""

    doc_ids: frozenset[str]

    def allows(self, doc_id: Optional[str]) -> bool:
        return doc_id in self.doc_ids

    def node_ids(self, stores: Stores, kind: NodeKind) -> list[str]:
        """Ids of the allowed documents' nodes of ``kind``."""
        return [n.id for doc in sorted(self.doc_ids) for n in stores.graph.nodes(kind, doc)]

    def search(
        self, stores: Stores, kind: NodeKind, vector: Sequence[float], top_k: int
    ) -> list[VectorHit]:
        """The ``top_k`` nodes of ``kind`` nearest to ``vector`` among the allowed documents
        only: exact cosine over their stored vectors (best first, ties by id), so the top k
        are filled from these documents however far down the whole index they rank."""
        if top_k < 1:
            return []
        sims = stores.similarities(vector, self.node_ids(stores, kind))
        best = sorted(sims.items(), key=lambda hit: (-hit[1], hit[0]))[:top_k]
        return [VectorHit(node_id, score) for node_id, score in best]

    def rows(self, doc_of_rows: Sequence[Optional[str]]) -> np.ndarray:
        """Boolean mask of the rows (one doc id each) that belong to allowed documents."""
        return np.fromiter((d in self.doc_ids for d in doc_of_rows), bool, len(doc_of_rows))


def resolve_scope(stores: Stores, filters: Optional[MetadataFilters]) -> Optional[DocScope]:
    """The documents passing ``filters`` (``None``: no filter, every document)."""
    if filters is None:
        return None
    docs = document_metadata(stores)
    return DocScope(frozenset(d for d, meta in docs.items() if matches(filters, meta)))


def search(
    stores: Stores,
    scope: Optional[DocScope],
    kind: NodeKind,
    vector: Sequence[float],
    top_k: int,
) -> list[VectorHit]:
    """``stores.search`` within ``scope`` (the whole index without one; through a kind's HNSW
    graph once the kind is large, ``stores.kind_search``)."""
    if scope is None:
        return kind_search.search(stores, kind, vector, top_k)
    return scope.search(stores, kind, vector, top_k)


async def asearch(
    stores: Stores,
    scope: Optional[DocScope],
    kind: NodeKind,
    vector: Sequence[float],
    top_k: int,
) -> list[VectorHit]:
    if scope is None and not kind_search.large(stores, kind.value):
        return await stores.asearch(kind, vector, top_k)
    import asyncio

    if scope is None:
        return await asyncio.to_thread(kind_search.search, stores, kind, vector, top_k)
    return await asyncio.to_thread(scope.search, stores, kind, vector, top_k)


# -- results --------------------------------------------------------------------------------------
def result_doc_id(item: NodeWithScore) -> str:
    """The source document of a retrieved node (``doc_id`` metadata, else its source link)."""
    return str(item.node.metadata.get("doc_id") or item.node.ref_doc_id or "")


def with_source(stores: Stores, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
    """Name every result's source: the document's ``file_name`` / ``title`` when it has one and
    the result does not carry it yet, so no answer cites only "document 0"."""
    docs: Optional[dict[str, dict[str, Any]]] = None
    for item in nodes:
        metadata = item.node.metadata
        if all(key in metadata for key in RESULT_SOURCE_KEYS):
            continue
        if docs is None:
            docs = document_metadata(stores)
        source = docs.get(result_doc_id(item), {})
        for key in RESULT_SOURCE_KEYS:
            if key not in metadata and source.get(key) is not None:
                metadata[key] = source[key]
    return nodes


__all__ = [
    "DocScope",
    "asearch",
    "check_filters",
    "document_metadata",
    "matches",
    "resolve_scope",
    "result_doc_id",
    "search",
    "with_source",
]
