"""The row digest a SQL commit seals into a document's record (``graph/sql_digest``): a commit
streamed from iterators records the digest the stores have always written (rows sorted as
Python sorts their texts), on random graphs with non-ASCII ids."""

from __future__ import annotations

import hashlib
import random
from typing import Any, Iterator

import pytest

from llama_index_e2rag.graph.base import DocRows
from llama_index_e2rag.graph.sql_rows import edge_row, node_row
from llama_index_e2rag.schema import GraphEdge, GraphNode

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
    if not hasattr(store, "doc_rows_digest"):
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
        assert store.doc_rows_digest(doc) == expected
