"""Whole-document reads a page at a time (``graph/sql_pages``): ``scan_nodes`` / ``scan_edges``
give what ``nodes`` / ``edges`` give, on random graphs with non-ASCII ids."""

from __future__ import annotations

import random

import pytest

from llama_index_e2rag.schema import EdgeKind, NodeKind

from .conftest import MakeStore, random_graph


@pytest.mark.parametrize("seed", range(4))
def test_scans_page_through_what_the_plain_reads_give(make_store: MakeStore, seed: int) -> None:
    rng = random.Random(seed)
    store = make_store()
    for doc in ("a", "b"):
        nodes, edges = random_graph(rng, doc)
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
def test_listed_scans_keep_the_order_the_whole_read_lists(make_store: MakeStore, seed: int) -> None:
    """Edges written in an order other than their keys' come back page by page in the order
    ``edges(kind)`` lists them (the order ``event_graph``'s entity links depend on)."""
    rng = random.Random(seed)
    store = make_store()
    for doc in ("a", "b", "a"):  # "a" twice: its rewritten edges follow "b"'s
        nodes, edges = random_graph(rng, doc)
        rng.shuffle(edges)
        store.replace_doc(doc, 0 if doc == "a" else 1, nodes, edges)
    page = rng.randint(1, 7)
    for kind in (EdgeKind.CO_MENTION, EdgeKind.PARTICIPATES):
        pages = list(store.scan_edges_listed(kind, page=page))
        assert all(0 < len(p) <= page for p in pages)
        listed = [(e.source, e.target, e.kind, e.role, e.doc_id) for e in store.edges(kind)]
        assert [(e.source, e.target, e.kind, e.role, e.doc_id) for p in pages for e in p] == listed
