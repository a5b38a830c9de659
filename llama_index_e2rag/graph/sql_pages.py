"""Keyset pages of a SQL graph store: ``scan_nodes`` / ``scan_edges`` read a whole document a
page at a time, each read starting after the last key of the one before, so a reader holds one
page and no cursor stays open between reads (a writer is never kept waiting by a slow reader).
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Iterator, Optional, Sequence

from llama_index_e2rag.graph.base import pages
from llama_index_e2rag.graph.sql_rows import (
    EDGE_COLUMNS,
    NODE_COLUMNS,
    filters,
    placeholders,
    row_edge,
    row_node,
)
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind

#: A store's read: rows of one statement with ``?`` placeholders (``SQLGraphStore._query``).
Query = Callable[[str, Sequence[Any]], list[Any]]


def node_pages(
    query: Query, kind: Optional[NodeKind], doc_id: Optional[str], page: int
) -> Iterator[list[GraphNode]]:
    """Nodes (of ``kind``, of ``doc_id``) ``page`` at a time in story order."""
    rows = keyset_pages(
        query, f"SELECT {NODE_COLUMNS} FROM e2rag_nodes", filters(kind=kind, doc_id=doc_id),
        ("p0", "p1", "p2", "id"), page, lambda row: (row[3], row[4], row[5], row[0]),
    )
    return ([row_node(r) for r in batch] for batch in rows)


def story_pages(query: Query, doc_id: Optional[str], page: int) -> Iterator[list[GraphNode]]:
    """Nodes of every kind (of ``doc_id``) ``page`` at a time in story order: each kind's
    keyset pages, read along the story index, merged. One read over all kinds has no index in
    that order, and sorted every node again for each page (a commit's scan of a staged
    million-word document: ~125 sorts of ~620k nodes). Each kind reads a quarter page at a time,
    so the merge holds about two pages."""
    part = max(1, page // 4)
    streams = [(node for batch in node_pages(query, kind, doc_id, part) for node in batch)
               for kind in NodeKind]
    return pages(heapq.merge(*streams, key=lambda node: (*node.pos, node.id)), page)


def edge_pages(
    query: Query, kind: Optional[EdgeKind], doc_id: Optional[str], page: int,
    index: Optional[str] = None,
) -> Iterator[list[GraphEdge]]:
    """Edges (of ``kind``, owned by ``doc_id``) ``page`` at a time in key order; ``index``
    names the SQLite index to read them along (``SQLiteGraphStore.scan_edges``)."""
    table = f"e2rag_edges INDEXED BY {index}" if index else "e2rag_edges"
    rows = keyset_pages(
        query, f"SELECT {EDGE_COLUMNS} FROM {table}", filters(kind=kind, doc_id=doc_id),
        ("source", "target", "kind", "role"), page, lambda row: tuple(row[:4]),
    )
    return ([row_edge(r) for r in batch] for batch in rows)


def rowid_edge_pages(query: Query, kind: EdgeKind, page: int) -> Iterator[list[GraphEdge]]:
    """Edges of ``kind`` ``page`` at a time in rowid order: SQLite's order for ``edges(kind)``
    (its plan walks the ``(kind, rowid)`` index, or the table, both in rowid order)."""
    rows = keyset_pages(
        query, f"SELECT {EDGE_COLUMNS}, rowid FROM e2rag_edges", filters(kind=kind),
        ("rowid",), page, lambda row: (row[6],),
    )
    return ([row_edge(r) for r in batch] for batch in rows)


def keyset_pages(
    query: Query,
    select: str,
    where: tuple[str, tuple[Any, ...]],
    key: tuple[str, ...],
    page: int,
    key_of: Callable[[Sequence[Any]], tuple[Any, ...]],
) -> Iterator[list[Any]]:
    """The rows of ``select`` (filtered by ``where``) in ``key`` order, ``page`` per read;
    each read starts after the last key of the one before, so no cursor stays open."""
    clause, params = where
    columns = ", ".join(key)
    after: tuple[Any, ...] = ()
    while True:
        more = f"{' AND ' if clause else ' WHERE '}({columns}) > ({placeholders(len(key))})"
        rows = query(
            f"{select}{clause}{more if after else ''} ORDER BY {columns} LIMIT {int(page)}",
            params + after,
        )
        if rows:
            yield rows
        if len(rows) < page:
            return
        after = key_of(rows[-1])
