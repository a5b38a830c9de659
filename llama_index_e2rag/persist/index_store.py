"""Our entry in llama-index's ``index_store.json``: its type keys, and its fields read without
llama-index (``e2rag show`` and the ownership check answer without importing it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

#: The index store's type key of an ``E2RAGIndexStruct``. A process that never imported the
#: package fails to load a store with ``KeyError: '<this key>'``: the key is the import that fixes it.
E2RAG_STRUCT_TYPE = "llama_index_e2rag.E2RAGIndex"
#: 0.1.0 wrote this one; still registered (``legacy`` reads what it holds).
LEGACY_STRUCT_TYPE = "e2rag"
STRUCT_TYPES = (E2RAG_STRUCT_TYPE, LEGACY_STRUCT_TYPE)


def read_struct(store: Path) -> Optional[dict[str, Any]]:
    """The E2RAGIndex struct's fields from ``index_store.json`` (None if there is none)."""
    path = store / "index_store.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    for entry in (data.get("index_store/data") or {}).values():
        if entry.get("__type__") in STRUCT_TYPES:
            struct = entry.get("__data__")
            return json.loads(struct) if isinstance(struct, str) else struct
    return None
