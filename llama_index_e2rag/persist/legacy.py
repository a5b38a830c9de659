"""Stores written by llama-index-e2rag 0.1.0: every line of the old format is here.

0.1.0 kept the graph as a JSON string inside the index struct (with the document orders and
extraction failures beside it) and the vectors in one ``SimpleVectorStore`` per node kind
(namespaces ``e2rag_<kind>``). Loading such a store converts it in memory; the next ``persist``
writes the new layout and removes the old vector files (``Conversion``: a process killed at any
moment leaves the 0.1.0 store or the converted one, whole). ``e2rag migrate --store DIR``
(``maintenance.migrate``) does both in one step and reads the old vector files directly
(``legacy_storage(fast=True)``), which is much faster than llama-index's own loader on large files.

The rest of the code asks only through ``__all__``: ``is_legacy`` / ``in_struct`` (is this the old
format?), ``legacy_storage`` (its storage context), ``open_legacy`` (today's stores from it) and,
around a save, ``Conversion``, ``conversion_pending``, ``finish_conversion`` and
``forget_converted``. This module imports
no llama-index at its top: ``ownership.inspect`` asks ``is_legacy`` on every ``e2rag show``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from llama_index_e2rag.disk.checksums import E2RAG_DIR, file_sum
from llama_index_e2rag.disk.files import atomic_write_text
from llama_index_e2rag.errors import CorruptGraphError
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.graph.sqlite_store import SQLiteGraphStore
from llama_index_e2rag.persist.index_store import read_struct
from llama_index_e2rag.schema import CHUNK_NODE_ATTR, GraphEdge, NodeKind
from llama_index_e2rag.vectors.base import VectorRecord
from llama_index_e2rag.vectors.embedded import EmbeddedVectors

if TYPE_CHECKING:
    from llama_index.core.storage.index_store.types import BaseIndexStore

    from llama_index_e2rag.graph.networkx_store import NetworkXGraphStore
    from llama_index.core.storage.storage_context import StorageContext
    from llama_index.core.vector_stores.simple import SimpleVectorStore, SimpleVectorStoreData

__all__ = [
    "Conversion",
    "conversion_pending",
    "finish_conversion",
    "forget_converted",
    "in_struct",
    "is_legacy",
    "legacy_storage",
    "open_legacy",
]

logger = logging.getLogger(__name__)

#: 0.1.0's vector namespaces were ``e2rag_<kind>``.
LEGACY_PREFIX = "e2rag_"
LEGACY_SUFFIX = "__vector_store.json"
#: Inside ``e2rag/`` while a conversion is under way: the 0.1.0 files it removes once committed.
RECORD_FILE = "migration.json"
RECORD_FORMAT = "llama-index-e2rag/migration"
#: llama-index's file names (its ``DEFAULT_PERSIST_FNAME``s of the graph and index stores).
POINTER_FILE = "graph_store.json"
INDEX_STORE_FILE = "index_store.json"


@dataclass
class Conversion:
    """A 0.1.0 store converted in memory, which the next ``persist`` writes.

    llama-index's ``StorageContext.persist`` writes ``docstore.json`` and ``index_store.json``
    first and only then saves the graph slot, so rewriting the index store (where 0.1.0 keeps
    the graph) in that order would leave, in between, neither the old graph nor the new one.
    Instead the docstore's and the index store's ``persist`` call ``commit`` first, which
    writes in this order:

    1. ``e2rag/`` (graph, vectors, manifest) and the pointer: until step 3 the folder is
       still the 0.1.0 store, which loads from its llama-index files as before (they are
       untouched) and whose next conversion writes ``e2rag/`` over;
    2. the record of the 0.1.0 vector files to remove, with their checksums;
    3. ``index_store.json`` without the graph: the commit, one atomic rename. From here the
       folder is the converted store, complete in ``e2rag/`` (the docstore, written next, is
       brought up to the graph on load if it lags);
    4. the recorded files, then the record, are removed (``finish_conversion``). A process
       killed meanwhile leaves files that the loaders skip and the next ``persist`` or
       ``e2rag migrate`` removes: only those the record names, unchanged since.
    """

    index_store: BaseIndexStore
    #: the vector namespaces the conversion read (``e2rag_<kind>``)
    namespaces: list[str]

    def commit(self, save_stores: Callable[[Path], None], folder: Path) -> None:
        """Write the converted store into ``folder`` in the order above (``save_stores``: the
        slot's, given the pointer's path; a conversion in place records 0.1.0's files, one into
        another folder has none to remove)."""
        old = {}
        if is_legacy(folder):
            old = {f"{n}{LEGACY_SUFFIX}": file_sum(folder / f"{n}{LEGACY_SUFFIX}")
                   for n in self.namespaces if (folder / f"{n}{LEGACY_SUFFIX}").is_file()}
        save_stores(folder / POINTER_FILE)
        if old:
            atomic_write_text(folder / E2RAG_DIR / RECORD_FILE,
                              json.dumps({"format": RECORD_FORMAT, "remove": old}))
        self.index_store.persist(str(folder / INDEX_STORE_FILE))
        finish_conversion(folder)


def in_struct(struct: Any) -> bool:
    """An index struct (object or its JSON fields) still holding 0.1.0's graph."""
    if isinstance(struct, dict):
        return bool(struct.get("graph_json"))
    return bool(getattr(struct, "graph_json", ""))


def is_legacy(persist_dir: Path) -> bool:
    """A store written by 0.1.0 (graph in the index struct; ``e2rag migrate`` converts it)."""
    try:
        return in_struct(read_struct(Path(persist_dir)) or {})
    except (OSError, ValueError):
        return False


def recorded(folder: Path) -> dict[str, list[int]]:
    """The 0.1.0 files a conversion of ``folder`` recorded for removal, with their checksums
    (none without a record, or with one that is not ours)."""
    try:
        data = json.loads((folder / E2RAG_DIR / RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
        return {}
    return {name: sums for name, sums in (data.get("remove") or {}).items()
            if name.startswith(LEGACY_PREFIX) and name.endswith(LEGACY_SUFFIX) and "/" not in name}


def conversion_pending(folder: Path) -> bool:
    """A conversion of ``folder`` committed but not finished (0.1.0 files left to remove)."""
    return bool(recorded(folder))


def finish_conversion(folder: Path) -> None:
    """Remove what a committed conversion recorded (step 4 of ``Conversion``): each file still
    as it was converted, then the record. A record beside a 0.1.0 index store is of a
    conversion killed before its commit: left for the next one to write over."""
    old = recorded(folder)
    if not old or is_legacy(folder):
        return
    for name, sums in old.items():
        path = folder / name
        if path.is_file() and file_sum(path) == sums:
            path.unlink()
    (folder / E2RAG_DIR / RECORD_FILE).unlink(missing_ok=True)


def forget_converted(vector_stores: dict[str, Any], folder: Path) -> None:
    """Leave out of ``vector_stores`` (a storage context's) 0.1.0's files that a committed
    conversion of ``folder`` still has to remove (read as vector stores by llama-index's loader,
    they would be written back by ``persist``)."""
    for name in recorded(folder):
        vector_stores.pop(name[: -len(LEGACY_SUFFIX)], None)


def open_legacy(
    struct: Any, storage_context: "StorageContext", graph_store: Optional[GraphStore] = None
) -> tuple[GraphStore, EmbeddedVectors, Conversion]:
    """Today's graph and vectors holding everything of a 0.1.0 index struct and its vector
    namespaces, and the conversion that the next persist commits.

    The struct's graph fields are emptied (the stores hold them now) and the old namespaces
    leave the storage context, so the next persist writes only the new layout.
    """
    # llama-index and NetworkX (heavy) only here: is_legacy, which ownership asks cheaply (every
    # command, ``e2rag show`` among them), needs none of them
    from llama_index.core.vector_stores.simple import SimpleVectorStore

    # deferred: networkx, ~0.3 s
    from llama_index_e2rag.graph.networkx_store import NetworkXGraphStore

    try:
        old = NetworkXGraphStore.from_dict(
            json.loads(struct.graph_json), source="the e2rag graph in the index store"
        )
    except json.JSONDecodeError as exc:
        raise CorruptGraphError(f"the e2rag graph in the index store is corrupt: {exc}") from exc
    keep_chunks(old, storage_context)
    graph = graph_store if graph_store is not None else SQLiteGraphStore()
    copy_graph(old, graph, dict(struct.doc_order), list(struct.failures))
    vectors = EmbeddedVectors()
    namespaces = [n for n in storage_context.vector_stores if n.startswith(LEGACY_PREFIX)]
    for name in namespaces:
        store = storage_context.vector_stores.pop(name)
        if isinstance(store, SimpleVectorStore):
            vectors.add(legacy_records(name[len(LEGACY_PREFIX) :], store.data, old))
    struct.graph_json, struct.doc_order, struct.failures = "", {}, []
    logger.info("converted a 0.1.0 e2rag store (%d vector namespaces)", len(namespaces))
    return graph, vectors, Conversion(storage_context.index_store, namespaces)


def keep_chunks(old: NetworkXGraphStore, storage_context: "StorageContext") -> None:
    """Put each chunk's ``TextNode`` (0.1.0 kept it in the docstore only) on its graph node, as
    today's stores do, so a converted store reads its chunks like any other."""
    for node in old.nodes(NodeKind.CHUNK):
        if CHUNK_NODE_ATTR not in node.attrs:
            found = storage_context.docstore.get_node(node.id, raise_error=False)
            if found is not None:
                node.attrs[CHUNK_NODE_ATTR] = found.to_dict()


def copy_graph(
    old: NetworkXGraphStore,
    graph: GraphStore,
    orders: dict[str, int],
    failures: list[dict[str, str]],
) -> None:
    """Write ``old`` document by document in story order; edges between documents follow the
    later one (0.1.0 stamped them so), any left over go in last."""
    doc_ids = sorted(set(old.doc_ids()) | set(orders), key=lambda d: (orders.get(d, 1 << 30), d))
    edges_by_doc: dict[str, list[GraphEdge]] = {}
    for edge in old.edges():
        edges_by_doc.setdefault(edge.doc_id, []).append(edge)
    written: set[str] = set()
    pending: list[GraphEdge] = []
    next_order = max(orders.values(), default=-1) + 1
    for doc_id in doc_ids:
        nodes = old.nodes(doc_id=doc_id)
        written.update(n.id for n in nodes)
        ready, later = [], []
        for edge in edges_by_doc.pop(doc_id, []):
            (ready if {edge.source, edge.target} <= written else later).append(edge)
        pending += later
        order = orders.get(doc_id)
        if order is None:
            order, next_order = next_order, next_order + 1
        graph.replace_doc(
            doc_id, order, nodes, ready, [f for f in failures if f["doc_id"] == doc_id]
        )
    pending += [e for edges in edges_by_doc.values() for e in edges]
    leftover = [e for e in pending if {e.source, e.target} <= written]
    if leftover:
        graph.upsert_edges(leftover)


def legacy_records(
    kind: str, data: "SimpleVectorStoreData", graph: NetworkXGraphStore
) -> list[VectorRecord]:
    """Vector records of one 0.1.0 namespace (texts from the graph, which embedded them)."""
    records = []
    for node_id, vector in data.embedding_dict.items():
        node = graph.get_node(node_id)
        meta = data.metadata_dict.get(node_id) or {}
        records.append(
            VectorRecord(
                id=node_id,
                kind=kind,
                doc_id=node.doc_id if node is not None else str(meta.get("doc_id", "")),
                text=node.text if node is not None else "",
                vector=np.asarray(vector, dtype=np.float32),
                metadata={k: meta[k] for k in ("chunk_id", "doc_order", "char_offset", "ordinal")
                          if k in meta},
            )
        )
    return records


def read_legacy_vectors(persist_dir: Path) -> dict[str, "SimpleVectorStore"]:
    """The ``e2rag_<kind>`` namespaces of a 0.1.0 persist directory, read with plain ``json``
    (llama-index's loader type-checks every float, minutes on a novel)."""
    # llama-index (heavy): see open_legacy
    from llama_index.core.vector_stores.simple import SimpleVectorStore, SimpleVectorStoreData

    stores = {}
    for path in sorted(persist_dir.glob(f"{LEGACY_PREFIX}*{LEGACY_SUFFIX}")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        data = SimpleVectorStoreData(
            embedding_dict=dict(raw.get("embedding_dict") or {}),
            text_id_to_ref_doc_id=dict(raw.get("text_id_to_ref_doc_id") or {}),
            metadata_dict=dict(raw.get("metadata_dict") or {}),
        )
        stores[path.name[: -len(LEGACY_SUFFIX)]] = SimpleVectorStore(data=data)
    return stores


def legacy_storage(persist_dir: Path, fast: bool = False) -> "StorageContext":
    """The storage context of the 0.1.0 store in ``persist_dir``, which llama-index's
    ``load_index_from_storage`` opens (converting it in memory). ``fast`` reads the old vector
    files with ``read_legacy_vectors`` (for ``e2rag migrate``, which saves at once)."""
    # llama-index (heavy): see open_legacy
    from llama_index.core.storage.storage_context import StorageContext
    from llama_index.core.vector_stores.simple import SimpleVectorStore

    if not fast:
        return StorageContext.from_defaults(persist_dir=str(persist_dir))
    return StorageContext.from_defaults(
        persist_dir=str(persist_dir),
        vector_stores={**read_legacy_vectors(Path(persist_dir)), "default": SimpleVectorStore()},
    )
