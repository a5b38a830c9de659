"""The ``event_graph`` read model persisted per content state: read back by the next load instead
of derived from every edge of the graph, trusted only while it matches the graph, the same
ranking; its nodes are read from the graph only when a query uses them.

Real components: the offline event graph layer (spaCy), MiniLM, a persisted store in a real folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from llama_index_e2rag.app.demo import sample_document
from llama_index_e2rag.graph.node_rows import NodeRows, ids_of
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.retrievers import event_graph, event_graph_file
from llama_index_e2rag.vectors import nearest, nearest_graph

from persisted_demo import forbid, model_file, ranking


@pytest.fixture(scope="module")
def store(minilm, tmp_path_factory) -> Path:
    """Peter Rabbit with the event graph layer, persisted, its view saved as ``e2rag index``
    saves it."""
    from llama_index_e2rag import EventGraphBuilder

    folder = tmp_path_factory.mktemp("store")
    index = E2RAGIndex.from_documents(
        [sample_document()], embed_model=minilm, doc_builders=[EventGraphBuilder()]
    )
    index.storage_context.persist(str(folder))
    event_graph.save_read_model(index.stores)
    return folder


def _ranking(index: E2RAGIndex) -> list[list[tuple[str, float, str]]]:
    return ranking(index, mode="event_graph")


def _no_derivation(monkeypatch: pytest.MonkeyPatch) -> None:
    forbid(monkeypatch, event_graph, "_derive", "the event graph view was derived from the graph")


def _adjacency(graph) -> list:
    """Every node's neighbours and links in their order (tied paths are listed in it)."""
    return [(node, list(links.items())) for node, links in graph.adjacency()]


def _file(store: Path) -> Path:
    return model_file(store, event_graph_file.EVENT_GRAPH_FILE)


def test_a_load_reads_the_saved_model_and_ranks_as_the_graph_does(
    store: Path, minilm, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _file(store).is_file()
    built = load_index(store, embed_model=minilm)
    from_graph, links = event_graph._derive(built.stores)
    expected = _ranking(built)
    assert len(from_graph.entities) > 5 and from_graph.graph.number_of_edges() > 0

    _no_derivation(monkeypatch)
    loaded = load_index(store, embed_model=minilm)
    from_file = event_graph._VIEW.get(loaded.stores)
    assert isinstance(from_file.entities, NodeRows)
    assert event_graph_file.encode(from_file, links) == event_graph_file.encode(from_graph, links)
    assert _adjacency(from_file.graph) == _adjacency(from_graph.graph)
    assert np.array_equal(from_file.entity_vectors, from_graph.entity_vectors)
    assert np.array_equal(from_file.event_vectors, from_graph.event_vectors)
    assert _ranking(loaded) == expected
    read = len(from_file.entities._nodes) + len(from_file.events._nodes)
    assert 0 < read < len(from_file.entities) + len(from_file.events)  # only what was used


def test_a_write_makes_the_saved_model_stale(
    store: Path, minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Path(shutil.copytree(store, tmp_path / "store"))
    index = load_index(store, embed_model=minilm)
    before = list(ids_of(event_graph._VIEW.get(index.stores).entities))
    index.insert(Document(text="Benjamin Bunny met Peter Rabbit in the wood.", id_="benjamin"))
    after = list(ids_of(event_graph._VIEW.get(index.stores).entities))
    assert set(before) < set(after)
    loaded = load_index(store, embed_model=minilm)
    reloaded = event_graph._VIEW.get(loaded.stores)
    assert list(ids_of(reloaded.entities)) == after and isinstance(reloaded.entities, NodeRows)
    # a filter restricts the read view as it restricts the derived one
    peter = MetadataFilters(filters=[MetadataFilter(key="file_name", value="peter_rabbit.txt")])
    derived = load_index(store, embed_model=minilm)
    monkeypatch.setattr(event_graph_file, "read", lambda stores, key: None)
    assert ranking(loaded, mode="event_graph", filters=peter) == ranking(
        derived, mode="event_graph", filters=peter)
    assert not isinstance(event_graph._VIEW.get(derived.stores).entities, NodeRows)


def test_past_the_threshold_the_view_searches_through_its_saved_graphs(
    store: Path, minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Path(shutil.copytree(store, tmp_path / "store"))
    expected = _ranking(load_index(store, embed_model=minilm))
    monkeypatch.setattr(nearest, "ANN_MIN_ROWS", 10)
    loaded = load_index(store, embed_model=minilm)
    assert _ranking(loaded) == expected  # a story this small: the graphs find every row
    view = event_graph._VIEW.get(loaded.stores)
    assert view.entity_search.approximate and view.event_search.approximate
    for name in ("event_graph-entities.hnsw", "event_graph-events.hnsw"):
        assert model_file(store, name).is_file()
    monkeypatch.setattr(nearest_graph, "build_graph", lambda matrix: pytest.fail("built again"))
    assert _ranking(load_index(store, embed_model=minilm)) == expected  # read back
