"""``load_index``: a persisted store comes back as an ``E2RAGIndex``; no store, one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document

import llama_index_e2rag
from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index


def test_a_saved_index_loads_and_a_missing_store_is_named(tmp_path: Path) -> None:
    assert llama_index_e2rag.load_index is load_index
    index = E2RAGIndex.from_documents([Document(text="Ann rowed home.", id_="a")],
                                      embed_model=HashEmbedding())
    index.storage_context.persist(str(tmp_path / "s"))
    loaded = load_index(tmp_path / "s", embed_model=HashEmbedding())
    assert isinstance(loaded, E2RAGIndex) and loaded.doc_order("a") == 0
    with pytest.raises(E2RAGError, match="no e2rag store"):
        load_index(tmp_path / "missing")
