"""Whole-document reads a page at a time (``graph/sql_pages``): ``scan_nodes`` / ``scan_edges``
give what ``nodes`` / ``edges`` give, on random graphs with non-ASCII ids."""

from __future__ import annotations

import random

import pytest

from llama_index_e2rag.graph import SQLiteGraphStore
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


@pytest.mark.parametrize("doc", [None, "a"])
@pytest.mark.parametrize("scan", ["edges of a kind", "nodes of every kind"])
def test_sqlite_pages_are_read_along_an_index_not_sorted(tmp_path, doc, scan) -> None:
    """Each page seeks along an index in the scan's order from the last key read: a plan that
    sorts (SQLite's own pick for a kind's edges, the ``kind`` or ``doc_id`` index; any plan for
    nodes of every kind in story order) sorts every row again for each page, and a scan grows
    with the square of what it reads."""
    rng = random.Random(5)
    store = SQLiteGraphStore(tmp_path / "g.sqlite")
    for name in ("a", "b"):
        nodes, edges = random_graph(rng, name)
        store.replace_doc(name, 0 if name == "a" else 1, nodes, edges)
    reads: list[tuple[str, tuple]] = []
    query = store._query

    def recorded(statement, params=()):
        reads.append((statement, tuple(params)))
        return query(statement, params)

    store._query = recorded  # type: ignore[method-assign]
    if scan == "edges of a kind":
        pages = list(store.scan_edges(EdgeKind.CO_MENTION, doc, page=2))
        index = "sqlite_autoindex_e2rag_edges_1"
    else:
        pages = list(store.scan_nodes(None, doc, page=2))
        index = "e2rag_nodes_story"
    assert len(pages) > 2 and len(reads) > 2
    for statement, params in reads:
        plan = " ".join(str(row[-1]) for row in query("EXPLAIN QUERY PLAN " + statement, params))
        # along the index: at most the edges of one (source, target) pair are sorted ("right
        # part"), never every row read ("FOR ORDER BY")
        assert index in plan, plan
        assert "TEMP B-TREE FOR ORDER BY" not in plan, plan
