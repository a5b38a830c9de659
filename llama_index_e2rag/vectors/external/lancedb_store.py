"""LanceDB (``LanceDBVectorStore``): no table until the first add; llama-index's ``delete``,
``delete_nodes`` and ``get_nodes`` put values in double quotes, which DataFusion reads as column
names (``No field named "doc-b"``), so the backend deletes and reads natively with escaped
single-quoted literals; an empty query result raises ``Warning``; ``add`` appends duplicates, so
ids are deleted first. Results carry their vectors, so scores are exact cosines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from llama_index_e2rag.errors import VectorStoreError
from llama_index_e2rag.vectors.base import VectorHit
from llama_index_e2rag.vectors.external.aio import IO
from llama_index_e2rag.vectors.external.base import Backend
from llama_index_e2rag.vectors.external.records import BATCH, KIND_KEY, stored_id, unit


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _id_in(uids: Sequence[str]) -> str:
    return "id IN (" + ",".join(_sql_str(u) for u in uids) + ")"


class LanceDBBackend(Backend):
    """LanceDB: native deletes and reads (quoted literals); no table until the first add."""

    family = "lancedb"
    counts_natively = True
    returns_embeddings = True  # type: ignore[assignment]
    native_async = False  # type: ignore[assignment]

    @property
    def tbl(self) -> Any:
        return getattr(self.store, "_table", None)

    def check(self, dim: Optional[int]) -> None:
        super().check(dim)
        if (self.store.query_type or "vector") != "vector":
            raise VectorStoreError(
                f"LanceDBVectorStore(query_type={self.store.query_type!r}) needs query text; "
                "create it with query_type='vector' for e2rag"
            )
        table = self.tbl
        if table is not None and dim is not None:
            field = table.schema.field(self.store.vector_column_name)
            size = getattr(field.type, "list_size", None)
            if size not in (None, -1, dim):
                raise VectorStoreError(
                    f"LanceDB table {self.store._table_name!r} holds {size}-d vectors, the index "
                    f"embeds {dim}-d; use another table_name"
                )

    async def remove_ids(self, io: IO, uids: list[str]) -> None:
        if self.tbl is None:
            return
        for start in range(0, len(uids), BATCH):
            self.tbl.delete(_id_in(uids[start : start + BATCH]))

    async def delete_doc(self, io: IO, doc_id: str) -> None:
        if self.tbl is not None:
            self.tbl.delete(f"{self.store.doc_id_key} = {_sql_str(doc_id)}")

    async def query(self, io: IO, kind: str, q: np.ndarray, top_k: int) -> list[VectorHit]:
        if self.tbl is None:
            return []
        try:
            return await super().query(io, kind, q, top_k)
        except Warning:  # "query results are empty.."
            return []

    async def get(self, io: IO, gids: Sequence[str]) -> dict[str, np.ndarray]:
        by_uid = {stored_id(g): g for g in gids}
        if self.tbl is None or not by_uid:
            return {}
        out: dict[str, np.ndarray] = {}
        uids = list(by_uid)
        column = self.store.vector_column_name
        for start in range(0, len(uids), BATCH):
            chunk = uids[start : start + BATCH]
            rows = (
                self.tbl.search()
                .where(_id_in(chunk))
                .select(["id", column])
                .limit(len(chunk))  # a plain search() stops at 10 rows
                .to_list()
            )
            for row in rows:
                out[by_uid[row["id"]]] = unit(row[column])
        return out

    async def count(self, io: IO, kind: Optional[str]) -> int:
        if self.tbl is None:
            return 0
        if kind is None or not self.shared:
            return int(self.tbl.count_rows())
        return int(self.tbl.count_rows(f"metadata.{KIND_KEY} = {_sql_str(kind)}"))
