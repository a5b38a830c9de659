"""``e2rag index`` extracts and saves documents in groups of ``--commit-words``: the same store
as one write, memory for one group, and a stopped run keeps whole groups (a re-run adds the
rest)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from llama_index.core import Document
from scripted_llm import ScriptedLLM
from extract.test_chrono import HARBOUR, MOUNTAIN

from llama_index_e2rag.cli.entry import main
from llama_index_e2rag.cli.index import commit_groups
from llama_index_e2rag.cli.store import load_store
from llama_index_e2rag.index import E2RAGIndex

from .conftest import EXTRACTION_KINDS, extractions


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    paths = []
    for name, text in (("harbour", HARBOUR), ("mountain", MOUNTAIN)):
        path = tmp_path / f"{name}.txt"
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    return paths


def _graph(store: Path) -> tuple[list[str], list[tuple[str, str, str]]]:
    graph = load_store(store).graph_store
    return (
        sorted(n.id for n in graph.nodes()),
        sorted((e.source, e.target, e.kind.value) for e in graph.edges()),
    )


@pytest.mark.parametrize("seed", range(5))
def test_groups_keep_the_order_and_close_when_the_next_document_would_pass_the_budget(
    seed: int,
) -> None:
    rng = random.Random(seed)
    budget = rng.randint(5, 40)
    docs = [
        Document(text=" ".join(["w"] * rng.randint(1, 60)), id_=f"d{i}")
        for i in range(rng.randint(1, 12))
    ]
    groups = commit_groups(docs, budget)

    def words(group: list[Document]) -> int:
        return sum(len(d.text.split()) for d in group)

    assert [d.id_ for g in groups for d in g] == [d.id_ for d in docs]
    for group in groups:
        assert group and (len(group) == 1 or words(group) <= budget)
    for group, following in zip(groups, groups[1:]):
        assert words(group) + len(following[0].text.split()) > budget


def test_no_documents_is_one_empty_group() -> None:
    assert commit_groups([], 10) == [[]]


def test_a_store_indexed_in_groups_is_the_store_of_one_write(
    llm: ScriptedLLM, files: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole, grouped = tmp_path / "whole", tmp_path / "grouped"
    assert main(["index", *files, "--store", str(whole), "--chunk-size", "40"]) == 0
    assert "group 1 of" not in capsys.readouterr().err
    assert main(["index", *files, "--store", str(grouped), "--chunk-size", "40",
                 "--commit-words", "1"]) == 0
    err = capsys.readouterr().err
    assert "e2rag: group 1 of 2: 1 document(s)" in err
    assert "e2rag: group 2 of 2: 1 document(s)" in err
    assert _graph(grouped) == _graph(whole)


def test_a_run_stopped_between_groups_keeps_the_first_and_a_rerun_extracts_only_the_rest(
    llm: ScriptedLLM, files: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    argv = ["index", *files, "--store", str(store), "--chunk-size", "40", "--commit-words", "1",
            "--quiet"]

    def stopped(self: E2RAGIndex, documents: list[Document]) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(E2RAGIndex, "insert_documents", stopped)
        assert main(argv) == 130  # "e2rag: interrupted", as for a Ctrl-C
    first = load_store(store).graph_store.doc_orders()
    assert list(first) == [str(Path(files[0]).resolve())]
    extracted = extractions(llm)

    assert main(argv) == 0
    stored = load_store(store).graph_store
    assert set(stored.doc_orders()) == {str(Path(f).resolve()) for f in files}
    assert stored.doc_orders()[str(Path(files[0]).resolve())] == first[
        str(Path(files[0]).resolve())
    ]
    second_chunks = [
        c for c in stored.nodes(doc_id=str(Path(files[1]).resolve()))
        if c.kind.value == "chunk" and c.attrs.get("layer") != 0
    ]
    assert extractions(llm) == extracted + len(EXTRACTION_KINDS) * len(second_chunks)
