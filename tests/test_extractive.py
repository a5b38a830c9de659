"""ExtractiveSynthesizer: LLM-free answers made of evidence sentences with story positions."""

from __future__ import annotations

import re

import pytest
from llama_index.core.base.response.schema import Response, StreamingResponse
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_e2rag.embeddings import MiniLMEmbedding
from llama_index_e2rag.extract.base import DOC_ORDER_KEY
from llama_index_e2rag.extractive import EVIDENCE_KEY, ExtractiveSynthesizer, split_sentences
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.schema import GraphNode, NodeKind

STORY = (
    "Mr. McGregor was planting cabbages in the morning. Peter squeezed under the gate!\n\n"
    "He ate some lettuces and some French beans. Then he felt rather sick.\n\n"
    "Peter lost one of his shoes among the cabbages. His mother made camomile tea."
)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedding:
    return MiniLMEmbedding()


def _chunk(text: str, start: int, score: float, name: str = "garden.txt") -> NodeWithScore:
    node = TextNode(
        text=text,
        metadata={"file_name": name, DOC_ORDER_KEY: 0},
        start_char_idx=start,
        end_char_idx=start + len(text),
    )
    return NodeWithScore(node=node, score=score)


def _story_chunks() -> list[NodeWithScore]:
    """The story cut in two chunks at a paragraph, as an index would return them."""
    cut = STORY.index("He ate")
    return [_chunk(STORY[:cut], 0, 0.9), _chunk(STORY[cut:], cut, 0.8)]


def test_split_sentences_keeps_abbreviations_and_offsets():
    spans = split_sentences(STORY)
    sentences = [STORY[a:b] for a, b in spans]
    assert sentences[0] == "Mr. McGregor was planting cabbages in the morning."
    assert sentences[1] == "Peter squeezed under the gate!"
    assert "Then he felt rather sick." in sentences
    assert len(sentences) == 6
    assert all(STORY[a:b] == s for (a, b), s in zip(spans, sentences))


def test_answer_is_the_evidence_sentence_with_its_position_and_source(minilm):
    synth = ExtractiveSynthesizer(embed_model=minilm, top_n=2)
    response = synth.synthesize("Where did Peter lose his shoe?", _story_chunks())
    assert isinstance(response, Response)
    text = str(response)
    best = "Peter lost one of his shoes among the cabbages."
    offset = STORY.index(best)
    first = text.splitlines()[1]
    # Best evidence first, with the file it came from and its absolute character offset.
    assert first == f"1. [garden.txt · char {offset:,}] {best}"
    evidence = response.metadata[EVIDENCE_KEY]
    assert evidence[0]["text"] == best and evidence[0]["char_offset"] == offset
    assert len(evidence) == 2
    assert len(response.source_nodes) == 2


def test_percent_position_comes_from_the_graph(minilm):
    graph = NetworkXGraphStore()
    graph.upsert_nodes(
        [
            GraphNode(
                id="c1", kind=NodeKind.CHUNK, text=STORY, doc_id="d", pos=(0, 0, 0),
                span=(0, len(STORY)),
            )
        ]
    )
    node = TextNode(
        text="His mother made camomile tea.",
        metadata={"kind": "sentence", "pos": [0, STORY.index("His mother"), 0], "doc_id": "d"},
    )
    synth = ExtractiveSynthesizer(embed_model=minilm, graph_store=graph)
    text = str(synth.synthesize("What did his mother make?", [NodeWithScore(node=node, score=1)]))
    percent = round(100 * STORY.index("His mother") / len(STORY))
    assert f"[document 0 · {percent}% · char {STORY.index('His mother'):,}]" in text


def test_without_embedding_the_retriever_order_decides():
    synth = ExtractiveSynthesizer(top_n=1)
    nodes = list(reversed(_story_chunks()))  # the second chunk now ranks first
    nodes[0].score, nodes[1].score = 0.95, 0.5
    text = str(synth.synthesize("anything", nodes))
    assert "He ate some lettuces and some French beans." in text
    assert "McGregor" not in text


def test_scored_sentences_keep_the_retriever_ranking_unless_asked(minilm):
    """Sentence nodes from the grounded retriever arrive ranked; ``auto`` trusts that ranking,
    ``rank_by="similarity"`` re-ranks by cosine with the question."""
    nodes = [
        NodeWithScore(node=TextNode(text=text, metadata={"kind": "sentence"}), score=score)
        for text, score in [
            ("He ate some lettuces and some French beans.", 0.9),
            ("Peter lost one of his shoes among the cabbages.", 0.4),
        ]
    ]
    query = "Where did Peter lose his shoe?"
    auto = ExtractiveSynthesizer(embed_model=minilm, top_n=1).synthesize(query, nodes)
    assert "lettuces" in str(auto)
    by_sim = ExtractiveSynthesizer(embed_model=minilm, top_n=1, rank_by="similarity")
    assert "shoes" in str(by_sim.synthesize(query, nodes))


def test_story_order_lists_evidence_in_narrative_order(minilm):
    synth = ExtractiveSynthesizer(embed_model=minilm, top_n=4, order="story")
    response = synth.synthesize("What happened to Peter in the garden?", _story_chunks())
    offsets = [e["char_offset"] for e in response.metadata[EVIDENCE_KEY]]
    assert len(offsets) == 4 and offsets == sorted(offsets)


def test_duplicate_sentences_are_shown_once(minilm):
    chunks = _story_chunks() + _story_chunks()
    response = ExtractiveSynthesizer(embed_model=minilm, top_n=10).synthesize("Peter", chunks)
    texts = [e["text"] for e in response.metadata[EVIDENCE_KEY]]
    assert len(texts) == len(set(texts)) == 6


async def test_async_matches_sync(minilm):
    synth = ExtractiveSynthesizer(embed_model=minilm, top_n=3)
    query = "What did Peter eat?"
    sync = synth.synthesize(query, _story_chunks())
    asynchronous = await synth.asynthesize(query, _story_chunks())
    assert str(sync) == str(asynchronous)
    assert "He ate some lettuces and some French beans." in str(sync).splitlines()[1]


def test_streaming_yields_the_same_answer(minilm):
    plain = ExtractiveSynthesizer(embed_model=minilm, top_n=2)
    streaming = ExtractiveSynthesizer(embed_model=minilm, top_n=2, streaming=True)
    response = streaming.synthesize("What did Peter eat?", _story_chunks())
    assert isinstance(response, StreamingResponse)
    expected = str(plain.synthesize("What did Peter eat?", _story_chunks()))
    assert "".join(response.response_gen) == expected


def test_plain_text_path_without_metadata(minilm):
    text = ExtractiveSynthesizer(embed_model=minilm, top_n=1).get_response(
        "What did his mother make?", [STORY]
    )
    assert text.splitlines()[1] == "1. [document] His mother made camomile tea."


def test_no_nodes_gives_a_clear_empty_answer():
    response = ExtractiveSynthesizer().synthesize("Who?", [])
    assert "No evidence" in str(response)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="top_n"):
        ExtractiveSynthesizer(top_n=0)
    with pytest.raises(ValueError, match="order"):
        ExtractiveSynthesizer(order="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rank_by"):
        ExtractiveSynthesizer(rank_by="length")  # type: ignore[arg-type]


def test_position_label_format():
    """The location label is what users read; keep its shape stable."""
    synth = ExtractiveSynthesizer(top_n=1)
    node = TextNode(text="One sentence.", metadata={"kind": "sentence", "pos": [2, 12345, 0]})
    line = str(synth.synthesize("q", [NodeWithScore(node=node, score=1.0)])).splitlines()[1]
    assert re.fullmatch(r"1\. \[document 2 · char 12,345\] One sentence\.", line)


def test_index_query_engine_answers_extractively_without_an_llm(minilm):
    """No LLM resolves (no key, nothing in Settings): the index's engine answers from evidence."""
    from llama_index.core import Document

    from llama_index_e2rag.extract.grounded import GroundedExtractor
    from llama_index_e2rag.index import E2RAGIndex

    index = E2RAGIndex.from_documents(
        [Document(text=STORY, id_="garden", metadata={"file_name": "garden.txt"})],
        embed_model=minilm,
        extractors=[GroundedExtractor()],
    )
    assert index.llm is None
    response = index.as_query_engine(mode="grounded").query("Where did Peter lose his shoe?")
    best = "Peter lost one of his shoes among the cabbages."
    offset = STORY.index(best)
    percent = round(100 * offset / len(STORY))
    assert f"1. [garden.txt · {percent}% · char {offset:,}] {best}" in str(response)
    assert response.source_nodes[0].node.metadata["pos"][1] == offset
