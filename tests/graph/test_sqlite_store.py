"""SQLiteGraphStore on a real file: restarts, concurrent readers, killed writers, persist/move.

Other processes run ``tests/graph/conftest.py`` as a worker (see ``conftest.worker``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from llama_index_e2rag.graph import SQLiteGraphStore

from .conftest import (
    check_killed_writer,
    check_readers_during_replace,
    check_restart,
    check_same_doc_writers,
    observe,
    run_worker,
    snapshot,
    story_doc,
)


def _spec(path: Path) -> dict[str, Any]:
    return {"backend": "sqlite", "path": str(path)}


def _dump(path: Path) -> dict[str, Any]:
    """The store at ``path`` as read by a new process."""
    return json.loads(run_worker("dump", json.dumps(_spec(path))))


def test_data_survive_a_process_restart(tmp_path: Path) -> None:
    check_restart(_spec(tmp_path / "graph.sqlite"))


def test_readers_see_the_old_or_the_new_document_never_a_mix(tmp_path: Path) -> None:
    check_readers_during_replace(_spec(tmp_path / "graph.sqlite"), tmp_path)


def test_a_writer_killed_inside_replace_doc_leaves_the_previous_document(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    wal = Path(f"{path}-wal")
    sizes: dict[str, int] = {}

    def in_transaction(info: dict[str, Any]) -> bool:
        """The writer holds SQLite's write lock, and its uncommitted pages reached the WAL (so
        the next open must really discard them, not merely never have seen them)."""
        sizes["wal"] = wal.stat().st_size if wal.exists() else 0
        probe = sqlite3.connect(path, timeout=0)
        try:
            probe.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            return "locked" in str(exc)
        else:
            probe.rollback()
            return False
        finally:
            probe.close()

    check_killed_writer(_spec(path), tmp_path, in_transaction)
    assert sizes["wal"] > 1_000_000, "the killed transaction never spilled to the WAL"


def test_two_writers_of_one_document_run_one_after_the_other(tmp_path: Path) -> None:
    def queued(info: dict[str, Any]) -> bool:  # SQLite shows no waiters: give it time to queue
        time.sleep(0.5)
        return True

    check_same_doc_writers(_spec(tmp_path / "graph.sqlite"), tmp_path, queued)


def _fill(store: SQLiteGraphStore) -> None:
    store.replace_doc("a", 0, *story_doc("a", 0, 40, "g1"), [{"chunk_id": "c1", "reason": "x"}])
    store.replace_doc("b", 1, *story_doc("b", 1, 25, "g1"))


def test_persist_writes_a_self_contained_copy_that_opens_in_a_new_process(tmp_path: Path) -> None:
    with closing(SQLiteGraphStore()) as store:  # an index's graph before its first persist
        assert store.is_temporary
        _fill(store)
        expected = json.loads(json.dumps(snapshot(store)))
        target = tmp_path / "saved" / "graph.sqlite"
        store.persist(target)
        store.persist(target)  # over an existing copy
        assert sorted(p.name for p in target.parent.iterdir()) == ["graph.sqlite"]
        # the file alone is the whole graph: no WAL beside it is needed
        alone = tmp_path / "elsewhere" / "graph.sqlite"
        alone.parent.mkdir()
        shutil.copyfile(target, alone)
        assert _dump(alone) == expected
        store.replace_doc("c", 2, *story_doc("c", 2, 5, "g1"))  # the copy is not a live view
        assert store.is_temporary
    assert _dump(target) == expected


def test_move_to_continues_writing_in_the_new_file(tmp_path: Path) -> None:
    first, second = tmp_path / "first.sqlite", tmp_path / "moved" / "graph.sqlite"
    with closing(SQLiteGraphStore(first)) as store:
        store.replace_doc("a", 0, *story_doc("a", 0, 30, "g1"))
        store.move_to(second)
        assert store.path == second
        store.replace_doc("b", 1, *story_doc("b", 1, 20, "g1"))
        store.replace_doc("a", 0, *story_doc("a", 0, 31, "g2"))
        expected = json.loads(json.dumps(snapshot(store)))
    moved = _dump(second)
    assert moved == expected and moved["orders"] == {"a": 0, "b": 1}
    left = _dump(first)  # the old file stopped at the move
    assert left["orders"] == {"a": 0}
    assert {n["attrs"]["gen"] for n in left["graph"]["nodes"]} == {"g1"}
    assert len(left["graph"]["nodes"]) == 30


def test_move_to_from_the_temporary_file_drops_it(tmp_path: Path) -> None:
    store = SQLiteGraphStore()
    temp_dir = store.path.parent
    store.replace_doc("a", 0, *story_doc("a", 0, 30, "g1"))
    target = tmp_path / "graph.sqlite"
    store.move_to(target)
    assert not store.is_temporary and not temp_dir.exists()
    store.replace_doc("b", 1, *story_doc("b", 1, 20, "g1"))
    assert observe(store, "a") == (30, ["g1"])
    store.close()
    assert _dump(target)["orders"] == {"a": 0, "b": 1}


def test_texts_by_attr_equal_the_nodes_read_whole(tmp_path: Path) -> None:
    import random

    from llama_index_e2rag.schema import GraphNode, NodeKind

    rng = random.Random(5)
    store = SQLiteGraphStore(tmp_path / "g.sqlite")
    nodes = []
    for i in range(200):
        attrs: dict[str, Any] = {"other": i}
        if rng.random() < 0.7:
            attrs["topic_id"] = f"topic-{rng.randint(0, 9)}"
        kind = NodeKind.SENTENCE if rng.random() < 0.8 else NodeKind.CHUNK
        nodes.append(GraphNode(id=f"n{i}", kind=kind, doc_id=f"d{rng.randint(0, 2)}",
                               pos=(rng.randint(0, 2), rng.randint(0, 50), 0),
                               text=f"text {i} é", attrs=attrs))
    store.upsert_nodes(nodes)
    whole = [(n.attrs["topic_id"], n.text) for n in store.nodes(NodeKind.SENTENCE)
             if "topic_id" in n.attrs]
    assert whole and store.texts_by_attr(NodeKind.SENTENCE.value, "topic_id") == whole
