"""The ``GraphStore`` contract, run against every backend (``conftest.make_store``)."""

from __future__ import annotations

import pytest

from llama_index_e2rag.errors import GraphStoreError
from llama_index_e2rag.graph import GraphStore
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind

from .conftest import MakeStore, node


def _doc(doc: str) -> tuple[list[GraphNode], list[GraphEdge]]:
    """A chunk, two mentions and an event; both mentions take part in the event."""
    chunk = node(doc, NodeKind.CHUNK, 0, f"Hermione and Ron argue in {doc}.")
    her = node(doc, NodeKind.MENTION, 0, "Hermione: argues", chunk.id)
    ron = node(doc, NodeKind.MENTION, 13, "Ron: argues back", chunk.id)
    event = node(doc, NodeKind.EVENT, 5, f"Hermione argues with Ron in {doc}", chunk.id)
    edges = [
        GraphEdge(source=her.id, target=event.id, kind=EdgeKind.PARTICIPATES, doc_id=doc, role="A0"),
        GraphEdge(source=ron.id, target=event.id, kind=EdgeKind.PARTICIPATES, doc_id=doc, role="A1"),
        GraphEdge(source=her.id, target=ron.id, kind=EdgeKind.CO_MENTION, doc_id=doc),
    ]
    return [event, ron, chunk, her], edges


def _filled(make_store: MakeStore) -> GraphStore:
    store = make_store()
    for order, doc in enumerate(("a", "b")):
        nodes, edges = _doc(doc)
        store.replace_doc(doc, order, nodes, edges, [{"chunk_id": "c1", "reason": f"{doc} broke"}])
    a_her = store.nodes(NodeKind.MENTION, "a")[0]
    b_her = store.nodes(NodeKind.MENTION, "b")[0]
    store.upsert_edges([GraphEdge(source=a_her.id, target=b_her.id, kind=EdgeKind.NEXT, doc_id="b")])
    return store


def test_satisfies_the_protocol(make_store: MakeStore) -> None:
    assert isinstance(make_store(), GraphStore)


def test_nodes_come_back_equal_and_in_story_order(make_store: MakeStore) -> None:
    store = _filled(make_store)
    expected = sorted(_doc("a")[0] + _doc("b")[0], key=lambda n: (n.pos, n.id))
    assert store.nodes() == expected
    assert [n.pos for n in store.nodes(NodeKind.MENTION)] == [(0, 0, 0), (0, 13, 0), (1, 0, 0), (1, 13, 0)]
    assert store.nodes(NodeKind.EVENT, "b") == [n for n in expected if n.kind == NodeKind.EVENT and n.doc_id == "b"]
    wanted = [expected[3].id, "missing", expected[0].id]
    assert [n.id for n in store.get_nodes(wanted)] == [expected[3].id, expected[0].id]
    assert store.get_node(expected[1].id) == expected[1] and store.get_node("missing") is None
    assert store.has_node(expected[2].id) and not store.has_node("missing")


def test_edges_by_kind_document_direction_and_subgraph(make_store: MakeStore) -> None:
    store = _filled(make_store)
    her, ron = store.nodes(NodeKind.MENTION, "a")
    (event,) = store.nodes(NodeKind.EVENT, "a")
    roles = {e.role for e in store.edges(EdgeKind.PARTICIPATES, doc_id="a")}
    assert roles == {"A0", "A1"}
    assert {e.kind for e in store.edges_of(her.id, direction="out")} == {
        EdgeKind.PARTICIPATES, EdgeKind.CO_MENTION, EdgeKind.NEXT
    }
    assert [e.source for e in store.edges_of(event.id, [EdgeKind.PARTICIPATES], "in")] in (
        [her.id, ron.id], [ron.id, her.id]
    )
    assert store.edges_of(event.id, direction="out") == []
    assert [n.id for n in store.neighbors(event.id)] == [her.id, ron.id]
    inside = store.subgraph_edges([her.id, ron.id, event.id], [EdgeKind.PARTICIPATES])
    assert len(inside) == 2 and all(e.doc_id == "a" for e in inside)


def test_story_neighbors_stay_within_the_kind(make_store: MakeStore) -> None:
    store = _filled(make_store)
    mentions = store.nodes(NodeKind.MENTION)
    assert store.story_neighbors(mentions[1], 1, 2) == [mentions[0], mentions[2], mentions[3]]
    assert store.story_neighbors(mentions[0], 3, 0) == []


def test_replace_doc_swaps_one_document_with_its_order_and_failures(make_store: MakeStore) -> None:
    store = _filled(make_store)
    b_before = {n.id for n in store.nodes(doc_id="b")}
    version = store.version
    nodes, edges = _doc("a")
    store.replace_doc("a", 7, nodes[:2], [], [])
    assert store.version != version
    assert {n.id for n in store.nodes(doc_id="a")} == {n.id for n in nodes[:2]}
    assert {n.id for n in store.nodes(doc_id="b")} == b_before
    assert store.doc_orders() == {"a": 7, "b": 1}
    assert store.failures() == [{"doc_id": "b", "chunk_id": "c1", "reason": "b broke"}]
    for edge in store.edges():  # the cross-document edge went with a's mention
        assert store.has_node(edge.source) and store.has_node(edge.target)


def test_a_failed_replace_leaves_the_previous_document(make_store: MakeStore) -> None:
    store = _filled(make_store)
    if type(store).__name__ == "NetworkXGraphStore":
        pytest.skip("the in-memory store is not transactional (it stages documents only)")
    before = store.to_dict()
    nodes, _ = _doc("a")
    dangling = GraphEdge(source=nodes[0].id, target="nowhere", kind=EdgeKind.NEXT, doc_id="a")
    with pytest.raises(GraphStoreError, match="nowhere"):
        store.replace_doc("a", 0, nodes, [dangling], [])
    assert store.to_dict() == before and store.doc_orders() == {"a": 0, "b": 1}


def test_delete_doc_leaves_no_dangling_edge_and_forgets_the_document(make_store: MakeStore) -> None:
    store = _filled(make_store)
    b_ids = {n.id for n in store.nodes(doc_id="b")}
    assert store.delete_doc("b") == b_ids
    assert store.nodes(doc_id="b") == [] and store.doc_ids() == ["a"]
    assert store.doc_orders() == {"a": 0}
    assert [f["doc_id"] for f in store.failures()] == ["a"]
    for edge in store.edges():
        assert store.has_node(edge.source) and store.has_node(edge.target)
    assert store.counts() == {
        "nodes": {"chunk": 1, "event": 1, "mention": 2},
        "edges": {"co_mention": 1, "participates": 2},
    }


def test_edge_to_an_unknown_node_is_refused(make_store: MakeStore) -> None:
    store = _filled(make_store)
    some = store.nodes(NodeKind.MENTION)[0]
    with pytest.raises(GraphStoreError, match="upsert nodes before"):
        store.upsert_edges(
            [GraphEdge(source=some.id, target="event-x", kind=EdgeKind.PARTICIPATES, doc_id="a")]
        )
