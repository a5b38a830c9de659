"""``E2LightRAG``: LightRAG plus E²RAG's event layer, for new and existing deployments.

LightRAG has no plugin API, so this is a subclass overriding the seams the pipeline calls through
``self`` (patching ``lightrag.operate`` functions would never reach the pipeline, which imported
them by name):

- ``_process_extract_entities``: LightRAG's entity pass runs unchanged; its per-chunk results
  (before the cross-chunk merge) become the chunk's mentions, and our event pass runs on the same
  chunks (``layer.build_doc_layer``).
- ``initialize_storages`` / ``finalize_storages`` / ``_index_storages``: the layer's storages
  (``storage.EventLayerStore``) live and flush with LightRAG's own. With file storages the
  instance holds the workspace's OS lock from initialising to finalising
  (``workspace_lock``), so a second process (a backfill beside a running server) is refused
  instead of having its writes overwritten. Starting up logs how many documents have no layer
  (``gaps``: counted once, then followed through the doc-status and layer writes; each e2rag
  query reports it too, without a scan).
- ``adelete_by_doc_id``: also removes the document's mentions, events and edges.
- ``_upsert_doc_status_transition``: a document the pipeline marks FAILED (an extraction or
  merge failure, a cancelled pipeline) loses its layer, as it has no place in LightRAG's graph;
  retrying it rebuilds the layer from the cache.
- The ``drop`` of LightRAG's document storages (``full_docs``, ``text_chunks``, ``doc_status``)
  also drops the layer: LightRAG's clear paths (``DELETE /documents``) drop storages one by one
  with no hook of their own. Starting up forgets the layers of documents LightRAG no longer
  holds, however they went (a stock server's clear, a deleted workspace folder).
- ``aquery_llm`` / ``aquery_data``: ``mode="e2rag"`` (``QueryParam.mode`` is a ``Literal`` for
  type checkers only; LightRAG does not validate it at run time); other modes go to LightRAG.

LightRAG's own entity graph, vectors and caches are never written by us beyond the
``e2rag_*`` LLM cache entries, so the stock modes answer exactly as before.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from lightrag import LightRAG
from lightrag.base import DeletionResult, DocStatus, QueryParam
from lightrag.lightrag import _run_sync
from lightrag.prompt import PROMPTS
from lightrag.query_validation import validate_query_not_empty, validate_rag_query

from llama_index_e2rag.ranking.e2rag import EVENT_WEIGHT, MENTION_POOL

from lightrag_ext import workspace_lock
from lightrag_ext.backfill import BackfillReport, backfill_event_layer
from lightrag_ext.gaps import LayerGaps, layer_gap_message
from lightrag_ext.layer import write_stored_doc_layer
from lightrag_ext.answer import answer, no_result, user_data
from lightrag_ext.query import E2RAG_MODE, ProgressCallback, Retrieved, retrieve
from lightrag_ext.storage import EventLayerStore
from llama_index_e2rag.extract import prompts as extract_prompts  # templates built on access

if TYPE_CHECKING:
    from llama_index.core.prompts import BasePromptTemplate

logger = logging.getLogger(__name__)

#: ``metadata`` key of e2rag results: processed documents the mode could not search (no layer).
DOCUMENTS_WITHOUT_LAYER = "e2rag_documents_without_layer"


def _forking_master() -> bool:
    """Whether LightRAG runs as ``lightrag-gunicorn``'s multi-worker master (shared data set
    up for several processes before the app is built and the workers forked)."""
    from lightrag.kg import shared_storage

    return bool(getattr(shared_storage, "_is_multiprocess", False)) and (
        os.environ.get("LIGHTRAG_MAIN_PROCESS") == "1"
    )


class E2LightRAG(LightRAG):
    """A ``LightRAG`` that also builds and queries E²RAG's entity–event layer.

    Same constructor and storages as ``LightRAG``. The layer lives in the workspace
    ``"<workspace>_e2rag"`` of the configured storage backends (see ``lightrag_ext.storage``).
    """

    def __post_init__(self, addon_params: Optional[dict[str, Any]] = None) -> None:
        super().__post_init__(addon_params)
        self.event_layer = EventLayerStore(self)
        self._event_layer_ready = False
        self._workspace_lock: Optional[Path] = None
        if workspace_lock.needs_lock(self._all_storages()):
            self._workspace_lock = workspace_lock.lock_path(
                self.working_dir, self.event_layer.workspace
            )
            if _forking_master():
                # lightrag-gunicorn's master builds the instance, then forks the workers that
                # initialise it: they inherit this hold (see workspace_lock)
                self.event_layer.check_not_lightrag_workspace()
                workspace_lock.acquire(self._workspace_lock)
        self._holds_workspace = False
        self._follow_document_drops()
        self._layer_gaps = LayerGaps(self)
        #: the e2rag mode's ranking knobs (``EntityEventRetriever``'s event_weight, mention_pool)
        self.e2rag_event_weight: float = EVENT_WEIGHT
        self.e2rag_mention_pool: int = MENTION_POOL

    # -- prompts (llama-index style) ----------------------------------------------------------
    # Built on first access, so that importing lightrag_ext and building layers with the default
    # prompts (``layer.rag_prompt`` fills their texts) never import llama-index.
    @cached_property
    def event_prompt(self) -> BasePromptTemplate:
        """The event prompt, a llama-index template receiving ``{text}``; settable."""
        return extract_prompts.EVENT_EXTRACTION_PROMPT

    @cached_property
    def mention_prompt(self) -> BasePromptTemplate:
        """The fallback mention prompt, a llama-index template receiving ``{text}``; settable."""
        return extract_prompts.ENTITY_EXTRACTION_PROMPT

    def get_prompts(self) -> dict[str, BasePromptTemplate]:
        """The event prompt and the fallback mention prompt (both receive ``{text}``)."""
        return {"event_prompt": self.event_prompt, "mention_prompt": self.mention_prompt}

    def update_prompts(self, prompts: dict[str, BasePromptTemplate]) -> None:
        """Replace prompts by name; answers are cached per prompt text, so new ones re-run."""
        unknown = set(prompts) - {"event_prompt", "mention_prompt"}
        if unknown:
            raise ValueError(
                f"unknown prompt names {sorted(unknown)}; known: event_prompt, mention_prompt"
            )
        for name, prompt in prompts.items():
            setattr(self, name, prompt)

    # -- storage lifecycle ------------------------------------------------------------------
    async def initialize_storages(self) -> None:
        if self._event_layer_ready:
            await super().initialize_storages()
            return
        self._hold_workspace()
        try:
            await super().initialize_storages()
        except BaseException:
            self._release_workspace()  # nothing was opened, so nothing will be flushed
            raise
        await self.event_layer.initialize()
        self._event_layer_ready = True
        await self._forget_layers_of_missing_documents()
        await self._report_layer_gaps(logging.WARNING)

    async def finalize_storages(self) -> None:
        try:
            if self._event_layer_ready:
                await self.event_layer.finalize()
                self._event_layer_ready = False
            await super().finalize_storages()
        finally:
            self._layer_gaps.forget()
            self._release_workspace()  # after LightRAG's last flush

    def _all_storages(self) -> list[Any]:
        return [
            self.full_docs,
            self.doc_status,
            self.chunks_vdb,
            self.chunk_entity_relation_graph,
        ] + self.event_layer.storages()

    def _hold_workspace(self) -> None:
        """Take the workspace's OS lock (file storages only); ``WorkspaceBusyError`` if another
        process holds it. The layer's folder is checked first, so that the lock file is never
        created in a LightRAG workspace that happens to bear the layer's name."""
        if self._workspace_lock is None or self._holds_workspace:
            return
        self.event_layer.check_not_lightrag_workspace()
        workspace_lock.acquire(self._workspace_lock)
        self._holds_workspace = True

    def _release_workspace(self) -> None:
        if self._workspace_lock is not None and self._holds_workspace:
            workspace_lock.release(self._workspace_lock)
            self._holds_workspace = False

    async def _report_layer_gaps(self, level: int) -> int:
        """Log how many processed documents the e2rag mode cannot find (no complete layer) and
        how to build their layer; the count (``gaps``: counted at start-up, then followed, so
        a query pays no scan)."""
        missing, total = await self._layer_gaps.count()
        if missing:
            logger.log(level, layer_gap_message(missing, total))
        return missing

    def _index_storages(self) -> list:
        return super()._index_storages() + self.event_layer.storages()

    def _follow_document_drops(self) -> None:
        """Make dropping any of LightRAG's document storages drop the layer too.

        The storages are this instance's own objects, so wrapping their ``drop`` reaches every
        caller (the server's clear route holds them, not us). The first failure is reported in
        LightRAG's ``drop`` result shape.
        """
        for storage in (self.full_docs, self.text_chunks, self.doc_status):
            stock_drop = storage.drop

            async def drop_with_layer(stock_drop=stock_drop) -> dict[str, str]:
                result = await stock_drop()
                layer = await self.event_layer.drop()
                return result if layer["status"] == "success" else layer

            storage.drop = drop_with_layer

    async def _forget_layers_of_missing_documents(self) -> None:
        """Delete the layers of documents LightRAG no longer holds or holds as FAILED; when it
        holds no document at all, drop the whole layer (with any nodes an interrupted write
        left)."""
        doc_ids = await self.event_layer.doc_ids()
        if not doc_ids:
            return
        counts = await self.doc_status.get_all_status_counts()
        if not counts.get("all", sum(counts.values())):
            await self.event_layer.drop()
            logger.info("e2rag: LightRAG holds no documents; dropped the event layer")
            return
        records = await self.doc_status.get_by_ids(doc_ids)
        gone = [
            doc_id
            for doc_id, record in zip(doc_ids, records)
            if not record or record.get("status") == DocStatus.FAILED
        ]
        for doc_id in gone:
            await self.event_layer.delete_doc(doc_id)
        if gone:
            logger.info("e2rag: forgot the layers of %d documents LightRAG lost", len(gone))

    async def _upsert_doc_status_transition(
        self,
        doc_id: str,
        status: DocStatus,
        status_doc: Any,
        file_path: str,
        *,
        ctx: Any,
        extra_fields: Optional[dict[str, Any]] = None,
        metadata_extra: Optional[dict[str, Any]] = None,
        metadata_drop: tuple[str, ...] = (),
    ) -> None:
        """LightRAG's status write; a FAILED document (failure or cancellation) loses its layer."""
        await super()._upsert_doc_status_transition(
            doc_id,
            status,
            status_doc,
            file_path,
            ctx=ctx,
            extra_fields=extra_fields,
            metadata_extra=metadata_extra,
            metadata_drop=metadata_drop,
        )
        if status == DocStatus.FAILED and self._event_layer_ready:
            await self.event_layer.delete_doc(doc_id)

    # -- indexing ---------------------------------------------------------------------------
    async def _process_extract_entities(
        self,
        chunk: dict[str, Any],
        pipeline_status: Any = None,
        pipeline_status_lock: Any = None,
        truncation_tally: Any = None,
    ) -> list:
        """LightRAG's entity pass, then the event layer of the same chunks.

        ``chunk`` is LightRAG's ``{chunk_id: chunk record}`` of one document; the entity pass
        returns one ``(entities, relations)`` pair per chunk, in that order.
        """
        results = await super()._process_extract_entities(
            chunk, pipeline_status, pipeline_status_lock, truncation_tally
        )
        records = {chunk_id: nodes for chunk_id, (nodes, _) in zip(chunk, results)}
        by_doc: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        for chunk_id, row in chunk.items():
            by_doc[row["full_doc_id"]][chunk_id] = row
        for doc_id, rows in by_doc.items():
            await self._write_layer(doc_id, rows, records)
        return results

    async def _write_layer(
        self,
        doc_id: str,
        rows: dict[str, dict[str, Any]],
        records: dict[str, Optional[dict[str, list[dict[str, Any]]]]],
    ) -> None:
        status = await self.doc_status.get_by_id(doc_id)
        layer = await write_stored_doc_layer(self, doc_id, rows, records, status)
        counts = layer.counts()
        logger.info(
            "e2rag layer of %s: %d mentions, %d events, %d edges, %d failed chunks",
            doc_id,
            counts["mentions"],
            counts["events"],
            counts["edges"],
            len(layer.failures),
        )

    async def abuild_event_layer(
        self, doc_ids: Optional[list[str]] = None, *, rebuild: bool = False
    ) -> BackfillReport:
        """Build the event layer of documents already indexed by LightRAG (no entity re-run).

        Idempotent: documents whose layer is complete are skipped unless ``rebuild``; documents
        with failed chunks are retried. ``doc_ids=None`` means every processed document.
        """
        return await backfill_event_layer(self, doc_ids, rebuild=rebuild)

    def build_event_layer(
        self, doc_ids: Optional[list[str]] = None, *, rebuild: bool = False
    ) -> BackfillReport:
        """Sync ``abuild_event_layer`` (same loop rules as LightRAG's sync wrappers)."""
        return _run_sync(
            lambda: self.abuild_event_layer(doc_ids, rebuild=rebuild),
            sync_name="build_event_layer",
            async_name="abuild_event_layer",
            owning_loop=self._owning_loop,
        )

    # -- deletion ---------------------------------------------------------------------------
    async def adelete_by_doc_id(
        self, doc_id: str, delete_llm_cache: bool = False
    ) -> DeletionResult:
        """LightRAG's deletion, then the document's mentions, events, edges (and our cache)."""
        result = await super().adelete_by_doc_id(doc_id, delete_llm_cache)
        if result.status not in ("success", "not_found"):
            return result
        removed = await self.event_layer.delete_doc(doc_id)
        if removed is not None and delete_llm_cache:
            keys = (removed.get("metadata") or {}).get("cache_keys") or []
            if keys:
                await self.llm_response_cache.delete(keys)
                await self.llm_response_cache.index_done_callback()
        return result

    # -- querying ---------------------------------------------------------------------------
    async def aquery_llm(
        self,
        query: str,
        param: QueryParam = QueryParam(),
        system_prompt: str | None = None,
        progress_callback: Any = None,
    ) -> dict[str, Any]:
        if param.mode != E2RAG_MODE:
            # LightRAG.<method>(self, ...), not super(): LightRAG's own tests call these
            # unbound with a stand-in for ``self``, which super() refuses
            return await LightRAG.aquery_llm(self, query, param, system_prompt, progress_callback)
        query = validate_rag_query(validate_query_not_empty(query))
        try:
            without_layer = await self._report_layer_gaps(logging.WARNING)
            retrieved = await self._e2rag_retrieve(query, param, progress_callback)
            if retrieved is None or not retrieved.bundle.passages:
                result = no_result()
                result["llm_response"] = {
                    "content": PROMPTS["fail_response"],
                    "response_iterator": None,
                    "is_streaming": False,
                    "llm_generated": False,
                }
            else:
                result = await answer(
                    self, query, param, system_prompt, retrieved, progress_callback
                )
            result["metadata"][DOCUMENTS_WITHOUT_LAYER] = without_layer
        except Exception as exc:  # noqa: BLE001 - same contract as LightRAG's aquery_llm
            logger.exception("e2rag query failed")
            result = {
                "status": "failure",
                "message": f"Query failed: {exc}",
                "data": {},
                "metadata": {},
                "llm_response": {
                    "content": None,
                    "response_iterator": None,
                    "is_streaming": False,
                    "llm_generated": False,
                },
            }
        await self._query_done()
        return result

    async def _e2rag_retrieve(
        self, query: str, param: QueryParam, progress: ProgressCallback = None
    ) -> Optional[Retrieved]:
        return await retrieve(
            self,
            self.event_layer,
            query,
            param,
            event_weight=self.e2rag_event_weight,
            mention_pool=self.e2rag_mention_pool,
            progress=progress,
        )

    async def aquery_data(self, query: str, param: QueryParam = QueryParam()) -> dict[str, Any]:
        if param.mode != E2RAG_MODE:
            return await LightRAG.aquery_data(self, query, param)
        query = validate_rag_query(validate_query_not_empty(query))
        without_layer = await self._report_layer_gaps(logging.WARNING)
        retrieved = await self._e2rag_retrieve(query, param)
        await self._query_done()
        found = retrieved is not None and retrieved.bundle.passages
        result = user_data(retrieved) if found else no_result()
        result["metadata"][DOCUMENTS_WITHOUT_LAYER] = without_layer
        return result
