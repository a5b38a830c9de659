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


def test_saving_a_model_keeps_neither_it_nor_the_vector_pages_read_for_it(
    store: Path, minilm, tmp_path: Path
) -> None:
    """``save_now`` (what ``e2rag index`` calls per model) writes the model, then forgets it and
    has the stores let go of the vector pages: a build's peak is one model's, not the sum; a
    query after it reads the saved file back."""
    import shutil

    from llama_index_e2rag.stores.read_model_file import save_now
    from llama_index_e2rag.stores.state_cache import StateCache

    copy = Path(shutil.copytree(store, tmp_path / "store"))
    stores = load_index(copy, embed_model=minilm).stores
    built, released = [], []
    cache = StateCache(lambda stores, state: built.append(state) or object())
    stores.release_pages = lambda: released.append(1)  # type: ignore[method-assign]
    save_now(stores, cache)
    assert built and released == [1]
    cache.get(stores)
    assert len(built) == 2  # not kept: built (here: read back) again
