"""Milvus and Milvus Lite (``MilvusVectorStore``).

* ``add`` inserts duplicates unless ``upsert_mode=True``, so ids are deleted first.
* Its ``delete`` puts the doc id in double quotes without escaping: the backend deletes natively
  with a JSON-escaped literal.
* A collection reopened in a new process is "released" (search fails with "call load() before
  search"): it is loaded once, lazily, before the first read or delete.
* Scores are cosine for IP (the default) and COSINE; for L2 they are recomputed from
  ``get_nodes``, which returns vectors. The text field is VARCHAR(65535), so texts are cut there.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Optional

import numpy as np

from llama_index_e2rag.errors import VectorStoreError
from llama_index_e2rag.vectors.base import VectorHit, VectorRecord
from llama_index_e2rag.vectors.external.aio import IO
from llama_index_e2rag.vectors.external.base import Backend
from llama_index_e2rag.vectors.external.records import KIND_KEY

logger = logging.getLogger(__name__)


def _milvus_str(value: str) -> str:
    return json.dumps(value)  # a double-quoted literal with backslash escapes


class MilvusBackend(Backend):
    """Milvus: upsert only with ``upsert_mode``; native delete by doc; load before reading."""

    family = "milvus"
    counts_natively = True
    returns_embeddings = True  # type: ignore[assignment]
    _TEXT_BYTES = 65_535

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._loaded = False

    @property
    def upserts(self) -> bool:  # type: ignore[override]
        return bool(self.store.upsert_mode)

    @property
    def native_async(self) -> bool:
        return self.store.aclient is not None

    def _async(self, method: str) -> Optional[Callable[..., Awaitable[Any]]]:
        return getattr(self.store, method) if self.store.aclient is not None else None

    def _client_call(self, io: IO, method: str, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        client, aclient = self.store.client, self.store.aclient
        return io(
            lambda: getattr(client, method)(*args, **kwargs),
            (lambda: getattr(aclient, method)(*args, **kwargs)) if aclient is not None else None,
        )

    async def ensure_loaded(self, io: IO) -> None:
        """A collection reopened in a new process is 'released': load it before reading."""
        if self._loaded:
            return
        client, name = self.store.client, self.store.collection_name
        state = await io(lambda: client.get_load_state(name))
        state = state.get("state") if isinstance(state, dict) else state
        if getattr(state, "name", str(state)) != "Loaded":
            await io(lambda: client.load_collection(name))
        self._loaded = True

    def metric(self) -> str:
        metric = (self.store.index_config or {}).get("metric_type") or self.store.similarity_metric
        return str(metric).upper()

    def check(self, dim: Optional[int]) -> None:
        super().check(dim)
        if not self.store.enable_dense:
            raise VectorStoreError(
                "MilvusVectorStore(enable_dense=False) stores no dense vectors; create it with "
                "enable_dense=True and dim=<embedding dimension>"
            )
        if dim is not None and self.store.dim is not None and self.store.dim != dim:
            raise VectorStoreError(
                f"MilvusVectorStore dim={self.store.dim} != embedding dimension {dim}; "
                f"use dim={dim} and a new collection_name"
            )

    def text(self, record: VectorRecord) -> str:
        raw = (record.text or "").encode("utf-8")
        if len(raw) <= self._TEXT_BYTES:
            return record.text or ""
        return raw[: self._TEXT_BYTES].decode("utf-8", errors="ignore")

    async def query(self, io: IO, kind: str, q: np.ndarray, top_k: int) -> list[VectorHit]:
        await self.ensure_loaded(io)
        return await super().query(io, kind, q, top_k)

    async def get(self, io: IO, gids: Sequence[str]) -> dict[str, np.ndarray]:
        await self.ensure_loaded(io)
        return await super().get(io, gids)

    async def remove_ids(self, io: IO, uids: list[str]) -> None:
        if uids:
            await self.ensure_loaded(io)
            await super().remove_ids(io, uids)

    async def delete_doc(self, io: IO, doc_id: str) -> None:
        await self.ensure_loaded(io)
        await self._client_call(
            io,
            "delete",
            collection_name=self.store.collection_name,
            filter=f"{self.store.doc_id_field} == {_milvus_str(doc_id)}",
        )

    def cosine_from_score(self, score: float) -> Optional[float]:
        return score if self.metric() in ("IP", "COSINE") else None

    async def count(self, io: IO, kind: Optional[str]) -> int:
        await self.ensure_loaded(io)
        flt = "" if kind is None or not self.shared else f"{KIND_KEY} == {_milvus_str(kind)}"
        rows = await self._client_call(
            io,
            "query",
            collection_name=self.store.collection_name,
            filter=flt,
            output_fields=["count(*)"],
        )
        return int(rows[0]["count(*)"]) if rows else 0

    def persist(self, folder: Path, prefix: str) -> None:
        try:
            self.store.client.flush(self.store.collection_name)
        except Exception as exc:  # Milvus Lite persists through its WAL anyway
            logger.debug("milvus flush failed: %s", exc)
