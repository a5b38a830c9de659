"""FAISS (``FaissVectorStore``): no ids (a node's id is its row position), no metadata, no
delete, no filters, no ``get_nodes``, and one ``id_map.json`` per folder that several stores
would overwrite. So the backend keeps the table itself (row -> graph id, kind, doc), over-fetches
and filters by kind, tombstones deleted rows (compacting flat indexes), reads vectors back with
``reconstruct``, and persists index and table under per-store names.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import numpy as np
from llama_index.core.vector_stores.types import VectorStoreQuery

from llama_index_e2rag.errors import VectorStoreError
from llama_index_e2rag.vectors.base import VectorHit, VectorRecord
from llama_index_e2rag.vectors.external.aio import IO
from llama_index_e2rag.vectors.external.base import Backend
from llama_index_e2rag.disk.files import atomic_replace
from llama_index_e2rag.vectors.external.id_table import IdTable
from llama_index_e2rag.vectors.external.records import kind_name, unit

#: a flat index is compacted once deleted rows outnumber max(this, live rows)
_COMPACT_MIN = 1024


class FaissBackend(Backend):
    """FAISS: positions as ids, no metadata, no delete, no filters: the adapter keeps the table."""

    family = "faiss"
    native_async = False  # type: ignore[assignment]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.table = IdTable(True)
        self.lock = threading.RLock()  # rows and table change together

    @property
    def index(self) -> Any:
        return self.store.client

    @property
    def returns_embeddings(self) -> bool:  # type: ignore[override]
        import faiss

        return isinstance(self.index, (faiss.IndexFlat, faiss.IndexHNSWFlat))

    def text(self, record: VectorRecord) -> str:
        return ""  # FaissVectorStore keeps vectors only

    def check(self, dim: Optional[int]) -> None:
        super().check(dim)
        import faiss

        index = self.index
        if isinstance(index, (faiss.IndexIDMap, faiss.IndexIDMap2)):
            raise VectorStoreError(
                "FaissVectorStore over an IndexIDMap cannot add (it needs add_with_ids); "
                "use a plain index such as faiss.IndexFlatIP(dim)"
            )
        if not index.is_trained:
            raise VectorStoreError(
                "the FAISS index is not trained; train it first or use faiss.IndexFlatIP(dim)"
            )
        if index.metric_type not in (faiss.METRIC_INNER_PRODUCT, faiss.METRIC_L2):
            raise VectorStoreError(
                "the FAISS index metric is neither inner product nor L2; "
                "use faiss.IndexFlatIP(dim) or faiss.IndexFlatL2(dim)"
            )
        if dim is not None and index.d != dim:
            raise VectorStoreError(
                f"the FAISS index is {index.d}-d, the index embeds {dim}-d; "
                f"create it with faiss.IndexFlatIP({dim})"
            )
        assert self.table is not None
        if index.ntotal != len(self.table.rows):
            raise VectorStoreError(
                f"FAISS store {self.name!r} holds {index.ntotal} vectors but the e2rag id map "
                f"knows {len(self.table.rows)}; pass persist_dir= (or call load(folder)) with the "
                "folder it was persisted to, or start from an empty FAISS index"
            )

    async def add(self, io: IO, records: Sequence[VectorRecord], vectors: np.ndarray) -> None:
        table = self.table
        assert table is not None
        with self.lock:
            if self.index.d != vectors.shape[1]:
                raise VectorStoreError(
                    f"the FAISS index is {self.index.d}-d, got {vectors.shape[1]}-d vectors; "
                    "use an index of the embedding dimension"
                )
            nodes = [self.node(r, v) for r, v in zip(records, vectors, strict=True)]
            positions = self.store.add(nodes)
            for record, position in zip(records, positions, strict=True):
                table.put(record.id, kind_name(record.kind), record.doc_id, int(position))
            self._maybe_compact()

    async def delete_doc(self, io: IO, doc_id: str) -> None:
        assert self.table is not None
        await self.delete_ids(io, list(self.table.by_doc.get(doc_id, ())))

    async def delete_ids(self, io: IO, gids: Sequence[str]) -> None:
        table = self.table
        assert table is not None
        with self.lock:
            for gid in gids:
                table.drop(gid)
            self._maybe_compact()

    def _maybe_compact(self, force: bool = False) -> None:
        """Drop deleted rows from a flat index (``remove_ids`` shifts rows: renumber the table)."""
        import faiss

        table = self.table
        assert table is not None
        if not table.dead or not isinstance(self.index, faiss.IndexFlat):
            return
        if force or table.dead > max(_COMPACT_MIN, len(table.kind)):
            dead = table.compacted()
            self.index.remove_ids(np.asarray(dead, dtype=np.int64))
            if self.index.ntotal != len(table.rows):  # pragma: no cover - faiss contract
                raise VectorStoreError("FAISS compaction lost rows; re-index this store")

    def cosine_from_score(self, score: float) -> Optional[float]:
        import faiss

        if self.index.metric_type == faiss.METRIC_INNER_PRODUCT:
            return score
        return 1.0 - score / 2.0  # faiss L2 is squared; unit vectors

    async def query(self, io: IO, kind: str, q: np.ndarray, top_k: int) -> list[VectorHit]:
        table = self.table
        assert table is not None
        with self.lock:
            total = int(self.index.ntotal)
            live = table.count(kind if self.shared else None)
            if total == 0 or live == 0 or top_k <= 0:
                return []
            # no filters: fetch enough rows to expect top_k of this kind, more if short
            k = min(total, max(top_k, math.ceil(top_k * total / live) * 2))
            while True:
                result = self.store.query(
                    VectorStoreQuery(query_embedding=[float(x) for x in q], similarity_top_k=k)
                )
                hits = []
                for position, score in zip(result.ids or [], result.similarities or []):
                    gid = table.rows[int(position)] if int(position) < len(table.rows) else None
                    if gid is None or (self.shared and table.kind.get(gid) != kind):
                        continue
                    hits.append(VectorHit(gid, float(self.cosine_from_score(float(score)))))
                if len(hits) >= min(top_k, live) or k >= total:
                    return sorted(hits, key=lambda h: (-h.score, h.id))[:top_k]
                k = min(total, k * 4)

    async def get(self, io: IO, gids: Sequence[str]) -> dict[str, np.ndarray]:
        table = self.table
        assert table is not None
        if not self.returns_embeddings:
            return {}
        with self.lock:
            return {g: unit(self.index.reconstruct(table.pos[g])) for g in gids if g in table.pos}

    def persist(self, folder: Path, prefix: str) -> None:
        table = self.table
        assert table is not None
        with self.lock:
            self._maybe_compact(force=True)
            state = table.to_json(int(self.index.ntotal))
            atomic_replace(folder / f"{prefix}.faiss", lambda p: self.store.persist(persist_path=str(p)))
            atomic_replace(
                folder / f"{prefix}.ids.json",
                lambda p: Path(p).write_text(json.dumps(state), encoding="utf-8"),
            )

    def load(self, folder: Path, prefix: str) -> bool:
        """Take the persisted index when the given one is empty (or already that index)."""
        from llama_index.vector_stores.faiss import FaissVectorStore

        index_path, ids_path = folder / f"{prefix}.faiss", folder / f"{prefix}.ids.json"
        if not (index_path.is_file() and ids_path.is_file()):
            return False
        with self.lock:
            state = json.loads(ids_path.read_text(encoding="utf-8"))
            if self.index.ntotal == 0:
                store = FaissVectorStore.from_persist_path(str(index_path))
            elif self.index.ntotal == state.get("ntotal"):
                store = self.store  # the caller loaded the same index already
            else:
                raise VectorStoreError(
                    f"FAISS store {self.name!r} holds {self.index.ntotal} vectors, {index_path} "
                    f"{state.get('ntotal')}; pass an empty FAISS index to load the persisted one"
                )
            if store.client.ntotal != state.get("ntotal"):
                raise VectorStoreError(
                    f"{index_path} and {ids_path} are out of sync; persist again or re-index"
                )
            self.store = store
            self.table = IdTable.from_json(state, True)
        return True
