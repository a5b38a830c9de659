"""The index's writes: insert documents or nodes, add layers, delete, each committed as one write.

Phase 1 computes everything in memory (chunks, extraction, document builders, embeddings);
phase 2 commits each batch under the write lock, with the build settings and LLM spending the
index struct records (``persist.storage.index_meta``), then hands the struct to llama-index's
index store. ``E2RAGIndex`` owns one ``IndexWriter`` over its stores and models; inserts may run
concurrently (distinct story orders, one commit at a time).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Optional, Sequence

from llama_index.core.schema import BaseNode, Document, TextNode
from llama_index.core.storage.index_store.types import BaseIndexStore

from llama_index_e2rag.extract.base import DOC_ORDER_KEY, chunk_doc_id, hide_internal_keys
from llama_index_e2rag.extract.builders import DocumentBuilder, builder_configs
from llama_index_e2rag.extract.chunking import chunk_document
from llama_index_e2rag.ingest.layers import LayersAdded, missing_builders, stage_layers
from llama_index_e2rag.ingest.models import IndexModels
from llama_index_e2rag.ingest.embedding import StagedVectors
from llama_index_e2rag.ingest.pipeline import (
    DocOrders,
    StagedDoc,
    WriteLock,
    add_stats,
    document_write,
    link_staged,
)
from llama_index_e2rag.ingest.progress import steps_bar
from llama_index_e2rag.ingest.ray_workers import RayIngest, astage_on_ray
from llama_index_e2rag.ingest.stage import Group, astage_batch
from llama_index_e2rag.ingest.staging import chunk_words, discard, staging_graph, words_of
from llama_index_e2rag.ingest.validation import validate_nodes
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.heap import give_back
from llama_index_e2rag.persist.storage import index_meta
from llama_index_e2rag.persist.struct import E2RAGIndexStruct
from llama_index_e2rag.stores.port import Stores
from llama_index_e2rag.stores.same_text import TextClaims

__all__ = ["IndexWriter"]

logger = logging.getLogger(__name__)

class IndexWriter:
    """Writes into ``stores`` with ``models``; ``struct`` gives the index struct in use (the
    index may replace it) and ``index_store`` is llama-index's, which ``persist`` saves."""

    def __init__(
        self,
        stores: Stores,
        models: IndexModels,
        doc_builders: Sequence[DocumentBuilder],
        passage_words: int,
        vectors_label: str,
        struct: Callable[[], E2RAGIndexStruct],
        index_store: Callable[[], BaseIndexStore],
        show_progress: bool = False,
        ray: Optional[RayIngest] = None,
    ) -> None:
        self.stores = stores
        self.models = models
        self.doc_builders = list(doc_builders)
        self.passage_words = passage_words
        self.vectors_label = vectors_label
        self.show_progress = show_progress
        #: where inserts of documents stage them: ``None`` here, else on Ray (``ray_workers``)
        self.ray = ray
        self._struct = struct
        self._index_store = index_store
        self._write_lock = WriteLock()
        self._stats_synced: dict[str, Any] = {}
        self.doc_orders = DocOrders(stores.graph.doc_orders)
        self._text_claims = TextClaims(stores.graph.doc_records)

    # -- insertion ------------------------------------------------------------------------------
    async def abuild(
        self,
        documents: Sequence[Document],
        allow_duplicates: bool,
        ray: Optional[RayIngest] = None,
    ) -> None:
        """The first build of a new index (``from_documents``): if it fails nothing was
        committed, and the empty struct leaves the index store as it was."""
        try:
            await self.ainsert_documents(documents, allow_duplicates, ray)
        except BaseException:
            self._index_store().delete_index_struct(self._struct().index_id)
            raise

    async def ainsert_documents(
        self,
        documents: Sequence[Document],
        allow_duplicates: bool,
        ray: Optional[RayIngest] = None,
    ) -> None:
        """Skip the same text twice (unless allowed), chunk, extract, build, embed (here, or on
        Ray workers: ``ray``, else the writer's ``ray``); then commit the (validated) documents
        as one."""
        ray = ray or self.ray
        async with self.stores.locks.awriter():
            kept, duplicates, claimed = self._text_claims.claim(documents, allow_duplicates)
            for duplicate in duplicates:
                logger.warning(duplicate.notice())
            if duplicates and not kept:
                return  # nothing new: no build, no commit
            orders: dict[str, int] = {}
            try:
                orders = self.doc_orders.reserve([doc.id_ for doc in kept])
                if ray is not None and kept:
                    await self._aindex_on_ray(ray, kept, orders)
                    return
                splitter = self.models.splitter
                groups = [
                    (doc, doc.id_, orders[doc.id_], chunk_document(splitter, doc, orders[doc.id_]))
                    for doc in kept
                ]
                await self._aindex_groups(groups)
            finally:
                self.doc_orders.release(orders)
                self._text_claims.release(claimed)

    async def ainsert_nodes(self, nodes: Sequence[BaseNode]) -> None:
        """Index pre-chunked nodes, grouped by their source document (their ids are kept)."""
        validate_nodes(nodes)
        if self.doc_builders and nodes:
            raise ValueError(
                "document builders need whole documents; index with from_documents() or "
                "insert(document) instead of nodes"
            )
        by_doc: dict[str, list[TextNode]] = {}
        for node in nodes:
            if not isinstance(node, TextNode):
                raise TypeError(f"E2RAGIndex indexes TextNodes, got {type(node).__name__}")
            by_doc.setdefault(chunk_doc_id(node), []).append(node)
        async with self.stores.locks.awriter():
            orders = self.doc_orders.reserve(list(by_doc))
            try:
                for doc_id, chunks in by_doc.items():
                    for chunk in chunks:
                        chunk.metadata[DOC_ORDER_KEY] = orders[doc_id]
                        hide_internal_keys(chunk)
                await self._aindex_groups(
                    [(None, doc_id, orders[doc_id], chunks) for doc_id, chunks in by_doc.items()]
                )
            finally:
                self.doc_orders.release(orders)

    async def _aindex_groups(self, groups: Sequence[Group]) -> None:
        """Phase 1 stages everything (``staging``: a long document on disk, filled a group of
        chunks at a time as extraction goes); phase 2 commits the batch, one build at a time.
        The staging graphs are deleted however the build ends."""
        await self.acheck_dim()
        words = {doc_id: chunk_words(chunks) for _, doc_id, _, chunks in groups}
        graphs = {
            doc_id: staging_graph(words_of(doc, words[doc_id])) for doc, doc_id, _, _ in groups
        }
        try:
            await self._astage_and_commit(groups, graphs, words)
        finally:
            for graph in graphs.values():
                discard(graph)

    async def _aindex_on_ray(
        self, ray: RayIngest, documents: Sequence[Document], orders: dict[str, int]
    ) -> None:
        """Phase 1 on Ray workers, one document per call; phase 2 here, as any build's."""
        await self.acheck_dim()
        batch = await astage_on_ray(
            ray,
            self.models,
            self.doc_builders,
            self.passage_words,
            documents,
            orders,
            self.show_progress,
        )
        try:
            add_stats(self._struct().llm_stats, batch.llm_stats, {})
            await self._acommit_staged(batch.staged, batch.vectors)
        finally:
            for stage in batch.staged:
                discard(stage.graph)

    async def _astage_and_commit(
        self, groups: Sequence[Group], graphs: dict[str, GraphStore], words: dict[str, list[int]]
    ) -> None:
        staged, vectors = await astage_batch(
            groups,
            graphs,
            words,
            self.models,
            self.doc_builders,
            self.passage_words,
            self.show_progress,
        )
        await self._acommit_staged(staged, vectors)

    async def _acommit_staged(self, staged: list[StagedDoc], vectors: StagedVectors) -> None:
        """Phase 2, wherever phase 1 ran (here or on Ray workers): link the batch to the graph
        as committed, then commit it as one write."""
        async with self._write_lock.hold():
            # links join the batch to the graph as committed now, so they run under the lock
            await link_staged(
                staged, self.doc_builders, self.stores.graph, lambda: self.models.llm_runner
            )
            writes = [document_write(stage, vectors) for stage in staged]
            if vectors:
                self._struct().config["embed_model"] = self.models.embed_model.model_name
            await self._acommit(writes)

    async def acheck_dim(self) -> None:
        """Refuse vector storage the embedding cannot fill before extraction spends anything
        (a model's declared ``dimension``, else one probe embedding)."""
        embed_model = self.models.embed_model
        dim = getattr(embed_model, "dimension", None)
        if not isinstance(dim, int):
            dim = len(await embed_model.aget_query_embedding("dimension probe"))
        for storage in (self.stores.vectors, self.stores.vector_copy):
            if storage is not None:
                await asyncio.to_thread(storage.check_dim, dim)
        self._struct().config["dim"] = dim

    # -- layers ---------------------------------------------------------------------------------
    def add_doc_builders(self, builders: Sequence[DocumentBuilder]) -> None:
        """Run ``builders`` on later inserts too; one whose ``config_name`` is there is skipped."""
        names = {getattr(b, "config_name", None) for b in self.doc_builders}
        for builder in builders:
            name = getattr(builder, "config_name", None)
            if name is None or name not in names:
                self.doc_builders.append(builder)
            names.add(name)

    async def aadd_layers(
        self, builders: Sequence[DocumentBuilder], documents: Sequence[Document] = ()
    ) -> LayersAdded:
        """Build the layers of ``builders`` missing from every stored document (``layers``) and
        commit them as one write; the builders then run on later inserts too."""
        new = missing_builders(self.doc_builders, builders)
        if not new:
            return LayersAdded()
        await self.acheck_dim()
        async with self.stores.locks.awriter():
            await asyncio.to_thread(self.stores.sync)
            build = await stage_layers(
                self.stores,
                new,
                self.models.embed_model,
                lambda: self.models.llm_runner,
                documents,
                show_progress=self.show_progress,
            )
            async with self._write_lock.hold():
                await link_staged(
                    build.staged, new, self.stores.graph, lambda: self.models.llm_runner
                )
                before = list(self.doc_builders)
                self.doc_builders.extend(new)
                try:
                    await self._acommit(build.writes(), finish=False)
                except BaseException:
                    self.doc_builders = before
                    self.record_config()
                    raise
                await self.afinish_write()
        return build.report

    # -- deletion -------------------------------------------------------------------------------
    async def adelete_document(self, ref_doc_id: str, delete_from_docstore: bool) -> None:
        """Remove a document's chunks, graph nodes, edges and vectors (unknown ids: a warning)."""
        if ref_doc_id not in self.stores.graph.doc_orders():
            logger.warning("ref_doc_id %s not found, nothing deleted.", ref_doc_id)
            return
        async with self.stores.locks.awriter(), self._write_lock.hold():
            await self.stores.adelete_document(ref_doc_id, docstore=delete_from_docstore)
            await self.afinish_write()

    # -- the commit -----------------------------------------------------------------------------
    async def _acommit(self, writes: list[Any], finish: bool = True) -> None:
        """One commit of a batch (a crash leaves all of it or none), with the struct's settings
        and LLM spending; then the struct goes to the index store unless ``finish`` is False."""
        self.sync_llm_stats()
        self.record_config()
        with steps_bar("Writing stores", len(writes), self.show_progress):
            await self.stores.areplace_documents(writes, index_meta(self._struct()))
        give_back()  # the batch's rows are written: the next batch or read model starts lower
        if finish:
            await self.afinish_write()

    def sync_llm_stats(self) -> None:
        """Add the runner's spending since the last sync (exact even when builds overlap)."""
        runner = self.models.runner_if_built
        if runner is None:
            return
        runner.flush()
        now = runner.stats.as_dict()
        add_stats(self._struct().llm_stats, now, self._stats_synced)
        self._stats_synced = now

    def record_config(self) -> None:
        """The build settings the struct records (and each commit writes into the graph)."""
        self._struct().config.update(
            chunk_size=self.models.chunk_size,
            chunk_overlap=self.models.chunk_overlap,
            passage_words=self.passage_words,
            combined=self.models.combined,
            doc_builders=builder_configs(self.doc_builders),
            vectors=self.vectors_label,
        )

    async def afinish_write(self) -> None:
        """Hand the struct to llama-index's index store (saved by the next ``persist``)."""
        self.record_config()
        await self._index_store().async_add_index_struct(self._struct())
