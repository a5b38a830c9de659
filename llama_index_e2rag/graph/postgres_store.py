"""The graph in a PostgreSQL schema, for a server deployment (several processes, one database).

The tables and statements are those of ``SQLGraphStore`` (shared with SQLite); this module only
connects. Each store lives in its own schema (``e2rag`` unless told), created on first connect,
so several indexes can share one database. Needs ``psycopg`` 3 (``pip install
"llama-index-e2rag[postgres]"``); it is imported when a store is built, not with the package.

Transactions: the connection is never in autocommit, every public write is one transaction
(``SQLGraphStore._transaction``) and every read ends its implicit transaction, so no connection
sits "idle in transaction". Writers of one schema serialise on a transaction-scoped advisory
lock taken first thing in each write, so concurrent processes can neither deadlock nor
interleave their writes; readers are never blocked and see committed documents only. A client
killed mid-write leaves nothing: the server rolls its open transaction back.

Opening a store whose tables exist runs no DDL: PostgreSQL's ``CREATE INDEX IF NOT EXISTS`` takes
a SHARE lock on the table even when the index exists, which would make every new reader wait
for any writer's open transaction (and queue later writers behind it).
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from typing import Any, Iterator

from llama_index_e2rag.graph.sql_store import SQLGraphStore

#: Schema of the graph tables when none is given.
DEFAULT_SCHEMA = "e2rag"


def _lock_key(schema: str) -> int:
    """A stable signed 64-bit advisory-lock key for one schema (same in every process)."""
    digest = hashlib.sha256(f"llama-index-e2rag/graph:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _parse_dsn(dsn: str) -> dict[str, Any]:
    """The DSN's fields, or nothing when psycopg is missing or the DSN is unparsable (then
    connecting says why)."""
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return {}
    try:
        return conninfo_to_dict(dsn)
    except psycopg.Error:
        return {}


class PostgresGraphStore(SQLGraphStore):
    """``GraphStore`` in a PostgreSQL schema.

    ``dsn`` is anything libpq accepts (``postgresql://user:password@host:5432/db`` or
    ``host=… dbname=… user=…``; the password may also come from ``PGPASSWORD`` or ``~/.pgpass``).
    ``schema`` must be a plain name; it is quoted as an identifier, never interpolated raw.
    """

    placeholder = "%s"
    binary_collation = ' COLLATE "C"'

    def __init__(self, dsn: str, schema: str = DEFAULT_SCHEMA) -> None:
        super().__init__()
        if not schema or "\x00" in schema:
            raise ValueError(f"invalid PostgreSQL schema name {schema!r}")
        self._dsn = dsn
        self.schema = schema
        self._key = _lock_key(schema)
        self._writer_key = _lock_key(f"{schema}/writer")

    def __repr__(self) -> str:  # never show the DSN (it may carry a password)
        return f"<{type(self).__name__} {self.describe()}>"

    def describe(self) -> str:
        """User, host, port, database and schema (as connected, else as the DSN says); never
        the password."""
        info: dict[str, Any] = {}
        if self._conn is not None and not self._conn.closed:
            live = self._conn.info
            info = {"user": live.user, "host": live.host, "port": live.port, "dbname": live.dbname}
        else:
            info = _parse_dsn(self._dsn)
        host = info.get("host") or info.get("hostaddr") or "local socket"
        where = f"{host}:{info.get('port') or 5432}/{info.get('dbname') or info.get('user') or '?'}"
        if info.get("user"):
            where = f"{info['user']}@{where}"
        return f"PostgreSQL graph {where} schema {self.schema}"

    def _connect(self) -> Any:
        import psycopg
        from psycopg import sql

        conn = psycopg.connect(self._dsn, autocommit=False)
        try:
            name = sql.Identifier(self.schema)
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,))
                if cur.fetchone() is None:  # (CREATE SCHEMA needs CREATE on the database)
                    # one creator at a time: concurrent CREATE SCHEMA IF NOT EXISTS can collide
                    cur.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
                    cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
                # A session setting (not SET LOCAL): it outlives this transaction once committed.
                cur.execute(sql.SQL("SET search_path TO {}").format(name))
            conn.commit()
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def writer_lock(self) -> Iterator[None]:
        """One writing process of this schema at a time, on any machine, for a whole write
        (story orders reserved → extraction → commit): a session advisory lock on a
        connection of its own, released when it closes (also when the client dies)."""
        import psycopg

        conn = psycopg.connect(self._dsn, autocommit=True)
        try:
            conn.execute("SELECT pg_advisory_lock(%s)", (self._writer_key,))
            yield
        finally:
            conn.close()

    def _has_table(self, name: str) -> bool:
        return bool(self._query("SELECT to_regclass(?) IS NOT NULL", (name,))[0][0])

    def _begin(self, cur: Any) -> None:
        """This schema's writer lock, released at COMMIT or ROLLBACK (also when the client
        dies): writers of one graph run one at a time."""
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
