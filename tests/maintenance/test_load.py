"""``load_index``: a persisted store comes back as an ``E2RAGIndex``; no store, one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document
from llama_index.core.node_parser import SentenceSplitter

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


#: Run in a fresh interpreter: what a load and an offline answer leave of llama-index's global
#: tokenizer (tiktoken) and default transformations, then that the index still gives both.
FRESH_LOAD = """
import sys
import llama_index.core
from llama_index.core.settings import Settings
from hash_embedding import HashEmbedding
from llama_index_e2rag.maintenance.load import load_index

index = load_index(sys.argv[1], embed_model=HashEmbedding())
answer = index.as_query_engine().query("Who rowed home?")
print(llama_index.core.global_tokenizer is None, Settings._transformations is None,
      "rowed" in str(answer))
print(index._transformations is Settings.transformations)
"""


def test_a_load_and_an_offline_answer_build_no_default_splitter(tmp_path: Path) -> None:
    """llama-index's default ``SentenceSplitter`` (tiktoken's vocabulary, ~0.5 s) is built only
    when the index's transformations are asked for: the index chunks with its own splitter."""
    index = E2RAGIndex.from_documents([Document(text="Ann rowed home.", id_="a")],
                                      embed_model=HashEmbedding())
    index.storage_context.persist(str(tmp_path / "s"))
    tests = Path(__file__).resolve().parents[1]
    ran = subprocess.run(
        [sys.executable, "-c", FRESH_LOAD, str(tmp_path / "s")],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), *sys.path])},
    )
    assert ran.stdout.split("\n")[:2] == ["True True True", "True"], ran.stderr


def test_transformations_given_to_the_index_are_kept(tmp_path: Path) -> None:
    splitter = SentenceSplitter(chunk_size=64, chunk_overlap=0)
    index = E2RAGIndex.from_documents([Document(text="Ann rowed home.", id_="a")],
                                      embed_model=HashEmbedding(), transformations=[splitter])
    assert index._transformations == [splitter]
