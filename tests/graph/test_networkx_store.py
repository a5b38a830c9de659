"""NetworkX graph store (staging and in-memory use): JSON round trip, atomic writes, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_index_e2rag.errors import GraphStoreError
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.schema import (
    SCHEMA_VERSION,
    EdgeKind,
    GraphEdge,
    NodeKind,
)

from .conftest import node


@pytest.fixture
def store() -> NetworkXGraphStore:
    """Two documents; doc b's mention also links to doc a's event (a cross-document edge)."""
    g = NetworkXGraphStore()
    ca = node("a", NodeKind.CHUNK, 0, "Hermione read every rule.")
    ma = node("a", NodeKind.MENTION, 0, "Hermione: reads rules", ca.id)
    ea = node("a", NodeKind.EVENT, 9, "Hermione reads the rules", ca.id)
    cb = node("b", NodeKind.CHUNK, 0, "Hermione broke a rule.")
    mb = node("b", NodeKind.MENTION, 0, "Hermione: breaks rules", cb.id)
    eb = node("b", NodeKind.EVENT, 9, "Hermione breaks a rule", cb.id)
    g.upsert_nodes([eb, cb, mb, ea, ca, ma])
    g.upsert_edges(
        [
            GraphEdge(
                source=ma.id, target=ea.id, kind=EdgeKind.PARTICIPATES, doc_id="a", role="A0"
            ),
            GraphEdge(source=mb.id, target=eb.id, kind=EdgeKind.PARTICIPATES, doc_id="b"),
            GraphEdge(source=ma.id, target=mb.id, kind=EdgeKind.NEXT, doc_id="b"),
            GraphEdge(source=eb.id, target=ea.id, kind=EdgeKind.RELATION, doc_id="b"),
        ]
    )
    return g


def test_round_trip_keeps_nodes_edges_and_story_order(
    store: NetworkXGraphStore, tmp_path: Path
) -> None:
    path = tmp_path / "graph.json"
    store.persist(str(path))
    loaded = NetworkXGraphStore.from_persist_path(str(path))
    assert loaded.to_dict() == store.to_dict()
    assert [n.id for n in loaded.nodes()] == [n.id for n in store.nodes()]
    assert [n.pos for n in loaded.nodes(NodeKind.MENTION)] == [(0, 0, 0), (1, 0, 0)]
    participates = loaded.edges(EdgeKind.PARTICIPATES, doc_id="a")
    assert len(participates) == 1 and participates[0].role == "A0"
    assert loaded.counts() == store.counts()


def test_failed_write_leaves_previous_file_intact(
    store: NetworkXGraphStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "graph.json"
    store.persist(str(path))
    before = path.read_bytes()
    store.upsert_nodes([node("c", NodeKind.CHUNK, 0, "A new chapter.")])

    def broken_dump(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(json, "dump", broken_dump)
    with pytest.raises(OSError, match="disk full"):
        store.persist(str(path))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["graph.json"]  # no temp file left behind


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"format": "llama-index-e2rag/graph", "schema_version": 1, "nodes": [', "corrupt"),
        ('{"nodes": [], "edges": []}', "format marker"),
        (
            '{"format": "llama-index-e2rag/graph", "schema_version": 1, "nodes": [{"id": 1}], '
            '"edges": []}',
            "corrupt",
        ),
    ],
)
def test_corrupt_file_is_refused_with_graph_store_error(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "graph.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(GraphStoreError, match=message):
        NetworkXGraphStore.from_persist_path(str(path))


def test_newer_schema_version_is_refused(store: NetworkXGraphStore, tmp_path: Path) -> None:
    data = store.to_dict()
    data["schema_version"] = SCHEMA_VERSION + 1
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(GraphStoreError, match="newer"):
        NetworkXGraphStore.from_persist_path(str(path))
