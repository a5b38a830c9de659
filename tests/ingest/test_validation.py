"""llama_index_e2rag.ingest.validation: input refused before any work (whole text, words, JSON
metadata, duplicate ids) and chunking that survives text without white space or sentence ends."""

from __future__ import annotations

import datetime
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any, List, Optional, Sequence

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document, StorageContext
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from scripted_llm import ScriptedLLM

from llama_index_e2rag.app.demo import SAMPLE_PATH
from llama_index_e2rag.errors import BadDocumentError
from llama_index_e2rag.extract.grounded import CO_NEIGHBOURS
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.extract.chunking import (
    MAX_STOPS_IN_RUN,
    MAX_UNBROKEN_RUN,
    chunk_document,
    run_safe_splitter,
)
from llama_index_e2rag.ingest.validation import (
    validate_document, validate_documents, validate_nodes)
from llama_index_e2rag.schema import EdgeKind, NodeKind

NAMES = ["Peter", "McGregor"]
STORY = (
    "Peter lost his shoes in the garden. Mr. McGregor found them the next morning.\n\n"
    "Peter ran home to his mother and hid under the bed."
)
SEQUEL = "The next day Peter went back to the garden. Mr. McGregor chased him again."
PETER = SAMPLE_PATH.read_text(encoding="utf-8")


class CountingEmbedding(HashEmbedding):
    """The hash embedding, counting the texts it embeds (the probe of the dimension included)."""

    texts: int = 0

    def _get_text_embedding(self, text: str) -> List[float]:
        self.texts += 1
        return super()._get_text_embedding(text)

    async def _aget_text_embedding(self, text: str) -> List[float]:
        self.texts += 1
        return await super()._aget_text_embedding(text)

    def _get_query_embedding(self, query: str) -> List[float]:
        self.texts += 1
        return super()._get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        self.texts += 1
        return await super()._aget_query_embedding(query)


def build(
    docs: Sequence[Document],
    llm: Optional[ScriptedLLM] = None,
    embed: Optional[HashEmbedding] = None,
    **kwargs: Any,
) -> E2RAGIndex:
    return E2RAGIndex.from_documents(
        docs,
        llm=llm if llm is not None else ScriptedLLM(names=NAMES),
        embed_model=embed if embed is not None else HashEmbedding(),
        chunk_size=40,
        chunk_overlap=0,
        **kwargs,
    )


def assert_no_work(llm: ScriptedLLM, embed: CountingEmbedding) -> None:
    assert sum(llm.calls_by_kind.values()) == 0
    assert embed.texts == 0


def nodes_of(text: str, doc_id: str, size: int = 40) -> list[TextNode]:
    document = Document(text=text, id_=doc_id)
    return SentenceSplitter(chunk_size=size, chunk_overlap=0).get_nodes_from_documents([document])


# -- the text ------------------------------------------------------------------------------------
def test_the_whole_text_is_checked_not_only_its_start() -> None:
    clean = STORY * (60_000 // len(STORY) + 1)  # longer than any sample of the start
    garbage = "\x01\x02\x03\x04" * (len(clean) // 40)  # 10% of the whole text
    with pytest.raises(BadDocumentError, match="not readable text") as caught:
        validate_document(Document(text=clean + garbage, id_="tail"))
    assert "'tail'" in str(caught.value)
    validate_document(Document(text=clean + garbage[: len(garbage) // 4], id_="fine"))  # 2.5%


@pytest.mark.parametrize(
    "extra",
    ["\n\r\t\f\v" * 200, "\u00a0" * 5, "\ufffd" * 3],
    ids=["line-controls", "a-few-nbsp", "a-few-replacement-chars"],
)
def test_line_controls_and_a_little_odd_text_pass(extra: str) -> None:
    validate_document(Document(text=STORY + extra + STORY, id_="ok"))


@pytest.mark.parametrize(
    "text",
    [
        "!?.,;:-" * 6_900,
        "!?.,;:- " * 6_000,
        "!?.,;:-\n" * 6_000,
        "." * 48_000,
        "-" * 48_000,
        "…—«» " * 1_000,
    ],
    ids=["punctuation", "punctuation-spaces", "punctuation-lines", "dots", "dashes", "unicode"],
)
def test_text_without_a_letter_or_digit_is_refused_at_once(text: str) -> None:
    llm, embed = ScriptedLLM(names=NAMES), CountingEmbedding()
    storage = StorageContext.from_defaults()
    docs = [Document(text=STORY, id_="good"), Document(text=text, id_="marks")]
    with pytest.raises(BadDocumentError, match="has no words") as caught:
        build(docs, llm=llm, embed=embed, storage_context=storage)
    message = str(caught.value)
    assert "'marks'" in message and "\n" not in message
    assert_no_work(llm, embed)
    assert storage.docstore.docs == {} and storage.index_store.index_structs() == []


@pytest.mark.parametrize("text", ["... 7 ...", "Привет!", "漢字。", "!!! a !!!"])
def test_one_letter_or_digit_of_any_script_is_a_word(text: str) -> None:
    validate_document(Document(text=text, id_="word"))


# -- metadata ------------------------------------------------------------------------------------
WHEN = datetime.datetime(2024, 5, 1, 12, 0)


@pytest.mark.parametrize(
    "metadata, path",
    [
        ({"published": WHEN}, "published"),
        ({"meta": {"published": WHEN.date()}}, "meta.published"),
        ({"title": "x", "meta": {"source": {"seen": WHEN}}}, "meta.source.seen"),
        ({"tags": {"a", "b"}}, "tags"),
        ({"meta": {"owner": object()}}, "meta.owner"),
        ({"score": math.nan}, "score"),
        ({"pages": [1, 2, {"weight": -math.inf}]}, "pages[2].weight"),
        ({"meta": {(1, 2): "tuple key"}}, "meta"),
    ],
    ids=["datetime", "date-nested", "two-levels-deep", "set", "object", "nan", "in-list", "key"],
)
def test_metadata_that_is_not_json_is_refused_naming_document_and_key(
    metadata: dict[str, Any], path: str
) -> None:
    with pytest.raises(BadDocumentError) as caught:
        validate_document(Document(text=STORY, id_="doc-7", metadata=metadata))
    message = str(caught.value)
    assert "'doc-7'" in message and f"metadata key {path!r}" in message and "\n" not in message


def test_json_metadata_passes_however_nested() -> None:
    shared = {"k": [1, 2.5, None, True]}
    metadata = {"a": {"b": {"c": [shared, shared, ("x", 1)]}}, "n": None, "i": 3, "s": "é"}
    validate_document(Document(text=STORY, id_="fine", metadata=metadata))


def test_self_referencing_metadata_is_refused() -> None:
    document = Document(text=STORY, id_="loop")
    looped: dict[str, Any] = {}
    looped["again"] = looped
    document.metadata["meta"] = looped
    with pytest.raises(BadDocumentError, match="'loop'.*JSON"):
        validate_document(document)


def test_a_batch_with_bad_metadata_leaves_an_index_unchanged_and_persistable(
    tmp_path: Path,
) -> None:
    llm, embed = ScriptedLLM(names=NAMES), CountingEmbedding()
    index = build([Document(text=STORY, id_="story")], llm=llm, embed=embed)
    before = index.graph_store.to_dict()
    spent = (sum(llm.calls_by_kind.values()), embed.texts)
    bad = Document(text=SEQUEL, id_="sequel", metadata={"meta": {"published": WHEN}})
    good = Document(text=SEQUEL, id_="other")
    with pytest.raises(BadDocumentError, match="'sequel'.*'meta.published'"):
        index.insert_documents([good, bad])
    with pytest.raises(BadDocumentError, match="'sequel'"):
        index.insert(bad)
    assert (sum(llm.calls_by_kind.values()), embed.texts) == spent
    assert index.graph_store.to_dict() == before and set(index.ref_doc_info) == {"story"}
    index.storage_context.persist(str(tmp_path))  # what failed after the insert used to succeed


def test_prechunked_nodes_with_bad_metadata_are_refused_before_any_work() -> None:
    embed = CountingEmbedding()
    index = build([Document(text=STORY, id_="story")], embed=embed)
    before, spent = index.graph_store.to_dict(), embed.texts
    nodes = nodes_of(SEQUEL, "sequel")
    nodes[-1].metadata["meta"] = {"found": {"on": WHEN}}
    with pytest.raises(BadDocumentError, match=f"'{nodes[-1].node_id}'.*'meta.found.on'"):
        index.insert_nodes(nodes)
    assert embed.texts == spent and index.graph_store.to_dict() == before
    with pytest.raises(BadDocumentError, match="'meta.found.on'"):
        E2RAGIndex(nodes=nodes, embed_model=CountingEmbedding())


def test_validate_nodes_reads_every_node() -> None:
    nodes = nodes_of(STORY + " " + SEQUEL, "d", size=20)
    assert len(nodes) > 2
    validate_nodes(nodes)
    nodes[len(nodes) // 2].metadata["when"] = WHEN
    with pytest.raises(BadDocumentError, match="'when'"):
        validate_nodes(nodes)


# -- duplicate ids -------------------------------------------------------------------------------
def test_a_document_id_twice_in_one_call_is_refused_before_any_work() -> None:
    twins = [
        Document(text=STORY, id_="twin"),
        Document(text=SEQUEL, id_="other"),
        Document(text=SEQUEL, id_="twin"),
    ]
    llm, embed = ScriptedLLM(names=NAMES), CountingEmbedding()
    storage = StorageContext.from_defaults()
    with pytest.raises(BadDocumentError, match="'twin' is given twice"):
        build(twins, llm=llm, embed=embed, storage_context=storage)
    assert_no_work(llm, embed)
    assert storage.docstore.docs == {} and storage.index_store.index_structs() == []
    with pytest.raises(BadDocumentError, match="'twin'"):
        validate_documents(twins)


TWINS = [Document(text=SEQUEL, id_="twin"), Document(text=STORY, id_="twin")]


def test_insert_documents_refuses_duplicate_ids_and_changes_nothing() -> None:
    index = build([Document(text=STORY, id_="story")])
    before = index.graph_store.to_dict()
    with pytest.raises(BadDocumentError, match="'twin'"):
        index.insert_documents(TWINS)
    assert index.graph_store.to_dict() == before and set(index.ref_doc_info) == {"story"}


async def test_ainsert_documents_refuses_duplicate_ids_and_changes_nothing() -> None:
    index = build([Document(text=STORY, id_="story")])
    before = index.graph_store.to_dict()
    with pytest.raises(BadDocumentError, match="'twin'"):
        await index.ainsert_documents(TWINS)
    assert index.graph_store.to_dict() == before and set(index.ref_doc_info) == {"story"}


def test_a_node_id_twice_in_one_insert_nodes_is_refused() -> None:
    index = build([Document(text=STORY, id_="story")])
    before = index.graph_store.to_dict()
    nodes = nodes_of(SEQUEL, "sequel", size=20)
    copy = TextNode(text="Peter hid again.", id_=nodes[0].node_id)
    copy.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="sequel")
    with pytest.raises(BadDocumentError, match=f"'{nodes[0].node_id}' is given twice"):
        index.insert_nodes([*nodes, copy])
    assert index.graph_store.to_dict() == before
    index.insert_nodes(nodes)  # the same nodes without the copy are fine
    assert "sequel" in index.ref_doc_info


# -- chunking text without white space or sentence ends ------------------------------------------
#: 12,600 characters of stops and marks without white space, aperiodic, so that a chunk's text
#: is found in the document at its own place only
STOP_RUN = "".join(random.Random(7).choice("!?.,;:-") for _ in range(12_600))


@pytest.mark.parametrize(
    "text",
    [
        "Peter lost his shoes. " + "!?.,;:-" * 1_800 + " Then he ran home.",
        ("word!?" * 2_000 + " Peter ran. ") * 2,
        "  \n" + ("Yes?!" * 1_500 + " ") * 2 + "The end.",
        "Peter hid.\u00a0" + "!?.\u00a0" * 3_000 + " He waited.",
    ],
    ids=["punctuation-run", "word-run", "leading-space", "nbsp-joined"],
)
def test_runs_of_stops_without_white_space_chunk_without_recursion(text: str) -> None:
    """Before the runs were cut, NLTK's punkt split off a few characters per call and the
    splitter recursed on the rest: a RecursionError once a run held about a thousand splits."""
    document = Document(text=text, id_="runs")
    chunks = chunk_document(SentenceSplitter(chunk_size=40, chunk_overlap=0), document, 0)
    assert chunks
    for chunk in chunks:
        assert text[chunk.start_char_idx : chunk.end_char_idx] == chunk.get_content()
    covered = "".join(c.get_content() for c in chunks)
    assert "".join(covered.split()) == "".join(text.split())  # no overlap: nothing lost


def test_white_space_between_cut_runs_is_kept_in_the_chunk() -> None:
    text = "Peter hid. " + STOP_RUN[:3_000] + " \n " + STOP_RUN[3_000:6_000] + " He waited."
    splitter = SentenceSplitter(chunk_size=60, chunk_overlap=0)
    chunks = chunk_document(splitter, Document(text=text, id_="ws"), 0)
    assert any(" \n " in c.get_content() for c in chunks)
    for chunk in chunks:
        assert text[chunk.start_char_idx : chunk.end_char_idx] == chunk.get_content()


@pytest.mark.parametrize(
    "text",
    [
        PETER,
        "See https://example.org/a/very/long/path/" + "segment/" * 20 + "page.html for more.",
        "吾輩は猫である。名前はまだ無い。" * 400,
        ("Peter ran to the gate. Stop" + "." * MAX_STOPS_IN_RUN + "x" * MAX_UNBROKEN_RUN + " ") * 9,
    ],
    ids=["prose", "long-url", "cjk-without-spaces", "run-with-few-stops"],
)
def test_text_without_runs_of_stops_chunks_exactly_as_the_plain_splitter(text: str) -> None:
    splitter = SentenceSplitter(chunk_size=40, chunk_overlap=4)
    assert run_safe_splitter(splitter).split_text(text) == splitter.split_text(text)
    chunks = chunk_document(splitter, Document(text=text, id_="plain"), 0)
    assert [c.get_content() for c in chunks] == splitter.split_text(text)


def test_text_without_sentence_ends_gets_co_event_edges_linear_in_its_length() -> None:
    """Without stops the parse is one sentence, and pairing every two of its events made
    740,000 edges out of 48 KB: an event of such a sentence now pairs with its neighbours."""
    index = E2RAGIndex.from_documents(
        [Document(text="Peter ran and " * 300 + "stopped.", id_="run-on")],
        embed_model=HashEmbedding(),
        chunk_size=1200,
    )
    events = {e.id for e in index.graph_store.nodes(NodeKind.EVENT)}
    assert len(events) > 4 * CO_NEIGHBOURS
    degree: Counter[str] = Counter()
    for edge in index.graph_store.edges():
        if edge.kind == EdgeKind.CO_EVENT:
            degree.update([edge.source, edge.target])
    assert degree and max(degree.values()) <= 2 * CO_NEIGHBOURS


def test_the_offline_default_indexes_words_between_punctuation_runs() -> None:
    """The reported crash, on the real offline default (spaCy parse, MiniLM embedding)."""
    marks = "!?.,;:-" * 1_800  # the reported text: 48 KB of this crashed after 46 s
    text = "Peter lost his shoes. " + marks + " Mr. McGregor found them.\n\n" + marks
    index = E2RAGIndex.from_documents([Document(text=text, id_="noisy")])
    assert index.graph_store.nodes(NodeKind.CHUNK)
    nodes = index.as_retriever(mode="vector", similarity_top_k=3).retrieve("Who found the shoes?")
    assert any("McGregor" in n.node.get_content() for n in nodes)
    with pytest.raises(BadDocumentError, match="has no words"):
        index.insert(Document(text=marks, id_="only-marks"))
