"""Documents the e2rag mode cannot find: processed by LightRAG, without a current layer.

Counting them reads the status of every processed document and its layer record. The count is
logged at start-up and with every ``e2rag`` query, so doing that scan per query made a query's
cost grow with the corpus. ``LayerGaps`` counts once, when the instance's storages open, and
then follows the writes that can change the answer. It wraps the methods of this instance's own
storage objects, so every caller is seen (LightRAG's pipeline and delete paths, the server's
routes, our backfill, a user writing a record): LightRAG's doc status (``upsert``,
``update_doc_status_fields`` with a status, ``delete``) and the layer's commit records
(``upsert``, ``delete``). Each write re-reads only the documents it names. A ``drop`` of either
makes the next use count again.

Each query re-reads the documents still counted as missing (point reads of those few; none when
every document has its layer): with database storages a backfill may run in another process
beside the server, and the documents it builds drop out of the next query's count. Documents
another instance or process adds (database storages, or ``lightrag-gunicorn``'s other workers)
are counted when this instance opens its storages again.
"""

from __future__ import annotations

from typing import Any, Optional

from lightrag.base import DocStatus

from lightrag_ext.host import LayerHost
from lightrag_ext.storage import LAYER_FORMAT_VERSION


def is_current(record: dict[str, Any]) -> bool:
    """A complete layer in the current format (older formats lack edges, e.g. ``next``)."""
    version = (record.get("metadata") or {}).get("e2rag_layer")
    return record.get("status") == DocStatus.PROCESSED.value and version == LAYER_FORMAT_VERSION


def _processed(status: Optional[dict[str, Any]]) -> bool:
    return bool(status) and status.get("status") == DocStatus.PROCESSED.value


def layer_gap_message(missing: int, total: int) -> str:
    return (
        f"e2rag: {missing} of {total} documents have no event layer, so the e2rag mode cannot "
        "find them; build it with `e2rag-lightrag-backfill` (server stopped, same flags and "
        ".env as the server) or `await rag.abuild_event_layer()`"
    )


class LayerGaps:
    """The processed documents of ``rag`` without a current layer, counted once, then followed."""

    def __init__(self, rag: LayerHost) -> None:
        self._rag = rag
        self._counted = False
        self._missing: set[str] = set()
        self._processed = 0
        self._follow(rag.doc_status, lightrag_status=True)
        self._follow(rag.event_layer.docs, lightrag_status=False)

    async def count(self) -> tuple[int, int]:
        """(processed documents without a current layer, processed documents)."""
        if not self._counted:
            processed = await self._rag.doc_status.get_docs_by_statuses([DocStatus.PROCESSED])
            records = await self._rag.event_layer.get_records(processed)
            self._missing = {d for d in processed if not is_current(records.get(d) or {})}
            self._processed = len(processed)
            self._counted = True
        elif self._missing:
            missing = sorted(self._missing)
            await self._settle(missing, dict.fromkeys(missing, True))
        return len(self._missing), self._processed

    def forget(self) -> None:
        """Count again at next use (the storages closed, or one was dropped)."""
        self._counted = False
        self._missing = set()
        self._processed = 0

    async def _before(self, doc_ids: list[str], lightrag_status: bool) -> Optional[dict]:
        """Whether each document is processed, before a write to LightRAG's doc status."""
        if not (self._counted and lightrag_status):
            return None
        statuses = await self._statuses(doc_ids)
        return {d: _processed(s) for d, s in zip(doc_ids, statuses)}

    async def _statuses(self, doc_ids: list[str]) -> list[Optional[dict[str, Any]]]:
        """The doc status of each of ``doc_ids``, in order, None where absent. LightRAG's
        PostgreSQL doc status answers ``[]`` when none of the ids exists, not one None each."""
        statuses = await self._rag.doc_status.get_by_ids(doc_ids)
        if len(statuses) == len(doc_ids):
            return list(statuses)
        return [await self._rag.doc_status.get_by_id(d) for d in doc_ids]

    async def _settle(self, doc_ids: list[str], was_processed: Optional[dict]) -> None:
        """Re-read the named documents after a write (``was_processed``: before a write to
        LightRAG's doc status, whose processed count it may change)."""
        if not self._counted or not doc_ids:
            return
        statuses = await self._statuses(doc_ids)
        records = await self._rag.event_layer.get_records(doc_ids)
        for doc_id, status in zip(doc_ids, statuses):
            processed = _processed(status)
            if was_processed is not None:
                self._processed += int(processed) - int(was_processed[doc_id])
            if processed and not is_current(records.get(doc_id) or {}):
                self._missing.add(doc_id)
            else:
                self._missing.discard(doc_id)

    def _follow(self, storage: Any, *, lightrag_status: bool) -> None:
        stock_upsert, stock_delete, stock_drop = storage.upsert, storage.delete, storage.drop

        async def upsert(data: dict[str, dict[str, Any]]) -> None:
            doc_ids = list(data)
            before = await self._before(doc_ids, lightrag_status)
            await stock_upsert(data)
            await self._settle(doc_ids, before)

        async def delete(ids: list[str]) -> None:
            doc_ids = list(dict.fromkeys(ids))
            before = await self._before(doc_ids, lightrag_status)
            await stock_delete(ids)
            await self._settle(doc_ids, before)

        async def drop() -> dict[str, str]:
            result = await stock_drop()
            self.forget()
            return result

        storage.upsert, storage.delete, storage.drop = upsert, delete, drop
        if not lightrag_status:
            return
        stock_update = storage.update_doc_status_fields

        async def update_doc_status_fields(
            doc_id: str, fields: dict[str, Any], **kwargs: Any
        ) -> Any:
            if "status" not in fields:
                return await stock_update(doc_id, fields, **kwargs)
            before = await self._before([doc_id], lightrag_status)
            result = await stock_update(doc_id, fields, **kwargs)
            await self._settle([doc_id], before)
            return result

        storage.update_doc_status_fields = update_doc_status_fields
