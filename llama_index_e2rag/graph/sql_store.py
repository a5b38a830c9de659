"""The graph on a SQL database: one schema and one set of statements for SQLite and PostgreSQL.

Nodes, edges, documents (story order) and extraction failures are rows, so inserting or deleting
a document touches that document's rows only, inside one transaction: a process killed at any
moment leaves the database before or after the document, never between. Subclasses supply a
connection (``_connect``) and their placeholder style; everything else is shared.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from llama_index_e2rag.errors import GraphStoreError
from llama_index_e2rag.graph.base import PAGE, Direction, DocRows, batch_links, pages
from llama_index_e2rag.graph.sql_digest import add_counts, doc_seal, reseal
from llama_index_e2rag.graph.sql_pages import edge_pages, node_pages
from llama_index_e2rag.graph.sql_rows import (  # noqa: F401 - FORMAT_NAME, SCHEMA, ... re-exported
    DOC_RECORD,
    EDGE_COLUMNS,
    FORMAT_NAME,
    NODE_COLUMNS,
    ORDER,
    SCHEMA,
    TABLES_VERSION,
    UPSERT_EDGE,
    UPSERT_META,
    UPSERT_NODE,
    batches,
    edge_row,
    filters,
    node_row,
    placeholders,
    row_edge,
    row_node,
)
from llama_index_e2rag.schema import SCHEMA_VERSION, EdgeKind, GraphEdge, GraphNode, NodeKind

class SQLGraphStore:
    """``GraphStore`` over a DB-API connection; every public write is one transaction.

    One connection is shared by the threads of a process under a lock (reads are short), so a
    reader never sees a half-applied write of this process; other processes see committed
    transactions only.
    """

    #: DB-API placeholder of the driver; statements are written with ``?``.
    placeholder = "?"
    #: Collation that orders text as Python compares it (code points; the row digest's order).
    binary_collation = ""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._conn: Any = None

    # -- subclass hooks -------------------------------------------------------------------------
    def _connect(self) -> Any:
        raise NotImplementedError

    def _has_table(self, name: str) -> bool:
        """Whether table ``name`` exists (where this store's tables live)."""
        raise NotImplementedError

    def _begin(self, cur: Any) -> None:
        """First statement of every write transaction: take the graph's write lock, so that
        writers run one after the other and every read they make inside is current."""

    def _sql(self, statement: str) -> str:
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)

    # -- connection and transactions ----------------------------------------------------------
    @property
    def conn(self) -> Any:
        if self._conn is None:
            with self._lock:
                if self._conn is None:
                    self._conn = self._connect()
                    self._create_schema()
        return self._conn

    def _create_schema(self) -> None:
        """Create the tables if this layout version is missing, then check the format. Opening
        an existing graph only reads: DDL, even ``IF NOT EXISTS``, can wait for a writer."""
        if self._tables_version() != TABLES_VERSION:
            with self._transaction() as cur:
                for statement in SCHEMA:
                    cur.execute(statement)
                cur.execute(self._sql("SELECT value FROM e2rag_meta WHERE key = ?"), ("format",))
                if cur.fetchone() is None:
                    cur.executemany(
                        self._sql("INSERT INTO e2rag_meta (key, value) VALUES (?, ?)"),
                        [
                            ("format", FORMAT_NAME),
                            ("tables_version", str(TABLES_VERSION)),
                            ("schema_version", str(SCHEMA_VERSION)),
                            ("version", "0"),
                        ],
                    )
        meta = dict(self._query("SELECT key, value FROM e2rag_meta"))
        if meta.get("format") != FORMAT_NAME:
            raise GraphStoreError(f"{self.describe()} is not an e2rag graph database")
        version = int(meta["schema_version"])
        if version > SCHEMA_VERSION:
            raise GraphStoreError(
                f"{self.describe()} was written with graph schema {version}, newer than "
                f"this llama-index-e2rag (schema {SCHEMA_VERSION}); upgrade the package"
            )

    def _tables_version(self) -> Optional[int]:
        if not self._has_table("e2rag_meta"):
            return None
        rows = self._query("SELECT value FROM e2rag_meta WHERE key = 'tables_version'")
        return int(rows[0][0]) if rows else None

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A cursor inside BEGIN … COMMIT (ROLLBACK on any error), holding the process lock."""
        with self._lock, self._translated():
            conn = self._conn if self._conn is not None else self.conn
            cur = conn.cursor()
            try:
                self._begin(cur)
                yield cur
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            finally:
                cur.close()

    def _bump(self, cur: Any) -> None:
        cur.execute(
            "UPDATE e2rag_meta SET value = CAST(CAST(value AS BIGINT) + 1 AS TEXT) "
            "WHERE key = 'version'"
        )

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock, self._translated():
            cur = self.conn.cursor()
            try:
                cur.execute(self._sql(statement), tuple(params))
                rows = cur.fetchall()
            finally:
                cur.close()
            self.conn.commit()  # end the read transaction (PostgreSQL opens one implicitly)
        return rows

    def _damage(self, exc: Exception) -> Optional[Exception]:
        """The error to raise instead of a driver error that means the database is damaged."""
        return None

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            damage = self._damage(exc)
            if damage is None:
                raise
            raise damage from exc

    def describe(self) -> str:
        """Where the graph lives, for messages."""
        return type(self).__name__

    @property
    def version(self) -> int:
        """Changes with every committed write, by any process (the read caches' key)."""
        return int(self._query("SELECT value FROM e2rag_meta WHERE key = 'version'")[0][0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- writes ---------------------------------------------------------------------------------
    def upsert_nodes(self, nodes: Iterable[GraphNode]) -> None:
        with self._transaction() as cur:
            self._write_nodes(cur, list(nodes))

    def upsert_edges(self, edges: Iterable[GraphEdge]) -> None:
        with self._transaction() as cur:
            self._write_edges(cur, list(edges))

    def _write_nodes(self, cur: Any, nodes: list[GraphNode]) -> None:
        if nodes:
            cur.executemany(self._sql(UPSERT_NODE), [node_row(n) for n in nodes])
            self._bump(cur)

    def _write_edges(self, cur: Any, edges: list[GraphEdge]) -> None:
        if not edges:
            return
        ends = sorted({e.source for e in edges} | {e.target for e in edges})
        known: set[str] = set()
        for batch in batches(ends):
            cur.execute(
                self._sql(f"SELECT id FROM e2rag_nodes WHERE id IN ({placeholders(len(batch))})"),
                tuple(batch),
            )
            known.update(r[0] for r in cur.fetchall())
        for edge in edges:
            for end in (edge.source, edge.target):
                if end not in known:
                    raise GraphStoreError(
                        f"edge {edge.kind.value} {edge.source} -> {edge.target}: node {end!r} "
                        "is not in the graph; upsert nodes before their edges"
                    )
        cur.executemany(self._sql(UPSERT_EDGE), [edge_row(e) for e in edges])
        self._bump(cur)

    def delete_nodes(self, node_ids: Iterable[str]) -> None:
        """Remove nodes and their edges; the documents that held any of them are re-sealed in
        the same transaction (their records' digests and counts follow their rows)."""
        ids = sorted(set(node_ids))
        with self._transaction() as cur:
            holders = self._link_owners(cur, ids, "")
            for batch in batches(ids):
                marks = placeholders(len(batch))
                rows = self._fetch(cur, f"SELECT DISTINCT doc_id FROM e2rag_nodes WHERE id IN "
                                   f"({marks})", batch)
                holders.update(r[0] for r in rows)
            self._delete_ids(cur, ids)
            reseal(cur, self._sql, self.binary_collation, holders)

    def _delete_ids(self, cur: Any, ids: Sequence[str]) -> None:
        for batch in batches(ids):
            marks = placeholders(len(batch))
            cur.execute(
                self._sql(f"DELETE FROM e2rag_edges WHERE source IN ({marks})"), tuple(batch)
            )
            cur.execute(
                self._sql(f"DELETE FROM e2rag_edges WHERE target IN ({marks})"), tuple(batch)
            )
            cur.execute(self._sql(f"DELETE FROM e2rag_nodes WHERE id IN ({marks})"), tuple(batch))
        if ids:
            self._bump(cur)

    def delete_doc(self, doc_id: str) -> set[str]:
        """Remove the document's nodes, every edge touching them, its order and failures; the
        documents whose links to it went with them are re-sealed in the same transaction."""
        with self._transaction() as cur:
            owners: set[str] = set()
            ids = self._delete_doc(cur, doc_id, owners)
            reseal(cur, self._sql, self.binary_collation, owners)
            return ids

    def _delete_doc(self, cur: Any, doc_id: str, owners: set[str]) -> set[str]:
        """Delete the document's rows; add to ``owners`` the other documents that owned one of
        the removed edges (their links to it), whose digests the caller re-seals."""
        cur.execute(self._sql("SELECT id FROM e2rag_nodes WHERE doc_id = ?"), (doc_id,))
        ids = {r[0] for r in cur.fetchall()}
        owners.update(self._link_owners(cur, sorted(ids), doc_id))
        self._delete_ids(cur, sorted(ids))
        for table in ("e2rag_edges", "e2rag_documents", "e2rag_failures"):
            cur.execute(self._sql(f"DELETE FROM {table} WHERE doc_id = ?"), (doc_id,))
        cur.execute(self._sql("DELETE FROM e2rag_meta WHERE key = ?"), (DOC_RECORD + doc_id,))
        self._bump(cur)
        return ids

    def _link_owners(self, cur: Any, ids: Sequence[str], doc_id: str) -> set[str]:
        """Documents other than ``doc_id`` owning an edge that touches one of ``ids``."""
        owners: set[str] = set()
        for batch in batches(ids):
            for column in ("source", "target"):
                rows = self._fetch(
                    cur,
                    f"SELECT DISTINCT doc_id FROM e2rag_edges WHERE {column} IN "
                    f"({placeholders(len(batch))}) AND doc_id <> ?",
                    (*batch, doc_id),
                )
                owners.update(r[0] for r in rows)
        return owners

    def _fetch(self, cur: Any, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one statement run inside the caller's transaction."""
        cur.execute(self._sql(statement), tuple(params))
        return list(cur.fetchall())

    def replace_doc(
        self,
        doc_id: str,
        order: int,
        nodes: Sequence[GraphNode],
        edges: Sequence[GraphEdge],
        failures: Sequence[dict[str, str]] = (),
    ) -> None:
        """Swap a document's whole graph, order and failures in one transaction."""
        self.commit_docs([DocRows(doc_id, order, nodes, edges, failures)])

    def commit_docs(self, docs: Sequence[DocRows], meta: Mapping[str, str] = {}) -> None:
        """Replace every document of ``docs`` and set ``meta`` in one transaction: a batch of
        documents lands whole or not at all. Rows go in a page at a time (a document's nodes
        and edges may be read from a staging store as they are written), so the commit holds
        one page, not the document. A document's record gets the digest and counts of its rows
        as written, links included; the links are written once every document of the batch is,
        and the documents that lost links to a replaced one are re-sealed."""
        links = batch_links(docs)
        with self._transaction() as cur:
            owners: set[str] = set()
            for doc in docs:
                self._delete_doc(cur, doc.doc_id, owners)
                for page in pages(doc.nodes):
                    cur.executemany(self._sql(UPSERT_NODE), [node_row(n) for n in page])
                for page in pages(doc.edges):
                    self._write_edges(cur, page)
                cur.execute(
                    self._sql("INSERT INTO e2rag_documents (doc_id, doc_order) VALUES (?, ?)"),
                    (doc.doc_id, doc.order),
                )
                if doc.failures:
                    cur.executemany(
                        self._sql(
                            "INSERT INTO e2rag_failures (doc_id, chunk_id, reason) "
                            "VALUES (?, ?, ?)"
                        ),
                        [(doc.doc_id, f.get("chunk_id", ""), f["reason"]) for f in doc.failures],
                    )
            self._write_edges(cur, links)
            for doc in docs:
                seal = doc_seal(cur, self._sql, self.binary_collation, doc.doc_id)
                record = dict(doc.record, **seal)
                cur.execute(self._sql(UPSERT_META), (DOC_RECORD + doc.doc_id, json.dumps(record)))
            reseal(cur, self._sql, self.binary_collation, owners - {doc.doc_id for doc in docs})
            for key, value in meta.items():
                cur.execute(self._sql(UPSERT_META), (key, value))
            self._bump(cur)

    def count_records(self, doc_ids: Iterable[str]) -> list[str]:
        """Add row counts to the records of ``doc_ids`` committed before records had them, in
        one transaction (``sql_digest.add_counts``); returns the documents counted."""
        with self._transaction() as cur:
            counted = add_counts(cur, self._sql, self.binary_collation, doc_ids)
            if counted:
                self._bump(cur)
            return counted

    # -- reads ----------------------------------------------------------------------------------
    def get_node(self, node_id: str) -> Optional[GraphNode]:
        rows = self._query(f"SELECT {NODE_COLUMNS} FROM e2rag_nodes WHERE id = ?", (node_id,))
        return row_node(rows[0]) if rows else None

    def get_nodes(self, node_ids: Iterable[str]) -> list[GraphNode]:
        """Known nodes among ``node_ids``, in the order asked."""
        wanted = list(dict.fromkeys(node_ids))
        found: dict[str, GraphNode] = {}
        for batch in batches(wanted):
            rows = self._query(
                f"SELECT {NODE_COLUMNS} FROM e2rag_nodes WHERE id IN ({placeholders(len(batch))})",
                batch,
            )
            found.update((r[0], row_node(r)) for r in rows)
        return [found[i] for i in wanted if i in found]

    def has_node(self, node_id: str) -> bool:
        return bool(self._query("SELECT 1 FROM e2rag_nodes WHERE id = ?", (node_id,)))

    def nodes(
        self, kind: Optional[NodeKind] = None, doc_id: Optional[str] = None
    ) -> list[GraphNode]:
        where, params = filters(kind=kind, doc_id=doc_id)
        rows = self._query(f"SELECT {NODE_COLUMNS} FROM e2rag_nodes{where}{ORDER}", params)
        return [row_node(r) for r in rows]

    def scan_nodes(
        self, kind: Optional[NodeKind] = None, doc_id: Optional[str] = None, page: int = PAGE
    ) -> Iterator[list[GraphNode]]:
        """``nodes`` a page at a time (keyset pages in story order, ``sql_pages``): a reader of
        a whole document holds one page."""
        return node_pages(self._query, kind, doc_id, page)

    def scan_edges(
        self, kind: Optional[EdgeKind] = None, doc_id: Optional[str] = None, page: int = PAGE
    ) -> Iterator[list[GraphEdge]]:
        """``edges`` a page at a time (keyset pages in key order, ``sql_pages``)."""
        return edge_pages(self._query, kind, doc_id, page)

    def scan_edges_listed(self, kind: EdgeKind, page: int = PAGE) -> Iterator[list[GraphEdge]]:
        """``edges(kind)`` in its order, a page at a time: the whole list where the database
        gives no order to page in (PostgreSQL: heap order, unspecified); SQLite pages."""
        return pages(self.edges(kind), page)

    def story_neighbors(self, node: GraphNode, before: int, after: int) -> list[GraphNode]:
        """Up to ``before`` nodes of the same kind just before ``node`` and ``after`` just after,
        in story order (``node`` excluded)."""
        key = (node.kind.value, *node.pos, node.id)
        earlier = self._query(
            f"SELECT {NODE_COLUMNS} FROM e2rag_nodes WHERE kind = ? AND (p0, p1, p2, id) < "
            "(?, ?, ?, ?) ORDER BY p0 DESC, p1 DESC, p2 DESC, id DESC LIMIT ?",
            (*key, before),
        )
        later = self._query(
            f"SELECT {NODE_COLUMNS} FROM e2rag_nodes WHERE kind = ? AND (p0, p1, p2, id) > "
            f"(?, ?, ?, ?){ORDER} LIMIT ?",
            (*key, after),
        )
        return [row_node(r) for r in reversed(earlier)] + [row_node(r) for r in later]

    def edges(
        self, kind: Optional[EdgeKind] = None, doc_id: Optional[str] = None
    ) -> list[GraphEdge]:
        where, params = filters(kind=kind, doc_id=doc_id)
        rows = self._query(f"SELECT {EDGE_COLUMNS} FROM e2rag_edges{where}", params)
        return [row_edge(r) for r in rows]

    def edges_of(
        self,
        node_id: str,
        kinds: Optional[Iterable[EdgeKind]] = None,
        direction: Direction = "both",
    ) -> list[GraphEdge]:
        wanted = {k.value for k in kinds} if kinds is not None else None
        found: list[GraphEdge] = []
        for column, side in (("source", "out"), ("target", "in")):
            if direction in (side, "both"):
                rows = self._query(
                    f"SELECT {EDGE_COLUMNS} FROM e2rag_edges WHERE {column} = ?", (node_id,)
                )
                found.extend(row_edge(r) for r in rows if wanted is None or r[2] in wanted)
        return found

    def neighbors(
        self,
        node_id: str,
        kinds: Optional[Iterable[EdgeKind]] = None,
        direction: Direction = "both",
    ) -> list[GraphNode]:
        others = {
            e.target if e.source == node_id else e.source
            for e in self.edges_of(node_id, kinds, direction)
        }
        return sorted(self.get_nodes(others), key=lambda n: (n.pos, n.id))

    def subgraph_edges(
        self, node_ids: Iterable[str], kinds: Optional[Iterable[EdgeKind]] = None
    ) -> list[GraphEdge]:
        ids = sorted(set(node_ids))
        wanted = {k.value for k in kinds} if kinds is not None else None
        found: list[GraphEdge] = []
        inside = set(ids)
        for batch in batches(ids):
            marks = placeholders(len(batch))
            rows = self._query(
                f"SELECT {EDGE_COLUMNS} FROM e2rag_edges WHERE source IN ({marks})", batch
            )
            found.extend(
                row_edge(r) for r in rows if r[1] in inside and (wanted is None or r[2] in wanted)
            )
        return found

    def doc_ids(self) -> list[str]:
        rows = self._query(
            "SELECT doc_id FROM e2rag_nodes GROUP BY doc_id UNION SELECT doc_id FROM "
            "e2rag_documents"
        )
        return sorted(r[0] for r in rows)

    def get_meta(self, key: str) -> Optional[str]:
        rows = self._query("SELECT value FROM e2rag_meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def doc_records(self) -> dict[str, dict[str, Any]]:
        """Each committed document's record (documents written before records existed have
        none)."""
        rows = self._query(
            "SELECT key, value FROM e2rag_meta WHERE key >= ? AND key < ?",
            (DOC_RECORD, DOC_RECORD[:-1] + chr(ord(DOC_RECORD[-1]) + 1)),
        )
        return {key[len(DOC_RECORD) :]: json.loads(value) for key, value in rows}

    def doc_seal(self, doc_id: str) -> dict[str, Any]:
        """The digest and counts of the document's rows as they are now (``sql_digest``)."""
        with self._lock, self._translated():
            cur = self.conn.cursor()
            try:
                return doc_seal(cur, self._sql, self.binary_collation, doc_id)
            finally:
                cur.close()
                self.conn.commit()  # end the read transaction

    def doc_orders(self) -> dict[str, int]:
        """Story order of every committed document."""
        return {r[0]: int(r[1]) for r in self._query("SELECT doc_id, doc_order FROM e2rag_documents")}

    def failures(self) -> list[dict[str, str]]:
        rows = self._query("SELECT doc_id, chunk_id, reason FROM e2rag_failures")
        return [{"doc_id": r[0], "chunk_id": r[1], "reason": r[2]} for r in rows]

    def counts(self) -> dict[str, dict[str, int]]:
        nodes = self._query("SELECT kind, COUNT(*) FROM e2rag_nodes GROUP BY kind")
        edges = self._query("SELECT kind, COUNT(*) FROM e2rag_edges GROUP BY kind")
        return {
            "nodes": {k: int(c) for k, c in sorted(nodes)},
            "edges": {k: int(c) for k, c in sorted(edges)},
        }

    def __len__(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM e2rag_nodes")[0][0])

    def to_dict(self) -> dict[str, Any]:
        """The same exchange format as ``NetworkXGraphStore.to_dict`` (for export and tests)."""
        return {
            "format": FORMAT_NAME,
            "schema_version": SCHEMA_VERSION,
            "nodes": [n.model_dump(mode="json") for n in sorted(self.nodes(), key=lambda n: n.id)],
            "edges": sorted(
                (e.model_dump(mode="json") for e in self.edges()),
                key=lambda e: (e["source"], e["target"], e["kind"], e.get("role") or ""),
            ),
        }
