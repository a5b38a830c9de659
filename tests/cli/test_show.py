"""``e2rag show``: counts added up from the documents' records and a light check of file sizes
and vector counts; ``--check`` reads every byte and every row.

Real CLI, real store (scripted LLM and hash embedding through ``Settings``, as users configure).
"""

from __future__ import annotations

import json
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
    assert code == 0 and "status: ok (file sizes and vector counts; e2rag show --check" in out
    assert "counted from every row" not in out and "read from every vector file" not in out
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


def _forget_counts(store: Path) -> None:
    """Make the store one written before records and the vector manifest counted rows."""
    with sqlite3.connect(store / "e2rag" / "graph.sqlite") as conn:
        conn.execute("UPDATE e2rag_meta SET value = json_remove(value, '$.counts') "
                     "WHERE key LIKE 'doc:%'")
        assert conn.execute("SELECT COUNT(*) FROM e2rag_meta WHERE key LIKE 'doc:%' AND "
                            "json_extract(value, '$.counts') IS NULL").fetchone()[0] == 2
    manifest = store / "e2rag" / "vectors" / "vectors.json"
    data = json.loads(manifest.read_text())
    for entry in data["segments"]:
        entry.pop("docs")
    manifest.write_text(json.dumps(data))


def test_a_store_without_recorded_counts_is_counted_from_its_rows_until_repaired(
    store: Path, capsys
) -> None:
    _, counted = _show(store, capsys)
    _forget_counts(store)
    code, scanned = _show(store, capsys)
    assert code == 0 and "counted from every row" in scanned
    assert "vector counts read from every vector file" in scanned
    body = lambda out: out[out.index("documents:"):]  # noqa: E731
    assert body(scanned) == body(counted)
    assert main(["repair", "--store", str(store), "--quiet"]) == 0
    assert "counted the rows of 2 document(s)" in capsys.readouterr().out
    code, out = _show(store, capsys)
    assert code == 0 and out == counted


def _vector_file(store: Path) -> Path:
    return max((store / "e2rag" / "vectors").glob("vectors-*.npy"), key=lambda p: p.stat().st_size)


def test_a_cut_vector_file_is_refused_without_check(store: Path, capsys) -> None:
    path = _vector_file(store)
    path.write_bytes(path.read_bytes()[:-64])
    capsys.readouterr()
    assert main(["show", "--store", str(store)]) == 1
    out, err = capsys.readouterr()
    assert "status: DAMAGED" in out and f"{path} is " in out
    assert err.startswith("e2rag: error: ") and err.count("\n") == 1  # one line
    assert f"e2rag repair --store {store}" in err
    path.unlink()  # a missing file likewise
    code, out = _show(store, capsys)
    assert code == 1 and f"{path} is missing" in out


def test_a_vector_file_changed_in_place_is_found_by_check_only(store: Path, capsys) -> None:
    path = _vector_file(store)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    path.write_bytes(bytes(data))
    code, out = _show(store, capsys)
    assert code == 0 and "status: ok" in out
    code, out = _show(store, capsys, "--check")
    assert code == 1 and "status: DAMAGED" in out and "does not match its checksum" in out


def test_fewer_vectors_than_the_records_expect_are_refused_without_check(
    store: Path, capsys
) -> None:
    """The manifest's counts are checked against the graph's records, as a load checks them."""
    manifest = store / "e2rag" / "vectors" / "vectors.json"
    data = json.loads(manifest.read_text())
    entry = next(e for e in data["segments"] if e["docs"])
    doc = next(iter(entry["docs"]))
    entry["docs"][doc] -= 1
    manifest.write_text(json.dumps(data))
    code, out = _show(store, capsys)
    assert code == 1 and f"lacks vectors its graph committed (1 {entry['kind']})" in out


def test_check_finds_counts_that_disagree_with_the_rows(store: Path, capsys) -> None:
    with sqlite3.connect(store / "e2rag" / "graph.sqlite") as conn:
        conn.execute("UPDATE e2rag_meta SET value = json_set(value, '$.counts.nodes.passage', 99)"
                     " WHERE key LIKE 'doc:%'")
    code, out = _show(store, capsys)
    assert code == 0 and "passage=198" in out  # the light check trusts the records
    code, out = _show(store, capsys, "--check")
    assert code == 1 and "changed since they were committed" in out
