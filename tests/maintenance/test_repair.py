"""e2rag repair: what the graph still says is rebuilt without extraction; what it lost is
extracted again from docstore.json's chunks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hash_embedding import HashEmbedding

import fault_worker

from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.maintenance.repair import documents_from_docstore, repair_store
from llama_index_e2rag.schema import NodeKind
from llama_index_e2rag.persist.check import full_check


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    fault_worker.build(store)
    return store


def test_rows_changed_behind_the_graphs_back_are_found_and_extracted_again(tmp_path: Path) -> None:
    store = _store(tmp_path)
    before = sorted(n.text for n in load_index(store, **fault_worker.options()).graph_store.nodes(NodeKind.EVENT))
    with sqlite3.connect(store / "e2rag" / "graph.sqlite") as db:
        db.execute("UPDATE e2rag_nodes SET text = 'tampered' WHERE kind = 'event'")
    health = full_check(store)
    assert any("changed since they were committed" in p for p in health.problems)
    options = fault_worker.options()
    report = repair_store(store, embed_model=options.pop("embed_model"), llm=options["llm"])
    assert any("extracted" in a for a in report.actions), report.actions
    assert report.after is not None and report.after.ok, report.after
    index = load_index(store, **fault_worker.options())
    assert sorted(n.text for n in index.graph_store.nodes(NodeKind.EVENT)) == before


def test_a_lost_graph_is_rebuilt_from_the_docstores_chunks_and_the_old_folder_kept(tmp_path: Path) -> None:
    store = _store(tmp_path)
    chunks = sorted(c.text for c in load_index(store, **fault_worker.options()).graph_store.nodes(NodeKind.CHUNK))
    (store / "e2rag" / "graph.sqlite").unlink()
    report = repair_store(store, embed_model=HashEmbedding())
    assert report.after is not None and report.after.ok
    assert list(store.glob("e2rag.damaged-*"))
    index = load_index(store, embed_model=HashEmbedding())
    assert sorted(c.text for c in index.graph_store.nodes(NodeKind.CHUNK)) == chunks


def test_documents_come_back_from_their_chunks_with_their_text(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (document,) = documents_from_docstore(store)
    assert document.id_ == "a"
    words = fault_worker.OLD.split()
    assert document.text.split() == words


def test_a_whole_store_needs_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    report = repair_store(store, embed_model=HashEmbedding())
    assert report.before.ok and report.actions == [] and report.after is not None and report.after.ok
