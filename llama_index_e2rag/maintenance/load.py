"""``load_index(persist_dir)``: the ``E2RAGIndex`` of a persisted store, its files checked first
(``persist.load.open_storage``), so a damaged one is named with its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llama_index.core import load_index_from_storage

from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.persist.load import open_storage

__all__ = ["load_index"]


def load_index(persist_dir: str | Path, **kwargs: Any) -> E2RAGIndex:
    """The ``E2RAGIndex`` persisted in ``persist_dir`` (kwargs go to the index, e.g.
    ``embed_model=``, ``llm=``)."""
    storage = open_storage(Path(persist_dir))
    index = load_index_from_storage(storage, persist_dir=str(persist_dir), **kwargs)
    if not isinstance(index, E2RAGIndex):
        raise E2RAGError(f"{persist_dir} holds a {type(index).__name__}, not an e2rag index")
    return index
