"""A mode's view saved as a read model (``stores.read_model_file``) is trusted only as it was
written for this content: damaged, missing or written for another state, it is derived from the
graph again, with the same ranking, and saved as before.

Real components: the offline event and sentence graph layers (spaCy), MiniLM, a persisted store.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llama_index_e2rag.app.demo import sample_document
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.retrievers import (
    event_graph,
    event_graph_file,
    sentence_graph,
    sentence_graph_file,
)

from persisted_demo import HARMS, assert_derived_again, forbid, model_file, ranking

#: Per mode: its file module, a key of its body, the derivation a read must not call.
MODELS = {
    "event_graph": (event_graph_file, "links", event_graph, "_derive"),
    "sentence_graph": (sentence_graph_file, "rst", sentence_graph_file, "derive"),
}


@pytest.fixture(scope="module")
def store(minilm, tmp_path_factory) -> Path:
    """Peter Rabbit with both graph layers, persisted, both views saved as ``e2rag index``
    saves them."""
    from llama_index_e2rag import EventGraphBuilder, SentenceGraphBuilder

    folder = tmp_path_factory.mktemp("store")
    index = E2RAGIndex.from_documents(
        [sample_document()], embed_model=minilm,
        doc_builders=[EventGraphBuilder(), SentenceGraphBuilder()],
    )
    index.storage_context.persist(str(folder))
    event_graph.save_read_model(index.stores)
    sentence_graph.save_read_model(index.stores)
    return folder


@pytest.mark.parametrize("mode", sorted(MODELS))
@pytest.mark.parametrize("harm", HARMS)
def test_a_damaged_missing_or_other_model_is_derived_and_written_again(
    store: Path, minilm, monkeypatch: pytest.MonkeyPatch, mode: str, harm: str
) -> None:
    model, key, module, derive = MODELS[mode]

    def other() -> None:
        model.write(load_index(store, embed_model=minilm).stores, "none", {})

    assert_derived_again(
        model_file(store, model.MODEL.name), harm, key, other,
        lambda: ranking(load_index(store, embed_model=minilm), mode=mode),
        lambda: forbid(monkeypatch, module, derive, f"the {mode} view was derived"),
    )
