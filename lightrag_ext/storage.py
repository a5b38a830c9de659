"""Where the event layer lives: LightRAG's own storage classes, in a workspace of our own.

Backends map *namespaces* to fixed tables with fixed columns (PostgreSQL's ``NAMESPACE_TABLE_MAP``:
``text_chunks`` -> ``LIGHTRAG_DOC_CHUNKS`` and so on; an unknown KV namespace raises). So we never
invent namespaces: the layer reuses standard ones under a separate ``workspace``
(``"<workspace>_e2rag"``, or ``"e2rag"`` for the default workspace), a column or folder every
backend already keys on:

=================  =========================  ===========================================
storage            namespace                  holds
=================  =========================  ===========================================
graph              ``chunk_entity_relation``  mention and event nodes, their edges
vector             ``entities``               mention embeddings (entity_name, source_id)
vector             ``chunks``                 event embeddings (full_doc_id, content)
doc status         ``doc_status``             one commit record per document: node ids,
                                              edge pairs, chunk offsets, failed chunks
=================  =========================  ===========================================

Graph properties must be scalars (LightRAG's attribute contract), so each node carries its full
``GraphNode`` as a JSON string plus LightRAG's usual scalar fields. LightRAG's graphs hold one
undirected edge per node pair, while our layer can link a pair twice (two events of one chunk
are ``co_event`` and, told one after the other, ``next``), so a stored edge carries the JSON list
of every ``GraphEdge`` between its two nodes.
The doc-status record is written last, after a flush: it is the commit record that makes
``abuild_event_layer`` idempotent and tells deletion what to remove.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional

from lightrag.base import DocStatus
from lightrag.namespace import NameSpace

from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.schema import GraphEdge, GraphNode, NodeKind

if TYPE_CHECKING:
    from lightrag import LightRAG

#: 2: edges hold a list of GraphEdges per node pair, and the layer has story-order ``next`` edges.
LAYER_FORMAT_VERSION = 2
RECORD_KEY = "e2rag_record"
MENTION_META_FIELDS = {"entity_name", "source_id", "content", "file_path"}
EVENT_META_FIELDS = {"full_doc_id", "content", "file_path"}


#: Files of a LightRAG workspace that the layer never writes (file storages): finding one in
#: the layer's folder means that folder is a LightRAG workspace of its own.
LIGHTRAG_ONLY_FILES = (
    "kv_store_full_docs.json",
    "kv_store_text_chunks.json",
    "kv_store_llm_response_cache.json",
    "vdb_relationships.json",
)


class StorageCollisionError(E2RAGError):
    """The event layer would share a workspace with LightRAG's own data."""


def check_not_lightrag_workspace(folder: Path) -> None:
    """Refuse a layer folder that is a LightRAG workspace (file storages).

    A deployment may have a workspace literally named like our layer's (``e2rag`` beside the
    default workspace, ``x_e2rag`` beside ``x``); writing or dropping the layer there would
    replace and delete that workspace's files.
    """
    found = [name for name in LIGHTRAG_ONLY_FILES if (folder / name).exists()]
    if found:
        raise StorageCollisionError(
            f"{folder} holds a LightRAG workspace ({found[0]}), not an e2rag event layer, but "
            "the layer of this workspace would live there; pass another workspace=... "
            "(WORKSPACE for the server) or move that folder"
        )


def layer_workspace(workspace: str) -> str:
    """The workspace holding the event layer of a LightRAG workspace."""
    return f"{workspace}_e2rag" if workspace else "e2rag"


def node_properties(node: GraphNode, file_path: str) -> dict[str, Any]:
    """Scalar graph properties for a node (LightRAG's fields plus the JSON record)."""
    return {
        "entity_id": node.id,
        "entity_type": f"e2rag_{node.kind.value}",
        "description": node.text,
        "source_id": node.chunk_id or "",
        "file_path": file_path,
        RECORD_KEY: json.dumps(node.model_dump(mode="json"), ensure_ascii=False),
    }


def edge_properties(edges: list[GraphEdge], file_path: str, chunk_id: str) -> dict[str, Any]:
    """Scalar graph properties for the edges of one node pair; the records keep direction and
    kind."""
    kinds = ",".join(dict.fromkeys(e.kind.value for e in edges))
    return {
        "keywords": kinds,
        "description": "; ".join(e.attrs.get("description", e.kind.value) for e in edges),
        "weight": float(len(edges)),
        "source_id": chunk_id,
        "file_path": file_path,
        RECORD_KEY: json.dumps([e.model_dump(mode="json") for e in edges], ensure_ascii=False),
    }


def node_from_properties(props: dict[str, Any]) -> Optional[GraphNode]:
    raw = props.get(RECORD_KEY)
    return GraphNode.model_validate_json(raw) if raw else None


def edges_from_properties(props: dict[str, Any]) -> list[GraphEdge]:
    """The GraphEdges of a stored edge (format 1 stored a single one)."""
    raw = props.get(RECORD_KEY)
    if not raw:
        return []
    data = json.loads(raw)
    return [GraphEdge.model_validate(item) for item in (data if isinstance(data, list) else [data])]


def edge_pairs(edges: Iterable[GraphEdge]) -> dict[tuple[str, str], list[GraphEdge]]:
    """Edges grouped by node pair (first seen direction), as LightRAG stores them."""
    pairs: dict[tuple[str, str], list[GraphEdge]] = {}
    seen: dict[frozenset[str], tuple[str, str]] = {}
    for edge in edges:
        key = seen.setdefault(frozenset((edge.source, edge.target)), (edge.source, edge.target))
        pairs.setdefault(key, []).append(edge)
    return pairs


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


@dataclass
class DocLayer:
    """The event layer of one document, as built by the event pass or the backfill."""

    doc_id: str
    file_path: str
    chunk_ids: list[str]
    chunk_offsets: dict[str, int]
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    cache_keys: list[str] = field(default_factory=list)
    doc_created_at: Optional[str] = None
    mention_source: str = "lightrag_extraction"

    def counts(self) -> dict[str, int]:
        kinds = [n.kind for n in self.nodes]
        return {
            "mentions": kinds.count(NodeKind.MENTION),
            "events": kinds.count(NodeKind.EVENT),
            "edges": len(self.edges),
        }

    def record(self) -> dict[str, Any]:
        """The doc-status commit record (fields every DocStatusStorage backend accepts)."""
        counts = self.counts()
        stamp = now_iso()
        return {
            "status": (DocStatus.FAILED if self.failures else DocStatus.PROCESSED).value,
            "content_summary": (
                f"e2rag event layer: {counts['mentions']} mentions, {counts['events']} events, "
                f"{counts['edges']} edges"
            ),
            "content_length": sum(len(n.text) for n in self.nodes),
            "chunks_count": len(self.chunk_ids),
            "chunks_list": list(self.chunk_ids),
            "file_path": self.file_path,
            "error_msg": "; ".join(f"{c}: {r}" for c, r in sorted(self.failures.items())) or None,
            "created_at": stamp,
            "updated_at": stamp,
            "metadata": {
                "e2rag_layer": LAYER_FORMAT_VERSION,
                "node_ids": [n.id for n in self.nodes],
                "edges": [list(pair) for pair in edge_pairs(self.edges)],
                "chunk_offsets": self.chunk_offsets,
                "failed_chunks": self.failures,
                "cache_keys": self.cache_keys,
                "doc_created_at": self.doc_created_at,
                "mention_source": self.mention_source,
                "counts": counts,
            },
        }


class EventLayerStore:
    """The four storages of the event layer, built from the user's configured storage classes."""

    def __init__(self, rag: "LightRAG") -> None:
        self.workspace = layer_workspace(rag.workspace)
        self.folder = Path(rag.working_dir) / self.workspace  # file storages only
        self.graph = rag.graph_storage_cls(
            namespace=NameSpace.GRAPH_STORE_CHUNK_ENTITY_RELATION,
            workspace=self.workspace,
            embedding_func=rag.embedding_func,
        )
        self.mentions_vdb = rag.vector_db_storage_cls(
            namespace=NameSpace.VECTOR_STORE_ENTITIES,
            workspace=self.workspace,
            embedding_func=rag.embedding_func,
            meta_fields=set(MENTION_META_FIELDS),
        )
        self.events_vdb = rag.vector_db_storage_cls(
            namespace=NameSpace.VECTOR_STORE_CHUNKS,
            workspace=self.workspace,
            embedding_func=rag.embedding_func,
            meta_fields=set(EVENT_META_FIELDS),
        )
        self.docs = rag.doc_status_storage_cls(
            namespace=NameSpace.DOC_STATUS,
            workspace=self.workspace,
            global_config=rag.doc_status.global_config,
            embedding_func=None,
        )
        self._counterparts = (
            (self.graph, rag.chunk_entity_relation_graph),
            (self.mentions_vdb, rag.entities_vdb),
            (self.events_vdb, rag.chunks_vdb),
            (self.docs, rag.doc_status),
        )

    def storages(self) -> list[Any]:
        """Storages flushed with LightRAG's own (doc status persists on upsert)."""
        return [self.graph, self.mentions_vdb, self.events_vdb, self.docs]

    async def initialize(self) -> None:
        for storage in self.storages():
            await storage.initialize()
        try:
            self.check_isolated()
            await self.check_layer_records()
        except StorageCollisionError:
            await self.finalize()  # release backend clients (PG pools are ref-counted)
            raise

    async def finalize(self) -> None:
        for storage in self.storages():
            await storage.finalize()

    def check_isolated(self) -> None:
        """Refuse to run when a backend forced every storage into one workspace.

        Several backends let an environment variable (``POSTGRES_WORKSPACE``,
        ``MONGODB_WORKSPACE``, ``NEO4J_WORKSPACE``, ``MILVUS_WORKSPACE``, ...) override the
        workspace of every storage. Our layer would then write into LightRAG's own rows (the
        doc-status record of a document would replace LightRAG's), so we stop instead.
        """
        for ours, theirs in self._counterparts:
            if type(ours) is type(theirs) and _effective_location(ours) == _effective_location(
                theirs
            ):
                raise StorageCollisionError(
                    f"{type(ours).__name__} resolved the event-layer workspace "
                    f"{self.workspace!r} to LightRAG's own workspace "
                    f"{getattr(theirs, 'workspace', '')!r}; an environment variable such as "
                    "POSTGRES_WORKSPACE / MONGODB_WORKSPACE / NEO4J_WORKSPACE / MILVUS_WORKSPACE "
                    "forces one workspace for all storages. Unset it and pass "
                    "workspace=... to E2LightRAG instead."
                )

    def check_not_lightrag_workspace(self) -> None:
        """See ``check_not_lightrag_workspace`` (file storages keep the layer in ``folder``)."""
        check_not_lightrag_workspace(self.folder)

    async def check_layer_records(self) -> None:
        """Refuse a layer workspace whose doc-status records are not layer commit records
        (any backend): it is a LightRAG workspace of its own, see
        ``check_not_lightrag_workspace``."""
        found = await self.docs.get_docs_by_statuses(list(DocStatus))
        foreign = [d for d, s in found.items() if "e2rag_layer" not in (s.metadata or {})]
        if foreign:
            raise StorageCollisionError(
                f"the event-layer workspace {self.workspace!r} holds LightRAG documents "
                f"({len(foreign)}, e.g. {foreign[0]!r}), not e2rag layer records; pass another "
                "workspace=... (WORKSPACE for the server) to E2LightRAG"
            )

    async def flush(self) -> None:
        for storage in (self.graph, self.mentions_vdb, self.events_vdb):
            await storage.index_done_callback()

    async def drop(self) -> dict[str, str]:
        """Drop every storage of the layer; LightRAG's ``drop`` contract (a status dict)."""
        failures = []
        for storage in self.storages():
            result = await storage.drop()
            if (result or {}).get("status") != "success":
                failures.append(f"{type(storage).__name__}: {(result or {}).get('message')}")
        if failures:
            return {"status": "error", "message": "e2rag layer: " + "; ".join(failures)}
        return {"status": "success", "message": "e2rag event layer dropped"}

    # -- writes -----------------------------------------------------------------------------
    async def write_doc(self, layer: DocLayer) -> None:
        """Replace a document's layer: stale nodes out, new nodes/edges/vectors in, commit."""
        previous = await self.get_record(layer.doc_id)
        if previous is not None:
            keep = {n.id for n in layer.nodes}
            stale = [i for i in previous["metadata"].get("node_ids", []) if i not in keep]
            await self._remove_nodes(stale, previous["metadata"].get("edges", []))
        chunk_of = {n.id: n.chunk_id or "" for n in layer.nodes}
        if layer.nodes:
            await self.graph.upsert_nodes_batch(
                [(n.id, node_properties(n, layer.file_path)) for n in layer.nodes]
            )
        if layer.edges:
            await self.graph.upsert_edges_batch(
                [
                    (source, target, edge_properties(group, layer.file_path, chunk_of[source]))
                    for (source, target), group in edge_pairs(layer.edges).items()
                ]
            )
        mentions = {
            n.id: {
                "entity_name": n.name or n.text,
                "source_id": n.chunk_id or "",
                "content": n.text,
                "file_path": layer.file_path,
            }
            for n in layer.nodes
            if n.kind == NodeKind.MENTION and n.attrs.get("embed") is not False
        }
        events = {
            n.id: {"full_doc_id": n.doc_id, "content": n.text, "file_path": layer.file_path}
            for n in layer.nodes
            if n.kind == NodeKind.EVENT and n.attrs.get("embed") is not False
        }
        if mentions:
            await self.mentions_vdb.upsert(mentions)
        if events:
            await self.events_vdb.upsert(events)
        await self.flush()
        await self.docs.upsert({layer.doc_id: layer.record()})

    async def delete_doc(self, doc_id: str) -> Optional[dict[str, Any]]:
        """Remove a document's nodes, edges, vectors and record; return the removed record."""
        record = await self.get_record(doc_id)
        if record is None:
            return None
        meta = record.get("metadata") or {}
        await self._remove_nodes(meta.get("node_ids", []), meta.get("edges", []))
        await self.flush()
        await self.docs.delete([doc_id])
        await self.docs.index_done_callback()
        return record

    async def _remove_nodes(self, node_ids: list[str], edges: Iterable[list[str]]) -> None:
        if not node_ids:
            return
        wanted = set(node_ids)
        pairs = [(s, t) for s, t in edges if s in wanted or t in wanted]
        if pairs:
            await self.graph.remove_edges(pairs)
        await self.graph.remove_nodes(list(node_ids))
        await self.mentions_vdb.delete(list(node_ids))
        await self.events_vdb.delete(list(node_ids))

    # -- reads ------------------------------------------------------------------------------
    async def get_record(self, doc_id: str) -> Optional[dict[str, Any]]:
        record = await self.docs.get_by_id(doc_id)
        return record if record else None

    async def doc_ids(self) -> list[str]:
        """Every document that has a layer record (complete or with failed chunks)."""
        found = await self.docs.get_docs_by_statuses([DocStatus.PROCESSED, DocStatus.FAILED])
        return list(found)

    async def get_records(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        ids = list(dict.fromkeys(doc_ids))
        rows = await self.docs.get_by_ids(ids) if ids else []
        return {i: r for i, r in zip(ids, rows) if r}

    async def get_nodes(self, node_ids: Iterable[str]) -> dict[str, GraphNode]:
        ids = list(dict.fromkeys(node_ids))
        found = await self.graph.get_nodes_batch(ids) if ids else {}
        nodes = {}
        for node_id, props in found.items():
            node = node_from_properties(props)
            if node is not None:
                nodes[node_id] = node
        return nodes

    async def neighbor_ids(self, node_ids: Iterable[str]) -> dict[str, list[str]]:
        """One hop over the layer's edges (the graph is undirected, as in LightRAG)."""
        ids = list(dict.fromkeys(node_ids))
        found = await self.graph.get_nodes_edges_batch(ids) if ids else {}
        return {
            node_id: [t if s == node_id else s for s, t in pairs]
            for node_id, pairs in found.items()
        }

    async def get_edges(self, pairs: Iterable[tuple[str, str]]) -> list[GraphEdge]:
        """Every GraphEdge stored between the given node pairs (either direction)."""
        unique = list(dict.fromkeys(tuple(sorted(p)) for p in pairs))
        if not unique:
            return []
        found = await self.graph.get_edges_batch([{"src": s, "tgt": t} for s, t in unique])
        return [edge for props in found.values() for edge in edges_from_properties(props)]


def _effective_location(storage: Any) -> tuple[str, str]:
    return (
        str(getattr(storage, "workspace", "")),
        str(getattr(storage, "final_namespace", None) or getattr(storage, "namespace", "")),
    )
