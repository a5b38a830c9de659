"""Progress on stderr for every stage of a build and a save, and nothing when it is off."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core import Document

from llama_index_e2rag.extract.builders import restore_builders
from llama_index_e2rag.index import E2RAGIndex

BOOK = (
    "Peter gave himself up for lost, and shed big tears. His sobs were overheard by some "
    "friendly sparrows, who flew to him in great excitement. Mr. McGregor jumped up and ran "
    "after Peter. Peter ran home to his mother in the sand-bank."
)
LAYERS = ("chrono", "sentence_graph", "event_graph")


def _build(hash_embed, show: bool) -> E2RAGIndex:
    """One document (a novel is one): its layers must show progress too."""
    return E2RAGIndex.from_documents(
        [Document(text=BOOK, id_="book")],
        embed_model=hash_embed,
        doc_builders=restore_builders({name: {} for name in LAYERS}),
        show_progress=show,
    )


def test_every_stage_of_a_build_and_a_save_names_itself(hash_embed, capfd, tmp_path: Path):
    index = _build(hash_embed, show=True)
    err = capfd.readouterr().err
    stages = ["Parsing (spaCy)", "Building document layers", *LAYERS, "Embedding", "Writing stores"]
    assert [stage for stage in stages if stage not in err] == []
    index.storage_context.persist(str(tmp_path / "store"))
    assert "Saving e2rag stores" in capfd.readouterr().err


@pytest.mark.parametrize("step", ["build", "save"])
def test_nothing_is_printed_without_show_progress(hash_embed, capfd, tmp_path: Path, step):
    index = _build(hash_embed, show=False)
    if step == "save":
        capfd.readouterr()
        index.storage_context.persist(str(tmp_path / "store"))
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


@pytest.mark.parametrize("show", [True, False])
def test_adding_layers_to_stored_documents_shows_each_stage_only_when_asked(
    hash_embed, capfd, show: bool
):
    """``add_layers`` (``e2rag index --chrono`` on a store) took a minute on a novel, silently."""
    index = E2RAGIndex.from_documents(
        [Document(text=BOOK, id_="book")], embed_model=hash_embed, show_progress=show
    )
    capfd.readouterr()
    added = index.add_layers(restore_builders({name: {} for name in LAYERS}))
    assert added.names == list(LAYERS) and added.nodes > 0
    captured = capfd.readouterr()
    if show:
        stages = ["Building document layers", *LAYERS, "Embedding", "Writing stores"]
        assert [stage for stage in stages if stage not in captured.err] == []
    else:
        assert captured.err == "" and captured.out == ""
