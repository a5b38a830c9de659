"""SentenceGraphBuilder.abuild on the real spaCy pipeline: sentence and topic nodes, positions,
chunk mapping, segments, topics from titles, NER or staged mentions, and its settings."""

from __future__ import annotations

import subprocess
import sys
from typing import Optional, Sequence

import pytest
from llama_index.core import Document
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from llama_index_e2rag.extract.base import DOC_ORDER_KEY, pop_graph
from llama_index_e2rag.extract.grounded import GroundedExtractor
from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder
from llama_index_e2rag.extract.sentence_graph.segments import (
    entity_keys,
    segment,
    sentence_nodes,
)
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind

CURIE = (
    "Marie Curie was born in Warsaw in 1867. Because women could not enrol at the University "
    "of Warsaw, she studied in secret. In 1891, she moved to Paris. There she met Pierre Curie "
    "at the Sorbonne. Together they discovered polonium and radium. However, Pierre died in a "
    "street accident in 1906. Marie Curie continued their work alone. For example, she "
    "isolated pure radium in 1910."
)
SECOND_CHUNK = CURIE.index("Together")


def make_chunk(text: str, start: int, doc_id: str, order: int = 0) -> TextNode:
    node = TextNode(
        text=text[start:],
        id_=f"{doc_id}-chunk-{start}",
        start_char_idx=start,
        end_char_idx=len(text),
        metadata={DOC_ORDER_KEY: order},
    )
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc_id)
    return node


async def build(
    builder: SentenceGraphBuilder,
    document: Document,
    order: int = 0,
    chunks: Sequence[TextNode] = (),
    graph: Optional[NetworkXGraphStore] = None,
) -> tuple[list[GraphNode], list[GraphEdge]]:
    nodes, edges, failures = await builder.abuild(
        document, order, list(chunks), graph or NetworkXGraphStore()
    )
    assert failures == []
    return nodes, edges


async def test_sentences_topic_and_edges_of_a_real_passage() -> None:
    document = Document(text=CURIE, id_="curie")
    chunks = [make_chunk(CURIE, 0, "curie", 3), make_chunk(CURIE, SECOND_CHUNK, "curie", 3)]
    nodes, edges = await build(SentenceGraphBuilder(), document, 3, chunks)
    (topic,) = [n for n in nodes if n.kind == NodeKind.TOPIC]
    sentences = [n for n in nodes if n.kind == NodeKind.SENTENCE]
    assert len(sentences) == 8

    # no title: the topic is the segment's most frequent named entity, found by spaCy NER
    assert (topic.text, topic.attrs["source"]) == ("Marie Curie", "ner")
    assert topic.attrs["embed"] is False and topic.attrs["entity_keys"] == ["marie curie"]
    assert topic.attrs["entities"]["marie curie"] == 2
    assert topic.span == (0, len(CURIE)) and topic.pos == (3, 0, 0)

    for i, node in enumerate(sentences):
        start, end = node.span
        assert CURIE[start:end] == node.text and node.pos == (3, start, 0)
        assert node.doc_id == "curie" and node.attrs["index"] == i
        assert node.attrs["topic_id"] == topic.id and node.attrs["segment"] == 0
        expected_chunk = chunks[1 if start >= SECOND_CHUNK else 0].node_id
        assert node.chunk_id == expected_chunk
    assert sentences[0].attrs["entities"] == ["marie curie", "warsaw"]

    roles = [n.attrs["sentgraph"] for n in sentences]
    core = {n.id for n in sentences if n.attrs["sentgraph"] == "core"}
    # cued satellites: "Because ...", "In 1891, ...", "For example, ..."; "However" joins the core
    assert roles[0] == "core" and roles[5] == "core"
    assert roles[1] == roles[2] == roles[7] == "supplementary"
    for node in sentences:
        assert ("nucleus_id" in node.attrs) == (node.attrs["sentgraph"] == "supplementary")
        if "nucleus_id" in node.attrs:
            assert node.attrs["nucleus_id"] in core

    child = [e for e in edges if e.kind == EdgeKind.CHILD]
    assert {e.target for e in child} == core
    assert all(e.source == topic.id and e.role == "core" for e in child)

    rst = {(e.source, e.target): e for e in edges if e.kind == EdgeKind.RST}
    first, because, in_1891, however, example = (sentences[i] for i in (0, 1, 2, 5, 7))
    assert rst[(first.id, because.id)].role == "cause"
    assert rst[(first.id, in_1891.id)].role == "circumstance"
    assert rst[(first.id, however.id)].role == "contrast"
    assert rst[(first.id, however.id)].attrs["class"] == "N-N"
    assert rst[(example.attrs["nucleus_id"], example.id)].role == "elaboration"
    # every satellite hangs from its nucleus
    satellites = {n.id: n.attrs["nucleus_id"] for n in sentences if "nucleus_id" in n.attrs}
    assert {(head, s) for s, head in satellites.items()} <= set(rst)
    assert all(e.doc_id == "curie" for e in edges)


async def test_rebuilding_gives_the_same_graph() -> None:
    document = Document(text=CURIE, id_="curie")
    first = await build(SentenceGraphBuilder(), document)
    again = await build(SentenceGraphBuilder(), document)
    assert [n.model_dump() for n in first[0]] == [n.model_dump() for n in again[0]]
    assert [e.model_dump() for e in first[1]] == [e.model_dump() for e in again[1]]


async def test_title_names_the_topic() -> None:
    document = Document(
        text=CURIE, id_="curie", metadata={"title": "Marie Curie (physicist, born 1867)"}
    )
    nodes, _ = await build(SentenceGraphBuilder(), document)
    (topic,) = [n for n in nodes if n.kind == NodeKind.TOPIC]
    assert (topic.text, topic.attrs["source"]) == ("Marie Curie (physicist, born 1867)", "title")
    assert topic.attrs["entity_keys"] == ["marie curie"]
    # topic_keys decides which metadata names a topic
    nodes, _ = await build(SentenceGraphBuilder(topic_keys=("name",)), document)
    (topic,) = [n for n in nodes if n.kind == NodeKind.TOPIC]
    assert topic.attrs["source"] == "ner"


async def test_staged_mentions_replace_ner() -> None:
    document = Document(text=CURIE, id_="curie")
    chunk = make_chunk(CURIE, 0, "curie")
    GroundedExtractor()([chunk])
    mentions, _, error = pop_graph(chunk)
    assert error is None
    graph = NetworkXGraphStore()
    graph.upsert_nodes(mentions)
    nodes, _ = await build(SentenceGraphBuilder(), document, chunks=[chunk], graph=graph)
    (topic,) = [n for n in nodes if n.kind == NodeKind.TOPIC]
    assert (topic.text, topic.attrs["source"]) == ("Marie Curie", "mention")
    first = next(n for n in nodes if n.kind == NodeKind.SENTENCE)
    assert "warsaw" in first.attrs["entities"]


async def test_llm_mentions_without_spans_are_found_in_their_chunk() -> None:
    document = Document(text=CURIE, id_="curie")
    chunk = make_chunk(CURIE, 0, "curie")
    graph = NetworkXGraphStore()
    graph.upsert_nodes(
        [
            GraphNode(
                id="m-pierre",
                kind=NodeKind.MENTION,
                text="Pierre Curie",
                name="Pierre Curie",
                doc_id="curie",
                pos=(0, 0, 2),
                chunk_id=chunk.node_id,
                attrs={"entity_type": "person"},
            )
        ]
    )
    nodes, _ = await build(SentenceGraphBuilder(), document, chunks=[chunk], graph=graph)
    (topic,) = [n for n in nodes if n.kind == NodeKind.TOPIC]
    assert (topic.text, topic.attrs["source"]) == ("Pierre Curie", "mention")
    named = [n.attrs["index"] for n in nodes if n.kind == NodeKind.SENTENCE and n.attrs["entities"]]
    assert named == [3]  # "met Pierre Curie"; neither "Marie Curie" nor "Pierre" alone


def test_entity_keys_drop_parentheticals_and_articles() -> None:
    assert entity_keys("The Silver Harp (song)") == ["the silver harp", "silver harp"]
    assert entity_keys("Dmitri Varfolomeyev (footballer, born 1978)") == ["dmitri varfolomeyev"]


async def test_segments_cut_at_paragraphs_with_one_topic_each() -> None:
    paragraphs = [
        "Ada Finch sailed from Genoa. Ada Finch reached Naples in May.",
        "Tomas Reyes built boats in Lisbon. Tomas Reyes sold them to traders.",
        "Lena Ward taught music in Oslo. Lena Ward wrote three operas.",
    ]
    text = "\n\n".join(paragraphs)
    nodes, edges = await build(
        SentenceGraphBuilder(segment_sentences=3), Document(text=text, id_="long")
    )
    topics = [n for n in nodes if n.kind == NodeKind.TOPIC]
    assert [t.attrs["segment"] for t in topics] == [0, 1, 2]
    assert [t.text for t in topics] == ["Ada Finch", "Tomas Reyes", "Lena Ward"]
    sentences = [n for n in nodes if n.kind == NodeKind.SENTENCE]
    assert [n.attrs["segment"] for n in sentences] == [0, 0, 1, 1, 2, 2]
    assert len({t.id for t in topics}) == 3
    segment_of = {n.id: n.attrs["segment"] for n in sentences}
    for edge in edges:
        if edge.kind == EdgeKind.RST:  # relations stay inside a segment
            assert segment_of[edge.source] == segment_of[edge.target]


def test_segment_packs_paragraphs_and_cuts_long_ones() -> None:
    short = "One a. Two b."
    long_paragraph = " ".join(f"Sentence {i} here." for i in range(7))
    text = f"{short}\n\n{short}\n\n{long_paragraph}"
    sentences = sentence_nodes(text, "doc", 0, [])
    groups = segment(sentences, text, 4)
    assert [len(g) for g in groups] == [4, 4, 3]
    assert [n.attrs["index"] for g in groups for n in g] == list(range(11))
    assert [len(g) for g in segment(sentences, text, 40)] == [11]


async def test_embed_context_prefixes_the_topic() -> None:
    document = Document(text=CURIE, id_="curie", metadata={"title": "Marie Curie"})
    nodes, _ = await build(SentenceGraphBuilder(embed_context=True), document)
    first = next(n for n in nodes if n.kind == NodeKind.SENTENCE)
    assert first.attrs["embed_text"] == f"Marie Curie: {first.text}"
    nodes, _ = await build(SentenceGraphBuilder(), document)
    assert all("embed_text" not in n.attrs for n in nodes)


async def test_empty_document_builds_nothing() -> None:
    assert await build(SentenceGraphBuilder(), Document(text="  ", id_="empty")) == ([], [])


def test_config_round_trip_and_refused_settings() -> None:
    builder = SentenceGraphBuilder(
        relations="parser",
        bridges="entities",
        segment_sentences=12,
        core_ratio=0.4,
        topic_keys=("title", "name"),
        co_entity_bridges=True,
        max_bridges_per_topic=3,
        embed_context=True,
    )
    config = builder.to_config()
    assert SentenceGraphBuilder.from_config(config).to_config() == config
    assert config["topic_keys"] == ["title", "name"]
    assert SentenceGraphBuilder.config_name == "sentence_graph"
    with pytest.raises(ValueError, match="relations must be one of"):
        SentenceGraphBuilder(relations="rst")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bridges must be one of"):
        SentenceGraphBuilder(bridges="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="core_ratio"):
        SentenceGraphBuilder(core_ratio=0)
    with pytest.raises(ValueError, match="segment_sentences"):
        SentenceGraphBuilder(segment_sentences=0)


def test_importing_the_builder_does_not_load_spacy() -> None:
    """spaCy loads on the first document that needs it (the builder is a llama-index
    ``PromptMixin``, so llama-index itself is imported)."""
    code = (
        "import sys\n"
        "import llama_index_e2rag.extract.sentence_graph.builder\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] == 'spacy']\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
