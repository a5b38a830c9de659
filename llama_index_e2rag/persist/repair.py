"""``e2rag repair``'s steps on the files of a store: what is rebuilt from the graph alone.

The graph is the record (``storage``), so llama-index's ``docstore.json`` comes back from the
chunks the graph carries, ``index_store.json`` from the settings the graph committed, the pointer
and the unused vector-store files are rewritten, and documents saved before records existed get
theirs. What needs an embedding or an extractor (re-embedding lost vectors, extracting changed or
lost documents again) is in ``maintenance.repair``, which runs these steps in order.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from llama_index.core.schema import TextNode
from llama_index.core.storage.docstore.simple_docstore import SimpleDocumentStore
from llama_index.core.storage.index_store.simple_index_store import SimpleIndexStore

from llama_index_e2rag.disk.checksums import E2RAG_DIR, Checksums
from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.graph.base import DocRows
from llama_index_e2rag.persist import legacy
from llama_index_e2rag.persist.check import StoreHealth
from llama_index_e2rag.persist.llama_files import write_checked
from llama_index_e2rag.persist.ownership import Kind, inspect, mark, no_store
from llama_index_e2rag.persist.storage import INDEX_META, new_save_id, write_pointer
from llama_index_e2rag.persist.struct import E2RAGIndexStruct
from llama_index_e2rag.schema import NodeKind, embeddable
from llama_index_e2rag.stores.port import CHUNK_NODE_ATTR


@dataclass
class RepairReport:
    before: StoreHealth
    actions: list[str] = field(default_factory=list)
    after: Optional[StoreHealth] = None


def check_repairable(persist_dir: Path) -> None:
    """Refuse, with the fix, a folder repair must not write into: not one of our stores (repair
    writes only into our own), a 0.1.0 store (``e2rag migrate`` converts it) or one without
    its ``e2rag/`` folder."""
    if inspect(persist_dir).kind is not Kind.STORE:
        raise no_store(persist_dir, "nothing to repair")
    if legacy.is_legacy(persist_dir):  # (an e2rag/ folder beside it is a conversion not committed)
        raise E2RAGError(f"{persist_dir} holds a llama-index-e2rag 0.1.0 store; convert it "
                         f"with: e2rag migrate --store {persist_dir}")
    if not (persist_dir / E2RAG_DIR).is_dir():
        raise E2RAGError(f"{persist_dir} holds no e2rag store (no {E2RAG_DIR}/ folder)")


def record_documents(graph: Any, report: RepairReport) -> None:
    """Give documents saved before records existed their record (rewriting their own rows).

    A document's edges to other documents go as links, written after the whole batch, so a
    link between two re-recorded documents survives; links other documents own into a
    re-recorded one are removed with its old rows (the report counts them), and their owners
    re-sealed."""
    records, orders = graph.doc_records(), graph.doc_orders()
    missing = [d for d in orders if d not in records]
    failures = graph.failures() if missing else []
    docs, lost, rerecorded = [], set(), set(missing)
    for doc_id in missing:
        nodes = graph.nodes(doc_id=doc_id)
        lost.update((e.source, e.target, e.key) for n in nodes for e in graph.edges_of(n.id)
                    if e.doc_id not in rerecorded)
        counts: dict[str, int] = {}
        for node in nodes:
            if embeddable(node):
                counts[node.kind.value] = counts.get(node.kind.value, 0) + 1
        ids = {n.id for n in nodes}
        edges, links = [], []
        for edge in graph.edges(doc_id=doc_id):
            (edges if edge.source in ids and edge.target in ids else links).append(edge)
        own = [f for f in failures if f["doc_id"] == doc_id]
        docs.append(DocRows(doc_id, orders[doc_id], nodes, edges, own,
                            {"hash": None, "vectors": counts}, links))
    if docs:
        graph.commit_docs(docs)
        report.actions.append(f"recorded {len(docs)} document(s) saved before records existed")
    if lost:
        report.actions.append(f"dropped {len(lost)} link(s) other documents held into them "
                              "(re-index those documents to restore them)")


def count_documents(graph: Any, report: RepairReport) -> None:
    """Count the rows of documents committed before records counted them, once: ``e2rag
    show`` then adds up records instead of reading every row."""
    records = graph.doc_records()
    counted = graph.count_records(d for d, r in records.items() if "counts" not in r)
    if counted:
        report.actions.append(f"counted the rows of {len(counted)} document(s) in their records")


def rewrite_llama_files(graph: Any, persist_dir: Path, report: RepairReport) -> None:
    """docstore.json, index_store.json, the pointer and the unused vector-store files, from the
    graph, where they are damaged or missing."""
    # what the check before the repair found (the steps before this one touch no such file)
    damaged = " ".join(report.before.problems + report.before.notes)
    home = (persist_dir / E2RAG_DIR).resolve()
    if "docstore.json" in damaged:
        docstore = SimpleDocumentStore()
        records = graph.doc_records()
        for doc_id in graph.doc_orders():
            chunks = [TextNode.from_dict(n.attrs[CHUNK_NODE_ATTR])
                      for n in graph.nodes(NodeKind.CHUNK, doc_id) if CHUNK_NODE_ATTR in n.attrs]
            docstore.add_documents(chunks, allow_update=True)
            doc_hash = (records.get(doc_id) or {}).get("hash")
            if doc_hash:
                docstore.set_document_hash(doc_id, doc_hash)
        docstore.persist(str(persist_dir / "docstore.json"))
        _checked(persist_dir, "docstore.json")
        report.actions.append("rebuilt docstore.json from the graph's chunks")
    if "index_store.json" in damaged:
        stored = graph.get_meta(INDEX_META)
        if stored is None:
            raise E2RAGError(
                f"{persist_dir / 'index_store.json'} is damaged and this store's graph predates "
                "the settings it now records; index the documents again"
            )
        meta = json.loads(stored)
        struct = E2RAGIndexStruct(index_id=meta["index_id"], config=meta.get("config") or {},
                                  llm_stats=meta.get("llm_stats") or {})
        index_store = SimpleIndexStore()
        index_store.add_index_struct(struct)
        index_store.persist(str(persist_dir / "index_store.json"))
        _checked(persist_dir, "index_store.json")
        report.actions.append("rebuilt index_store.json from the settings in the graph")
    if "graph_store.json" in damaged:
        write_pointer(persist_dir / "graph_store.json", home, new_save_id())
        report.actions.append("rewrote graph_store.json (the pointer to e2rag/)")
    empty = json.dumps({"embedding_dict": {}, "text_id_to_ref_doc_id": {}, "metadata_dict": {}})
    for name in ("default__vector_store.json", "image__vector_store.json"):
        if name in damaged:
            write_checked(str(persist_dir / name), empty)
            report.actions.append(f"rewrote {name} (unused by e2rag; empty)")


def _checked(persist_dir: Path, name: str) -> None:
    """Register a file llama-index just wrote (through its own, non-atomic writer)."""
    path = persist_dir / name
    Checksums(persist_dir).write(name, path.read_bytes())


def set_aside(persist_dir: Path) -> Path:
    """Rename the damaged ``e2rag/`` folder out of the way (never over a name already there)
    and mark the store ours again (the marker went with the old folder); returns where it is."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = persist_dir / f"{E2RAG_DIR}.damaged-{stamp}"
    n = 1
    while aside.exists() or aside.is_symlink():
        aside, n = persist_dir / f"{E2RAG_DIR}.damaged-{stamp}-{n}", n + 1
    (persist_dir / E2RAG_DIR).rename(aside)
    mark(persist_dir)
    return aside
