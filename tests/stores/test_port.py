"""``Stores.lexical``: the passages' BM25 index, a read model derived at the first query after a
write (never over the whole store at a save), equal to one built from the passages now."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
from llama_index.core import Document
from test_index import SEQUEL, STORY, load, make_index

import llama_index_e2rag.stores.port as port
from llama_index_e2rag.schema import NodeKind, sort_by_position
from llama_index_e2rag.stores.lexical import LexicalIndex

QUERIES = ["Harry mirror", "Dumbledore warned", "parents at night", "unknownword"]
EXTRA = [
    "Ron played chess with Harry in the common room. The knight took the queen.",
    "Hermione read about the Philosopher's Stone in the library at night.",
    "Hagrid kept a dragon egg in his hut. The dragon hatched in May.",
]


#: ``LexicalIndex.build`` as it is (the tests count the stores' calls of it)
_BUILD = LexicalIndex.build


def _rebuilt(index) -> LexicalIndex:
    """BM25 built from the graph's passages as they are now (the definition)."""
    passages = sort_by_position(index.graph_store.nodes(NodeKind.PASSAGE))
    return _BUILD([p.id for p in passages], [p.text for p in passages])


def _assert_equal(lexical: LexicalIndex, expected: LexicalIndex) -> None:
    assert lexical.ids == expected.ids
    for query in QUERIES:
        assert np.array_equal(lexical.scores(query), expected.scores(query))


def _counting_builds(monkeypatch) -> list[int]:
    calls: list[int] = []
    build = LexicalIndex.build.__func__

    def counted(cls, ids, texts):
        calls.append(len(ids))
        return build(cls, ids, texts)

    monkeypatch.setattr(port.LexicalIndex, "build", classmethod(counted))
    return calls


def test_a_save_builds_no_bm25_and_the_first_query_saves_it_for_later_processes(
    tmp_path: Path, monkeypatch
) -> None:
    make_index().storage_context.persist(str(tmp_path))
    loaded = load(tmp_path)
    calls = _counting_builds(monkeypatch)
    loaded.insert(Document(text=SEQUEL, id_="sequel"))
    loaded.storage_context.persist(str(tmp_path))
    assert calls == []  # insert + persist: nothing derived over the whole store
    first = load(tmp_path)
    _assert_equal(first.stores.lexical(), _rebuilt(first))
    assert len(calls) == 1 and (tmp_path / "e2rag" / "readmodels" / "bm25.jsonl").is_file()
    _assert_equal(load(tmp_path).stores.lexical(), _rebuilt(first))
    assert len(calls) == 1  # read back, not built again


def test_a_damaged_bm25_read_model_is_rebuilt(tmp_path: Path) -> None:
    make_index().storage_context.persist(str(tmp_path))
    load(tmp_path).stores.lexical()
    path = tmp_path / "e2rag" / "readmodels" / "bm25.jsonl"
    head, body = path.read_text().split("\n", 1)
    path.write_text(head + "\n" + body.replace("a", "b", 1))
    loaded = load(tmp_path)
    _assert_equal(loaded.stores.lexical(), _rebuilt(loaded))


def test_after_random_inserts_and_deletes_bm25_equals_a_rebuild(tmp_path: Path) -> None:
    rng = random.Random(11)
    make_index([Document(text=STORY, id_="phantom")]).storage_context.persist(str(tmp_path))
    held = {"phantom"}
    for step in range(6):
        index = load(tmp_path)
        absent = [i for i in range(len(EXTRA)) if f"extra-{i}" not in held]
        if absent and (rng.random() < 0.6 or len(held) == 1):
            doc_id = f"extra-{rng.choice(absent)}"
            index.insert(Document(text=EXTRA[int(doc_id[-1])], id_=doc_id))
            held.add(doc_id)
        else:
            doc_id = rng.choice(sorted(held - {"phantom"}))
            index.delete_ref_doc(doc_id)
            held.discard(doc_id)
        index.storage_context.persist(str(tmp_path))
        if step % 2:  # a query in between saves the model of that state
            load(tmp_path).stores.lexical()
        reopened = load(tmp_path)
        _assert_equal(reopened.stores.lexical(), _rebuilt(reopened))


def test_a_matrix_reads_one_page_of_vectors_at_a_time(monkeypatch) -> None:
    """``Stores.matrix_of`` asks the vector storage for at most a page of ids per read (a
    story's whole kind is never held twice) and gives what one whole read gives: rows aligned
    with the ids, zeros for an id without a vector."""
    from llama_index.core.storage.docstore import SimpleDocumentStore

    from llama_index_e2rag.graph import NetworkXGraphStore
    from llama_index_e2rag.vectors.base import VectorRecord
    from llama_index_e2rag.vectors.embedded import EmbeddedVectors

    rng = np.random.default_rng(0)
    storage = EmbeddedVectors()
    storage.add([VectorRecord(f"n{i}", ("event", "mention")[i % 2], "d", "t",
                              rng.standard_normal(8).astype(np.float32)) for i in range(60)])
    ids = [f"n{i}" for i in rng.permutation(60).tolist()] + ["unknown", "n3", "gone"]
    whole = storage.get_embeddings(ids)
    expected = np.stack([whole.get(i, np.zeros(8, np.float32)) for i in ids])
    stores = port.Stores(NetworkXGraphStore(), storage, SimpleDocumentStore())
    assert np.array_equal(stores.matrix_of(ids), expected)  # the embedded store's aligned read
    # any other store (without ``matrix_of``) is read a page at a time
    monkeypatch.setattr(storage, "matrix_of", None)
    asked: list[int] = []
    read = storage.get_embeddings
    monkeypatch.setattr(storage, "get_embeddings", lambda page: asked.append(len(page)) or read(
        page))
    monkeypatch.setattr(port, "PAGE", 7)
    assert np.array_equal(stores.matrix_of(ids), expected)
    assert max(asked) <= 7 and sum(asked) == len(ids)
    assert stores.matrix_of(["unknown"]).shape == (1, 0)

