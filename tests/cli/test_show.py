"""``e2rag show``: counts read from SQLite and what a load checks; ``--check`` reads every row.

Real CLI, real store (scripted LLM and hash embedding through ``Settings``, as users configure).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Settings
from scripted_llm import ScriptedLLM
from test_index import NAMES, SEQUEL, STORY

from llama_index_e2rag.cli.entry import main
from llama_index_e2rag.cli.show import node_counts
from llama_index_e2rag.graph.sqlite_store import SQLiteGraphStore


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(Settings, "_llm", ScriptedLLM(names=NAMES))
    monkeypatch.setattr(Settings, "_embed_model", HashEmbedding())
    books = tmp_path / "books"
    books.mkdir()
    (books / "one.txt").write_text(STORY, encoding="utf-8")
    (books / "two.txt").write_text(SEQUEL, encoding="utf-8")
    store = tmp_path / "store"
    assert main(["index", str(books), "--store", str(store), "--quiet", "--chrono"]) == 0
    return store


def _show(store: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["show", "--store", str(store), *flags])
    return code, capsys.readouterr().out


def test_show_counts_what_the_graph_holds(store: Path, capsys) -> None:
    code, out = _show(store, capsys)
    assert code == 0 and "status: ok (what a load checks; e2rag show --check" in out
    graph = SQLiteGraphStore.open_existing(store / "e2rag" / "graph.sqlite")
    try:
        counts = node_counts(graph)  # read from the nodes themselves
        chunks = {}
        for chunk in graph.nodes():
            if chunk.kind.value == "chunk" and chunk.attrs.get("layer") != 0:
                chunks[chunk.doc_id] = chunks.get(chunk.doc_id, 0) + 1
    finally:
        graph.close()
    assert "chunk (chrono layer 0)" in counts
    assert "nodes: " + ", ".join(f"{k}={v}" for k, v in counts.items()) in out
    for doc_id, n in chunks.items():
        assert f"{doc_id} ({n} chunks)" in out


def test_a_changed_row_is_found_by_check_only(store: Path, capsys) -> None:
    with sqlite3.connect(store / "e2rag" / "graph.sqlite") as conn:
        conn.execute(
            "UPDATE e2rag_nodes SET text = text || ' (edited)' WHERE id = "
            "(SELECT id FROM e2rag_nodes WHERE kind = 'passage' LIMIT 1)"
        )
    code, out = _show(store, capsys)
    assert code == 0 and "status: ok" in out  # the rows are not read without --check
    code, out = _show(store, capsys, "--check")
    assert code == 1 and "status: DAMAGED" in out and "changed since they were committed" in out
