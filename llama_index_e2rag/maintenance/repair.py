"""``e2rag repair``: rebuild what a damaged store lost from what is intact.

The graph is the record (``persist.storage``), so almost everything else is derived from it and
is rebuilt without an LLM: missing or damaged vectors are re-embedded from the graph's texts,
vectors no node names are dropped, llama-index's files come back from the graph
(``persist.repair``), BM25 is rebuilt on the next load. When the graph itself is lost or its rows
changed, the documents are put back together from the docstore's chunks and extracted again (the
index's extractor: with an LLM its cache in the store answers the calls already made; without
one, the offline parse). The damaged ``e2rag/`` folder is kept aside.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from llama_index.core import Document
from llama_index.core.storage.docstore.simple_docstore import SimpleDocumentStore

from llama_index_e2rag.disk.checksums import E2RAG_DIR
from llama_index_e2rag.disk.files import swap_folder
from llama_index_e2rag.embeddings import resolve_embed_model
from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.extract.base import hide_internal_keys
from llama_index_e2rag.extract.builders import restore_builders
from llama_index_e2rag.graph.networkx_store import NetworkXGraphStore
from llama_index_e2rag.graph.sqlite_store import GRAPH_FILE, SQLiteGraphStore
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.ingest import node_vectors
from llama_index_e2rag.ingest.embedding import embed_staged
from llama_index_e2rag.ingest.pipeline import vector_record
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.persist.check import changed_documents, full_check
from llama_index_e2rag.persist.index_store import read_struct
from llama_index_e2rag.persist.repair import (
    RepairReport,
    check_repairable,
    count_documents,
    record_documents,
    rewrite_llama_files,
    set_aside,
)
from llama_index_e2rag.persist.storage import VECTORS_DIR
from llama_index_e2rag.schema import embeddable
from llama_index_e2rag.vectors.embedded import EmbeddedVectors
from llama_index_e2rag.vectors.embedded_survey import survey

__all__ = ["RepairReport", "documents_from_docstore", "repair_store"]


def repair_store(
    persist_dir: Path, embed_model: Any = None, show_progress: bool = False, **index_kwargs: Any
) -> RepairReport:
    """Repair the store in ``persist_dir`` in place; the report says what was done.

    ``embed_model`` re-embeds (default: as everywhere, ending at the offline MiniLM);
    ``index_kwargs`` (e.g. ``llm=``) go to the index when documents must be extracted again.
    """
    persist_dir = Path(persist_dir)
    check_repairable(persist_dir)
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
    home = persist_dir / E2RAG_DIR
    graph = SQLiteGraphStore.open_existing(home / GRAPH_FILE)
    try:
        record_documents(graph, report)
        count_documents(graph, report)
        _repair_vectors(graph, home / VECTORS_DIR, embed_model, show_progress, report)
        rewrite_llama_files(graph, persist_dir, report)
        changed = changed_documents(graph)
    finally:
        graph.close()
    shutil.rmtree(home / "lexical", ignore_errors=True)  # derived; rebuilt on the next load
    if changed:
        _reextract(persist_dir, changed, embed_model, show_progress, report, index_kwargs)


def _repair_vectors(
    graph: Any, folder: Path, embed_model: Any, show_progress: bool, report: RepairReport
) -> None:
    """Keep the intact vector files, re-embed the nodes that lack a vector, drop orphans."""
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
        target = Path(tempfile.mkdtemp(prefix=f".{folder.name}.new.", dir=folder.parent))
        try:
            vectors.persist(target)
            swap_folder(target, folder)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
    elif survey(folder).doc_counts is None:  # saved before the manifest counted vectors
        vectors.persist(folder)  # in place: only the manifest is rewritten
        report.actions.append("counted the vectors of each document in the vector manifest")


# -- re-extraction ---------------------------------------------------------------------------
def documents_from_docstore(persist_dir: Path, doc_ids: Optional[list[str]] = None) -> list[Any]:
    """The documents put back together from their chunks' text and offsets (in docstore.json)."""
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
    documents = documents_from_docstore(persist_dir)
    try:
        config = (read_struct(persist_dir) or {}).get("config") or {}
    except (OSError, ValueError):
        config = {}
    aside = set_aside(persist_dir)
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
