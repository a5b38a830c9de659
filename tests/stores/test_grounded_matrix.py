"""The grounded mode's default node matrix persisted per content state: the rows of
``basic_embeddings`` over the whole state to the bit however it is paged, memory-mapped by the
next load instead of derived, the same ranking with and without the file, never used when stale
or damaged, and searched through its HNSW graph once it is large.

Real components: the offline default graph (spaCy), MiniLM, a persisted store in a real folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.stores import grounded_layout, grounded_matrix, node_embeddings
from llama_index_e2rag.stores import read_model_file
from llama_index_e2rag.stores.node_embeddings import basic_embeddings, graph_cache, l2_normalize
from llama_index_e2rag.vectors import nearest

from persisted_demo import DEMO_QUESTIONS, forbid, persist_demo
from resident import HAS_SMAPS, resident_kb

QUESTIONS = DEMO_QUESTIONS + ("Peter",)


@pytest.fixture(scope="module")
def store(minilm, tmp_path_factory) -> Path:
    """Peter Rabbit indexed offline and persisted; its grounded read models not saved yet."""
    folder = tmp_path_factory.mktemp("store")
    persist_demo(folder, minilm)
    return folder


def _copy(store: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(store, tmp_path / "store"))


def _ranking(index: E2RAGIndex, **kwargs) -> list[list[tuple[str, float]]]:
    retriever = index.as_retriever(mode="grounded", similarity_top_k=5, **kwargs)
    return [[(n.node.node_id, float(n.score)) for n in retriever.retrieve(q)] for q in QUESTIONS]


def _file(store: Path, name: str = grounded_matrix.MATRIX_FILE) -> Path:
    return store / "e2rag" / read_model_file.READ_MODELS_DIR / name


def _whole(index: E2RAGIndex) -> np.ndarray:
    """``basic_embeddings`` of the whole state in one call, as before the matrix was paged."""
    found = grounded_layout.derive(index.graph_store)
    vectors = index.stores.matrix_of(found.node_ids + found.text_ids)
    count = len(found.node_ids)
    return basic_embeddings(vectors[:count], found.indptr, found.indices,
                            l2_normalize(vectors[count:]), grounded_matrix.DEFAULT_ALPHA)


def _no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retrieval without the file: the matrix derived in memory, as for a store without a
    folder."""
    monkeypatch.setattr(grounded_matrix, "persisted", lambda *args: None)


@pytest.mark.parametrize("page_rows", [grounded_matrix.PAGE_ROWS, 7])
def test_the_saved_matrix_is_the_whole_states_basic_embeddings_to_the_bit(
    store: Path, minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page_rows: int
) -> None:
    monkeypatch.setattr(node_embeddings, "PAGE_ROWS", page_rows)
    store = _copy(store, tmp_path)
    index = load_index(store, embed_model=minilm)
    node_embeddings.save_read_model(index.stores)
    loaded = load_index(store, embed_model=minilm)
    saved = graph_cache(loaded.stores).matrix("basic", 0.5, 0.0)
    assert isinstance(saved, np.memmap) and _file(store).is_file()
    expected = _whole(index)
    assert len(expected) > 7 * 3 and saved.dtype == np.float32
    assert np.array_equal(np.asarray(saved), expected)


def test_the_ranking_is_the_same_with_and_without_the_file(
    store: Path, minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _copy(store, tmp_path)
    node_embeddings.save_read_model(load_index(store, embed_model=minilm).stores)
    with monkeypatch.context() as patched:
        forbid(patched, node_embeddings, "basic_pages", "the saved matrix was derived again")
        with_file = _ranking(load_index(store, embed_model=minilm))
        story = _ranking(load_index(store, embed_model=minilm), order="story", ret_count=2)
    _no_file(monkeypatch)
    assert _ranking(load_index(store, embed_model=minilm)) == with_file
    assert _ranking(load_index(store, embed_model=minilm), order="story", ret_count=2) == story
    assert all(with_file) and with_file != story


def test_another_alpha_or_variant_is_derived_as_before(
    store: Path, minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _copy(store, tmp_path)
    index = load_index(store, embed_model=minilm)
    node_embeddings.save_read_model(index.stores)
    others = ({"alpha": 0.3}, {"embedding_variant": "neighbor"})
    with_file = [_ranking(load_index(store, embed_model=minilm), **o) for o in others]
    _no_file(monkeypatch)
    assert [_ranking(load_index(store, embed_model=minilm), **o) for o in others] == with_file
    loaded = load_index(store, embed_model=minilm)
    cache = graph_cache(loaded.stores)
    found = grounded_layout.derive(index.graph_store)
    vectors = index.stores.matrix_of(found.node_ids + found.text_ids)
    count = len(found.node_ids)
    expected = basic_embeddings(vectors[:count], found.indptr, found.indices,
                                l2_normalize(vectors[count:]), 0.3)
    assert np.array_equal(cache.matrix("basic", 0.3, 0.0), expected)
    assert expected.shape[1] and not np.array_equal(expected, _whole(index))


def _damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _restale(path: Path) -> None:
    head_path = path.with_name(path.name + ".json")
    head = json.loads(head_path.read_text(encoding="utf-8"))
    head_path.write_text(json.dumps({**head, "key": head["key"] + "0"}), encoding="utf-8")


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 4])


@pytest.mark.parametrize("spoil", [_damage, _restale, _truncate])
def test_a_damaged_or_stale_matrix_is_derived_again_never_used(
    store: Path, minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spoil
) -> None:
    store = _copy(store, tmp_path)
    node_embeddings.save_read_model(load_index(store, embed_model=minilm).stores)
    path = _file(store)
    saved, expected = path.read_bytes(), _ranking(load_index(store, embed_model=minilm))
    spoil(path)
    loaded = load_index(store, embed_model=minilm)
    assert _ranking(loaded) == expected
    assert path.read_bytes() == saved  # derived again and saved again
    assert np.array_equal(graph_cache(loaded.stores).matrix("basic", 0.5, 0.0), _whole(loaded))


def test_a_write_makes_the_saved_matrix_stale(store: Path, minilm, tmp_path: Path) -> None:
    from llama_index.core import Document

    store = _copy(store, tmp_path)
    index = load_index(store, embed_model=minilm)
    node_embeddings.save_read_model(index.stores)
    index.insert(Document(text="Benjamin Bunny buried a silver spoon.", id_="benjamin"))
    reloaded = load_index(store, embed_model=minilm)
    matrix = graph_cache(reloaded.stores).matrix("basic", 0.5, 0.0)
    assert np.array_equal(np.asarray(matrix), _whole(reloaded))
    found = reloaded.as_retriever(mode="grounded").retrieve("Who buried the spoon?")
    assert found[0].node.get_content() == "Benjamin Bunny buried a silver spoon."


def test_a_large_matrix_is_searched_through_its_saved_graph(
    store: Path, minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the threshold lowered the demo's nodes count as large: the HNSW graph is saved
    beside the matrix and finds the exact top K on so few rows (its scores are float64)."""
    store = _copy(store, tmp_path)
    exact = _ranking(load_index(store, embed_model=minilm))
    monkeypatch.setattr(node_embeddings, "ANN_MIN_ROWS", 10)
    monkeypatch.setattr(nearest, "ANN_MIN_ROWS", 10)
    node_embeddings.save_read_model(load_index(store, embed_model=minilm).stores)
    assert _file(store, grounded_matrix.SEARCH_FILE).is_file()
    loaded = load_index(store, embed_model=minilm)
    approx = _ranking(loaded)
    assert graph_cache(loaded.stores).search is not None
    assert [[i for i, _ in q] for q in approx] == [[i for i, _ in q] for q in exact]
    for a, e in zip(approx, exact):
        assert [s for _, s in a] == pytest.approx([s for _, s in e], abs=1e-6)


@pytest.mark.skipif(not HAS_SMAPS, reason="reads Linux's smaps")
def test_the_vector_pages_of_the_derivation_are_let_go_before_the_graph_is_built(
    store: Path, minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deriving the matrix reads the vectors of every node and grounded sentence; their file
    pages leave the process page by page, and before the search graph's build, which does not
    need them."""
    store = _copy(store, tmp_path)
    segments = sorted(store.rglob("*.npy"))
    assert segments
    seen: list[int] = []
    real = node_embeddings.open_nearest

    def resident_then_open(*args, **kwargs):
        seen.append(sum(resident_kb(path) for path in segments))
        return real(*args, **kwargs)

    monkeypatch.setattr(node_embeddings, "ANN_MIN_ROWS", 10)
    monkeypatch.setattr(nearest, "ANN_MIN_ROWS", 10)
    monkeypatch.setattr(node_embeddings, "open_nearest", resident_then_open)
    index = load_index(store, embed_model=minilm)
    read: list[int] = []
    real_pages = node_embeddings.basic_pages

    def resident_with_each_page(*args, **kwargs):
        for page in real_pages(*args, **kwargs):
            read.append(sum(resident_kb(path) for path in segments))
            yield page

    monkeypatch.setattr(node_embeddings, "basic_pages", resident_with_each_page)
    node_embeddings.save_read_model(index.stores)
    assert read and min(read) > 0  # each page read some
    assert seen == [0]
