"""The ``sentence_graph`` mode's read model: derived from the graph, or read from its file.

Deriving it reads every sentence node of the graph (SentGraph's and the grounded layer's) and
every ``rst`` and ``bridge`` edge (at 148k words ~2 s of a new process's first query). What the
ranking keeps is small: SentGraph's sentences in row order (ids, documents, texts, topics,
roles), each row's ``rst`` neighbours, the bridges and the topics' names. It is persisted per
content state (``stores.read_model_file``: ``e2rag index`` writes it when the store has the
layer, otherwise the first query after a write does) and read back by the next process; vectors
come from the vector store, BM25 is built from the texts, and a sentence's node is read from the
graph when a query returns it (``graph.node_rows``).
"""

from __future__ import annotations

from typing import Any, Optional

from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind
from llama_index_e2rag.stores import read_model_file
from llama_index_e2rag.stores.port import Stores

#: Two JSON lines: the content key and the SHA-256 of the second line, then the model.
SENTENCE_GRAPH_FILE = "sentence_graph.jsonl"
#: Bumped when the encoding or what the model holds changes: an older file is derived again.
FORMAT = 1
_FIELDS = ("ids", "docs", "texts", "topic_of", "role", "rst", "bridges", "topics")
MODEL = read_model_file.ReadModel(SENTENCE_GRAPH_FILE, FORMAT)
content_key, write = MODEL.content_key, MODEL.write


def derive(stores: Stores) -> tuple[dict[str, Any], list[GraphNode]]:
    """The model from the whole graph (grounded sentences share the node kind and are left out
    by their attrs; cores come first), and its sentences' nodes in row order."""
    graph = stores.graph
    topics = {
        t.id: t.text for t in graph.nodes(NodeKind.TOPIC) if t.attrs.get("sentgraph") == "topic"
    }
    nodes = sorted(
        (n for n in graph.nodes(NodeKind.SENTENCE)
         if n.attrs.get("sentgraph") in ("core", "supplementary")),
        key=lambda n: (n.attrs.get("sentgraph") != "core", n.pos, n.id),
    )
    row = {n.id: i for i, n in enumerate(nodes)}
    rst: list[list[list[Any]]] = [[] for _ in nodes]
    for edge in graph.edges(EdgeKind.RST):
        a, b = row.get(edge.source), row.get(edge.target)
        if a is not None and b is not None:
            cls = str(edge.attrs.get("class", ""))
            rst[a].append([b, edge.role or "", cls])
            rst[b].append([a, edge.role or "", cls])
    bridges = [
        [edge.source, edge.target, edge.role or "", str(edge.attrs.get("description") or "")]
        for edge in graph.edges(EdgeKind.BRIDGE)
        if edge.source in topics and edge.target in topics
    ]
    data = {
        "ids": [n.id for n in nodes],
        "docs": [n.doc_id for n in nodes],
        "texts": [n.text for n in nodes],
        "topic_of": [str(n.attrs.get("topic_id", "")) for n in nodes],
        "role": [str(n.attrs["sentgraph"]) for n in nodes],
        "rst": rst,
        "bridges": bridges,
        "topics": topics,
    }
    return data, nodes


def read(stores: Stores, key: str) -> Optional[dict[str, Any]]:
    """The persisted model of content ``key``, else None (missing, older, damaged)."""
    data = MODEL.read(stores, key)
    if not isinstance(data, dict) or any(name not in data for name in _FIELDS):
        return None
    rows = len(data["ids"])
    same = all(len(data[name]) == rows for name in ("docs", "texts", "topic_of", "role", "rst"))
    return data if same else None
