"""``LlamaIndexVectors``: the ``VectorStorage`` port over llama-index vector stores.

One store for the whole index (the node kind is metadata ``kind``, filtered at query time) or a
``{kind: store}`` dict. Each store gets a backend: the generic one (``base.Backend``) or the quirk
class of its family (Qdrant, Chroma, LanceDB, Milvus, FAISS), so that every store behaves alike:
the same ids and metadata (``records``), cosine scores, ``add`` replaces, ``delete_doc`` of an
unknown document (or before the first add) is a no-op, and ``count`` is exact (for stores the
adapter cannot ask, it counts what it wrote). Sync and async calls share one code path
(``aio``); native async methods run on a private event loop.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from llama_index_e2rag.errors import VectorStoreError
from llama_index_e2rag.vectors.base import VectorHit, VectorRecord
from llama_index_e2rag.vectors.external.aio import IO, drive, io_loop
from llama_index_e2rag.vectors.external.base import Backend
from llama_index_e2rag.vectors.external.chroma_store import ChromaBackend
from llama_index_e2rag.vectors.external.faiss_store import FaissBackend
from llama_index_e2rag.vectors.external.lancedb_store import LanceDBBackend
from llama_index_e2rag.vectors.external.milvus_store import MilvusBackend
from llama_index_e2rag.vectors.external.qdrant_store import QdrantBackend
from llama_index_e2rag.vectors.external.records import KIND_RE, kind_name, unit

StoreArg = Union[BasePydanticVectorStore, Mapping[Any, BasePydanticVectorStore]]
Flow = Callable[[IO], Coroutine[Any, Any, Any]]
Group = tuple[Backend, list[VectorRecord], np.ndarray]

#: quirk classes by the llama-index store class they serve (matched by name: no import needed)
_BACKENDS: dict[str, type[Backend]] = {
    "QdrantVectorStore": QdrantBackend,
    "ChromaVectorStore": ChromaBackend,
    "LanceDBVectorStore": LanceDBBackend,
    "MilvusVectorStore": MilvusBackend,
    "FaissVectorStore": FaissBackend,
}


def _backend_class(store: Any) -> type[Backend]:
    for cls in type(store).__mro__:
        if cls.__name__ in _BACKENDS:
            return _BACKENDS[cls.__name__]
    return Backend


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name) or "store"


class LlamaIndexVectors:
    """``VectorStorage`` over one shared llama-index vector store or a ``{kind: store}`` dict.

    ``dim`` (optional) lets ``check`` refuse a store of the wrong dimension before any work;
    without it the dimension is learned at the first ``add``, which checks the stores against it
    before writing. ``namespace`` prefixes the files ``persist`` writes (FAISS indexes and id
    maps), so several adapters can persist into one folder. ``persist_dir`` loads what an earlier
    ``persist`` wrote there: give FAISS stores empty (they are replaced by the persisted index --
    ``stores`` gives the live objects) or already holding that same index. Reopening a
    FAISS-backed index without ``persist_dir`` fails in ``check`` (its rows could not be mapped
    back to graph ids). ``store_text=False`` stores empty texts (the adapter never reads them).
    """

    def __init__(
        self,
        stores: StoreArg,
        *,
        dim: Optional[int] = None,
        namespace: str = "e2rag-vectors",
        persist_dir: Union[str, Path, None] = None,
        store_text: bool = True,
    ) -> None:
        self.dim = dim
        self.namespace = _safe(namespace)
        self.store_text = store_text
        self._backends: list[Backend] = []
        self._by_kind: dict[str, Backend] = {}
        self._shared: Optional[Backend] = None
        if isinstance(stores, Mapping):
            if not stores:
                raise VectorStoreError("no vector store given; pass a store or {kind: store}")
            groups: dict[int, list[str]] = {}  # one backend per store object, whatever its kinds
            objs: dict[int, Any] = {}
            for kind, store in stores.items():
                groups.setdefault(id(store), []).append(kind_name(kind))
                objs[id(store)] = store
            for key, kinds in groups.items():
                store = objs[key]
                backend = _backend_class(store)(store, "+".join(sorted(kinds)), set(kinds))
                self._backends.append(backend)
                for kind in kinds:
                    self._by_kind[kind] = backend
        else:
            backend = _backend_class(stores)(stores, "all", None)
            self._backends.append(backend)
            self._shared = backend
        if persist_dir is not None:
            self.load(persist_dir)

    # ---- introspection
    @property
    def stores(self) -> dict[str, BasePydanticVectorStore]:
        """The live store behind each name (``"all"`` or the kinds it serves, joined by ``+``)."""
        return {b.name: b.store for b in self._backends}

    @property
    def label(self) -> str:
        """A stable description of the stores, e.g. ``QdrantVectorStore`` or
        ``chunk=FaissVectorStore;entity+event=QdrantVectorStore`` (for manifests and messages)."""
        if self._shared is not None:
            return type(self._shared.store).__name__
        return ";".join(
            f"{b.name}={type(b.store).__name__}" for b in sorted(self._backends, key=lambda b: b.name)
        )

    @property
    def returns_embeddings(self) -> bool:
        """Whether ``get_embeddings`` can return every stored vector (else keep a local copy)."""
        return all(b.returns_embeddings for b in self._backends)

    def _backend(self, kind: Any) -> Optional[Backend]:
        return self._shared or self._by_kind.get(kind_name(kind))

    # ---- running flows
    def _sync(self, flow: Flow) -> Any:
        return drive(flow(IO(False)))

    async def _async(self, backend: Backend, flow: Flow) -> Any:
        if backend.native_async:
            future = asyncio.run_coroutine_threadsafe(flow(IO(True)), io_loop())
            return await asyncio.wrap_future(future)
        return await asyncio.to_thread(drive, flow(IO(False)))

    def _wrap(self, backend: Backend, what: str, exc: Exception) -> VectorStoreError:
        return VectorStoreError(
            f"{backend.family} vector store {backend.name!r} failed to {what}: "
            f"{type(exc).__name__}: {exc}"
        )

    # ---- writes
    def _groups(self, records: Sequence[VectorRecord]) -> tuple[list[Group], Optional[int]]:
        """Records per backend (the last write of an id wins), unit vectors, and the dimension
        to adopt (check the stores against) when this is the first add without ``dim``."""
        if not records:
            return [], None
        grouped: dict[int, tuple[Backend, list[VectorRecord]]] = {}
        for record in records:
            kind = kind_name(record.kind)
            if not KIND_RE.match(kind):
                raise VectorStoreError(
                    f"node kind {kind!r} is not a plain name ([A-Za-z0-9_.:-]); rename the kind"
                )
            backend = self._backend(kind)
            if backend is None:
                raise VectorStoreError(
                    f"no vector store for node kind {kind!r}; add one to the {{kind: store}} "
                    "dict or use one shared store"
                )
            grouped.setdefault(id(backend), (backend, []))[1].append(record)
        out = []
        dim = self.dim
        for backend, recs in grouped.values():
            vectors = np.stack([unit(r.vector) for r in recs])
            if dim is None:
                dim = int(vectors.shape[1])
            elif vectors.shape[1] != dim:
                raise VectorStoreError(
                    f"got {vectors.shape[1]}-d vectors, this index embeds {dim}-d; "
                    "use the embedding model the index was built with"
                )
            last = {r.id: i for i, r in enumerate(recs)}
            keep = sorted(last.values())
            if not self.store_text:
                recs = [VectorRecord(r.id, r.kind, r.doc_id, "", r.vector, r.metadata) for r in recs]
            out.append((backend, [recs[i] for i in keep], vectors[keep]))
        return out, (dim if self.dim is None else None)

    def check_dim(self, dim: int) -> None:
        """Check every store against ``dim`` (the embedding's), then keep it; the index calls
        this before extraction so a store of the wrong dimension costs no LLM call."""
        if self.dim is not None and self.dim != dim:
            raise VectorStoreError(
                f"this index embeds {self.dim}-d vectors but the embedding model gives {dim}-d; "
                "use the embedding model the index was built with"
            )
        for backend in self._backends:
            backend.check(dim)
        self.dim = dim

    def add(self, records: Sequence[VectorRecord]) -> None:
        groups, new_dim = self._groups(records)
        if new_dim is not None:
            self.check_dim(new_dim)
        for backend, recs, vectors in groups:
            try:
                self._sync(lambda io, b=backend, r=recs, v=vectors: b.add(io, r, v))
            except VectorStoreError:
                raise
            except Exception as exc:
                raise self._wrap(backend, "add vectors", exc) from exc

    async def aadd(self, records: Sequence[VectorRecord]) -> None:
        groups, new_dim = self._groups(records)
        if new_dim is not None:
            await asyncio.to_thread(self.check_dim, new_dim)
        for backend, recs, vectors in groups:
            try:
                await self._async(backend, lambda io, b=backend, r=recs, v=vectors: b.add(io, r, v))
            except VectorStoreError:
                raise
            except Exception as exc:
                raise self._wrap(backend, "add vectors", exc) from exc

    def delete_doc(self, doc_id: str) -> None:
        for backend in self._backends:
            try:
                self._sync(lambda io, b=backend: b.delete_doc(io, doc_id))
            except Exception as exc:
                raise self._wrap(backend, f"delete document {doc_id!r}", exc) from exc

    async def adelete_doc(self, doc_id: str) -> None:
        for backend in self._backends:
            try:
                await self._async(backend, lambda io, b=backend: b.delete_doc(io, doc_id))
            except Exception as exc:
                raise self._wrap(backend, f"delete document {doc_id!r}", exc) from exc

    def delete_ids(self, ids: Sequence[str]) -> None:
        """Remove these graph node ids from every store (unknown ids are ignored)."""
        gids = list(dict.fromkeys(ids))
        if not gids:
            return
        for backend in self._backends:
            try:
                self._sync(lambda io, b=backend: b.delete_ids(io, gids))
            except Exception as exc:
                raise self._wrap(backend, "delete ids", exc) from exc

    async def adelete_ids(self, ids: Sequence[str]) -> None:
        gids = list(dict.fromkeys(ids))
        if not gids:
            return
        for backend in self._backends:
            try:
                await self._async(backend, lambda io, b=backend: b.delete_ids(io, gids))
            except Exception as exc:
                raise self._wrap(backend, "delete ids", exc) from exc

    # ---- reads
    def search(self, kind: str, query: np.ndarray, top_k: int) -> list[VectorHit]:
        backend = self._backend(kind)
        if backend is None or top_k <= 0:
            return []
        q = unit(query)
        try:
            hits = self._sync(lambda io: backend.query(io, kind_name(kind), q, int(top_k)))
        except VectorStoreError:
            raise
        except Exception as exc:
            raise self._wrap(backend, "search", exc) from exc
        return hits[:top_k]

    async def asearch(self, kind: str, query: np.ndarray, top_k: int) -> list[VectorHit]:
        backend = self._backend(kind)
        if backend is None or top_k <= 0:
            return []
        q = unit(query)
        try:
            hits = await self._async(
                backend, lambda io: backend.query(io, kind_name(kind), q, int(top_k))
            )
        except VectorStoreError:
            raise
        except Exception as exc:
            raise self._wrap(backend, "search", exc) from exc
        return hits[:top_k]

    def get_embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        wanted = list(dict.fromkeys(ids))
        for backend in self._backends:
            rest = [g for g in wanted if g not in out]
            if not rest:
                break
            try:
                out.update(self._sync(lambda io, b=backend, r=rest: b.get(io, r)))
            except Exception as exc:
                raise self._wrap(backend, "get embeddings", exc) from exc
        return out

    async def aget_embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        wanted = list(dict.fromkeys(ids))
        for backend in self._backends:
            rest = [g for g in wanted if g not in out]
            if not rest:
                break
            try:
                out.update(await self._async(backend, lambda io, b=backend, r=rest: b.get(io, r)))
            except Exception as exc:
                raise self._wrap(backend, "get embeddings", exc) from exc
        return out

    def count(self, kind: Optional[str] = None) -> int:
        if kind is not None:
            backend = self._backend(kind)
            if backend is None:
                return 0
            return int(self._sync(lambda io: backend.count(io, kind_name(kind))))
        return sum(int(self._sync(lambda io, b=b: b.count(io, None))) for b in self._backends)

    # ---- lifecycle
    def check(self) -> None:
        """Refuse (``VectorStoreError`` with the fix) a store that cannot serve this index."""
        for backend in self._backends:
            backend.check(self.dim)

    def persist(self, folder: Union[str, Path]) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for backend in self._backends:
            backend.persist(folder, f"{self.namespace}.{_safe(backend.name)}")

    def load(self, folder: Union[str, Path]) -> bool:
        """Restore what ``persist`` wrote under ``folder``; True if anything was found."""
        folder = Path(folder)
        found = False
        for backend in self._backends:
            found = backend.load(folder, f"{self.namespace}.{_safe(backend.name)}") or found
        return found

    def __repr__(self) -> str:
        parts = ", ".join(f"{b.name}={b.family}" for b in self._backends)
        return f"LlamaIndexVectors({parts})"
