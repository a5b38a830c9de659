"""E2RAGIndex: build, ids and positions, vectors per kind, persistence, delete, re-insert,
failures."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional, Sequence

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document, StorageContext, load_index_from_storage
from llama_index.core.schema import TextNode
from scripted_llm import ScriptedLLM

from llama_index_e2rag.extract.builders import DocumentBuilder
from llama_index_e2rag.errors import BadDocumentError, GraphStoreError, StoreDamagedError
from llama_index_e2rag.extract.base import DOC_ORDER_KEY
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.index import EMBEDDED_KINDS, E2RAGIndex, E2RAGIndexStruct
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind, make_id

NAMES = ["Hermione", "Ron", "Harry", "Neville"]
PARAGRAPHS = [
    "Hermione studied alone. Hermione quoted the school rules to Ron and refused to break any "
    "rule. Ron mocked Hermione in the Charms lesson.",
    "Neville lost his toad on the train. Neville searched every carriage for the toad while the "
    "rain fell outside.",
    "On Halloween a troll entered the girls bathroom. Hermione lied to the teachers to protect "
    "Harry and Ron after the troll fight. Then Hermione broke the rules for her friends.",
]
STORY = "\n\n".join(PARAGRAPHS)
SEQUEL = (
    "Harry found the mirror at night. Harry saw his parents in the mirror. "
    "Dumbledore warned Harry about the mirror in December."
)
CHUNK_SIZE = 40


def make_index(
    docs: Optional[Sequence[Document]] = None,
    llm: Optional[ScriptedLLM] = None,
    embed: Optional[HashEmbedding] = None,
    **kwargs: Any,
) -> E2RAGIndex:
    """The test story indexed with the scripted LLM and the hash embedding."""
    return E2RAGIndex.from_documents(
        docs if docs is not None else [Document(text=STORY, id_="phantom")],
        llm=llm if llm is not None else ScriptedLLM(names=NAMES),
        embed_model=embed if embed is not None else HashEmbedding(),
        chunk_size=CHUNK_SIZE,
        chunk_overlap=0,
        **kwargs,
    )


def chunk_containing(index: E2RAGIndex, phrase: str) -> GraphNode:
    (chunk,) = [c for c in index.graph_store.nodes(NodeKind.CHUNK) if phrase in c.text]
    return chunk


def vector_ids(index: E2RAGIndex, kind: NodeKind) -> set[str]:
    return set(index.stores.vectors.kind_matrix(kind.value)[0])


def load(persist_dir: Path, **kwargs: Any) -> E2RAGIndex:
    sc = StorageContext.from_defaults(persist_dir=str(persist_dir))
    index = load_index_from_storage(sc, embed_model=HashEmbedding(), **kwargs)
    assert isinstance(index, E2RAGIndex)
    return index


# -- build --------------------------------------------------------------------------------------
def test_chunks_have_deterministic_ids_and_true_offsets() -> None:
    index = make_index()
    chunks = index.graph_store.nodes(NodeKind.CHUNK)
    assert len(chunks) >= 3
    for chunk in chunks:
        start, end = chunk.span
        assert STORY[start:end] == chunk.text
        assert chunk.id == make_id("phantom", NodeKind.CHUNK, (start,), chunk.text)
        assert chunk.pos == (0, start, 0)
        text_node = index.stores.get_chunks([chunk.id])[0]
        assert text_node.start_char_idx == start and text_node.metadata[DOC_ORDER_KEY] == 0
    rebuilt = make_index()
    assert rebuilt.graph_store.to_dict() == index.graph_store.to_dict()


def test_document_order_follows_insertion() -> None:
    index = make_index([Document(text=STORY, id_="book1"), Document(text=SEQUEL, id_="book2")])
    assert index.doc_order("book1") == 0 and index.doc_order("book2") == 1
    assert {c.pos[0] for c in index.graph_store.nodes(NodeKind.CHUNK, "book2")} == {1}
    nodes = index.graph_store.nodes()
    assert [n.pos for n in nodes] == sorted(n.pos for n in nodes)
    assert nodes[-1].doc_id == "book2"
    assert set(index.ref_doc_info) == {"book1", "book2"}


def test_every_embedded_node_has_a_vector_of_its_kind() -> None:
    index = make_index()
    for kind in (NodeKind.CHUNK, NodeKind.MENTION, NodeKind.EVENT, NodeKind.PASSAGE):
        graph_ids = {n.id for n in index.graph_store.nodes(kind)}
        assert graph_ids and vector_ids(index, kind) == graph_ids
    total = sum(len(index.graph_store.nodes(kind)) for kind in EMBEDDED_KINDS)
    assert index.stores.vectors.count() == total


def test_identical_texts_are_embedded_once(hash_embed: HashEmbedding) -> None:
    seen: list[str] = []

    class Recording(HashEmbedding):
        def _get_text_embedding(self, text: str) -> list[float]:
            seen.append(text)
            return super()._get_text_embedding(text)

        async def _aget_text_embedding(self, text: str) -> list[float]:
            seen.append(text)
            return super()._get_text_embedding(text)

    twice = "Ron laughed. Ron laughed."
    make_index([Document(text=twice, id_="echo")], embed=Recording())
    assert len(seen) == len(set(seen))


def test_document_builder_output_is_stored_embedded_and_deleted() -> None:
    class FirstChunkFact:
        """A fact per document pointing at its first chunk (like ChronoRAG's layer 1)."""

        async def abuild(
            self, document: Document, doc_order: int, chunks: Sequence[TextNode], graph: GraphStore
        ) -> tuple[list[GraphNode], list[GraphEdge]]:
            assert graph.get_node(chunks[0].node_id) is not None
            text = f"{document.id_} opens the story"
            fact = GraphNode(
                id=make_id(document.id_, NodeKind.FACT, (0,), text),
                kind=NodeKind.FACT,
                text=text,
                doc_id=document.id_,
                pos=(doc_order, 0, 99),
            )
            edge = GraphEdge(
                source=fact.id, target=chunks[0].node_id, kind=EdgeKind.CHILD, doc_id=document.id_
            )
            return [fact], [edge]

    builder = FirstChunkFact()
    assert isinstance(builder, DocumentBuilder)
    index = make_index(doc_builders=[builder])
    (fact,) = index.graph_store.nodes(NodeKind.FACT)
    assert vector_ids(index, NodeKind.FACT) == {fact.id}
    assert [e.kind for e in index.graph_store.edges_of(fact.id)] == [EdgeKind.CHILD]
    index.delete_ref_doc("phantom")
    assert (
        index.graph_store.nodes(NodeKind.FACT) == [] and vector_ids(index, NodeKind.FACT) == set()
    )


# -- persistence --------------------------------------------------------------------------------
def test_persist_and_load_round_trip(tmp_path: Path) -> None:
    index = make_index([Document(text=STORY, id_="book1"), Document(text=SEQUEL, id_="book2")])
    index.storage_context.persist(str(tmp_path))
    loaded = load(tmp_path)
    assert loaded.graph_store.to_dict() == index.graph_store.to_dict()
    assert loaded.ref_doc_info.keys() == index.ref_doc_info.keys()
    assert loaded.doc_order("book2") == 1
    assert loaded.llm_stats() == index.llm_stats() and loaded.llm_stats()["calls"] > 0
    for kind in EMBEDDED_KINDS:
        assert vector_ids(loaded, kind) == vector_ids(index, kind)


def test_loading_needs_no_llm(tmp_path: Path) -> None:
    make_index().storage_context.persist(str(tmp_path))
    loaded = load(tmp_path)
    assert loaded.llm is None and loaded.llm_runner is None
    nodes = loaded.as_retriever(mode="vector", similarity_top_k=2).retrieve("troll fight")
    assert "troll fight" in nodes[0].node.get_content()


def test_load_refuses_a_corrupt_graph_database(tmp_path: Path) -> None:
    make_index().storage_context.persist(str(tmp_path))
    graph_file = tmp_path / "e2rag" / "graph.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(str(graph_file) + suffix).unlink(missing_ok=True)
    graph_file.write_bytes(b"not a database" * 100)
    with pytest.raises(StoreDamagedError, match="graph.sqlite.*e2rag repair"):
        load(tmp_path).graph_store.counts()


def test_load_refuses_a_graph_from_a_newer_version(tmp_path: Path) -> None:
    import sqlite3

    make_index().storage_context.persist(str(tmp_path))
    with sqlite3.connect(tmp_path / "e2rag" / "graph.sqlite") as conn:
        conn.execute("UPDATE e2rag_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(GraphStoreError, match="newer"):
        load(tmp_path).graph_store.counts()


# -- delete and re-insert -----------------------------------------------------------------------
def test_delete_ref_doc_leaves_nothing_of_the_document(tmp_path: Path) -> None:
    index = make_index([Document(text=STORY, id_="book1"), Document(text=SEQUEL, id_="book2")])
    book2 = {n.id for n in index.graph_store.nodes(doc_id="book2")}
    chunk_ids = index.ref_doc_info["book1"].node_ids
    index.delete_ref_doc("book1")
    index.storage_context.persist(str(tmp_path))
    for current in (index, load(tmp_path)):
        graph = current.graph_store
        assert graph.nodes(doc_id="book1") == [] and graph.edges(doc_id="book1") == []
        assert {n.id for n in graph.nodes()} == book2
        for edge in graph.edges():
            assert graph.has_node(edge.source) and graph.has_node(edge.target)
        for kind in EMBEDDED_KINDS:
            assert vector_ids(current, kind) == {n.id for n in graph.nodes(kind)}
        assert current.docstore.get_ref_doc_info("book1") is None
        assert all(current.docstore.get_node(i, raise_error=False) is None for i in chunk_ids)
        assert set(current.ref_doc_info) == {"book2"} and current.doc_order("book1") is None
        assert vector_ids(current, NodeKind.CHUNK) == {n.id for n in graph.nodes(NodeKind.CHUNK)}


def test_reinserting_a_document_replaces_it() -> None:
    index = make_index()
    before = index.graph_store.to_dict()
    vectors_before = {k: vector_ids(index, k) for k in EMBEDDED_KINDS}
    index.insert(Document(text=STORY, id_="phantom"))
    assert index.graph_store.to_dict() == before
    assert {k: vector_ids(index, k) for k in EMBEDDED_KINDS} == vectors_before
    index.insert(Document(text=SEQUEL, id_="phantom"))
    chunks = index.graph_store.nodes(NodeKind.CHUNK)
    assert chunks and all(c.text in SEQUEL for c in chunks)
    assert vector_ids(index, NodeKind.CHUNK) == {c.id for c in chunks}
    assert index.ref_doc_info["phantom"].node_ids and index.doc_order("phantom") == 0
    assert set(index.ref_doc_info["phantom"].node_ids) == {c.id for c in chunks}


async def test_ainsert_inside_a_running_loop() -> None:
    llm = ScriptedLLM(names=NAMES, async_delay=0.01)
    index = make_index(llm=llm)
    await index.ainsert(Document(text=SEQUEL, id_="sequel"))
    assert index.doc_order("sequel") == 1
    assert index.graph_store.nodes(NodeKind.MENTION, "sequel")
    assert llm.max_in_flight > 1  # extraction calls really ran concurrently


# -- failures -----------------------------------------------------------------------------------
def test_malformed_chunk_is_reported_and_the_rest_indexed() -> None:
    broken = PARAGRAPHS[1].replace("Neville lost", "GARBLED Neville lost")
    text = "\n\n".join([PARAGRAPHS[0], broken, PARAGRAPHS[2]])
    index = make_index(
        [Document(text=text, id_="phantom")],
        llm=ScriptedLLM(names=NAMES, malformed_marker="GARBLED"),
        max_retries=0,
    )
    bad = chunk_containing(index, "GARBLED")
    report = index.extraction_report()
    assert {(r["doc_id"], r["chunk_id"]) for r in report} == {("phantom", bad.id)}
    assert "entity_extraction" in report[0]["reason"]
    assert bad.id in vector_ids(index, NodeKind.CHUNK)  # the text stays searchable
    assert not [m for m in index.graph_store.nodes(NodeKind.MENTION) if m.chunk_id == bad.id]
    good = chunk_containing(index, "troll fight")
    assert [m for m in index.graph_store.nodes(NodeKind.MENTION) if m.chunk_id == good.id]


class _Interrupted(BaseException):
    """Stands for Ctrl-C / a killed process: not an extraction failure, it aborts the build."""


def test_interrupted_build_resumes_from_the_llm_cache(tmp_path: Path) -> None:
    oracle = ScriptedLLM(names=NAMES)
    clean = make_index(llm=oracle)
    total_calls = sum(oracle.calls_by_kind.values())
    answered = 0

    def answer_then_die(prompt: str) -> str:
        nonlocal answered
        if answered == 3:
            raise _Interrupted()
        answered += 1
        return oracle.complete(prompt).text

    dying = ScriptedLLM(
        names=NAMES,
        handlers={"entity_extraction": answer_then_die, "event_extraction": answer_then_die},
    )
    storage = StorageContext.from_defaults()
    with pytest.raises(_Interrupted):
        make_index(llm=dying, cache_dir=str(tmp_path), num_workers=1, storage_context=storage)
    assert storage.docstore.docs == {} and storage.index_store.index_structs() == []

    resumed_llm = ScriptedLLM(names=NAMES)
    resumed = make_index(llm=resumed_llm, cache_dir=str(tmp_path))
    assert sum(resumed_llm.calls_by_kind.values()) == total_calls - 3
    assert resumed.graph_store.to_dict() == clean.graph_store.to_dict()

    again = ScriptedLLM(names=NAMES)
    make_index(llm=again, cache_dir=str(tmp_path))
    assert sum(again.calls_by_kind.values()) == 0


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty"),
        ("   \n\t  ", "empty"),
        ("GIF89a\x00\x01\x02 binary", "NUL"),
        ("\x01\x02\x03\x04\x05\x06\x07\x08 text \x0e\x0f\x10\x11", "not readable text"),
        ("\ufffd\ufffd\ufffd\ufffd bad decode \ufffd\ufffd\ufffd", "not readable text"),
    ],
)
def test_bad_documents_are_refused_before_anything_is_written(text: str, reason: str) -> None:
    llm = ScriptedLLM(names=NAMES)
    storage = StorageContext.from_defaults()
    docs = [Document(text=STORY, id_="good"), Document(text=text, id_="bad")]
    with pytest.raises(BadDocumentError, match=reason) as caught:
        make_index(docs, llm=llm, storage_context=storage)
    assert "'bad'" in str(caught.value)
    assert sum(llm.calls_by_kind.values()) == 0
    assert storage.docstore.docs == {} and storage.index_store.index_structs() == []

    index = make_index(llm=llm)
    before = index.graph_store.to_dict()
    with pytest.raises(BadDocumentError):
        index.insert(Document(text=text, id_="bad"))
    assert index.graph_store.to_dict() == before and set(index.ref_doc_info) == {"phantom"}


def test_unknown_retriever_mode_lists_the_modes() -> None:
    index = make_index()
    with pytest.raises(ValueError, match="narrative, entity_event, grounded, chrono, vector"):
        index.as_retriever(mode="magic")


def test_progress_bars_are_shown_on_request(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    index = make_index(
        [Document(text=STORY, id_="one"), Document(text=SEQUEL, id_="two")], show_progress=True
    )
    err = capsys.readouterr().err
    for bar in ("E2RAG extraction", "Building document layers", "Writing stores"):
        assert bar in err
    index.storage_context.persist(str(tmp_path))
    assert "Saving e2rag stores" in capsys.readouterr().err
    quiet = make_index()
    quiet.storage_context.persist(str(tmp_path / "quiet"))
    assert capsys.readouterr().err == ""


def test_offline_parsing_shows_its_progress(capsys: pytest.CaptureFixture[str]) -> None:
    E2RAGIndex.from_documents(
        [Document(text=STORY, id_="one")], embed_model=HashEmbedding(), show_progress=True
    )
    assert "Parsing (spaCy)" in capsys.readouterr().err


def test_prechunked_nodes_keep_their_ids_and_get_a_graph() -> None:
    from llama_index.core.node_parser import SentenceSplitter

    document = Document(text=STORY, id_="phantom")
    nodes = SentenceSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=0).get_nodes_from_documents(
        [document]
    )
    ids = [n.node_id for n in nodes]
    index = E2RAGIndex(nodes=nodes, llm=ScriptedLLM(names=NAMES), embed_model=HashEmbedding())
    assert [c.id for c in index.graph_store.nodes(NodeKind.CHUNK)] == ids
    assert index.graph_store.nodes(NodeKind.MENTION) and index.doc_order("phantom") == 0
    assert set(index.ref_doc_info["phantom"].node_ids) == set(ids)
    with pytest.raises(ValueError, match="document builders need whole documents"):
        E2RAGIndex(nodes=nodes, embed_model=HashEmbedding(), doc_builders=[object()])


def test_refresh_ref_docs_reindexes_only_changed_documents() -> None:
    llm = ScriptedLLM(names=NAMES)
    index = make_index(llm=llm)
    calls = sum(llm.calls_by_kind.values())
    same, new = Document(text=STORY, id_="phantom"), Document(text=SEQUEL, id_="sequel")
    assert index.refresh_ref_docs([same, new]) == [False, True]
    changed = Document(text=STORY.replace("troll fight", "troll battle"), id_="phantom")
    assert index.refresh_ref_docs([changed, new]) == [True, False]
    assert chunk_containing(index, "troll battle") and sum(llm.calls_by_kind.values()) > calls
    assert index.doc_order("phantom") == 0 and index.doc_order("sequel") == 1


# -- concurrency --------------------------------------------------------------------------------
def _assert_positions_follow_orders(index: E2RAGIndex) -> None:
    for doc_id in index.ref_doc_info:
        nodes = index.graph_store.nodes(doc_id=doc_id)
        assert nodes and {n.pos[0] for n in nodes} == {index.doc_order(doc_id)}
    assert vector_ids(index, NodeKind.CHUNK) == {
        c.id for c in index.graph_store.nodes(NodeKind.CHUNK)
    }


def _variant(i: int) -> str:
    """The sequel with a sentence of its own: another text (the same text twice is skipped)."""
    return f"{SEQUEL} Harry counted {i + 2} candles."


async def test_concurrent_ainserts_get_distinct_story_orders() -> None:
    index = make_index(llm=ScriptedLLM(names=NAMES, async_delay=0.01))
    docs = [Document(text=_variant(i), id_=f"sequel{i}") for i in range(3)]
    await asyncio.gather(*(index.ainsert(doc) for doc in docs))
    assert sorted(index.doc_order(d.id_) for d in docs) == [1, 2, 3]
    _assert_positions_follow_orders(index)


def test_inserts_from_threads_get_distinct_story_orders() -> None:
    index = make_index()
    docs = [Document(text=_variant(i), id_=f"sequel{i}") for i in range(3)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(index.insert, docs))
    assert sorted(index.doc_order(d.id_) for d in docs) == [1, 2, 3]
    _assert_positions_follow_orders(index)


async def test_a_failed_concurrent_insert_leaves_only_a_harmless_gap(tmp_path: Path) -> None:
    class FailsFor:
        """A document builder that breaks on one document."""

        async def abuild(
            self, document: Document, doc_order: int, chunks: Sequence[TextNode], graph: GraphStore
        ) -> tuple[list[GraphNode], list[GraphEdge]]:
            if document.id_ == "bad":
                raise RuntimeError("builder broke")
            return [], []

    index = make_index(doc_builders=[FailsFor()], llm=ScriptedLLM(names=NAMES, async_delay=0.01))
    bad, good = Document(text=_variant(0), id_="bad"), Document(text=_variant(1), id_="good")
    results = await asyncio.gather(index.ainsert(bad), index.ainsert(good), return_exceptions=True)
    assert isinstance(results[0], RuntimeError) and results[1] is None
    await index.ainsert(Document(text=_variant(2), id_="later"))
    assert index.doc_order("bad") is None and "bad" not in index.ref_doc_info
    orders = [index.doc_order(d) for d in ("phantom", "good", "later")]
    assert orders == sorted(orders) and len(set(orders)) == 3
    _assert_positions_follow_orders(index)
    index.storage_context.persist(str(tmp_path))
    loaded = load(tmp_path, doc_builders=[])
    assert [loaded.doc_order(d) for d in ("phantom", "good", "later")] == orders
    hits = loaded.as_retriever(mode="vector", similarity_top_k=1).retrieve("the mirror at night")
    assert hits[0].node.metadata["doc_id"] in {"good", "later"}


def test_lazy_models_are_built_once_under_concurrent_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import llama_index_e2rag.embeddings as embeddings_module
    import llama_index_e2rag.llm.runner as llm_module

    caches: list[str] = []
    models: list[HashEmbedding] = []

    class SlowCache(llm_module.ResponseCache):
        def __init__(self, path: Optional[str]) -> None:
            time.sleep(0.05)  # widen the window in which a second thread could start another
            caches.append(str(path))
            super().__init__(path)

    def slow_resolve(embed_model: Any = None) -> HashEmbedding:
        time.sleep(0.05)
        models.append(HashEmbedding())
        return models[-1]

    monkeypatch.setattr(llm_module, "ResponseCache", SlowCache)
    monkeypatch.setattr(embeddings_module, "resolve_embed_model", slow_resolve)
    index = E2RAGIndex(
        index_struct=E2RAGIndexStruct(), llm=ScriptedLLM(names=NAMES), cache_dir=str(tmp_path)
    )
    start = threading.Barrier(4)

    def first_use(_: int) -> tuple[int, int]:
        start.wait()
        return id(index.llm_runner), id(index.embed_model)

    with ThreadPoolExecutor(max_workers=4) as pool:
        seen = set(pool.map(first_use, range(4)))
    assert len(seen) == 1 and len(caches) == 1 and len(models) == 1


# -- chunking defaults --------------------------------------------------------------------------
def test_default_chunk_size_is_capped_by_the_embedding_input_limit() -> None:
    from llama_index.core.utils import get_tokenizer

    from llama_index_e2rag.embeddings import MiniLMEmbedding

    class ShortInput(HashEmbedding):
        max_length: int = 64

    long_story = " ".join([STORY, SEQUEL] * 3)
    index = E2RAGIndex.from_documents(
        [Document(text=long_story, id_="long")],
        llm=ScriptedLLM(names=NAMES),
        embed_model=ShortInput(),
    )
    assert (index.chunk_size, index.chunk_overlap) == (64, 64 // 12)
    chunks = index.graph_store.nodes(NodeKind.CHUNK)
    tokenizer = get_tokenizer()
    assert len(chunks) > 3 and all(len(tokenizer(c.text)) <= 64 for c in chunks)
    assert index.index_struct.config["chunk_size"] == 64
    plain = E2RAGIndex(index_struct=E2RAGIndexStruct(), embed_model=HashEmbedding())
    assert (plain.chunk_size, plain.chunk_overlap) == (1200, 100)
    minilm = E2RAGIndex(index_struct=E2RAGIndexStruct(), embed_model=MiniLMEmbedding())
    assert (minilm.chunk_size, minilm.chunk_overlap) == (256, 21)
    given = E2RAGIndex(index_struct=E2RAGIndexStruct(), embed_model=ShortInput(), chunk_size=500)
    assert (given.chunk_size, given.chunk_overlap) == (500, 41)
