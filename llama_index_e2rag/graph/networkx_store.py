"""NetworkX default graph store, persisted as versioned JSON written atomically (never pickle)."""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from llama_index_e2rag.errors import CorruptGraphError, GraphStoreError
from llama_index_e2rag.disk.files import atomic_replace
from llama_index_e2rag.graph.base import PAGE, Direction, DocRows, batch_links, pages
from llama_index_e2rag.schema import (
    SCHEMA_VERSION,
    EdgeKind,
    GraphEdge,
    GraphNode,
    NodeKind,
    sort_by_position,
)

FORMAT_NAME = "llama-index-e2rag/graph"


class NetworkXGraphStore:
    """In-memory ``nx.MultiDiGraph`` keyed by node id; one multi-edge per (kind, role)."""

    def __init__(self) -> None:
        # deferred: networkx takes 0.25-0.5 s to import, and loading a store (which imports
        # the write pipeline that stages documents here) must not pay it
        import networkx as nx

        self._g = nx.MultiDiGraph()
        self._by_kind: dict[NodeKind, set[str]] = defaultdict(set)
        self._by_doc: dict[str, set[str]] = defaultdict(set)
        self._orders: dict[str, int] = {}
        self._failures: list[dict[str, str]] = []
        self._records: dict[str, dict[str, Any]] = {}
        self._meta: dict[str, str] = {}
        self._version = 0

    @property
    def version(self) -> int:
        """Changes with every write (the read caches' key)."""
        return self._version

    # -- writes -------------------------------------------------------------------------------
    def upsert_nodes(self, nodes: Iterable[GraphNode]) -> None:
        self._version += 1
        for node in nodes:
            old = self._g.nodes[node.id]["record"] if node.id in self._g else None
            if old is not None:
                self._by_kind[old.kind].discard(node.id)
                self._by_doc[old.doc_id].discard(node.id)
            self._g.add_node(node.id, record=node)
            self._by_kind[node.kind].add(node.id)
            self._by_doc[node.doc_id].add(node.id)

    def upsert_edges(self, edges: Iterable[GraphEdge]) -> None:
        self._version += 1
        for edge in edges:
            for end in (edge.source, edge.target):
                if end not in self._g:
                    raise GraphStoreError(
                        f"edge {edge.kind.value} {edge.source} -> {edge.target}: "
                        f"node {end!r} is not in the graph; upsert nodes before their edges"
                    )
            self._g.add_edge(edge.source, edge.target, key=edge.key, record=edge)

    def delete_nodes(self, node_ids: Iterable[str]) -> None:
        self._version += 1
        for node_id in list(node_ids):
            if node_id not in self._g:
                continue
            record: GraphNode = self._g.nodes[node_id]["record"]
            self._by_kind[record.kind].discard(node_id)
            self._by_doc[record.doc_id].discard(node_id)
            self._g.remove_node(node_id)  # removes incident edges too

    def delete_doc(self, doc_id: str) -> set[str]:
        """Remove every node of ``doc_id`` (and so every edge touching them); return their ids."""
        ids = set(self._by_doc.get(doc_id, set()))
        self.delete_nodes(ids)
        stale = [
            (u, v, k)
            for u, v, k, rec in self._g.edges(keys=True, data="record")
            if rec.doc_id == doc_id
        ]
        self._g.remove_edges_from(stale)
        self._by_doc.pop(doc_id, None)
        self._orders.pop(doc_id, None)
        self._records.pop(doc_id, None)
        self._failures = [f for f in self._failures if f["doc_id"] != doc_id]
        return ids

    def replace_doc(
        self,
        doc_id: str,
        order: int,
        nodes: Sequence[GraphNode],
        edges: Sequence[GraphEdge],
        failures: Sequence[dict[str, str]] = (),
    ) -> None:
        """Swap a document's graph, order and failures (in memory: all or nothing per call)."""
        self.delete_doc(doc_id)
        self.upsert_nodes(nodes)
        self.upsert_edges(edges)
        self._orders[doc_id] = order
        self._failures.extend(
            {"doc_id": doc_id, "chunk_id": f.get("chunk_id", ""), "reason": f["reason"]}
            for f in failures
        )

    def commit_docs(self, docs: Sequence[DocRows], meta: Mapping[str, str] = {}) -> None:
        """Replace each document, then write the batch's links, and set ``meta``. In memory
        there are no row digests to re-seal; a link to a node that is not there is refused
        before anything changes."""
        links = batch_links(docs)
        batch_nodes = {n.id for doc in docs for n in doc.nodes}
        replaced = {doc.doc_id for doc in docs}
        for link in links:
            for end in (link.source, link.target):
                node = self.get_node(end)
                if end not in batch_nodes and (node is None or node.doc_id in replaced):
                    raise GraphStoreError(
                        f"link {link.kind.value} {link.source} -> {link.target}: node {end!r} "
                        "is in neither the batch nor the graph"
                    )
        for doc in docs:
            self.replace_doc(doc.doc_id, doc.order, doc.nodes, doc.edges, doc.failures)
            self._records[doc.doc_id] = dict(doc.record)
        self.upsert_edges(links)
        self._meta.update(meta)

    # -- reads --------------------------------------------------------------------------------
    def get_meta(self, key: str) -> Optional[str]:
        return self._meta.get(key)

    def doc_records(self) -> dict[str, dict[str, Any]]:
        return {doc: dict(record) for doc, record in self._records.items()}

    def get_node(self, node_id: str) -> Optional[GraphNode]:
        data = self._g.nodes.get(node_id)
        return data["record"] if data else None

    def get_nodes(self, node_ids: Iterable[str]) -> list[GraphNode]:
        return [self._g.nodes[i]["record"] for i in node_ids if i in self._g]

    def has_node(self, node_id: str) -> bool:
        return node_id in self._g

    def nodes(
        self, kind: Optional[NodeKind] = None, doc_id: Optional[str] = None
    ) -> list[GraphNode]:
        if kind is not None and doc_id is not None:
            ids: Iterable[str] = self._by_kind.get(kind, set()) & self._by_doc.get(doc_id, set())
        elif kind is not None:
            ids = self._by_kind.get(kind, set())
        elif doc_id is not None:
            ids = self._by_doc.get(doc_id, set())
        else:
            ids = self._g.nodes
        return sort_by_position(self._g.nodes[i]["record"] for i in ids)

    def scan_nodes(
        self, kind: Optional[NodeKind] = None, doc_id: Optional[str] = None, page: int = PAGE
    ) -> Iterator[list[GraphNode]]:
        """``nodes`` in pages (in memory already: the pages only match the SQL stores)."""
        return pages(self.nodes(kind, doc_id), page)

    def scan_edges(
        self, kind: Optional[EdgeKind] = None, doc_id: Optional[str] = None, page: int = PAGE
    ) -> Iterator[list[GraphEdge]]:
        return pages(self.edges(kind, doc_id), page)

    def scan_edges_listed(self, kind: EdgeKind, page: int = PAGE) -> Iterator[list[GraphEdge]]:
        return pages(self.edges(kind), page)

    def edges(
        self, kind: Optional[EdgeKind] = None, doc_id: Optional[str] = None
    ) -> list[GraphEdge]:
        return [
            rec
            for _, _, rec in self._g.edges(data="record")
            if (kind is None or rec.kind == kind) and (doc_id is None or rec.doc_id == doc_id)
        ]

    def edges_of(
        self,
        node_id: str,
        kinds: Optional[Iterable[EdgeKind]] = None,
        direction: Direction = "both",
    ) -> list[GraphEdge]:
        if node_id not in self._g:
            return []
        wanted = set(kinds) if kinds is not None else None
        found: list[GraphEdge] = []
        if direction in ("out", "both"):
            found.extend(rec for _, _, rec in self._g.out_edges(node_id, data="record"))
        if direction in ("in", "both"):
            found.extend(rec for _, _, rec in self._g.in_edges(node_id, data="record"))
        return [e for e in found if wanted is None or e.kind in wanted]

    def neighbors(
        self,
        node_id: str,
        kinds: Optional[Iterable[EdgeKind]] = None,
        direction: Direction = "both",
    ) -> list[GraphNode]:
        seen: dict[str, GraphNode] = {}
        for edge in self.edges_of(node_id, kinds, direction):
            other = edge.target if edge.source == node_id else edge.source
            if other not in seen:
                seen[other] = self._g.nodes[other]["record"]
        return sort_by_position(seen.values())

    def subgraph_edges(
        self, node_ids: Iterable[str], kinds: Optional[Iterable[EdgeKind]] = None
    ) -> list[GraphEdge]:
        ids = {i for i in node_ids if i in self._g}
        wanted = set(kinds) if kinds is not None else None
        return [
            rec
            for _, v, rec in self._g.out_edges(ids, data="record")
            if v in ids and (wanted is None or rec.kind in wanted)
        ]

    def story_neighbors(self, node: GraphNode, before: int, after: int) -> list[GraphNode]:
        """Up to ``before``/``after`` nodes of the same kind around ``node``, in story order."""
        same = self.nodes(kind=node.kind)
        keys = [(n.pos, n.id) for n in same]
        at = bisect.bisect_left(keys, (node.pos, node.id))
        end = at + 1 if at < len(keys) and keys[at] == (node.pos, node.id) else at
        return same[max(0, at - before) : at] + same[end : end + after]

    def doc_ids(self) -> list[str]:
        return sorted({d for d, ids in self._by_doc.items() if ids} | set(self._orders))

    def doc_orders(self) -> dict[str, int]:
        return dict(self._orders)

    def failures(self) -> list[dict[str, str]]:
        return [dict(f) for f in self._failures]

    def counts(self) -> dict[str, dict[str, int]]:
        node_counts = {k.value: len(v) for k, v in self._by_kind.items() if v}
        edge_counts: dict[str, int] = defaultdict(int)
        for _, _, rec in self._g.edges(data="record"):
            edge_counts[rec.kind.value] += 1
        return {"nodes": dict(sorted(node_counts.items())), "edges": dict(sorted(edge_counts.items()))}

    def __len__(self) -> int:
        return self._g.number_of_nodes()

    # -- persistence --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "schema_version": SCHEMA_VERSION,
            "nodes": [
                self._g.nodes[i]["record"].model_dump(mode="json") for i in sorted(self._g.nodes)
            ],
            "edges": sorted(
                (rec.model_dump(mode="json") for _, _, rec in self._g.edges(data="record")),
                key=lambda e: (e["source"], e["target"], e["kind"], e.get("role") or ""),
            ),
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "graph data") -> "NetworkXGraphStore":
        """Rebuild a store; refuses data that is not ours, corrupt, or from a newer schema."""
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            raise GraphStoreError(f"{source} is not an e2rag graph (missing format marker)")
        version = data.get("schema_version")
        if not isinstance(version, int):
            raise GraphStoreError(f"{source} has no valid schema_version")
        if version > SCHEMA_VERSION:
            raise GraphStoreError(
                f"{source} was written with graph schema {version}, newer than this "
                f"llama-index-e2rag (schema {SCHEMA_VERSION}); upgrade the package to read it"
            )
        store = cls()
        try:
            store.upsert_nodes(GraphNode.model_validate(n) for n in data["nodes"])
            store.upsert_edges(GraphEdge.model_validate(e) for e in data["edges"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptGraphError(f"{source} is corrupt: {exc}") from exc
        return store

    def persist(self, persist_path: str) -> None:
        """Write JSON to a temporary file in the same folder, then rename over the target."""
        data = self.to_dict()

        def dump(tmp: Path) -> None:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(data, fh, ensure_ascii=False)

        atomic_replace(Path(persist_path), dump)

    @classmethod
    def from_persist_path(cls, persist_path: str) -> "NetworkXGraphStore":
        path = Path(persist_path)
        if not path.exists():
            raise FileNotFoundError(f"no e2rag graph at {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CorruptGraphError(f"{path} is corrupt or truncated: {exc}") from exc
        return cls.from_dict(data, source=str(path))
