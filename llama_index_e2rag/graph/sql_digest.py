"""The row digest of a document in a SQL graph store, sealed into its record at commit.

A committed document's record carries a digest of its rows (``SQLGraphStore.commit_docs``) so
that a later check sees rows changed behind the store's back. The digest is read back in SQL's
order a page at a time, never sorted in Python, and is the one the stores have always written:
each row's fields as text, the rows in Python's order of those texts.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Iterable, Sequence

from llama_index_e2rag.graph.base import PAGE
from llama_index_e2rag.graph.sql_rows import DOC_RECORD, EDGE_COLUMNS, NODE_COLUMNS, UPSERT_META

#: A store's statement rewriter: ``?`` placeholders into its driver's (``SQLGraphStore._sql``).
Sql = Callable[[str], str]


def row_text(row: Sequence[Any]) -> bytes:
    """One row as the document digest reads it: its fields as text (None as empty), joined."""
    fields = ("" if v is None else str(v) for v in row)
    return "\x1f".join(fields).encode("utf-8", "surrogatepass") + b"\x1e"


def doc_digest(cur: Any, sql: Sql, collation: str, doc_id: str) -> str:
    """A digest of the document's nodes and the edges it owns (its links included), each
    row's fields as text, rows in Python's order of those texts (ids and edge keys are
    unique, so the leading columns decide it): read a page at a time, in SQL's order, which
    ``collation`` (the store's binary one) makes Python's."""
    c = collation
    digest = hashlib.sha1()
    for statement in (
        f"SELECT {NODE_COLUMNS} FROM e2rag_nodes WHERE doc_id = ? ORDER BY id{c}",
        f"SELECT {EDGE_COLUMNS} FROM e2rag_edges WHERE doc_id = ? "
        f"ORDER BY source{c}, target{c}, kind{c}, role{c}",
    ):
        cur.execute(sql(statement), (doc_id,))
        while rows := cur.fetchmany(PAGE):
            for row in rows:
                digest.update(row_text(row))
        digest.update(b"\x1d")
    return digest.hexdigest()


def reseal(cur: Any, sql: Sql, collation: str, doc_ids: Iterable[str]) -> None:
    """Rewrite the row digest in the record of each document of ``doc_ids`` from its rows
    as they are now (documents without a record or digest stay as they are)."""
    for doc_id in sorted(doc_ids):
        cur.execute(sql("SELECT value FROM e2rag_meta WHERE key = ?"), (DOC_RECORD + doc_id,))
        found = cur.fetchall()
        record = json.loads(found[0][0]) if found else {}
        if record.get("rows"):
            record["rows"] = doc_digest(cur, sql, collation, doc_id)
            cur.execute(sql(UPSERT_META), (DOC_RECORD + doc_id, json.dumps(record)))
