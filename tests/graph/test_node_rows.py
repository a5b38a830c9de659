"""``NodeRows``: a node is read from the graph when its row is first used, once, in one call
for a batch; ids and documents need no read."""

from __future__ import annotations

import pytest

from llama_index_e2rag.graph.node_rows import NodeRows, docs_of, ids_of, prefetch, take
from llama_index_e2rag.schema import GraphNode, NodeKind

NODES = [
    GraphNode(id=f"n{i}", kind=NodeKind.ENTITY, text=f"node {i}", doc_id=f"d{i % 2}",
              pos=(0, i, 0))
    for i in range(6)
]


class Graph:
    """Counts the reads of ``get_nodes``."""

    def __init__(self) -> None:
        self.reads: list[list[str]] = []
        self.nodes = {n.id: n for n in NODES}

    def get_nodes(self, ids):
        self.reads.append(list(ids))
        return [self.nodes[i] for i in ids if i in self.nodes]


def rows(graph: Graph) -> NodeRows:
    return NodeRows([n.id for n in NODES], [n.doc_id for n in NODES], graph.get_nodes)


def test_rows_are_read_when_used_once_each_a_batch_in_one_call() -> None:
    graph = Graph()
    nodes = rows(graph)
    assert len(nodes) == 6 and ids_of(nodes)[2] == "n2" and docs_of(nodes)[3] == "d1"
    assert graph.reads == []
    prefetch(nodes, [4, 1, 4])
    assert graph.reads == [["n4", "n1"]]
    assert nodes[1] is NODES[1] and nodes[-2] is NODES[4]
    assert graph.reads == [["n4", "n1"]]
    assert nodes[2:4] == NODES[2:4] and list(nodes) == NODES
    assert graph.reads == [["n4", "n1"], ["n2", "n3"], ["n0"], ["n5"]]
    with pytest.raises(IndexError):
        nodes[6]


def test_a_subset_keeps_what_was_read_and_a_plain_list_works_alike() -> None:
    graph = Graph()
    nodes = rows(graph)
    nodes.prefetch([3])
    subset = take(nodes, [5, 3])
    assert ids_of(subset) == ["n5", "n3"] and docs_of(subset) == ["d1", "d1"]
    assert subset[1] is NODES[3] and graph.reads == [["n3"]]
    assert take(NODES, [5, 3]) == [NODES[5], NODES[3]] and ids_of(NODES[:2]) == ["n0", "n1"]


def test_a_node_gone_from_the_graph_is_named() -> None:
    graph = Graph()
    nodes = rows(graph)
    del graph.nodes["n2"]
    with pytest.raises(LookupError, match="n2"):
        nodes[2]
