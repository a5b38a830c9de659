"""The ``sentence_graph`` read model persisted per content state: read back by the next load
instead of derived from every sentence and edge of the graph, trusted only while it matches the
graph, the same ranking; its sentences' nodes are read from the graph only when returned.

Real components: the offline sentence graph layer (spaCy), MiniLM, a persisted store in a real
folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document

from llama_index_e2rag.app.demo import sample_document
from llama_index_e2rag.graph.node_rows import NodeRows
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.retrievers import sentence_graph, sentence_graph_file

from persisted_demo import forbid, model_file, ranking


@pytest.fixture(scope="module")
def store(minilm, tmp_path_factory) -> Path:
    """Peter Rabbit with the sentence graph layer, persisted; its model not saved yet."""
    from llama_index_e2rag import SentenceGraphBuilder

    folder = tmp_path_factory.mktemp("store")
    index = E2RAGIndex.from_documents(
        [sample_document()], embed_model=minilm, doc_builders=[SentenceGraphBuilder()]
    )
    index.storage_context.persist(str(folder))
    return folder


def _ranking(index: E2RAGIndex) -> list[list[tuple[str, float, str]]]:
    return ranking(index, mode="sentence_graph")


def _no_derivation(monkeypatch: pytest.MonkeyPatch) -> None:
    forbid(monkeypatch, sentence_graph_file, "derive",
           "the sentence graph view was derived from the graph")


def _file(store: Path) -> Path:
    return model_file(store, sentence_graph_file.SENTENCE_GRAPH_FILE)


def test_the_first_query_saves_the_model_and_the_next_load_reads_it(
    store: Path, minilm, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = load_index(store, embed_model=minilm)
    expected = _ranking(built)  # derives the view and saves it
    assert _file(store).is_file() and expected[0]
    from_graph = sentence_graph._VIEW.get(built.stores)

    _no_derivation(monkeypatch)
    loaded = load_index(store, embed_model=minilm)
    from_file = sentence_graph._VIEW.get(loaded.stores)
    assert isinstance(from_file.nodes, NodeRows) and not isinstance(from_graph.nodes, NodeRows)
    a, b = from_file.view, from_graph.view
    assert (a.ids, a.texts, a.topic_of, a.role, a.rst) == (b.ids, b.texts, b.topic_of, b.role,
                                                          b.rst)
    assert (a.bridges_out, a.bridges_in, a.members, a.topic_names) == (
        b.bridges_out, b.bridges_in, b.members, b.topic_names)
    assert np.array_equal(a.vectors, b.vectors)
    assert _ranking(loaded) == expected
    assert 0 < len(from_file.nodes._nodes) < len(from_file.nodes)  # only what was returned


def test_a_write_makes_the_saved_model_stale(store: Path, minilm, tmp_path: Path) -> None:
    store = Path(shutil.copytree(store, tmp_path / "store"))
    index = load_index(store, embed_model=minilm)
    before = sentence_graph._VIEW.get(index.stores).view.ids
    index.insert(Document(text="Benjamin Bunny met Peter in the wood. They ran home together.",
                          id_="benjamin"))
    after = sentence_graph._VIEW.get(index.stores).view.ids
    assert set(before) < set(after)
    reloaded = sentence_graph._VIEW.get(load_index(store, embed_model=minilm).stores)
    assert reloaded.view.ids == after and isinstance(reloaded.nodes, NodeRows)
