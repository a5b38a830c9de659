"""Qdrant (``QdrantVectorStore``): a sync and/or an async client, and no collection until the
first add.

* Either client may be missing (sync calls then fail with AttributeError, async ones with "Async
  client is not initialized"): the backend uses whichever exists and runs the other side itself.
  Local mode refuses two clients on one path, and ``:memory:`` clients do not share data, so
  ``check`` refuses a local client *and* aclient.
* Before the first add, ``delete``/``query``/``count`` raise "Collection ... not found": the
  backend asks ``collection_exists`` first.
* Query results carry no vectors; their scores are cosine for Cosine/Dot collections, and are
  recomputed from ``get_nodes`` (which returns vectors) for Euclid. Manhattan is refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Optional

import numpy as np

from llama_index_e2rag.errors import VectorStoreError
from llama_index_e2rag.vectors.base import VectorHit
from llama_index_e2rag.vectors.external.aio import IO, drive
from llama_index_e2rag.vectors.external.base import Backend
from llama_index_e2rag.vectors.external.records import KIND_KEY


class QdrantBackend(Backend):
    """Qdrant: upserts; sync or async client may be missing; no collection until the first add."""

    family = "qdrant"
    upserts = True
    counts_natively = True
    returns_embeddings = True  # type: ignore[assignment]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._distance: Optional[str] = None

    @property
    def client(self) -> Any:
        return getattr(self.store, "_client", None)

    @property
    def aclient(self) -> Any:
        return getattr(self.store, "_aclient", None)

    @property
    def native_async(self) -> bool:
        return self.aclient is not None

    def _sync(self, method: str) -> Optional[Callable[..., Any]]:
        return getattr(self.store, method) if self.client is not None else None

    def _async(self, method: str) -> Optional[Callable[..., Awaitable[Any]]]:
        return getattr(self.store, method) if self.aclient is not None else None

    def _client_call(self, io: IO, method: str, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        client, aclient = self.client, self.aclient
        return io(
            (lambda: getattr(client, method)(*args, **kwargs)) if client is not None else None,
            (lambda: getattr(aclient, method)(*args, **kwargs)) if aclient is not None else None,
        )

    async def exists(self, io: IO) -> bool:
        return bool(await self._client_call(io, "collection_exists", self.store.collection_name))

    def check(self, dim: Optional[int]) -> None:
        super().check(dim)
        if self.client is None and self.aclient is None:
            raise VectorStoreError(
                "QdrantVectorStore has neither client nor aclient; pass client=QdrantClient(...) "
                "and/or aclient=AsyncQdrantClient(...)"
            )
        local = [
            type(getattr(c, "_client", None)).__name__ in ("QdrantLocal", "AsyncQdrantLocal")
            for c in (self.client, self.aclient)
            if c is not None
        ]
        if len(local) == 2 and any(local):
            raise VectorStoreError(
                "QdrantVectorStore has a local client and aclient, which do not share data; pass "
                "only client= or only aclient= (e2rag runs the other side itself)"
            )
        if self.store.enable_hybrid:
            raise VectorStoreError(
                "QdrantVectorStore(enable_hybrid=True) computes sparse vectors with a model at add "
                "time; create it with enable_hybrid=False for e2rag"
            )
        config = getattr(self.store, "_dense_config", None)
        size, distance = config.size if config else None, config.distance if config else None
        existing = drive(self._vector_params(IO(False)))  # one request; None before first add
        if existing is not None:
            size, distance = existing.size, existing.distance
        if size is not None and dim is not None and size != dim:
            raise VectorStoreError(
                f"Qdrant collection {self.store.collection_name!r} holds {size}-d vectors, the "
                f"index embeds {dim}-d (embedding dimension mismatch); use another collection_name"
            )
        if distance is not None and str(getattr(distance, "value", distance)).lower() == "manhattan":
            raise VectorStoreError(
                f"Qdrant collection {self.store.collection_name!r} uses Manhattan distance, which "
                "does not rank by cosine; use Distance.COSINE (the default)"
            )

    async def _vector_params(self, io: IO) -> Any:
        if not await self.exists(io):
            return None
        info = await self._client_call(io, "get_collection", self.store.collection_name)
        vectors = info.config.params.vectors
        if isinstance(vectors, dict):
            vectors = vectors.get(self.store.dense_vector_name) or vectors.get("")
        return vectors

    async def distance(self, io: IO) -> str:
        if self._distance is None:
            params = await self._vector_params(io)
            distance = getattr(params, "distance", "cosine")
            self._distance = str(getattr(distance, "value", distance)).lower()
        return self._distance

    async def delete_doc(self, io: IO, doc_id: str) -> None:
        if await self.exists(io):
            await self._call(io, "delete", "adelete", doc_id)

    async def delete_ids(self, io: IO, gids: Sequence[str]) -> None:
        if await self.exists(io):
            await super().delete_ids(io, gids)

    async def query(self, io: IO, kind: str, q: np.ndarray, top_k: int) -> list[VectorHit]:
        try:
            return await super().query(io, kind, q, top_k)
        except Exception:
            if not await self.exists(io):
                return []
            raise

    async def hits(self, io: IO, kind: str, q: np.ndarray, result: Any) -> list[VectorHit]:
        if result.ids:
            await self.distance(io)  # cached: the metric the scores are in
        return await super().hits(io, kind, q, result)

    def cosine_from_score(self, score: float) -> Optional[float]:
        return score if self._distance in ("cosine", "dot") else None

    async def get(self, io: IO, gids: Sequence[str]) -> dict[str, np.ndarray]:
        if not gids or not await self.exists(io):
            return {}
        return await super().get(io, gids)

    async def count(self, io: IO, kind: Optional[str]) -> int:
        from qdrant_client.http import models as rest

        if not await self.exists(io):
            return 0
        flt = None
        if kind is not None and self.shared:
            flt = rest.Filter(
                must=[rest.FieldCondition(key=KIND_KEY, match=rest.MatchValue(value=kind))]
            )
        result = await self._client_call(
            io, "count", self.store.collection_name, count_filter=flt, exact=True
        )
        return int(result.count)
