"""Cross-document links (``DocRows.links``) on every backend (``conftest.make_store``).

The rule: a link belongs to the document that made it, is written after the whole batch, and
when the document at its other end is deleted or replaced the link goes and its owner's row
digest is re-sealed in the same transaction, so the store check stays clean.
"""

from __future__ import annotations

from typing import Any, Sequence

import pytest

from llama_index_e2rag.errors import GraphStoreError
from llama_index_e2rag.graph import GraphStore
from llama_index_e2rag.graph.base import DocRows
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind
from llama_index_e2rag.persist.check import changed_documents

from .conftest import MakeStore, node

#: The row digest HEAD (before links existed) recorded for ``_rows("a")``: documents without
#: links must keep it, or every store written before would fail its check.
DIGEST_BEFORE_LINKS = "07c388dd6d15d7236b3f438654da907943d4f05b"


def _doc(doc: str) -> tuple[list[GraphNode], list[GraphEdge]]:
    """A topic and its core sentence."""
    topic = node(doc, NodeKind.TOPIC, 0, f"Topic {doc}")
    sentence = node(doc, NodeKind.SENTENCE, 4, f"A sentence of {doc}.")
    child = GraphEdge(
        source=topic.id, target=sentence.id, kind=EdgeKind.CHILD, role="core", doc_id=doc
    )
    return [topic, sentence], [child]


def _topic(doc: str) -> str:
    return _doc(doc)[0][0].id


def _bridge(owner: str, other: str, role: str = "shared_entity") -> GraphEdge:
    return GraphEdge(
        source=_topic(owner), target=_topic(other), kind=EdgeKind.BRIDGE, role=role, doc_id=owner
    )


def _rows(doc: str, order: int, links: Sequence[GraphEdge] = ()) -> DocRows:
    nodes, edges = _doc(doc)
    return DocRows(doc, order, nodes, edges, (), {"hash": "h"}, links)


def _bridges(store: GraphStore) -> set[tuple[str, str, str]]:
    return {(e.source, e.target, e.doc_id) for e in store.edges(EdgeKind.BRIDGE)}


def _digests(store: GraphStore) -> dict[str, str]:
    """Each document's recorded row digest (none on NetworkX, which keeps no digests)."""
    return {doc: r["rows"] for doc, r in store.doc_records().items() if "rows" in r}


def _assert_sealed(store: GraphStore) -> None:
    """Every record agrees with its rows (SQL stores keep row digests; NetworkX has none)."""
    if hasattr(store, "doc_seal"):
        assert store.doc_records() and changed_documents(store) == []


def _snapshot(store: GraphStore) -> dict[str, Any]:
    return {"graph": store.to_dict(), "records": store.doc_records(), "orders": store.doc_orders()}


@pytest.mark.parametrize("owner_first", [True, False], ids=["owner-first", "owner-last"])
def test_a_link_within_one_batch_is_written_in_either_order(
    make_store: MakeStore, owner_first: bool
) -> None:
    store = make_store()
    docs = [_rows("a", 0, [_bridge("a", "b")]), _rows("b", 1)]
    store.commit_docs(docs if owner_first else docs[::-1])
    assert _bridges(store) == {(_topic("a"), _topic("b"), "a")}
    _assert_sealed(store)


def test_a_link_counts_in_its_owners_digest_only(make_store: MakeStore) -> None:
    store = make_store()
    store.commit_docs([_rows("a", 0), _rows("b", 1)])
    plain = _digests(store)
    store.commit_docs([_rows("a", 0, [_bridge("a", "b")])])  # b is committed already
    assert _bridges(store) == {(_topic("a"), _topic("b"), "a")}
    _assert_sealed(store)
    if plain:  # SQL stores
        assert _digests(store)["a"] != plain["a"] and _digests(store)["b"] == plain["b"]


def test_a_document_without_links_keeps_the_digest_it_had_before_links(
    make_store: MakeStore,
) -> None:
    store = make_store()
    if not hasattr(store, "doc_seal"):
        pytest.skip("NetworkX keeps no row digests")
    store.commit_docs([_rows("a", 0)])
    assert _digests(store) == {"a": DIGEST_BEFORE_LINKS}


def test_deleting_the_target_removes_the_link_and_reseals_the_owner(
    make_store: MakeStore,
) -> None:
    store = make_store()
    store.commit_docs([_rows("a", 0, [_bridge("a", "b")]), _rows("b", 1), _rows("c", 2)])
    before = _digests(store)
    store.delete_doc("b")
    assert _bridges(store) == set()
    _assert_sealed(store)
    if before:  # the owner's digest is now that of its rows without the link; c is untouched
        resealed = _digests(store)
        assert resealed["c"] == before["c"] and resealed["a"] != before["a"]
        store.commit_docs([_rows("a", 0)])
        assert _digests(store)["a"] == resealed["a"]


def test_replacing_the_target_removes_links_to_it_unless_the_batch_remakes_them(
    make_store: MakeStore,
) -> None:
    store = make_store()
    store.commit_docs([_rows("a", 0, [_bridge("a", "b")]), _rows("b", 1)])
    store.commit_docs([_rows("b", 1)])  # same node ids: the old link still goes with them
    assert _bridges(store) == set()
    _assert_sealed(store)
    store.commit_docs([_rows("b", 1), _rows("a", 0, [_bridge("a", "b")])])
    assert _bridges(store) == {(_topic("a"), _topic("b"), "a")}
    _assert_sealed(store)


def test_deleting_the_owner_removes_its_links_and_leaves_the_target_sealed(
    make_store: MakeStore,
) -> None:
    store = make_store()
    store.commit_docs([
        _rows("a", 0),
        _rows("b", 1, [_bridge("b", "a"), _bridge("b", "c")]),
        _rows("c", 2, [_bridge("c", "a", "related")]),
    ])
    before = _digests(store)
    store.delete_doc("b")
    assert _bridges(store) == {(_topic("c"), _topic("a"), "c")}
    assert _digests(store) == {d: r for d, r in before.items() if d != "b"}
    _assert_sealed(store)


def test_a_bad_link_rolls_the_whole_batch_back(make_store: MakeStore) -> None:
    """The links are written in the batch's transaction: a link that cannot be written (its
    other end is nowhere) undoes the documents written before it, records included."""
    store = make_store()
    store.commit_docs([_rows("a", 0), _rows("b", 1, [_bridge("b", "a")])])
    before = _snapshot(store)
    dangling = GraphEdge(
        source=_topic("c"), target="nowhere", kind=EdgeKind.BRIDGE, role="related", doc_id="c"
    )
    with pytest.raises(GraphStoreError, match="nowhere"):
        store.commit_docs([_rows("a", 0), _rows("c", 2, [dangling])])
    assert _snapshot(store) == before
    _assert_sealed(store)


def test_a_link_to_a_node_the_batch_removes_is_refused(make_store: MakeStore) -> None:
    store = make_store()
    store.commit_docs([_rows("a", 0), _rows("b", 1)])
    before = _snapshot(store)
    nodes, edges = _doc("b")
    renamed = [n.model_copy(update={"id": n.id + "-new"}) for n in nodes]
    moved = [e.model_copy(update={"source": e.source + "-new", "target": e.target + "-new"})
             for e in edges]
    new_b = DocRows("b", 1, renamed, moved, (), {"hash": "h2"})
    with pytest.raises(GraphStoreError, match=_topic("b")):
        store.commit_docs([new_b, _rows("a", 0, [_bridge("a", "b")])])  # b's old topic
    assert _snapshot(store) == before


@pytest.mark.parametrize("twin", ["link", "edge"])
def test_one_edge_given_twice_in_a_batch_is_refused(make_store: MakeStore, twin: str) -> None:
    """A link must not share its key with another link or an edge of the batch: the second
    write would take the edge over from its owner."""
    store = make_store()
    b = _rows("b", 1, [_bridge("a", "b")] if twin == "link" else [])
    if twin == "edge":
        b.edges = [*b.edges, _bridge("a", "b").model_copy(update={"doc_id": "b"})]
    with pytest.raises(GraphStoreError, match="twice"):
        store.commit_docs([_rows("a", 0, [_bridge("a", "b")]), b])
    assert store.doc_orders() == {}
