"""The tables of the SQL graph: their layout, the statements that write them, and how a row
becomes a node or an edge and back.

Shared by the SQLite and PostgreSQL stores through ``SQLGraphStore``; apart from it so that the
layout reads in one place, without the transaction and locking code.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Sequence

from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind

FORMAT_NAME = "llama-index-e2rag/graph"
#: Version of the table layout below (independent of the node schema's ``SCHEMA_VERSION``).
TABLES_VERSION = 1
#: Ids per ``IN (...)`` list: well under SQLite's and PostgreSQL's parameter limits.
BATCH = 500

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS e2rag_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS e2rag_nodes ("
    " id TEXT PRIMARY KEY, kind TEXT NOT NULL, doc_id TEXT NOT NULL,"
    " p0 BIGINT NOT NULL, p1 BIGINT NOT NULL, p2 BIGINT NOT NULL,"
    " s0 BIGINT, s1 BIGINT, chunk_id TEXT, name TEXT, text TEXT NOT NULL, attrs TEXT)",
    "CREATE INDEX IF NOT EXISTS e2rag_nodes_story ON e2rag_nodes (kind, p0, p1, p2, id)",
    "CREATE INDEX IF NOT EXISTS e2rag_nodes_doc ON e2rag_nodes (doc_id)",
    "CREATE TABLE IF NOT EXISTS e2rag_edges ("
    " source TEXT NOT NULL, target TEXT NOT NULL, kind TEXT NOT NULL, role TEXT NOT NULL,"
    " doc_id TEXT NOT NULL, attrs TEXT, PRIMARY KEY (source, target, kind, role))",
    "CREATE INDEX IF NOT EXISTS e2rag_edges_target ON e2rag_edges (target, kind)",
    "CREATE INDEX IF NOT EXISTS e2rag_edges_kind ON e2rag_edges (kind)",
    "CREATE INDEX IF NOT EXISTS e2rag_edges_doc ON e2rag_edges (doc_id)",
    "CREATE TABLE IF NOT EXISTS e2rag_documents (doc_id TEXT PRIMARY KEY, doc_order BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS e2rag_failures ("
    " doc_id TEXT NOT NULL, chunk_id TEXT NOT NULL, reason TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS e2rag_failures_doc ON e2rag_failures (doc_id)",
)
NODE_COLUMNS = "id, kind, doc_id, p0, p1, p2, s0, s1, chunk_id, name, text, attrs"
EDGE_COLUMNS = "source, target, kind, role, doc_id, attrs"
UPSERT_NODE = (
    f"INSERT INTO e2rag_nodes ({NODE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, doc_id = excluded.doc_id, "
    "p0 = excluded.p0, p1 = excluded.p1, p2 = excluded.p2, s0 = excluded.s0, s1 = excluded.s1, "
    "chunk_id = excluded.chunk_id, name = excluded.name, text = excluded.text, "
    "attrs = excluded.attrs"
)
UPSERT_EDGE = (
    f"INSERT INTO e2rag_edges ({EDGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (source, target, kind, role) DO UPDATE SET doc_id = excluded.doc_id, "
    "attrs = excluded.attrs"
)
ORDER = " ORDER BY p0, p1, p2, id"
#: Key prefix of the document records in ``e2rag_meta``.
DOC_RECORD = "doc:"
UPSERT_META = (
    "INSERT INTO e2rag_meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


def node_row(node: GraphNode) -> tuple[Any, ...]:
    span = node.span or (None, None)
    attrs = json.dumps(node.attrs, ensure_ascii=False) if node.attrs else None
    return (
        node.id, node.kind.value, node.doc_id, *node.pos, *span,
        node.chunk_id, node.name, node.text, attrs,
    )  # fmt: skip


def row_node(row: Sequence[Any]) -> GraphNode:
    """Rows come from our own writes, so the record is built without re-validation."""
    s0, s1 = row[6], row[7]
    return GraphNode.model_construct(
        id=row[0],
        kind=NodeKind(row[1]),
        doc_id=row[2],
        pos=(row[3], row[4], row[5]),
        span=(s0, s1) if s0 is not None else None,
        chunk_id=row[8],
        name=row[9],
        text=row[10],
        attrs=json.loads(row[11]) if row[11] else {},
    )


def edge_row(edge: GraphEdge) -> tuple[Any, ...]:
    attrs = json.dumps(edge.attrs, ensure_ascii=False) if edge.attrs else None
    return (edge.source, edge.target, edge.kind.value, edge.role or "", edge.doc_id, attrs)


def row_edge(row: Sequence[Any]) -> GraphEdge:
    return GraphEdge.model_construct(
        source=row[0],
        target=row[1],
        kind=EdgeKind(row[2]),
        role=row[3] or None,
        doc_id=row[4],
        attrs=json.loads(row[5]) if row[5] else {},
    )


def batches(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(ids), BATCH):
        yield ids[start : start + BATCH]


def placeholders(count: int) -> str:
    return ", ".join("?" * count)


def filters(**equals: Any) -> tuple[str, tuple[Any, ...]]:
    clauses, params = [], []
    for column, value in equals.items():
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value.value if hasattr(value, "value") else value)
    return (" WHERE " + " AND ".join(clauses) if clauses else "", tuple(params))
