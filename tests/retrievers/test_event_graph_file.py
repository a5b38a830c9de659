"""The ``event_graph`` read model persisted per content state: read back by the next load instead
of derived from every edge of the graph, trusted only while it matches the graph, the same
ranking; its nodes are read from the graph only when a query uses them.

Real components: the offline event graph layer (spaCy), MiniLM, a persisted store in a real folder.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from llama_index_e2rag.app.demo import sample_document
from llama_index_e2rag.extract.event_graph.entities import fused_entities, name_forms
from llama_index_e2rag.graph import SQLiteGraphStore
from llama_index_e2rag.graph.node_rows import NodeRows, ids_of
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.ranking.event_graph import entity_links
from llama_index_e2rag.retrievers import event_graph, event_graph_file
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind, sort_by_position
from llama_index_e2rag.stores import port
from llama_index_e2rag.vectors import nearest, nearest_graph

from resident import HAS_SMAPS, resident_kb

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
    derived = event_graph._derive(built.stores)
    assert json.dumps(derived) == json.dumps(_whole_read_model(built.stores))
    from_graph = event_graph._view(built.stores, derived)
    expected = _ranking(built)
    assert len(from_graph.entities) > 5 and from_graph.graph.number_of_edges() > 0

    _no_derivation(monkeypatch)
    loaded = load_index(store, embed_model=minilm)
    from_file = event_graph._VIEW.get(loaded.stores)
    assert isinstance(from_file.entities, NodeRows)
    key = event_graph_file.content_key(loaded.stores, loaded.stores.version)
    assert event_graph_file.read(loaded.stores, key) == derived
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
    derive, calls = event_graph._derive, []
    monkeypatch.setattr(event_graph, "_derive", lambda stores: calls.append(1) or derive(stores))
    assert ranking(loaded, mode="event_graph", filters=peter) == ranking(
        derived, mode="event_graph", filters=peter)
    assert calls == [1]  # the second ranking's view was derived from the graph


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


@pytest.mark.skipif(not HAS_SMAPS, reason="reads Linux's smaps")
def test_the_view_keeps_copies_of_its_vectors_and_none_of_their_pages(
    store: Path, minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The view's entity and event matrices are copies, so the vector file pages read for them
    leave the process before its search graphs are opened."""
    store = Path(shutil.copytree(store, tmp_path / "store"))
    segments = sorted(store.rglob("*.npy"))
    resident: list[int] = []
    real = event_graph_file.searches
    monkeypatch.setattr(event_graph_file, "searches", lambda stores, view: (
        resident.append(sum(resident_kb(path) for path in segments)), real(stores, view))[1])
    view = event_graph._VIEW.get(load_index(store, embed_model=minilm).stores)
    assert len(view.event_vectors) and np.abs(view.event_vectors).sum() > 0  # read, and kept
    assert resident == [0]


def _whole_read_model(stores) -> dict:
    """The model as it was derived before it was read a page at a time (5dbe511): every
    ``participates``, ``co_mention`` and ``instance_of`` edge and every event node at once."""
    graph = stores.graph
    entities = sort_by_position(fused_entities(graph))
    row = {e.id: i for i, e in enumerate(entities)}
    participates = [
        e for e in graph.edges(EdgeKind.PARTICIPATES)
        if e.source in row and e.attrs.get("event_graph") in ("lifted", "extracted")
    ]
    events = sort_by_position(graph.nodes(NodeKind.GRAPH_EVENT))
    if not events:
        lifted = sorted({e.target for e in participates if e.attrs.get("event_graph") == "lifted"})
        events = sort_by_position(n for n in graph.get_nodes(lifted) if n.kind == NodeKind.EVENT)
    event_ids = {e.id for e in events}
    participants: dict = {}
    for edge in participates:
        if edge.target in event_ids:
            participants.setdefault(edge.target, []).append(edge.source)
    participants = {k: sorted(set(v), key=row.__getitem__) for k, v in participants.items()}
    links = entity_links(
        list(row), graph.edges(EdgeKind.CO_MENTION) + graph.edges(EdgeKind.INSTANCE_OF))
    return {
        "entities": [e.id for e in entities],
        "entity_docs": [e.doc_id for e in entities],
        "events": [e.id for e in events],
        "event_docs": [e.doc_id for e in events],
        "participants": participants,
        "links": [list(link) for link in links],
        "forms": [[f.entity_type, sorted(f.exact), sorted(f.short)]
                  for f in map(name_forms, entities)],
    }


def _random_event_graph(rng: random.Random, folder: Path, graph_events: bool) -> SQLiteGraphStore:
    """Fused entities (and other entity nodes), events, mentions and the layer's edges, tied
    positions and weights included, written in a random order (not their keys')."""
    store = SQLiteGraphStore(folder / "graph.sqlite")
    for order, doc in enumerate(("a", "b")):
        def node(kind: NodeKind, i: int, **attrs) -> GraphNode:
            name = rng.choice(["Peter Rabbit", "Mr. McGregor", "Flopsy", "the gate", "Mopsy"])
            return GraphNode(id=f"{doc}{kind.value}{i}", kind=kind, text=name, name=name,
                             doc_id=doc, pos=(order, rng.randint(0, 9), 0), attrs=attrs)
        entities = [node(NodeKind.ENTITY, i, event_graph="entity",
                         entity_type=rng.choice(["PERSON", "PLACE", None]),
                         aliases=rng.sample(["Peter", "Rabbit", "Flops"], 2)) for i in range(30)]
        others = [node(NodeKind.ENTITY, 100 + i) for i in range(5)]
        events = [node(NodeKind.GRAPH_EVENT if graph_events else NodeKind.EVENT, i)
                  for i in range(40)]
        mentions = [node(NodeKind.MENTION, i) for i in range(20)]
        ends = entities + others + mentions
        edges: dict = {}
        for _ in range(400):
            kind = rng.choice([EdgeKind.PARTICIPATES, EdgeKind.CO_MENTION, EdgeKind.INSTANCE_OF])
            source = rng.choice(ends)
            target = rng.choice(events if kind == EdgeKind.PARTICIPATES else ends)
            attrs = {"event_graph": rng.choice({
                EdgeKind.PARTICIPATES: ["lifted", "extracted", None],
                EdgeKind.CO_MENTION: ["entity_link", None],
                EdgeKind.INSTANCE_OF: ["same_entity", None]}[kind]),
                "weight": rng.choice([1, 2, 3, 0.5])}
            edges[(source.id, target.id, kind)] = GraphEdge(
                source=source.id, target=target.id, kind=kind, doc_id=doc, attrs=attrs)
        shuffled = list(edges.values())
        rng.shuffle(shuffled)
        store.replace_doc(doc, order, entities + others + events + mentions, shuffled)
    return store


@pytest.mark.parametrize("seed", range(3))
def test_the_paged_derivation_gives_the_whole_read_model(tmp_path: Path, seed: int) -> None:
    """On random graphs (graph events, or events lifted to entities), the model read a page at a
    time is the one the whole reads gave, byte for byte once encoded (the links' order is the
    order tied paths are listed in); no edge list and no event kind is read whole."""
    from llama_index.core.storage.docstore import SimpleDocumentStore

    from llama_index_e2rag.vectors.embedded import EmbeddedVectors

    rng = random.Random(seed)
    graph = _random_event_graph(rng, tmp_path, graph_events=seed != 1)
    stores = port.Stores(graph, EmbeddedVectors(), SimpleDocumentStore())
    expected = json.dumps(_whole_read_model(stores))
    assert json.loads(expected)["links"] and json.loads(expected)["participants"]

    def whole(kind=None, doc_id=None):
        raise AssertionError(f"a whole read of {kind}")

    nodes = graph.nodes
    graph.edges = whole  # type: ignore[method-assign]
    graph.nodes = lambda kind=None, doc_id=None: (  # type: ignore[method-assign]
        whole(kind) if kind != NodeKind.ENTITY else nodes(kind, doc_id))
    assert json.dumps(event_graph._derive(stores)) == expected


def test_the_view_reads_a_page_of_vectors_at_a_time(
    store: Path, minilm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building the view asks a vector storage for at most one page of ids per read (the
    embedded store's aligned read, which fills only the result, is set aside here)."""
    loaded = load_index(store, embed_model=minilm)
    monkeypatch.setattr(loaded.stores.vectors, "matrix_of", None)
    asked: list[int] = []
    read = loaded.stores.vectors.get_embeddings
    monkeypatch.setattr(loaded.stores.vectors, "get_embeddings",
                        lambda ids: asked.append(len(ids)) or read(ids))
    monkeypatch.setattr(port, "PAGE", 4)
    view = event_graph._VIEW.get(loaded.stores)
    assert len(view.events) > 4 and asked and max(asked) <= 4

