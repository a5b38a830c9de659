"""``Backend``: one llama-index store as the adapter drives it, through the generic API only.

It serves any store without a quirk class (tested with core's ``SimpleVectorStore``): ``add`` /
``async_add``, ``delete``, ``delete_nodes``, ``query`` with a kind ``MetadataFilters`` and
``get_nodes``. The quirk classes (``*_store`` modules) override what their store gets wrong.
Because the generic path cannot count, and some stores return ids only, it keeps an ``IdTable``
of what it wrote (persisted with ``persist``): counts are exact for what this adapter wrote and
approximate if others write to the same store.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Optional

import numpy as np
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)

from llama_index_e2rag.errors import VectorStoreError
from llama_index_e2rag.vectors.base import VectorHit, VectorRecord
from llama_index_e2rag.vectors.external.aio import IO
from llama_index_e2rag.disk.files import atomic_write_text
from llama_index_e2rag.vectors.external.id_table import IdTable
from llama_index_e2rag.vectors.external.records import (
    BATCH,
    ID_KEY,
    KIND_KEY,
    cosine,
    kind_name,
    stored_id,
    to_node,
    unit,
)

logger = logging.getLogger(__name__)


class Backend:
    """A llama-index store through its generic API (any store not special-cased)."""

    family = "llama-index"
    #: does ``add`` replace a node with a known id? (else its ids are deleted first)
    upserts = False
    #: can the store count per kind itself? (else the ``IdTable`` counts)
    counts_natively = False

    def __init__(self, store: BasePydanticVectorStore, name: str, kinds: Optional[set[str]]):
        self.store = store
        self.name = name
        #: kinds this store serves; None = every kind (the single shared store)
        self.kinds = kinds
        self._warned = False
        self.table: Optional[IdTable] = None if self.counts_natively else IdTable(False)

    # ---- capabilities
    @property
    def shared(self) -> bool:
        """Several kinds in this store: write the kind, filter by it."""
        return self.kinds is None or len(self.kinds) > 1

    def _overrides(self, method: str) -> bool:
        return getattr(type(self.store), method) is not getattr(BasePydanticVectorStore, method)

    @property
    def native_async(self) -> bool:
        return self._overrides("aquery") or self._overrides("async_add")

    @property
    def returns_embeddings(self) -> bool:
        """Can ``get`` return every stored vector? (else the index keeps a local copy)"""
        return False

    def _sync(self, method: str) -> Optional[Callable[..., Any]]:
        return getattr(self.store, method)

    def _async(self, method: str) -> Optional[Callable[..., Awaitable[Any]]]:
        return getattr(self.store, method) if self._overrides(method) else None

    def _call(self, io: IO, method: str, amethod: str, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        sync_fn, async_fn = self._sync(method), self._async(amethod)
        return io(
            (lambda: sync_fn(*args, **kwargs)) if sync_fn else None,
            (lambda: async_fn(*args, **kwargs)) if async_fn else None,
        )

    def kind_filter(self, kind: str) -> Optional[MetadataFilters]:
        if not self.shared:
            return None
        return MetadataFilters(
            filters=[MetadataFilter(key=KIND_KEY, value=kind, operator=FilterOperator.EQ)]
        )

    # ---- checks
    def check(self, dim: Optional[int]) -> None:
        """Raise ``VectorStoreError`` (with the fix) if the store cannot serve ``dim``-d vectors."""
        if not isinstance(self.store, BasePydanticVectorStore):
            raise VectorStoreError(
                f"vector store {self.name!r} is a {type(self.store).__name__}, not a llama-index "
                "BasePydanticVectorStore; pass a llama-index vector store"
            )

    # ---- nodes
    def node(self, record: VectorRecord, vector: np.ndarray) -> TextNode:
        return to_node(record, vector, self.text(record))

    def text(self, record: VectorRecord) -> str:
        return record.text or ""

    # ---- flows (each one a coroutine driven synchronously or on the io loop)
    async def add(self, io: IO, records: Sequence[VectorRecord], vectors: np.ndarray) -> None:
        nodes = [self.node(r, v) for r, v in zip(records, vectors, strict=True)]
        if not self.upserts:
            await self.remove_ids(io, [n.node_id for n in nodes])
        await self._call(io, "add", "async_add", nodes)
        if self.table is not None:
            for r in records:
                self.table.put(r.id, kind_name(r.kind), r.doc_id)

    async def remove_ids(self, io: IO, uids: list[str]) -> None:
        """Delete stored uuids (a store that cannot delete nodes is left as it is)."""
        try:
            for start in range(0, len(uids), BATCH):
                chunk = uids[start : start + BATCH]
                await self._call(io, "delete_nodes", "adelete_nodes", node_ids=chunk)
        except NotImplementedError:
            pass

    async def delete_ids(self, io: IO, gids: Sequence[str]) -> None:
        await self.remove_ids(io, [stored_id(g) for g in gids])
        if self.table is not None:
            for gid in gids:
                self.table.drop(gid)

    async def delete_doc(self, io: IO, doc_id: str) -> None:
        await self._call(io, "delete", "adelete", doc_id)
        if self.table is not None:
            for gid in list(self.table.by_doc.get(doc_id, ())):
                self.table.drop(gid)

    async def query(self, io: IO, kind: str, q: np.ndarray, top_k: int) -> list[VectorHit]:
        query = VectorStoreQuery(
            query_embedding=[float(x) for x in q],
            similarity_top_k=top_k,
            filters=self.kind_filter(kind),
        )
        result = await self._call(io, "query", "aquery", query)
        return await self.hits(io, kind, q, result)

    async def hits(self, io: IO, kind: str, q: np.ndarray, result: Any) -> list[VectorHit]:
        """Graph ids and cosine scores of a query result (nodes of other kinds dropped)."""
        nodes = list(result.nodes or [])
        ids = list(result.ids or [])
        sims = list(result.similarities or [])
        found: list[tuple[str, Optional[np.ndarray], Optional[float]]] = []
        for i in range(max(len(nodes), len(ids))):
            node = nodes[i] if i < len(nodes) else None
            meta = (node.metadata or {}) if node is not None else {}
            gid = meta.get(ID_KEY)
            if gid is None and i < len(ids):  # stores that return ids only
                gid = self.gid_of(str(ids[i]))
                meta = {KIND_KEY: self.table.kind.get(gid)} if gid and self.table else meta
            if gid is None or (self.shared and meta.get(KIND_KEY) not in (None, kind)):
                continue  # a node not written by e2rag, or another kind
            emb = node.embedding if node is not None else None
            found.append((gid, np.asarray(emb, dtype=np.float32) if emb else None,
                          sims[i] if i < len(sims) else None))
        scores: dict[str, float] = {}
        missing = []
        for gid, emb, sim in found:
            if emb is not None and emb.size:
                scores[gid] = cosine(q, emb)
            elif sim is not None and (converted := self.cosine_from_score(float(sim))) is not None:
                scores[gid] = converted
            else:
                missing.append(gid)
        if missing:
            vectors = await self.get(io, missing)
            for gid in missing:
                if gid in vectors:
                    scores[gid] = cosine(q, vectors[gid])
            sims_by_gid = {gid: sim for gid, _, sim in found}
            for gid in missing:
                if gid not in scores and sims_by_gid.get(gid) is not None:
                    if not self._warned:
                        logger.warning(
                            "%s store %r returns no vectors; using its own similarity scores",
                            type(self.store).__name__, self.name,
                        )
                        self._warned = True
                    scores[gid] = float(sims_by_gid[gid])  # type: ignore[arg-type]
        hits = [VectorHit(gid, scores[gid]) for gid, _, _ in found if gid in scores]
        hits.sort(key=lambda h: (-h.score, h.id))  # ties by id, as the embedded vectors
        return hits

    def gid_of(self, uid: str) -> Optional[str]:
        return self.table.by_uid.get(uid) if self.table is not None else None

    def cosine_from_score(self, score: float) -> Optional[float]:
        """The cosine similarity behind a store score, or None if it must be recomputed."""
        return None

    async def get(self, io: IO, gids: Sequence[str]) -> dict[str, np.ndarray]:
        by_uid = {stored_id(g): g for g in gids}
        uids = list(by_uid)
        nodes = []
        try:
            for start in range(0, len(uids), BATCH):
                chunk = uids[start : start + BATCH]
                nodes.extend(await self._call(io, "get_nodes", "aget_nodes", node_ids=chunk))
        except NotImplementedError:
            return {}
        out = {}
        wanted = set(by_uid.values())
        for node in nodes:
            gid = by_uid.get(node.node_id) or (node.metadata or {}).get(ID_KEY)
            if gid in wanted and node.embedding:
                out[gid] = unit(node.embedding)
        return out

    async def count(self, io: IO, kind: Optional[str]) -> int:
        assert self.table is not None
        return self.table.count(kind)

    # ---- files
    def persist(self, folder: Path, prefix: str) -> None:
        if self._overrides("persist"):  # a file-based store (e.g. SimpleVectorStore)
            tmp = folder / f"{prefix}.store.tmp"
            self.store.persist(persist_path=str(tmp))
            if tmp.exists():
                os.replace(tmp, folder / f"{prefix}.store")
        if self.table is not None:
            state = self.table.to_json(None)
            path = folder / f"{prefix}.ids.json"
            atomic_write_text(path, json.dumps(state))

    def load(self, folder: Path, prefix: str) -> bool:
        """Restore what ``persist`` wrote; True if anything was found."""
        found = False
        store_path = folder / f"{prefix}.store"
        from_path = getattr(type(self.store), "from_persist_path", None)
        if store_path.is_file() and callable(from_path):
            self.store = from_path(str(store_path))
            found = True
        path = folder / f"{prefix}.ids.json"
        if self.table is not None and path.is_file():
            self.table = IdTable.from_json(json.loads(path.read_text(encoding="utf-8")), False)
            found = True
        return found
