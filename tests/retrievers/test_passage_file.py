"""The narrative read model persisted per content state: read back by the next load instead of
rebuilt from every mention and event, trusted only while it matches the graph, the same ranking.

Real components: the offline default graph (spaCy), MiniLM, a persisted store in a real folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document

from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.retrievers import passage_cache, passage_file
from llama_index_e2rag.retrievers.passage_cache import narrative_state, save_read_model

from persisted_demo import forbid, persist_demo

QUESTIONS = (
    "What did Peter do after he lost his shoes?",
    "Who chased Peter round the garden?",
    "Why did Peter go to bed without supper?",
)


@pytest.fixture(scope="module")
def store(minilm, tmp_path_factory) -> Path:
    """Peter Rabbit indexed offline and persisted, its read model saved as ``e2rag index``
    saves it."""
    folder = tmp_path_factory.mktemp("store")
    save_read_model(persist_demo(folder, minilm).stores)
    return folder


def _ranking(index: E2RAGIndex) -> list[list[tuple[str, float]]]:
    retriever = index.as_retriever(similarity_top_k=6)
    return [
        [(n.node.node_id, round(float(n.score), 6)) for n in retriever.retrieve(q)]
        for q in QUESTIONS
    ]


def _no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    forbid(monkeypatch, passage_cache, "build_table",
           "the passage table was rebuilt from the graph")


def _file(store: Path) -> Path:
    return store / "e2rag" / passage_file.READ_MODELS_DIR / passage_file.NARRATIVE_FILE


def test_a_load_reads_the_saved_model_and_ranks_as_the_graph_does(
    store: Path, minilm, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _file(store).is_file()
    built = load_index(store, embed_model=minilm)
    passage_file.write(built.stores, "none", {})  # a model of no state: ignored, rebuilt
    from_graph = narrative_state(built.stores)
    expected = _ranking(built)

    _no_build(monkeypatch)
    loaded = load_index(store, embed_model=minilm)
    from_file = narrative_state(loaded.stores)
    assert passage_file.encode(from_file.table, from_file.chunk_metadata) == passage_file.encode(
        from_graph.table, from_graph.chunk_metadata
    )
    assert np.array_equal(from_file.table.vectors, from_graph.table.vectors)
    assert from_file.table.name_words == from_graph.table.name_words
    assert _ranking(loaded) == expected


def test_a_damaged_model_is_rebuilt_and_written_again(
    store: Path, minilm, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _ranking(load_index(store, embed_model=minilm))
    path = _file(store)
    text = path.read_text(encoding="utf-8")
    head, body = text.split("\n", 1)
    path.write_text(head + "\n" + body.replace('"ids"', '"idz"', 1), encoding="utf-8")

    assert _ranking(load_index(store, embed_model=minilm)) == expected
    assert path.read_text(encoding="utf-8") == text  # rebuilt from the graph, saved again
    _no_build(monkeypatch)
    assert _ranking(load_index(store, embed_model=minilm)) == expected


def test_a_write_makes_the_saved_model_stale(store: Path, minilm, tmp_path: Path) -> None:
    store = Path(shutil.copytree(store, tmp_path / "store"))
    index = load_index(store, embed_model=minilm)
    before = narrative_state(index.stores).table.ids
    index.insert(Document(text="Benjamin Bunny visited the garden at dawn.", id_="benjamin"))
    after = narrative_state(index.stores).table
    new_row = len(after.ids) - 1  # the new document's one passage comes last in story order
    assert len(after.ids) == len(before) + 1 and new_row in after.names["benjamin bunny"]
    reloaded = narrative_state(load_index(store, embed_model=minilm).stores).table
    assert reloaded.ids == after.ids and new_row in reloaded.names["benjamin bunny"]
