"""The row digest and row counts of a document in a SQL graph store, sealed into its record at
commit.

A committed document's record carries a digest of its rows (``SQLGraphStore.commit_docs``) so
that a later check sees rows changed behind the store's back. The digest is read back in SQL's
order a page at a time, never sorted in Python, and is the one the stores have always written:
each row's fields as text, the rows in Python's order of those texts. The same pass counts the
rows (``Tally``): nodes and edges per kind, and the values of the few attributes ``e2rag show``
counts apart; written in the same transaction as the rows, the counts cannot disagree with
them, so ``show`` adds up records instead of scanning the graph.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any, Callable, Iterable, Sequence

from llama_index_e2rag.graph.base import PAGE
from llama_index_e2rag.graph.sql_rows import DOC_RECORD, EDGE_COLUMNS, NODE_COLUMNS, UPSERT_META

#: A store's statement rewriter: ``?`` placeholders into its driver's (``SQLGraphStore._sql``).
Sql = Callable[[str], str]


def row_text(row: Sequence[Any]) -> bytes:
    """One row as the document digest reads it: its fields as text (None as empty), joined."""
    fields = ("" if v is None else str(v) for v in row)
    return "\x1f".join(fields).encode("utf-8", "surrogatepass") + b"\x1e"


#: Per node kind, the attribute whose values a document's counts tally apart (ChronoRAG's
#: ``layer`` of its layer-0 chunks, SentGraph's ``sentgraph`` role of its sentences).
COUNTED_ATTRS = {"chunk": "layer", "sentence": "sentgraph"}
_NODE_KIND, _NODE_ATTRS, _EDGE_KIND = 1, 11, 2  # columns of NODE_COLUMNS and EDGE_COLUMNS


class Tally:
    """Counts of one document's rows as its digest reads them: ``{"nodes": {kind: n},
    "edges": {kind: n}, "attrs": {"kind.attr": {value: n}}}`` (values as text)."""

    def __init__(self) -> None:
        self.nodes: Counter[str] = Counter()
        self.edges: Counter[str] = Counter()
        self.attrs: dict[str, Counter[str]] = {}

    def node(self, row: Sequence[Any]) -> None:
        kind, attrs = row[_NODE_KIND], row[_NODE_ATTRS]
        self.nodes[kind] += 1
        attr = COUNTED_ATTRS.get(kind)
        if attr and attrs and f'"{attr}"' in attrs:  # parse only the rows that may set it
            value = json.loads(attrs).get(attr)
            if value is not None:
                self.attrs.setdefault(f"{kind}.{attr}", Counter())[str(value)] += 1

    def edge(self, row: Sequence[Any]) -> None:
        self.edges[row[_EDGE_KIND]] += 1

    def record(self) -> dict[str, Any]:
        return {"nodes": dict(sorted(self.nodes.items())),
                "edges": dict(sorted(self.edges.items())),
                "attrs": {key: dict(sorted(c.items())) for key, c in sorted(self.attrs.items())}}


def doc_seal(cur: Any, sql: Sql, collation: str, doc_id: str) -> dict[str, Any]:
    """``{"rows": digest, "counts": tally}`` of the document's nodes and the edges it owns
    (its links included). The digest takes each row's fields as text, rows in Python's order
    of those texts (ids and edge keys are unique, so the leading columns decide it): read a
    page at a time, in SQL's order, which ``collation`` (the store's binary one) makes
    Python's. One pass gives both, so the counts are those of the digested rows."""
    c = collation
    digest, tally = hashlib.sha1(), Tally()
    for statement, count in (
        (f"SELECT {NODE_COLUMNS} FROM e2rag_nodes WHERE doc_id = ? ORDER BY id{c}", tally.node),
        (f"SELECT {EDGE_COLUMNS} FROM e2rag_edges WHERE doc_id = ? "
         f"ORDER BY source{c}, target{c}, kind{c}, role{c}", tally.edge),
    ):
        cur.execute(sql(statement), (doc_id,))
        while rows := cur.fetchmany(PAGE):
            for row in rows:
                digest.update(row_text(row))
                count(row)
        digest.update(b"\x1d")
    return {"rows": digest.hexdigest(), "counts": tally.record()}


def reseal(cur: Any, sql: Sql, collation: str, doc_ids: Iterable[str]) -> None:
    """Rewrite the row digest and counts in the record of each document of ``doc_ids`` from
    its rows as they are now (documents without a record or digest stay as they are)."""
    for doc_id in sorted(doc_ids):
        cur.execute(sql("SELECT value FROM e2rag_meta WHERE key = ?"), (DOC_RECORD + doc_id,))
        found = cur.fetchall()
        record = json.loads(found[0][0]) if found else {}
        if record.get("rows"):
            record.update(doc_seal(cur, sql, collation, doc_id))
            cur.execute(sql(UPSERT_META), (DOC_RECORD + doc_id, json.dumps(record)))


def add_counts(cur: Any, sql: Sql, collation: str, doc_ids: Iterable[str]) -> list[str]:
    """Give the record of each document of ``doc_ids`` sealed before records counted rows its
    counts, where its rows still match its digest (a changed document keeps its record for the
    check to find); returns the documents counted."""
    counted = []
    for doc_id in sorted(doc_ids):
        cur.execute(sql("SELECT value FROM e2rag_meta WHERE key = ?"), (DOC_RECORD + doc_id,))
        found = cur.fetchall()
        record = json.loads(found[0][0]) if found else {}
        if record.get("rows") and "counts" not in record:
            seal = doc_seal(cur, sql, collation, doc_id)
            if seal["rows"] == record["rows"]:
                record["counts"] = seal["counts"]
                cur.execute(sql(UPSERT_META), (DOC_RECORD + doc_id, json.dumps(record)))
                counted.append(doc_id)
    return counted
