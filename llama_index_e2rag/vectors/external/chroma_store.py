"""Chroma (``ChromaVectorStore``): ``add`` of a known id is silently ignored (so ids are deleted
first), scores are ``exp(-distance)`` in the collection's space, ``get_nodes`` returns no vectors
(they are read natively), and the client is sync only. Embeddings are always passed, so Chroma
never fetches its default ONNX embedding model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from llama_index_e2rag.errors import VectorStoreError
from llama_index_e2rag.vectors.base import VectorHit
from llama_index_e2rag.vectors.external.aio import IO
from llama_index_e2rag.vectors.external.base import Backend
from llama_index_e2rag.vectors.external.records import BATCH, KIND_KEY, stored_id, unit


class ChromaBackend(Backend):
    """Chroma: ``add`` silently ignores known ids; scores are ``exp(-distance)``; sync only."""

    family = "chroma"
    counts_natively = True
    returns_embeddings = True  # type: ignore[assignment]
    native_async = False  # type: ignore[assignment]

    @property
    def collection(self) -> Any:
        return self.store.client

    def space(self) -> str:
        """The collection's distance: ``l2`` (Chroma's default), ``cosine`` or ``ip``."""
        conf = getattr(self.collection, "configuration_json", None) or {}
        for section in ("hnsw", "spann"):
            if isinstance(conf.get(section), dict) and conf[section].get("space"):
                return str(conf[section]["space"]).lower()
        meta = getattr(self.collection, "metadata", None) or {}
        return str(meta.get("hnsw:space", "l2")).lower()

    def check(self, dim: Optional[int]) -> None:
        super().check(dim)
        if self.space() not in ("l2", "cosine", "ip"):
            raise VectorStoreError(
                f"Chroma collection space {self.space()!r} is unknown; use 'l2', 'cosine' or 'ip'"
            )

    async def query(self, io: IO, kind: str, q: np.ndarray, top_k: int) -> list[VectorHit]:
        self._space = self.space()
        return await super().query(io, kind, q, top_k)

    def cosine_from_score(self, score: float) -> Optional[float]:
        if score <= 0:
            return None
        distance = -math.log(score)
        # unit vectors: squared l2 = 2 - 2 cos; cosine and ip distances are 1 - cos
        return 1.0 - distance / 2.0 if self._space == "l2" else 1.0 - distance

    async def get(self, io: IO, gids: Sequence[str]) -> dict[str, np.ndarray]:
        by_uid = {stored_id(g): g for g in gids}
        uids = list(by_uid)
        out: dict[str, np.ndarray] = {}
        for start in range(0, len(uids), BATCH):
            got = self.collection.get(ids=uids[start : start + BATCH], include=["embeddings"])
            embeddings = got.get("embeddings")
            if embeddings is not None:
                out.update(
                    (by_uid[uid], unit(e)) for uid, e in zip(got["ids"], embeddings) if uid in by_uid
                )
        return out

    async def count(self, io: IO, kind: Optional[str]) -> int:
        if kind is None or not self.shared:
            return int(self.collection.count())
        return len(self.collection.get(where={KIND_KEY: kind}, include=[])["ids"])
