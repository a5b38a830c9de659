"""What a persisted store holds, read from its files without loading llama-index or any model.

``e2rag show`` should answer at once; loading an index imports llama-index (most of a second)
and builds nothing ``show`` needs. The graph database and the index store's JSON say it all.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from llama_index_e2rag.disk.checksums import E2RAG_DIR
from llama_index_e2rag.graph.sql_digest import COUNTED_ATTRS
from llama_index_e2rag.graph.sqlite_store import GRAPH_FILE, SQLiteGraphStore
from llama_index_e2rag.persist.index_store import read_struct
from llama_index_e2rag.persist.legacy import in_struct
from llama_index_e2rag.schema import NodeKind

#: Class names of the restorable document builders (``builders.RESTORABLE_BUILDERS``'s, whose
#: module imports llama-index).
BUILDER_CLASSES = {
    "chrono": "ChronoLayerBuilder",
    "sentence_graph": "SentenceGraphBuilder",
    "event_graph": "EventGraphBuilder",
}


@dataclass
class StoreSummary:
    """Documents in story order with their chunk counts, node/edge counts and build facts;
    ``scanned``: the counts were read from every row (documents committed before their records
    counted their rows), not added up from the records."""

    documents: list[tuple[int, str, int]]
    nodes: dict[str, int]
    edges: dict[str, int]
    failures: list[dict[str, str]]
    doc_builders: list[str] = field(default_factory=list)
    llm_stats: dict[str, Any] = field(default_factory=dict)
    scanned: bool = False


@dataclass
class _Counts:
    """Nodes and edges per kind, chunks per document (layer 0 apart), SentGraph's roles."""

    nodes: Counter[str] = field(default_factory=Counter)
    edges: Counter[str] = field(default_factory=Counter)
    chunks: Counter[str] = field(default_factory=Counter)
    layer0: int = 0
    roles: Counter[str] = field(default_factory=Counter)


def summarize(store: Path, chrono_label: str, sentgraph_label: str) -> Optional[StoreSummary]:
    """The summary of a store in today's layout; None for one that needs a full load (0.1.0).

    Counts are added up from the documents' records, which the commit wrote with the rows in
    one transaction (``graph.sql_digest``): as fast at 10M words as at 10k. A store with a
    document committed before records counted rows is counted inside SQLite (``GROUP BY``,
    every row read). ``chrono_label`` and ``sentgraph_label`` name ChronoRAG's layer-0 chunks
    and SentGraph's sentences (by role), counted apart from the extraction's."""
    struct = read_struct(store)
    graph_file = store / E2RAG_DIR / GRAPH_FILE
    if struct is None or in_struct(struct) or not graph_file.is_file():
        return None
    graph = SQLiteGraphStore.open_existing(graph_file)
    try:
        orders = graph.doc_orders()
        records = graph.doc_records()
        tallies = [(records.get(doc) or {}).get("counts") for doc in orders]
        scanned = None in tallies
        counts = _scanned(graph) if scanned else _added(dict(zip(orders, tallies)))
        failures = graph.failures()
    finally:
        graph.close()
    nodes = dict(sorted(counts.nodes.items()))
    if counts.layer0:
        nodes["chunk"] = nodes.get("chunk", 0) - counts.layer0
        nodes[chrono_label] = counts.layer0
    if nodes.get(NodeKind.TOPIC.value):  # SentGraph's sentences, apart from the extraction's
        nodes = sentence_roles(nodes, dict(counts.roles), sentgraph_label)
    config = struct.get("config") or {}
    return StoreSummary(
        documents=sorted((order, doc, counts.chunks[doc]) for doc, order in orders.items()),
        nodes=nodes,
        edges=dict(sorted(counts.edges.items())),
        failures=failures,
        doc_builders=[BUILDER_CLASSES.get(n, n) for n in sorted(config.get("doc_builders") or {})],
        llm_stats=struct.get("llm_stats") or {},
        scanned=scanned,
    )


def _added(tallies: dict[str, dict[str, Any]]) -> _Counts:
    """The counts of the documents' records (``sql_digest.Tally``), added up."""
    counts = _Counts()
    layer_key, role_key = (f"{kind}.{COUNTED_ATTRS[kind]}" for kind in ("chunk", "sentence"))
    for doc, tally in tallies.items():
        counts.nodes.update(tally["nodes"])
        counts.edges.update(tally["edges"])
        layer0 = tally["attrs"].get(layer_key, {}).get("0", 0)
        counts.chunks[doc] = tally["nodes"].get(NodeKind.CHUNK.value, 0) - layer0
        counts.layer0 += layer0
        counts.roles.update(tally["attrs"].get(role_key, {}))
    return counts


def _scanned(graph: SQLiteGraphStore) -> _Counts:
    """The counts read from every row, inside SQLite (no row reaches Python)."""
    totals = graph.counts()
    counts = _Counts(nodes=Counter(totals["nodes"]), edges=Counter(totals["edges"]))
    for (doc_id, layer), n in graph.attr_counts(NodeKind.CHUNK.value, "layer").items():
        if layer == 0:
            counts.layer0 += n
        else:
            counts.chunks[doc_id] += n
    if totals["nodes"].get(NodeKind.TOPIC.value):
        for (_, role), n in graph.attr_counts(NodeKind.SENTENCE.value, "sentgraph").items():
            if role:
                counts.roles[role] += n
    return counts


def sentence_roles(nodes: dict[str, int], roles: dict[str, int], label: str) -> dict[str, int]:
    """``nodes`` with SentGraph's sentences (``roles``: how many per role) moved from
    ``sentence`` to ``label`` per role; ``sentence`` goes when none is the extraction's."""
    nodes = dict(nodes)
    kind = NodeKind.SENTENCE.value
    for role, n in sorted(roles.items()):
        nodes[kind] = nodes.get(kind, 0) - n
        nodes[label.format(role=role)] = n
    if not nodes.get(kind):
        nodes.pop(kind, None)
    return nodes
