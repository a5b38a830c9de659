"""What the adapter must remember itself when a store cannot tell it.

FAISS keeps no ids, so the table maps each row position to its graph id; stores that return ids
only (llama-index's ``SimpleVectorStore``) need stored uuid -> graph id. Both need kind and
document per id to filter results by kind, delete a document and count. The table is persisted
as JSON beside the store's own files.
"""

from __future__ import annotations

from typing import Any, Optional

from llama_index_e2rag.errors import VectorStoreError
from llama_index_e2rag.vectors.external.records import stored_id

_STATE_VERSION = 1


class IdTable:
    """graph id -> (kind, doc), optionally with the FAISS row each id lives in."""

    def __init__(self, positional: bool) -> None:
        self.positional = positional
        self.rows: list[Optional[str]] = []  # FAISS position -> graph id (None: deleted)
        self.pos: dict[str, int] = {}
        self.kind: dict[str, str] = {}
        self.doc: dict[str, str] = {}
        self.by_doc: dict[str, set[str]] = {}
        self.by_uid: dict[str, str] = {}  # stored uuid -> graph id
        self.dead = 0

    def put(self, gid: str, kind: str, doc: str, position: Optional[int] = None) -> None:
        self.drop(gid)
        self.kind[gid], self.doc[gid] = kind, doc
        self.by_doc.setdefault(doc, set()).add(gid)
        self.by_uid[stored_id(gid)] = gid
        if self.positional:
            assert position is not None
            while len(self.rows) <= position:
                self.rows.append(None)
            self.rows[position] = gid
            self.pos[gid] = position

    def drop(self, gid: str) -> None:
        if gid not in self.kind:
            return
        doc = self.doc.pop(gid)
        del self.kind[gid]
        self.by_uid.pop(stored_id(gid), None)
        ids = self.by_doc.get(doc)
        if ids is not None:
            ids.discard(gid)
            if not ids:
                del self.by_doc[doc]
        if self.positional:
            self.rows[self.pos.pop(gid)] = None
            self.dead += 1

    def count(self, kind: Optional[str]) -> int:
        if kind is None:
            return len(self.kind)
        return sum(1 for k in self.kind.values() if k == kind)

    def compacted(self) -> list[int]:
        """Forget deleted rows; return their positions (for ``faiss.Index.remove_ids``)."""
        dead = [i for i, gid in enumerate(self.rows) if gid is None]
        self.rows = [gid for gid in self.rows if gid is not None]
        self.pos = {gid: i for i, gid in enumerate(self.rows)}
        self.dead = 0
        return dead

    def to_json(self, ntotal: Optional[int]) -> dict[str, Any]:
        return {
            "version": _STATE_VERSION,
            "ntotal": ntotal,
            "rows": self.rows if self.positional else None,
            "ids": {gid: [self.kind[gid], self.doc[gid]] for gid in self.kind},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], positional: bool) -> "IdTable":
        if data.get("version") != _STATE_VERSION:
            raise VectorStoreError(
                f"vector id map version {data.get('version')!r} is not {_STATE_VERSION}; "
                "re-index with this version of llama-index-e2rag"
            )
        table = cls(positional)
        for gid, (kind, doc) in data["ids"].items():
            table.kind[gid], table.doc[gid] = kind, doc
            table.by_doc.setdefault(doc, set()).add(gid)
            table.by_uid[stored_id(gid)] = gid
        if positional:
            table.rows = list(data["rows"])
            table.pos = {gid: i for i, gid in enumerate(table.rows) if gid is not None}
            table.dead = sum(1 for gid in table.rows if gid is None)
        return table
