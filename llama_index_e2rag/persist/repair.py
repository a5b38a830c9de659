"""``e2rag repair``: rebuild what a damaged store lost from what is intact.

The graph is the record (``persistence``), so almost everything else is derived from it and is
rebuilt without an LLM: missing or damaged vectors are re-embedded from the graph's texts,
vectors no node names are dropped, llama-index's ``docstore.json`` comes back from the chunks the
graph carries, ``index_store.json`` from the settings the graph committed, the pointer and the
unused vector-store files are rewritten, BM25 is rebuilt on the next load. When the graph itself
is lost or its rows changed, the documents are put back together from the docstore's chunks and
extracted again (the index's extractor: with an LLM its cache in the store answers the calls
already made; without one, the offline parse). The damaged ``e2rag/`` folder is kept aside.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from llama_index_e2rag.disk.checksums import E2RAG_DIR, Checksums
from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.persist.check import StoreHealth, changed_documents, full_check


@dataclass
class RepairReport:
    before: StoreHealth
    actions: list[str] = field(default_factory=list)
    after: Optional[StoreHealth] = None


def repair_store(
    persist_dir: Path, embed_model: Any = None, show_progress: bool = False, **index_kwargs: Any
) -> RepairReport:
    """Repair the store in ``persist_dir`` in place; the report says what was done.

    ``embed_model`` re-embeds (default: as everywhere, ending at the offline MiniLM);
    ``index_kwargs`` (e.g. ``llm=``) go to the index when documents must be extracted again.
    """
    from llama_index_e2rag.persist.load import is_legacy, no_store
    from llama_index_e2rag.persist.ownership import Kind, inspect

    persist_dir = Path(persist_dir)
    if inspect(persist_dir).kind is not Kind.STORE:  # repair writes only into our own stores
        raise no_store(persist_dir, "nothing to repair")
    if is_legacy(persist_dir):  # (an e2rag/ folder beside it is a conversion not committed)
        raise E2RAGError(f"{persist_dir} holds a llama-index-e2rag 0.1.0 store; convert it "
                         f"with: e2rag migrate --store {persist_dir}")
    if not (persist_dir / E2RAG_DIR).is_dir():
        raise E2RAGError(f"{persist_dir} holds no e2rag store (no {E2RAG_DIR}/ folder)")
    report = RepairReport(before=full_check(persist_dir))
    if not report.before.graph_usable:
        _rebuild_from_docstore(persist_dir, embed_model, show_progress, report, index_kwargs)
    else:
        _repair_around_graph(persist_dir, embed_model, show_progress, report, index_kwargs)
    report.after = full_check(persist_dir)
    return report


# -- the graph survived -------------------------------------------------------------------------
def _repair_around_graph(
    persist_dir: Path, embed_model: Any, show_progress: bool, report: RepairReport,
    index_kwargs: dict[str, Any],
) -> None:
    from llama_index_e2rag.graph.sqlite_store import GRAPH_FILE, SQLiteGraphStore
    from llama_index_e2rag.persist.storage import VECTORS_DIR

    home = persist_dir / E2RAG_DIR
    graph = SQLiteGraphStore.open_existing(home / GRAPH_FILE)
    try:
        _record_documents(graph, report)
        _repair_vectors(graph, home / VECTORS_DIR, embed_model, show_progress, report)
        _rewrite_llama_files(graph, persist_dir, report)
        changed = changed_documents(graph)
    finally:
        graph.close()
    shutil.rmtree(home / "lexical", ignore_errors=True)  # derived; rebuilt on the next load
    if changed:
        _reextract(persist_dir, changed, embed_model, show_progress, report, index_kwargs)


def _record_documents(graph: Any, report: RepairReport) -> None:
    """Give documents saved before records existed their record (rewriting their own rows).

    A document's edges to other documents go as links, written after the whole batch, so a
    link between two re-recorded documents survives; links other documents own into a
    re-recorded one are removed with its old rows (the report counts them), and their owners
    re-sealed."""
    from llama_index_e2rag.graph.base import DocRows
    from llama_index_e2rag.ingest.pipeline import embeddable

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


def _repair_vectors(
    graph: Any, folder: Path, embed_model: Any, show_progress: bool, report: RepairReport
) -> None:
    """Keep the intact vector files, re-embed the nodes that lack a vector, drop orphans."""
    import asyncio

    from llama_index_e2rag.ingest import node_vectors
    from llama_index_e2rag.embeddings import resolve_embed_model
    from llama_index_e2rag.graph.networkx_store import NetworkXGraphStore
    from llama_index_e2rag.ingest.pipeline import embed_staged, embeddable, vector_record
    from llama_index_e2rag.vectors.embedded import EmbeddedVectors

    vectors = EmbeddedVectors.open(folder, salvage=True)
    if vectors.damaged:
        report.actions.append(f"left out {len(vectors.damaged)} damaged vector file(s)")
    have = vectors.ids()
    wanted: set[str] = set()
    lacking: dict[str, list] = {}  # document -> all its nodes, where a vector is missing
    for doc_id in graph.doc_orders():
        nodes = graph.nodes(doc_id=doc_id)
        embedded = [n.id for n in nodes if embeddable(n)]
        wanted.update(embedded)
        if any(i not in have for i in embedded):
            lacking[doc_id] = nodes
    orphans = sorted(have - wanted)
    if orphans:
        vectors.delete_ids(orphans)
        report.actions.append(f"dropped {len(orphans)} vector(s) no graph node names")
    if lacking:
        model = resolve_embed_model(embed_model)
        added = 0
        for doc_id, nodes in lacking.items():
            staging = NetworkXGraphStore()
            staging.upsert_nodes(nodes)
            staging.upsert_edges(e for e in graph.edges(doc_id=doc_id)
                                 if staging.has_node(e.source) and staging.has_node(e.target))
            staged = asyncio.run(embed_staged(model, [staging], show_progress))
            records = [vector_record(n, node_vectors.vector(n, staging, staged.of))
                       for n in staging.nodes() if embeddable(n) and n.id not in have]
            vectors.add(records)
            added += len(records)
        report.actions.append(
            f"re-embedded {added} node(s) of {len(lacking)} document(s) with {model.model_name}"
        )
    if vectors.damaged or orphans or lacking:
        import tempfile

        from llama_index_e2rag.disk.files import swap_folder

        target = Path(tempfile.mkdtemp(prefix=f".{folder.name}.new.", dir=folder.parent))
        try:
            vectors.persist(target)
            swap_folder(target, folder)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise


def _rewrite_llama_files(graph: Any, persist_dir: Path, report: RepairReport) -> None:
    """docstore.json, index_store.json, the pointer and the unused vector-store files, from the
    graph, where they are damaged or missing."""
    from llama_index.core.storage.docstore.simple_docstore import SimpleDocumentStore
    from llama_index.core.storage.index_store.simple_index_store import SimpleIndexStore

    from llama_index_e2rag.index import E2RAGIndexStruct
    from llama_index_e2rag.persist.llama_files import write_checked
    from llama_index_e2rag.persist.storage import INDEX_META, new_save_id, write_pointer
    from llama_index_e2rag.stores.port import CHUNK_NODE_ATTR
    from llama_index_e2rag.schema import NodeKind

    # what the check before the repair found (the steps before this one touch no such file)
    damaged = " ".join(report.before.problems + report.before.notes)
    home = (persist_dir / E2RAG_DIR).resolve()
    if "docstore.json" in damaged:
        from llama_index.core.schema import TextNode

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


# -- re-extraction ---------------------------------------------------------------------------
def documents_from_docstore(persist_dir: Path, doc_ids: Optional[list[str]] = None) -> list[Any]:
    """The documents put back together from their chunks' text and offsets (in docstore.json)."""
    from llama_index.core import Document
    from llama_index.core.storage.docstore.simple_docstore import SimpleDocumentStore

    from llama_index_e2rag.extract.base import hide_internal_keys

    try:
        docstore = SimpleDocumentStore.from_persist_path(str(persist_dir / "docstore.json"))
    except (OSError, ValueError) as exc:
        raise E2RAGError(
            f"the graph is lost and {persist_dir / 'docstore.json'} cannot be read ({exc}): "
            "nothing is left to rebuild from; index the documents again"
        ) from exc
    documents = []
    for doc_id, info in sorted((docstore.get_all_ref_doc_info() or {}).items()):
        if doc_ids is not None and doc_id not in doc_ids:
            continue
        chunks = [docstore.get_node(n) for n in info.node_ids]
        chunks.sort(key=lambda c: c.start_char_idx or 0)
        end = max((c.end_char_idx or 0) for c in chunks) if chunks else 0
        text = [" "] * end
        for chunk in chunks:
            start = chunk.start_char_idx or 0
            text[start : start + len(chunk.text)] = chunk.text
        metadata = dict(chunks[0].metadata) if chunks else {}
        document = Document(text="".join(text).strip(), id_=doc_id, metadata=metadata)
        hide_internal_keys(document)
        documents.append(document)
    return documents


def _reextract(persist_dir: Path, doc_ids: list[str], embed_model: Any, show_progress: bool,
               report: RepairReport, index_kwargs: dict[str, Any]) -> None:
    from llama_index_e2rag.persist.load import load_index

    documents = documents_from_docstore(persist_dir, doc_ids)
    options = dict(index_kwargs, **({"embed_model": embed_model} if embed_model else {}))
    index = load_index(persist_dir, cache_dir=str(persist_dir), show_progress=show_progress,
                       **options)
    index.insert_documents(documents)
    index.storage_context.persist(str(persist_dir))
    report.actions.append(
        f"extracted {len(documents)} document(s) whose graph rows had changed again"
    )


def _rebuild_from_docstore(persist_dir: Path, embed_model: Any, show_progress: bool,
                           report: RepairReport, index_kwargs: dict[str, Any]) -> None:
    from llama_index_e2rag.extract.builders import restore_builders
    from llama_index_e2rag.index import E2RAGIndex
    from llama_index_e2rag.persist.ownership import mark
    from llama_index_e2rag.persist.info import read_struct

    documents = documents_from_docstore(persist_dir)
    try:
        config = (read_struct(persist_dir) or {}).get("config") or {}
    except (OSError, ValueError):
        config = {}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = persist_dir / f"{E2RAG_DIR}.damaged-{stamp}"
    n = 1
    while aside.exists() or aside.is_symlink():  # never over a name already there
        aside, n = persist_dir / f"{E2RAG_DIR}.damaged-{stamp}-{n}", n + 1
    (persist_dir / E2RAG_DIR).rename(aside)
    mark(persist_dir)  # still ours (checked above) with the marker gone with the old folder
    index = E2RAGIndex.from_documents(
        documents,
        embed_model=embed_model,
        chunk_size=config.get("chunk_size"),
        chunk_overlap=config.get("chunk_overlap"),
        passage_words=config.get("passage_words"),
        doc_builders=restore_builders(config.get("doc_builders") or {}),
        cache_dir=str(persist_dir),
        show_progress=show_progress,
        **index_kwargs,
    )
    index.storage_context.persist(str(persist_dir))
    extractor = ", ".join(type(e).__name__ for e in index.extractors)
    report.actions.append(
        f"rebuilt the graph of {len(documents)} document(s) from docstore.json's chunks with "
        f"{extractor}; the damaged folder is kept as {aside.name}"
    )
