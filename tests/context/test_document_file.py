"""The documents' story maps persisted per content state (``context.document_file``): a new
process places evidence from the saved file without reading every chunk, the same places, and
no reader has to ask for the file (``story_position.document_chunks`` consults it when given
the stores); a file that does not match the graph is derived again.

Real components: the offline default graph (spaCy), MiniLM, a persisted store in a real folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import Document

from llama_index_e2rag.app.query import QueryOptions, run_retrieve
from llama_index_e2rag.context import document_file, story_text
from llama_index_e2rag.context.story_position import document_chunks
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.retrievers.filters import document_metadata

from persisted_demo import DEMO_QUESTIONS, HARMS, assert_derived_again, model_file, persist_demo


@pytest.fixture(scope="module")
def store(minilm, tmp_path_factory) -> Path:
    """Peter Rabbit persisted, its documents' model saved as ``e2rag index`` saves it."""
    folder = tmp_path_factory.mktemp("store")
    document_file.save_read_model(persist_demo(folder, minilm).stores)
    return folder


def _places(store: Path, minilm: Any) -> list[list[tuple[Any, ...]]]:
    """Each demo question's evidence as ``e2rag query`` places it (a new load each time)."""
    index = load_index(store, embed_model=minilm)
    return [
        [(s["doc_id"], s["where"], s["chapter"], s["percent"], s["file_name"])
         for s in run_retrieve(index, store, QueryOptions(q, "vector" if i else None))["sources"]]
        for i, q in enumerate(DEMO_QUESTIONS[:2])
    ]


def _no_chunk_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test where a document's chunks are read to derive its story map."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a document's chunks were read to place evidence")

    monkeypatch.setattr(story_text, "_story_map", refuse)


def test_a_new_process_reads_the_saved_readings_equal_to_the_chunks(
    store: Path, minilm, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert model_file(store, document_file.DOCUMENTS_FILE).is_file()
    index = load_index(store, embed_model=minilm)
    # a graph alone has no read model: its chunks are read
    derived = {d: document_chunks(index.graph_store, d) for d in index.graph_store.doc_ids()}
    assert derived and all(r.story is not None and r.source_spans for r in derived.values())
    expected = _places(store, minilm)

    _no_chunk_reads(monkeypatch)
    loaded = load_index(store, embed_model=minilm)  # a reader asking with the stores, nothing else
    assert {d: document_chunks(loaded.stores, d) for d in derived} == derived
    assert _places(store, minilm) == expected


@pytest.mark.parametrize("harm", HARMS)
def test_a_file_that_does_not_match_the_graph_is_derived_again(
    store: Path, minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, harm: str
) -> None:
    store = Path(shutil.copytree(store, tmp_path / "store"))
    assert_derived_again(
        model_file(store, document_file.DOCUMENTS_FILE),
        harm,
        "first_chunk",
        lambda: document_file.MODEL.write(
            load_index(store, embed_model=minilm).stores, "another state", {}
        ),
        lambda: _places(store, minilm),
        lambda: _no_chunk_reads(monkeypatch),
    )


def test_a_write_makes_the_saved_readings_stale(store: Path, minilm, tmp_path: Path) -> None:
    store = Path(shutil.copytree(store, tmp_path / "store"))
    index = load_index(store, embed_model=minilm)
    index.insert(Document(text="CHAPTER I.\n\nBenjamin Bunny visited the garden.", id_="ben"))
    reloaded = load_index(store, embed_model=minilm)
    story = document_chunks(reloaded.stores, "ben").story
    assert story is not None and story.headings == ((0, "Chapter I"),)


def test_the_metadata_filters_read_documents_from_the_read_model(
    store: Path, minilm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that only holds the stores (the filters' documents) gets the read model's
    answer without asking for it: no chunk is read."""
    _no_chunk_reads(monkeypatch)
    index = load_index(store, embed_model=minilm)
    metadata = document_metadata(index.stores)
    assert sorted(metadata) == sorted(index.graph_store.doc_ids())
    assert all(meta["doc_id"] == doc for doc, meta in metadata.items())
