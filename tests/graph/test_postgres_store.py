"""PostgresGraphStore on a real server (``tests/conftest.py``): restarts, concurrent readers and
writers, killed writers, one schema per index, transactions and the lazy import.

Other processes run ``tests/graph/conftest.py`` as a worker (see ``conftest.worker``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Iterator

import pytest

from llama_index_e2rag.errors import GraphStoreError
from llama_index_e2rag.schema import EdgeKind, GraphEdge

from .conftest import (
    PausedWriter,
    check_killed_writer,
    check_readers_during_replace,
    check_restart,
    check_same_doc_writers,
    finish_second_after_first,
    observe,
    open_spec,
    run_worker,
    spawn,
    story_doc,
    wait_for,
)

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")
from psycopg import sql  # noqa: E402 (after the skip when psycopg is missing)
from psycopg.pq import TransactionStatus  # noqa: E402

TABLES = {"e2rag_documents", "e2rag_edges", "e2rag_failures", "e2rag_meta", "e2rag_nodes"}


@pytest.fixture
def spec(postgres_dsn: str, postgres_schema: str) -> dict[str, Any]:
    return {"backend": "postgres", "dsn": postgres_dsn, "schema": postgres_schema}


@pytest.fixture
def admin(postgres_dsn: str) -> Iterator[Any]:
    """A separate autocommit connection to look at the server from outside the store."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def extra_schemas(admin: Any) -> Iterator[list[str]]:
    """Names appended here are dropped at the end of the test."""
    names: list[str] = []
    yield names
    for name in names:
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


#: Another backend of this database waits for a lock (the writer lock held by ``pid``).
WAITING = (
    "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> %s "
    "AND datname = current_database()"
)


def _backend_gone(admin: Any, pid: int) -> bool:
    return admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() is None


def test_describe_names_server_database_and_schema_never_the_password() -> None:
    from llama_index_e2rag import PostgresGraphStore

    for dsn in (
        "postgresql://alice:s3cr3t-pw@db.example.org:6543/graphs",
        "host=db.example.org port=6543 dbname=graphs user=alice password=s3cr3t-pw",
    ):
        store = PostgresGraphStore(dsn, schema="novel_one")
        for text in (store.describe(), repr(store)):
            assert "s3cr3t-pw" not in text
            assert "db.example.org:6543" in text and "graphs" in text and "novel_one" in text


def test_psycopg_is_imported_on_connect_only() -> None:
    probe = (
        "import sys, llama_index_e2rag, llama_index_e2rag.graph\n"
        "assert 'psycopg' not in sys.modules, 'package import loaded psycopg'\n"
        "from llama_index_e2rag import PostgresGraphStore\n"
        "assert 'psycopg' not in sys.modules, 'class import loaded psycopg'\n"
        "assert 'PostgresGraphStore' not in dir(llama_index_e2rag.graph)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_tables_live_in_the_schema_and_no_transaction_is_left_open(
    spec: dict[str, Any], admin: Any
) -> None:
    with closing(open_spec(spec)) as store:
        assert len(store) == 0
        conn = store.conn
        assert conn.autocommit is False
        found = admin.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (spec["schema"],),
        ).fetchall()
        assert {r[0] for r in found} == TABLES
        assert not admin.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_name LIKE 'e2rag%%' "
            "AND table_schema = 'public'"
        ).fetchall()
        pid = conn.info.backend_pid

        def idle() -> None:
            assert conn.info.transaction_status == TransactionStatus.IDLE
            row = admin.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,))
            assert row.fetchone()[0] == "idle"

        idle()
        nodes, edges = story_doc("a", 0, 30, "g1")
        store.replace_doc("a", 0, nodes, edges)
        idle()
        assert observe(store, "a") == (30, ["g1"]) and store.version > 0 and store.counts()
        idle()
        bad = GraphEdge(source=nodes[0].id, target="nowhere", kind=EdgeKind.NEXT, doc_id="a")
        with pytest.raises(GraphStoreError):
            store.replace_doc("a", 0, nodes[:3], [bad])
        idle()  # rolled back, and the connection still works
        assert observe(store, "a") == (30, ["g1"])


def test_data_survive_a_process_restart(spec: dict[str, Any]) -> None:
    check_restart(spec)


def test_readers_see_the_old_or_the_new_document_never_a_mix(
    spec: dict[str, Any], tmp_path: Path
) -> None:
    check_readers_during_replace(spec, tmp_path)


def test_a_writer_killed_inside_replace_doc_leaves_the_previous_document(
    spec: dict[str, Any], tmp_path: Path, admin: Any
) -> None:
    def in_transaction(info: dict[str, Any]) -> bool:
        """The writer's backend is idle in a transaction that has written rows to this
        schema's nodes table (uncommitted: nobody else sees them)."""
        pid = info["backend_pid"]
        state = admin.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,))
        wrote = admin.execute(
            "SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE l.pid = %s AND "
            "c.relname = 'e2rag_nodes' AND n.nspname = %s AND l.mode = 'RowExclusiveLock'",
            (pid, spec["schema"]),
        )
        return state.fetchone()[0] == "idle in transaction" and wrote.fetchone() is not None

    def after_kill(info: dict[str, Any]) -> None:
        wait_for(lambda: _backend_gone(admin, info["backend_pid"]), "the server to notice")

    check_killed_writer(spec, tmp_path, in_transaction, after_kill)


def test_two_writer_processes_on_different_documents_both_land(
    spec: dict[str, Any], tmp_path: Path, admin: Any
) -> None:
    with closing(open_spec(spec)) as store:
        store.replace_doc("a", 0, *story_doc("a", 0, 200, "old"))
        store.replace_doc("b", 1, *story_doc("b", 1, 200, "old"))
    first = PausedWriter(spec, "a", 0, 2000, "new", tmp_path / "first")
    second = spawn("replace", json.dumps(spec), "b", 1, 1500, "new")
    waiting = (  # the second writer queues behind the first (it does not fail or interleave)
        lambda: admin.execute(WAITING, (first.info["backend_pid"],)).fetchone(),
        "the second writer to wait for the first",
    )
    finish_second_after_first(first, second, [waiting], still_waiting=True)
    with closing(open_spec(spec)) as store:
        assert observe(store, "a") == (2000, ["new"]) and observe(store, "b") == (1500, ["new"])
        assert store.doc_orders() == {"a": 0, "b": 1}
        assert sorted(f["reason"] for f in store.failures()) == ["new", "new"]


def test_two_writers_of_one_document_run_one_after_the_other(
    spec: dict[str, Any], tmp_path: Path, admin: Any
) -> None:
    check_same_doc_writers(
        spec, tmp_path, lambda info: admin.execute(WAITING, (info["backend_pid"],)).fetchone()
    )


def test_free_running_writer_processes_end_as_if_they_had_run_one_after_the_other(
    spec: dict[str, Any], extra_schemas: list[str]
) -> None:
    """Two processes replace their own document 6 times each, at the same moment. The result,
    version counter included (no lost increment), equals running the same writes serially."""
    start = time.time() + 1.5  # both processes are connected by then
    procs = [
        spawn("rounds", json.dumps(spec), doc, order, 300, 6, start)
        for order, doc in enumerate(("c", "d"))
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    serial = dict(spec, schema=f"{spec['schema']}_serial")
    extra_schemas.append(serial["schema"])
    with closing(open_spec(serial)) as reference:
        for round_ in range(6):
            for order, doc in enumerate(("c", "d")):
                reference.replace_doc(doc, order, *story_doc(doc, order, 300 + round_, f"r{round_}"))
        expected = (reference.to_dict(), reference.doc_orders(), reference.version)
    with closing(open_spec(spec)) as store:
        assert observe(store, "c") == (305, ["r5"]) and observe(store, "d") == (305, ["r5"])
        assert (store.to_dict(), store.doc_orders(), store.version) == expected


def test_two_indexes_in_two_schemas_of_one_database_do_not_see_each_other(
    spec: dict[str, Any], tmp_path: Path, extra_schemas: list[str]
) -> None:
    other = dict(spec, schema=f"{spec['schema']}_other")
    extra_schemas.append(other["schema"])
    with closing(open_spec(spec)) as one, closing(open_spec(other)) as two:
        one.replace_doc("a", 0, *story_doc("a", 0, 40, "one"), [{"reason": "one"}])
        two.replace_doc("a", 3, *story_doc("a", 3, 25, "two"))
        two.replace_doc("z", 4, *story_doc("z", 4, 5, "two"))
        assert observe(one, "a") == (40, ["one"]) and observe(two, "a") == (25, ["two"])
        assert one.doc_ids() == ["a"] and two.doc_ids() == ["a", "z"]
        assert one.doc_orders() == {"a": 0} and two.doc_orders() == {"a": 3, "z": 4}
        assert one.failures() == [{"doc_id": "a", "chunk_id": "", "reason": "one"}]
        assert two.failures() == []
        version = two.version
        one.delete_doc("a")
        assert one.doc_ids() == [] and observe(two, "a") == (25, ["two"])
        assert two.version == version
        # A writer inside its transaction on one schema does not hold up the other schema.
        writer = PausedWriter(spec, "a", 0, 100, "again", tmp_path / "writer")
        try:
            done = threading.Event()

            def write_two() -> None:
                two.replace_doc("y", 5, *story_doc("y", 5, 5, "two"))
                done.set()

            thread = threading.Thread(target=write_two, daemon=True)
            thread.start()
            assert done.wait(10), "a writer of another schema blocked this one"
            writer.release()
        finally:
            writer.kill()
        assert observe(one, "a") == (100, ["again"]) and two.doc_ids() == ["a", "y", "z"]
    dumped = json.loads(run_worker("dump", json.dumps(other)))
    assert dumped["orders"] == {"a": 3, "y": 5, "z": 4}


def test_opening_a_store_does_not_wait_for_a_writer(spec: dict[str, Any], tmp_path: Path) -> None:
    """A new reader connects and reads while a writer's transaction is open (no DDL, no lock)."""
    with closing(open_spec(spec)) as store:
        store.replace_doc("a", 0, *story_doc("a", 0, 50, "old"))
    writer = PausedWriter(spec, "a", 0, 500, "new", tmp_path / "writer")
    try:
        seen: list[Any] = []

        def open_and_read() -> None:
            with closing(open_spec(spec)) as reader:
                seen.append(observe(reader, "a"))

        thread = threading.Thread(target=open_and_read, daemon=True)
        thread.start()
        thread.join(10)
        assert seen == [(50, ["old"])], "opening a store waited for the writer"
        writer.release()
    finally:
        writer.kill()


def test_processes_creating_one_new_schema_at_the_same_moment_all_succeed(
    spec: dict[str, Any]
) -> None:
    start = time.time() + 1.5
    procs = [spawn("open", json.dumps(spec), start) for _ in range(4)]
    results = [proc.communicate(timeout=60) for proc in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in results]
    assert [out.strip() for out, _ in results] == ["0"] * 4


def test_a_concurrent_replace_never_leaves_a_dangling_cross_document_edge(
    spec: dict[str, Any], tmp_path: Path, admin: Any
) -> None:
    """Writer 1 replaces "a" with an edge into "b"'s node X; writer 2 replaces "b" without X
    while writer 1 is inside its transaction. Run one after the other, writer 2 removes the
    edge with X; interleaved (writer 2 deleting X before writer 1 checks its edge's ends), the
    edge would outlive X."""
    old_b, _ = story_doc("b", 1, 20, "old")
    x = old_b[5].id
    with closing(open_spec(spec)) as store:
        store.replace_doc("a", 0, *story_doc("a", 0, 20, "old"))
        store.replace_doc("b", 1, *story_doc("b", 1, 20, "old"))
    first = PausedWriter(spec, "a", 0, 300, "new", tmp_path / "first", f"--cross={x}")
    second = spawn("replace", json.dumps(spec), "b", 1, 300, "new")
    waiting = (
        lambda: admin.execute(WAITING, (first.info["backend_pid"],)).fetchone(),
        "the second writer to wait for the first",
    )
    finish_second_after_first(first, second, [waiting])
    with closing(open_spec(spec)) as store:
        assert observe(store, "a") == (300, ["new"]) and observe(store, "b") == (300, ["new"])
        assert not store.has_node(x)
        ends = [(e.source, e.target) for e in store.edges()]
        assert all(store.has_node(s) and store.has_node(t) for s, t in ends), "dangling edge"
        assert store.edges(EdgeKind.CO_MENTION) == []


def test_the_writer_lock_makes_a_second_writer_wait_until_the_first_is_done(
    spec: dict[str, Any]
) -> None:
    from llama_index_e2rag.stores.locks import StoreLocks

    first = StoreLocks(writer_lock=open_spec(spec).writer_lock)
    second = StoreLocks(writer_lock=open_spec(spec).writer_lock)
    order: list[str] = []
    held = threading.Event()

    def write(locks: StoreLocks, name: str, ready: threading.Event | None) -> None:
        with locks.writer():
            order.append(f"{name} in")
            if ready is not None:
                ready.set()
                time.sleep(0.5)
            order.append(f"{name} out")

    one = threading.Thread(target=write, args=(first, "first", held))
    one.start()
    held.wait(10)
    two = threading.Thread(target=write, args=(second, "second", None))
    two.start()
    one.join(10)
    two.join(10)
    assert order == ["first in", "first out", "second in", "second out"]
