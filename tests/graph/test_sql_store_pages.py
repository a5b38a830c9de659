"""Whole-document reads and writes a page at a time: ``scan_nodes`` / ``scan_edges`` give what
``nodes`` / ``edges`` give, and a SQL commit streamed from iterators records the row digest the
stores have always written (rows sorted as Python sorts their texts), on random graphs with
non-ASCII ids."""

from __future__ import annotations

import hashlib
import random
from typing import Any, Iterator

import pytest

from llama_index_e2rag.graph.base import DocRows
from llama_index_e2rag.graph.sql_rows import edge_row, node_row
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind

from .conftest import MakeStore

_LETTERS = "abcXYZ_-éßΩ中😀"


def _random_graph(rng: random.Random, doc: str) -> tuple[list[GraphNode], list[GraphEdge]]:
    kinds = [NodeKind.MENTION, NodeKind.EVENT, NodeKind.SENTENCE]
    nodes = [
        GraphNode(
            id=doc + "".join(rng.choice(_LETTERS) for _ in range(rng.randint(1, 6))) + str(i),
            kind=rng.choice(kinds),
            doc_id=doc,
            pos=(0 if doc == "a" else 1, rng.randint(0, 30), rng.randint(0, 3)),
            text=rng.choice(["x", "Ünïcode", "he said"]),
            attrs={"k": i} if rng.random() < 0.5 else {},
        )
        for i in range(rng.randint(5, 60))
    ]
    edges = {
        (rng.choice(nodes).id, rng.choice(nodes).id, rng.choice(list(EdgeKind)),
         rng.choice([None, "A0", "A1"]))
        for _ in range(rng.randint(0, 120))
    }
    return nodes, [
        GraphEdge(source=s, target=t, kind=k, role=r, doc_id=doc) for s, t, k, r in sorted(
            edges, key=str)
    ]


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
def test_scans_page_through_what_the_plain_reads_give(make_store: MakeStore, seed: int) -> None:
    rng = random.Random(seed)
    store = make_store()
    for doc in ("a", "b"):
        nodes, edges = _random_graph(rng, doc)
        store.replace_doc(doc, 0 if doc == "a" else 1, nodes, edges)
    page = rng.randint(1, 7)
    for kind in (None, NodeKind.MENTION):
        for doc in (None, "b"):
            pages = list(store.scan_nodes(kind, doc, page=page))
            assert all(0 < len(p) <= page for p in pages)
            assert [n.id for p in pages for n in p] == [n.id for n in store.nodes(kind, doc)]
    for edge_kind in (None, EdgeKind.CO_MENTION):
        for doc in (None, "a"):
            pages = list(store.scan_edges(edge_kind, doc, page=page))
            assert all(0 < len(p) <= page for p in pages)
            scanned = [(e.source, e.target, e.kind, e.role) for p in pages for e in p]
            assert sorted(scanned, key=str) == sorted(
                ((e.source, e.target, e.kind, e.role) for e in store.edges(edge_kind, doc)),
                key=str,
            )
            assert len(set(scanned)) == len(scanned)


@pytest.mark.parametrize("seed", range(4))
def test_a_streamed_commit_records_the_digest_of_sorted_rows(
    make_store: MakeStore, seed: int
) -> None:
    store = make_store()
    if not hasattr(store, "doc_rows_digest"):
        pytest.skip("an in-memory graph keeps no row digests")
    rng = random.Random(seed)
    graphs = {doc: _random_graph(rng, doc) for doc in ("a", "b")}
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
        assert store.doc_rows_digest(doc) == expected
