"""Backfill: give documents already indexed by LightRAG their event layer, without re-extraction.

For each processed document we read its chunks from ``text_chunks`` and recover LightRAG's
*per-chunk* entity records from LightRAG's LLM cache, exactly as LightRAG's own
rebuild-after-delete does (``_get_cached_extraction_results`` + ``_rebuild_from_extraction_result``:
the chunk's ``llm_cache_list`` points at its ``extract`` answers, which are re-parsed). So a
backfilled layer equals the one ``E2LightRAG`` builds at insert time. A chunk whose extraction
answers are not in the cache (cache disabled or cleared) gets a mention pass with the shared entity
prompt instead; only the event pass is new LLM work, and it is cached too.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional

from lightrag.base import DocStatus
from lightrag.operate import _get_cached_extraction_results, _rebuild_from_extraction_result
from tqdm.auto import tqdm

from lightrag_ext.gaps import is_current
from lightrag_ext.host import LayerHost
from lightrag_ext.layer import ChunkEntities, write_stored_doc_layer

logger = logging.getLogger(__name__)


@dataclass
class BackfillReport:
    """What a backfill did, per document id."""

    built: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    partial: dict[str, dict[str, str]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "built": list(self.built),
            "skipped": list(self.skipped),
            "partial": dict(self.partial),
            "missing": list(self.missing),
        }


async def _target_docs(rag: LayerHost, doc_ids: Optional[list[str]]) -> dict[str, dict]:
    """Processed LightRAG documents to cover (requested ids that are not processed: missing)."""
    if doc_ids is None:
        found = await rag.doc_status.get_docs_by_statuses([DocStatus.PROCESSED])
        return {doc_id: vars(status) for doc_id, status in sorted(found.items())}
    rows = await rag.doc_status.get_by_ids(list(doc_ids))
    return {doc_id: row for doc_id, row in zip(doc_ids, rows) if row}


async def recover_entity_records(
    rag: LayerHost, chunk_ids: list[str]
) -> dict[str, Optional[ChunkEntities]]:
    """LightRAG's per-chunk entity records from its extraction cache; None where not cached."""
    cached, chunk_data = await _get_cached_extraction_results(
        rag.llm_response_cache, set(chunk_ids), rag.text_chunks
    )
    records: dict[str, Optional[ChunkEntities]] = {}
    for chunk_id in chunk_ids:
        results = cached.get(chunk_id)
        if not results:
            records[chunk_id] = None
            continue
        merged: ChunkEntities = defaultdict(list)
        for extraction_result, create_time in results:
            nodes, _ = await _rebuild_from_extraction_result(
                rag.text_chunks,
                extraction_result,
                chunk_id,
                create_time,
                chunk_data=chunk_data.get(chunk_id),
            )
            for name, rows in nodes.items():
                merged[name].extend(rows)
        records[chunk_id] = dict(merged)
    return records


async def backfill_event_layer(
    rag: LayerHost, doc_ids: Optional[list[str]] = None, *, rebuild: bool = False
) -> BackfillReport:
    """Build missing, failed or outdated (or, with ``rebuild``, all) event layers of processed
    documents."""
    report = BackfillReport()
    targets = await _target_docs(rag, doc_ids)
    report.missing = [d for d in (doc_ids or []) if d not in targets]
    existing = await rag.event_layer.get_records(targets)
    for doc_id in tqdm(list(targets), desc="e2rag event layer", unit="doc"):
        status = targets[doc_id]
        if status.get("status") != DocStatus.PROCESSED.value:
            report.missing.append(doc_id)
            continue
        previous = existing.get(doc_id)
        if previous and is_current(previous) and not rebuild:
            report.skipped.append(doc_id)
            continue
        chunk_ids = list(status.get("chunks_list") or [])
        rows = await rag.text_chunks.get_by_ids(chunk_ids)
        chunks = {c: r for c, r in zip(chunk_ids, rows) if r}
        if not chunks:
            logger.warning("e2rag backfill: document %s has no stored chunks; skipped", doc_id)
            report.missing.append(doc_id)
            continue
        records = await recover_entity_records(rag, list(chunks))
        layer = await write_stored_doc_layer(rag, doc_id, chunks, records, status)
        report.built.append(doc_id)
        if layer.failures:
            report.partial[doc_id] = dict(layer.failures)
        logger.info(
            "e2rag backfill %s: %s (mentions from %s)", doc_id, layer.counts(), layer.mention_source
        )
    await rag.llm_response_cache.index_done_callback()
    return report
