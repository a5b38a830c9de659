"""The same text twice: a new document whose text is already indexed is skipped with a notice
(Python API: a logged warning; ``e2rag index``: one line), unless duplicates are allowed; the
same id with another text stays an update."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document, Settings
from scripted_llm import ScriptedLLM
from test_index import NAMES, SEQUEL, STORY, load, make_index

from llama_index_e2rag.extract.chrono import ChronoLayerBuilder
from llama_index_e2rag.cli.entry import main
from llama_index_e2rag.cli.store import load_store
from llama_index_e2rag.stores.same_text import find_duplicates, text_hash


def _book(doc_id: str, text: str = STORY) -> Document:
    return Document(text=text, id_=doc_id, metadata={"file_name": doc_id.rsplit("/", 1)[-1]})


def _docs(index) -> set[str]:  # type: ignore[no-untyped-def]
    return set(index.graph_store.doc_orders())


def _notices(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipped ")]


def test_a_copy_in_one_call_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="llama_index_e2rag"):
        index = make_index([_book("/books/a.txt"), _book("/copies/a.txt"), _book("/b", SEQUEL)])
    assert _docs(index) == {"/books/a.txt", "/b"}
    (notice,) = _notices(caplog)
    assert "/copies/a.txt" in notice and "/books/a.txt" in notice
    assert "allow_duplicates=True" in notice and "\n" not in notice


def test_a_copy_of_a_stored_document_costs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    llm = ScriptedLLM(names=NAMES)
    index = make_index([_book("/books/a.txt")], llm=llm)
    spent = sum(llm.calls_by_kind.values())
    with caplog.at_level(logging.WARNING, logger="llama_index_e2rag"):
        index.insert(_book("/copies/a.txt"))
        index.insert_documents([_book("/elsewhere/a.txt")])
        asyncio.run(index.ainsert(_book("/async/a.txt")))
    assert _docs(index) == {"/books/a.txt"}
    assert sum(llm.calls_by_kind.values()) == spent  # no extraction for a skipped copy
    assert len(_notices(caplog)) == 3 and all("already indexed" in n for n in _notices(caplog))


def test_allow_duplicates_indexes_the_copy_per_call_or_per_index() -> None:
    index = make_index([_book("/books/a.txt")])
    index.insert(_book("/copies/a.txt"), allow_duplicates=True)
    index.insert_documents([_book("/more/a.txt")], allow_duplicates=True)
    assert _docs(index) == {"/books/a.txt", "/copies/a.txt", "/more/a.txt"}
    allowing = make_index([_book("/a"), _book("/b")], allow_duplicates=True)
    assert _docs(allowing) == {"/a", "/b"}
    allowing.insert(_book("/c"))
    allowing.insert(_book("/d"), allow_duplicates=False)
    assert _docs(allowing) == {"/a", "/b", "/c"}


def test_the_same_id_with_a_new_text_is_an_update_not_a_duplicate() -> None:
    index = make_index([_book("/a"), _book("/b", SEQUEL)])
    index.insert(_book("/a", STORY + " Ron laughed."))  # a changed text replaces the old one
    index.insert(_book("/b"))  # even when it is another document's text: it is an update
    assert _docs(index) == {"/a", "/b"}
    assert "Ron laughed" in " ".join(n.text for n in index.graph_store.nodes(doc_id="/a"))
    # the replaced text is free again: a new document may bring it
    index.insert(_book("/sequel", SEQUEL))
    assert _docs(index) == {"/a", "/b", "/sequel"}


def test_only_the_text_counts_not_metadata_nor_a_different_text() -> None:
    copy = Document(text=STORY, id_="/copy", metadata={"file_name": "other.txt", "year": 1900})
    assert text_hash(copy) == text_hash(_book("/a")) and copy.hash != _book("/a").hash
    index = make_index([_book("/a")])
    index.insert(copy)
    index.insert(_book("/edited", STORY.replace("Halloween", "Christmas")))
    assert _docs(index) == {"/a", "/edited"}


def test_the_text_hash_survives_saving_loading_and_added_layers(tmp_path: Path) -> None:
    make_index([_book("/a")]).storage_context.persist(str(tmp_path))
    loaded = load(tmp_path)
    loaded.add_layers([ChronoLayerBuilder()])  # rewrites every document's record
    reopened = load(tmp_path)
    reopened.insert(_book("/copy"))
    assert _docs(reopened) == {"/a"}


def test_concurrent_inserts_of_one_text_index_it_once() -> None:
    index = make_index([_book("/b", SEQUEL)])

    async def both() -> None:
        await asyncio.gather(index.ainsert(_book("/one")), index.ainsert(_book("/two")))

    asyncio.run(both())
    assert len(_docs(index) & {"/one", "/two"}) == 1


def test_find_duplicates_follows_the_call_order_and_pending_inserts() -> None:
    records = {"/stored": {"text": text_hash(_book("/x"))}}
    found = find_duplicates([_book("/new"), _book("/b", SEQUEL), _book("/c", SEQUEL)], records)
    assert [(d.doc_id, d.same_as, d.stored) for d in found] == [
        ("/new", "/stored", True), ("/c", "/b", False)
    ]
    pending = {text_hash(_book("/b", SEQUEL)): "/in-flight"}
    assert [d.same_as for d in find_duplicates([_book("/b", SEQUEL)], {}, pending)] == [
        "/in-flight"
    ]


# -- e2rag index --------------------------------------------------------------------------------
@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch) -> ScriptedLLM:
    llm = ScriptedLLM(names=NAMES)
    monkeypatch.setattr(Settings, "_llm", llm)
    monkeypatch.setattr(Settings, "_embed_model", HashEmbedding())
    return llm


def test_the_command_skips_a_copy_with_one_line_each_time(
    models: ScriptedLLM, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.txt").write_text(STORY, encoding="utf-8")
    (tmp_path / "copy_of_a.txt").write_text(STORY, encoding="utf-8")
    (tmp_path / "b.txt").write_text(SEQUEL, encoding="utf-8")
    store = str(tmp_path / "store")
    a, copy = str(tmp_path / "a.txt"), str(tmp_path / "copy_of_a.txt")

    assert main(["index", a, copy, "--store", store, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith(f"e2rag: skipped {copy}: same text as {a}")
    assert "--allow-duplicates" in err and "1 skipped" in out

    # into the store that has the original, beside a new file
    assert main(["index", copy, str(tmp_path / "b.txt"), "--store", store, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "already indexed" in err
    assert out.startswith("indexed 1 document(s) (1 skipped")
    assert set(load_store(Path(store)).graph_store.doc_orders()) == {
        str((tmp_path / n).resolve()) for n in ("a.txt", "b.txt")
    }

    assert main(["index", copy, "--store", store, "--quiet", "--allow-duplicates"]) == 0
    out, err = capsys.readouterr()
    assert "skipped" not in err + out and out.startswith("indexed 1 document(s) into")
    assert len(load_store(Path(store)).graph_store.doc_orders()) == 3
