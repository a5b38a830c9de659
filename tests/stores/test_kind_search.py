"""A kind's search through its saved HNSW graph once the kind is large: the exact search below
the threshold, the exact hits above it on a small story, a graph file read back by the next load
and updated by a write.

Real components: the offline default graph (spaCy), MiniLM, a persisted store in a real folder;
the threshold is lowered so the demo story's kinds count as large.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from llama_index.core import Document

from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.retrievers import filters
from llama_index_e2rag.schema import NodeKind
from llama_index_e2rag.stores import kind_search, read_model_file
from llama_index_e2rag.vectors import nearest, nearest_graph

from persisted_demo import DEMO_QUESTIONS, persist_demo

KINDS = (NodeKind.CHUNK, NodeKind.SENTENCE, NodeKind.MENTION, NodeKind.EVENT)


@pytest.fixture(scope="module")
def store(minilm, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("store")
    persist_demo(folder, minilm)
    return folder


def _hits(stores, minilm, search) -> list:
    return [
        [(h.id, round(h.score, 9)) for h in search(stores, kind, vector, 5)]
        for kind in KINDS
        for vector in (minilm.get_query_embedding(q) for q in DEMO_QUESTIONS)
    ]


def _graphs(store: Path) -> set[str]:
    folder = store / "e2rag" / read_model_file.READ_MODELS_DIR
    return {p.name for p in folder.glob("kind-*.hnsw")} if folder.is_dir() else set()


def test_below_the_threshold_the_search_is_the_stores_own(store: Path, minilm) -> None:
    stores = load_index(store, embed_model=minilm).stores
    exact = _hits(stores, minilm, lambda s, k, v, n: s.search(k, v, n))
    assert _hits(stores, minilm, lambda s, k, v, n: filters.search(s, None, k, v, n)) == exact
    kind_search.save_read_models(stores)
    assert not _graphs(store)


def test_a_large_kind_is_searched_through_its_saved_graph(
    store: Path, minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Path(shutil.copytree(store, tmp_path / "store"))
    stores = load_index(store, embed_model=minilm).stores
    counts = {kind: stores.vectors.count(kind.value) for kind in KINDS}
    monkeypatch.setattr(nearest, "ANN_MIN_ROWS", min(counts.values()))
    exact = _hits(stores, minilm, lambda s, k, v, n: s.search(k, v, n))
    kind_search.save_read_models(stores)
    assert {f"kind-{kind.value}.hnsw" for kind in KINDS} <= _graphs(store)

    def refuse(matrix):
        raise AssertionError("a saved search graph was built again")

    monkeypatch.setattr(nearest_graph, "build_graph", refuse)
    loaded = load_index(store, embed_model=minilm).stores
    # a few hundred rows: the graph finds every row the exact scan finds, with its score
    assert _hits(loaded, minilm, kind_search.search) == exact

    loaded_index = load_index(store, embed_model=minilm)
    loaded_index.insert(Document(text="Benjamin Bunny met Peter in the wood.", id_="benjamin"))
    # the saved graph is updated by the inserted rows, not built again
    after = kind_search.search(loaded_index.stores, NodeKind.SENTENCE, exact_vector(minilm), 3)
    assert after == loaded_index.stores.search(NodeKind.SENTENCE, exact_vector(minilm), 3)
    assert after[0].id not in loaded.vectors.kind_matrix(NodeKind.SENTENCE.value)[0]  # new


def exact_vector(minilm) -> list[float]:
    return minilm.get_query_embedding("Benjamin Bunny in the wood")


def test_kinds_built_two_at_a_time_are_the_graphs_built_one_at_a_time(
    store: Path, minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two kinds' graphs are built at once on two threads, each on one thread of its own: the
    files are byte for byte those of one kind at a time."""
    monkeypatch.setattr(kind_search, "available_cores", lambda: 2)
    files = {}
    for builders in (1, 2):
        copy = Path(shutil.copytree(store, tmp_path / f"store-{builders}"))
        stores = load_index(copy, embed_model=minilm).stores
        monkeypatch.setattr(nearest, "ANN_MIN_ROWS", min(
            stores.vectors.count(kind.value) for kind in KINDS))
        monkeypatch.setattr(kind_search, "BUILDERS", builders)
        kind_search.save_read_models(stores)
        folder = copy / "e2rag" / read_model_file.READ_MODELS_DIR
        files[builders] = {p.name: p.read_bytes() for p in sorted(folder.glob("kind-*"))}
    assert len(files[1]) >= 2 * len(KINDS)  # a graph and its head per kind
    assert files[2] == files[1]
