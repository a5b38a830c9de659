"""Stores written by llama-index-e2rag 0.1.0: read them into today's stores without loss.

0.1.0 kept the graph as a JSON string inside the index struct (with the document orders and
extraction failures beside it) and the vectors in one ``SimpleVectorStore`` per node kind
(namespaces ``e2rag_<kind>``). Loading such a store converts it in memory; the next ``persist``
writes the new layout and removes the old vector files (``Conversion``: a process killed at any
moment leaves the 0.1.0 store or the converted one, whole). ``e2rag migrate --store DIR`` does
both in one step and reads the old vector files directly (``read_legacy_vectors``), which is
much faster than llama-index's own loader on large files.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
from llama_index.core.storage.index_store.types import BaseIndexStore
from llama_index.core.storage.index_store.types import DEFAULT_PERSIST_FNAME as INDEX_STORE_FILE
from llama_index.core.storage.storage_context import StorageContext
from llama_index.core.vector_stores.simple import SimpleVectorStore, SimpleVectorStoreData

from llama_index_e2rag.disk.checksums import E2RAG_DIR, file_sum
from llama_index_e2rag.errors import CorruptGraphError, E2RAGError
from llama_index_e2rag.disk.files import atomic_write_text
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.graph.networkx_store import NetworkXGraphStore
from llama_index_e2rag.graph.sqlite_store import SQLiteGraphStore
from llama_index_e2rag.schema import GraphEdge
from llama_index_e2rag.stores.port import Stores
from llama_index_e2rag.vectors.base import VectorRecord
from llama_index_e2rag.vectors.embedded import EmbeddedVectors

if TYPE_CHECKING:
    from llama_index_e2rag.persist.storage import StoresSlot

logger = logging.getLogger(__name__)

#: 0.1.0's vector namespaces were ``e2rag_<kind>``.
LEGACY_PREFIX = "e2rag_"
LEGACY_SUFFIX = "__vector_store.json"
#: Inside ``e2rag/`` while a conversion is under way: the 0.1.0 files it removes once committed.
RECORD_FILE = "migration.json"
RECORD_FORMAT = "llama-index-e2rag/migration"


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

    def hook(self, storage_context: StorageContext) -> None:
        """Have the storage context's docstore and index store commit this conversion before
        they write their files (``llama_files.AtomicKVStore``)."""
        from llama_index_e2rag.persist.llama_files import AtomicKVStore

        slot = storage_context.graph_store
        for store in (storage_context.docstore, storage_context.index_store):
            kvstore = getattr(store, "_kvstore", None)
            if isinstance(kvstore, AtomicKVStore):
                kvstore.before_persist = slot.convert  # type: ignore[attr-defined]

    def commit(self, slot: "StoresSlot", folder: Path) -> None:
        """Write the converted store into ``folder`` in the order above (a conversion in
        place records 0.1.0's files; one into another folder has none to remove)."""
        from llama_index_e2rag.persist.load import is_legacy
        from llama_index_e2rag.persist.storage import DEFAULT_GRAPH_STORE_FILE

        old = {}
        if is_legacy(folder):
            old = {f"{n}{LEGACY_SUFFIX}": file_sum(folder / f"{n}{LEGACY_SUFFIX}")
                   for n in self.namespaces if (folder / f"{n}{LEGACY_SUFFIX}").is_file()}
        slot.save_stores(folder / DEFAULT_GRAPH_STORE_FILE)
        if old:
            atomic_write_text(folder / E2RAG_DIR / RECORD_FILE,
                              json.dumps({"format": RECORD_FORMAT, "remove": old}))
        self.index_store.persist(str(folder / INDEX_STORE_FILE))
        finish_conversion(folder)


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


def finish_conversion(folder: Path) -> None:
    """Remove what a committed conversion recorded (step 4 of ``Conversion``): each file still
    as it was converted, then the record. A record beside a 0.1.0 index store is of a
    conversion killed before its commit: left for the next one to write over."""
    from llama_index_e2rag.persist.load import is_legacy

    old = recorded(folder)
    if not old or is_legacy(folder):
        return
    for name, sums in old.items():
        path = folder / name
        if path.is_file() and file_sum(path) == sums:
            path.unlink()
    (folder / E2RAG_DIR / RECORD_FILE).unlink(missing_ok=True)


def legacy_stores(
    struct: Any, storage_context: StorageContext, graph_store: Optional[GraphStore] = None
) -> tuple[Stores, str, Conversion]:
    """Today's stores holding everything of a 0.1.0 index struct and its vector namespaces,
    and the conversion that the next persist commits.

    The struct's graph fields are emptied (the stores hold them now) and the old namespaces
    leave the storage context, so the next persist writes only the new layout.
    """
    from llama_index_e2rag.persist.storage import EMBEDDED

    try:
        old = NetworkXGraphStore.from_dict(
            json.loads(struct.graph_json), source="the e2rag graph in the index store"
        )
    except json.JSONDecodeError as exc:
        raise CorruptGraphError(f"the e2rag graph in the index store is corrupt: {exc}") from exc
    graph = graph_store if graph_store is not None else SQLiteGraphStore()
    copy_graph(old, graph, dict(struct.doc_order), list(struct.failures))
    vectors = EmbeddedVectors()
    namespaces = [n for n in storage_context.vector_stores if n.startswith(LEGACY_PREFIX)]
    for name in namespaces:
        store = storage_context.vector_stores.pop(name)
        if isinstance(store, SimpleVectorStore):
            vectors.add(legacy_records(name[len(LEGACY_PREFIX) :], store.data, old))
    struct.graph_json, struct.doc_order, struct.failures = "", {}, []
    struct.config["vectors"] = EMBEDDED
    logger.info("converted a 0.1.0 e2rag store (%d vector namespaces)", len(namespaces))
    conversion = Conversion(storage_context.index_store, namespaces)
    return Stores(graph, vectors, storage_context.docstore), EMBEDDED, conversion


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
    kind: str, data: SimpleVectorStoreData, graph: NetworkXGraphStore
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


def read_legacy_vectors(persist_dir: Path) -> dict[str, SimpleVectorStore]:
    """The ``e2rag_<kind>`` namespaces of a 0.1.0 persist directory, read with plain ``json``
    (llama-index's loader type-checks every float, minutes on a novel)."""
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


def migrate_store(persist_dir: Path) -> dict[str, dict[str, int]]:
    """Convert a 0.1.0 persist directory in place, or finish a conversion killed after its
    commit (``Conversion``); returns node counts and vectors per kind."""
    from llama_index.core import load_index_from_storage

    from llama_index_e2rag.index import E2RAGIndex
    from llama_index_e2rag.persist.load import is_legacy, load_index

    persist_dir = Path(persist_dir)
    if is_legacy(persist_dir):
        storage = StorageContext.from_defaults(
            persist_dir=str(persist_dir),
            vector_stores={**read_legacy_vectors(persist_dir), "default": SimpleVectorStore()},
        )
        index = load_index_from_storage(storage)
    elif recorded(persist_dir):
        index = load_index(persist_dir)  # converted; its persist removes what is left of 0.1.0
    else:
        raise E2RAGError(
            f"{persist_dir} holds no llama-index-e2rag 0.1.0 store (its index_store.json keeps "
            "no 0.1.0 graph) and no unfinished conversion of one"
        )
    if not isinstance(index, E2RAGIndex):
        raise E2RAGError(f"{persist_dir} holds a {type(index).__name__}, not an e2rag index")
    index.storage_context.persist(str(persist_dir))
    vectors = index.stores.vectors
    kinds = {k for k in index.graph_store.counts()["nodes"]}
    return {
        "nodes": index.graph_store.counts()["nodes"],
        "vectors": {k: vectors.count(k) for k in sorted(kinds) if vectors.count(k)},
    }
