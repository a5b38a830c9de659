"""The row digest a SQL commit seals into a document's record (``graph/sql_digest``): a commit
streamed from iterators records the digest the stores have always written (rows sorted as
Python sorts their texts), on random graphs with non-ASCII ids."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any, Iterator

import pytest

from llama_index_e2rag.graph.base import DocRows
from llama_index_e2rag.graph.sql_rows import DOC_RECORD, UPSERT_META, edge_row, node_row
from llama_index_e2rag.persist.check import changed_documents
from llama_index_e2rag.schema import GraphEdge, GraphNode, NodeKind

from .conftest import MakeStore, random_graph


def _python_digest(nodes: list[GraphNode], edges: list[GraphEdge]) -> str:
    """The digest as the stores wrote it before commits streamed: every row's fields as text,
    the rows sorted in Python."""
    digest = hashlib.sha1()
    for rows in ([node_row(n) for n in nodes], [edge_row(e) for e in edges]):
        for row in sorted(tuple("" if v is None else str(v) for v in r) for r in rows):
            digest.update("\x1f".join(row).encode("utf-8", "surrogatepass") + b"\x1e")
        digest.update(b"\x1d")
    return digest.hexdigest()


def _once(items: list[Any]) -> Iterator[Any]:
    """An iterator that can be walked once only: the commit must not need a list."""
    return iter(items)


@pytest.mark.parametrize("seed", range(4))
def test_a_streamed_commit_records_the_digest_of_sorted_rows(
    make_store: MakeStore, seed: int
) -> None:
    store = make_store()
    if not hasattr(store, "doc_seal"):
        pytest.skip("an in-memory graph keeps no row digests")
    rng = random.Random(seed)
    graphs = {doc: random_graph(rng, doc) for doc in ("a", "b")}
    store.commit_docs(
        [
            DocRows(doc, i, _once(nodes), _once(edges), record={"hash": doc})
            for i, (doc, (nodes, edges)) in enumerate(graphs.items())
        ]
    )
    records = store.doc_records()
    for doc, (nodes, edges) in graphs.items():
        expected = _python_digest(nodes, edges)
        assert records[doc]["rows"] == expected
        assert store.doc_seal(doc)["rows"] == expected


def _python_counts(nodes: list[GraphNode], edges: list[GraphEdge]) -> dict[str, Any]:
    """The counts a record should hold, from the rows as given (not as the store reads them)."""
    counts: dict[str, Any] = {"nodes": {}, "edges": {}, "attrs": {}}
    for n in nodes:
        counts["nodes"][n.kind.value] = counts["nodes"].get(n.kind.value, 0) + 1
        attr = {"chunk": "layer", "sentence": "sentgraph"}.get(n.kind.value)
        if attr and n.attrs.get(attr) is not None:
            key = counts["attrs"].setdefault(f"{n.kind.value}.{attr}", {})
            key[str(n.attrs[attr])] = key.get(str(n.attrs[attr]), 0) + 1
    for e in edges:
        counts["edges"][e.kind.value] = counts["edges"].get(e.kind.value, 0) + 1
    return counts


def _with_roles(rng: random.Random, nodes: list[GraphNode]) -> list[GraphNode]:
    """Some sentences with a SentGraph role, some chunks of ChronoRAG's layer 0."""
    out = []
    for n in nodes:
        roll = rng.random()
        if n.kind is NodeKind.SENTENCE and roll < 0.5:
            n = n.model_copy(update={"attrs": dict(n.attrs, sentgraph=rng.choice(["core", "s"]))})
        elif roll < 0.2:
            n = n.model_copy(update={"kind": NodeKind.CHUNK, "attrs": dict(n.attrs, layer=0)})
        out.append(n)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_a_record_counts_its_rows_and_follows_them_through_deletes(
    make_store: MakeStore, seed: int
) -> None:
    """The counts ``e2rag show`` adds up are written with the rows; deleting single nodes
    re-seals the documents that held them (or their edges)."""
    store = make_store()
    if not hasattr(store, "doc_seal"):
        pytest.skip("an in-memory graph keeps no row digests or counts")
    rng = random.Random(seed)
    graphs = {}
    for doc in ("a", "b"):
        nodes, edges = random_graph(rng, doc)
        graphs[doc] = (_with_roles(rng, nodes), edges)
    store.commit_docs([DocRows(doc, i, nodes, edges, record={"hash": doc})
                       for i, (doc, (nodes, edges)) in enumerate(graphs.items())])
    records = store.doc_records()
    for doc, (nodes, edges) in graphs.items():
        assert records[doc]["counts"] == _python_counts(nodes, edges)
    gone = {n.id for n in rng.sample(graphs["a"][0], 3)}
    store.delete_nodes(gone)
    nodes = [n for n in graphs["a"][0] if n.id not in gone]
    edges = [e for e in graphs["a"][1] if not {e.source, e.target} & gone]
    assert store.doc_records()["a"]["counts"] == _python_counts(nodes, edges)
    assert changed_documents(store) == []


def test_counts_are_added_once_to_records_without_them_unless_the_rows_changed(
    make_store: MakeStore,
) -> None:
    store = make_store()
    if not hasattr(store, "count_records"):
        pytest.skip("an in-memory graph keeps no row counts")
    rng = random.Random(7)
    graphs = {doc: random_graph(rng, doc) for doc in ("a", "b")}
    store.commit_docs([DocRows(doc, i, nodes, edges, record={"hash": doc})
                       for i, (doc, (nodes, edges)) in enumerate(graphs.items())])
    counted = store.doc_records()
    with store._transaction() as cur:  # records as a store before counts wrote them
        for doc, record in counted.items():
            old = {k: v for k, v in record.items() if k != "counts"}
            cur.execute(store._sql(UPSERT_META), (DOC_RECORD + doc, json.dumps(old)))
        cur.execute(store._sql("UPDATE e2rag_nodes SET text = 'edited' WHERE id = ?"),
                    (graphs["b"][0][0].id,))
    assert store.count_records(["a", "b"]) == ["a"]
    records = store.doc_records()
    assert records["a"] == counted["a"] and "counts" not in records["b"]
    assert changed_documents(store) == ["b"]  # left for the check to find
