"""A document staged on disk, extracted a group of chunks at a time, commits the store a
document staged in memory and extracted in one call commits: the same nodes, edges, vectors,
failures and row digests, and the same answers in every mode (offline default, MiniLM, every
layer). The staging file is the build's own and is gone however the build ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core import Document

from llama_index_e2rag.graph.sqlite_store import SQLiteGraphStore
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.ingest import staging
from llama_index_e2rag.modes import RETRIEVER_MODES
from llama_index_e2rag.schema import NodeKind
from novel_stories import VARIANTS, build

_ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = [
    "What did Margaret do after the fire at the mill?",
    "Who chased Peter through the garden?",
    "Mr. Hale",
]


def _documents() -> list[Document]:
    peter = (_ROOT / "llama_index_e2rag" / "data" / "peter_rabbit.txt").read_text("utf-8")
    return [
        Document(text=build(VARIANTS[0]).text, id_="hale"),
        Document(text=peter, id_="peter"),
    ]


def _index(minilm: Any) -> E2RAGIndex:
    from llama_index_e2rag import ChronoLayerBuilder, EventGraphBuilder, SentenceGraphBuilder

    return E2RAGIndex.from_documents(
        _documents(), embed_model=minilm, llm=None,
        doc_builders=[ChronoLayerBuilder(), SentenceGraphBuilder(), EventGraphBuilder()],
    )


def _contents(index: E2RAGIndex) -> dict[str, Any]:
    graph = index.stores.graph
    nodes = {
        n.id: (n.kind, n.doc_id, n.pos, n.span, n.chunk_id, n.name, n.text, n.attrs)
        for n in graph.nodes()
    }
    edges = {(e.source, e.target, e.kind, e.role, e.doc_id, str(e.attrs)) for e in graph.edges()}
    vectors = index.stores.embeddings(sorted(nodes))
    return {
        "nodes": nodes,
        "edges": edges,
        "vectors": vectors,
        "failures": sorted(map(str, graph.failures())),
        "records": graph.doc_records(),
    }


@pytest.fixture(scope="module")
def both(minilm, offline) -> tuple[E2RAGIndex, E2RAGIndex, list[Any]]:
    """The two documents staged in memory and extracted in one call, then staged on disk and
    extracted ~150 words per call (many group boundaries inside every chapter)."""
    in_memory = _index(minilm)
    created: list[SQLiteGraphStore] = []

    def on_disk(words: int) -> SQLiteGraphStore:
        created.append(SQLiteGraphStore())
        return created[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("llama_index_e2rag.ingest.writer.staging_graph", on_disk)
        mp.setattr(staging, "EXTRACT_GROUP_WORDS", 150)
        on_disk_index = _index(minilm)
    return in_memory, on_disk_index, created


def test_a_document_staged_on_disk_commits_what_one_staged_in_memory_commits(both) -> None:
    in_memory, on_disk, created = both
    assert len(created) == 2
    memory, disk = _contents(in_memory), _contents(on_disk)
    assert disk["nodes"] == memory["nodes"]
    kinds = {kind for kind, *_ in memory["nodes"].values()}
    assert {NodeKind.MENTION, NodeKind.EVENT, NodeKind.FACT, NodeKind.ENTITY} <= kinds
    assert disk["edges"] == memory["edges"]
    assert disk["failures"] == memory["failures"]
    assert disk["records"] == memory["records"]  # row digests and vector counts included
    assert disk["vectors"].keys() == memory["vectors"].keys()
    for node_id, vector in memory["vectors"].items():
        np.testing.assert_allclose(disk["vectors"][node_id], vector, atol=1e-6)


@pytest.mark.parametrize("mode", RETRIEVER_MODES)
def test_every_mode_answers_the_same_from_either_staging(both, mode: str) -> None:
    in_memory, on_disk, _ = both
    for question in QUESTIONS:
        got = [(n.node.node_id, round(n.score or 0.0, 6)) for n in
               on_disk.as_retriever(mode).retrieve(question)]
        want = [(n.node.node_id, round(n.score or 0.0, 6)) for n in
                in_memory.as_retriever(mode).retrieve(question)]
        assert got == want, (mode, question)


def test_the_staging_files_are_gone_after_the_build(both) -> None:
    *_, created = both
    assert all(not Path(g.path).exists() for g in created)


def test_a_failed_build_deletes_its_staging_file_and_commits_nothing(minilm, offline) -> None:
    from llama_index_e2rag import ChronoLayerBuilder

    class Broken(ChronoLayerBuilder):
        async def abuild(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("builder broke")

    created: list[SQLiteGraphStore] = []

    def on_disk(words: int) -> SQLiteGraphStore:
        created.append(SQLiteGraphStore())
        return created[-1]

    index = E2RAGIndex(nodes=[], embed_model=minilm, llm=None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("llama_index_e2rag.ingest.writer.staging_graph", on_disk)
        index.add_doc_builders([Broken()])
        with pytest.raises(RuntimeError, match="builder broke"):
            index.insert(_documents()[1])
    assert created and all(not Path(g.path).exists() for g in created)
    assert index.stores.graph.doc_orders() == {}


def test_extraction_runs_per_group_only_when_every_extractor_is_chunk_local() -> None:
    from llama_index.core.schema import TextNode

    chunks = [TextNode(text="word " * 40, id_=f"c{i}") for i in range(10)]

    class Local:
        chunk_local = True

    class Whole:  # e.g. a llama-index metadata extractor
        pass

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(staging, "EXTRACT_GROUP_WORDS", 100)
        words = staging.chunk_words(chunks)
        local = list(staging.extraction_groups(chunks, words, [Local()]))
        mixed = list(staging.extraction_groups(chunks, words, [Local(), Whole()]))
    assert [len(g) for g in local] == [2, 2, 2, 2, 2]
    assert [c.node_id for g in local for c in g] == [c.node_id for c in chunks]
    assert mixed == [chunks]
