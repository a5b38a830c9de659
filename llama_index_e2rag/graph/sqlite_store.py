"""The default graph store: one SQLite file, written in the index's persist directory.

SQLite is transactional, embedded (in the standard library) and lets other processes read while
one writes (WAL mode), so the graph needs no server and no whole-file rewrite: inserting a
document writes that document's rows. An index that was never persisted keeps its graph in a
private temporary file; ``persist`` copies it with SQLite's online backup into a temporary file
beside the target and renames it into place, so a killed save leaves the previous file.
"""

from __future__ import annotations

import os
import sqlite3
import weakref
from pathlib import Path
from typing import Any, Iterator, Optional

from llama_index_e2rag.errors import DamagedFileError, StoreDamagedError
from llama_index_e2rag.disk.files import atomic_replace
from llama_index_e2rag.disk.scratch import make_scratch_dir, remove_scratch_dir
from llama_index_e2rag.graph.base import PAGE
from llama_index_e2rag.graph.sql_pages import edge_pages, rowid_edge_pages, story_pages
from llama_index_e2rag.graph.sql_rows import ORDER
from llama_index_e2rag.graph.sql_store import SQLGraphStore
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind

#: Prefix of a temporary graph's private folder (a killed build's is swept by the next one).
SCRATCH_PREFIX = "e2rag-graph-"
#: File name of the graph inside an e2rag store directory.
GRAPH_FILE = "graph.sqlite"
#: How long a connection waits for another process's write lock before failing.
_BUSY_TIMEOUT_SECONDS = 60.0
#: SQLite's own index of the edges' primary key (source, target, kind, role).
_EDGE_KEY_INDEX = "sqlite_autoindex_e2rag_edges_1"


class SQLiteGraphStore(SQLGraphStore):
    """``GraphStore`` in a SQLite database file (a private temporary one when ``path`` is None)."""

    def __init__(self, path: Optional[str | os.PathLike[str]] = None) -> None:
        super().__init__()
        self._temp_dir: Optional[str] = None
        if path is None:
            self._temp_dir, lock = make_scratch_dir(SCRATCH_PREFIX)
            self._remove_temp = weakref.finalize(self, remove_scratch_dir, self._temp_dir, lock)
            path = Path(self._temp_dir) / GRAPH_FILE
        self.path = Path(path)
        #: what to tell a user whose database turns out damaged (set by whoever opened it)
        self.repair_hint = "restore the file from a backup or index the documents again"
        #: ``DamagedFileError`` until an opener that knows the store names its fix
        self.damage_error: type[StoreDamagedError] = DamagedFileError

    @property
    def is_temporary(self) -> bool:
        """True until the graph has a file of its own (before the first persist)."""
        return self._temp_dir is not None

    def scan_nodes(
        self, kind: Optional[NodeKind] = None, doc_id: Optional[str] = None, page: int = PAGE
    ) -> Iterator[list[GraphNode]]:
        """``nodes`` a page at a time in story order; without a kind, the kinds' scans merged
        (``story_pages``: ids compare as SQLite's binary collation does, by code point)."""
        if kind is None:
            return story_pages(self._query, doc_id, page)
        return super().scan_nodes(kind, doc_id, page)

    def scan_edges(
        self, kind: Optional[EdgeKind] = None, doc_id: Optional[str] = None, page: int = PAGE
    ) -> Iterator[list[GraphEdge]]:
        """``edges`` a page at a time in key order. With a kind, each page is read along the
        key's own index from the last key of the one before: SQLite's plan otherwise took the
        ``kind`` (or ``doc_id``) index and sorted every edge of it for each page, so a scan
        grew with the square of the kind (a 300k-word document's ``participates`` and
        ``co_mention`` edges: 13.3 s through that plan, 1.5 s along the key)."""
        return edge_pages(self._query, kind, doc_id, page, _EDGE_KEY_INDEX if kind else None)

    def scan_edges_listed(self, kind: EdgeKind, page: int = PAGE) -> Iterator[list[GraphEdge]]:
        """``edges(kind)`` in its (rowid) order, a page at a time."""
        return rowid_edge_pages(self._query, kind, page)

    def describe(self) -> str:
        return "the in-memory e2rag graph" if self.is_temporary else f"graph database {self.path}"

    def _connect(self) -> Any:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(
                self.path, timeout=_BUSY_TIMEOUT_SECONDS, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as exc:
            raise self.damage_error(f"{self.path} is not a readable SQLite database ({exc}); "
                                    f"{self.repair_hint}") from exc
        return conn

    def _damage(self, exc: Exception) -> Optional[Exception]:
        # "database disk image is malformed", "file is not a database": the plain DatabaseError
        # (its subclasses are locks, constraints and SQL mistakes, not damage)
        if type(exc) is sqlite3.DatabaseError:
            return self.damage_error(f"the graph database {self.path} is damaged ({exc}); "
                                     f"{self.repair_hint}")
        return None

    def quick_check(self) -> Optional[str]:
        """SQLite's own check of every page and index (reads the whole file); None when sound."""
        try:
            rows = self._query("PRAGMA quick_check")
        except StoreDamagedError as exc:
            return str(exc.__cause__ or exc)
        problems = [r[0] for r in rows if r[0] != "ok"]
        return "; ".join(problems[:3]) if problems else None

    def attr_counts(self, kind: str, attr: str) -> dict[tuple[str, Any], int]:
        """How many nodes of ``kind`` each document holds per value of ``attrs[attr]`` (None:
        unset), counted inside SQLite: no row reaches Python (``e2rag show`` on a large store)."""
        rows = self._query(
            "SELECT doc_id, json_extract(attrs, ?), COUNT(*) FROM e2rag_nodes WHERE kind = ? "
            "GROUP BY 1, 2",
            (f"$.{attr}", kind),
        )
        return {(doc, value): int(n) for doc, value, n in rows}

    def texts_by_attr(self, kind: str, attr: str) -> list[tuple[Any, str]]:
        """``(attrs[attr], text)`` of every node of ``kind`` that sets ``attr``, in story order,
        picked inside SQLite: no node is built in Python (SentGraph's links read every sentence
        of the store at each insert)."""
        path = f"$.{attr}"
        return [
            (value, text)
            for value, text in self._query(
                "SELECT json_extract(attrs, ?), text FROM e2rag_nodes WHERE kind = ? AND "
                f"json_extract(attrs, ?) IS NOT NULL{ORDER}",
                (path, kind, path),
            )
        ]

    @classmethod
    def open_existing(cls, path: Path, repair_hint: Optional[str] = None) -> "SQLiteGraphStore":
        """A store's graph file, refused when it is not one: SQLite would otherwise take an
        empty or overwritten file for a new database and create empty tables in it."""
        graph = cls(path)
        if repair_hint:
            graph.repair_hint = repair_hint
            graph.damage_error = StoreDamagedError
        try:
            with open(path, "rb") as f:
                header = f.read(16)
        except OSError as exc:
            raise graph.damage_error(f"{path} cannot be read ({exc}); {graph.repair_hint}") from exc
        if header != b"SQLite format 3\x00":
            raise graph.damage_error(f"{path} is not a SQLite database (empty or overwritten); "
                                    f"{graph.repair_hint}")
        if not graph.has_tables():
            raise graph.damage_error(f"{path} holds no e2rag graph; {graph.repair_hint}")
        return graph

    def has_tables(self) -> bool:
        """Whether the file holds an e2rag graph (an existing store's file must); asked on a
        read-only connection, before the first use would create the tables."""
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            try:
                rows = conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'e2rag_meta'"
                ).fetchall()
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise self.damage_error(f"{self.path} is not a readable SQLite database ({exc}); "
                                    f"{self.repair_hint}") from exc
        return bool(rows)

    def _has_table(self, name: str) -> bool:
        return bool(
            self._query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
        )

    def _begin(self, cur: Any) -> None:
        # Take the write lock now (a deferred BEGIN would take it at the first write, after the
        # transaction's first reads, which another process could make stale meanwhile).
        cur.execute("BEGIN IMMEDIATE")

    def _create_schema(self) -> None:
        try:
            super()._create_schema()
        except sqlite3.DatabaseError as exc:
            raise self.damage_error(f"{self.describe()} is damaged ({exc}); "
                                    f"{self.repair_hint}") from exc

    def persist(self, persist_path: str | os.PathLike[str]) -> None:
        """Write a consistent copy of the graph to ``persist_path`` (atomic rename); a no-op
        when that is this store's own file, whose transactions are already durable."""
        target = Path(persist_path)
        if target.resolve() == self.path.resolve():
            with self._lock:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return

        def backup(tmp: Path) -> None:
            dest = sqlite3.connect(tmp)
            try:
                with self._lock:
                    self.conn.backup(dest)
                dest.execute("PRAGMA journal_mode=DELETE")
            finally:
                dest.close()
            for suffix in ("-wal", "-shm"):  # a previous database's journal must not survive it
                Path(str(target) + suffix).unlink(missing_ok=True)

        atomic_replace(target, backup)

    def move_to(self, persist_path: str | os.PathLike[str]) -> None:
        """Persist to ``persist_path`` and continue there (later writes go to that file)."""
        self.persist(persist_path)
        self.discard()
        self.path = Path(persist_path)

    def discard(self) -> None:
        """Close the graph and delete its private temporary file now rather than when the
        object is collected (a build's staging graph); a graph with a file of its own is only
        closed."""
        self.close()
        if self._temp_dir is not None:
            self._remove_temp()
            self._temp_dir = None
