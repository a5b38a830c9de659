"""ExtractiveSynthesizer: LLM-free answers made of evidence sentences with story positions.

The answer type rules themselves are in ``ranking/test_answer_types.py``; their effect on real
retrieved evidence (spaCy + MiniLM, FairytaleQA stories) in
``answer/test_extractive_answer_types.py``.
"""

from __future__ import annotations

import re

import pytest
from llama_index.core.base.response.schema import Response, StreamingResponse
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_e2rag.embeddings import MiniLMEmbedding
from llama_index_e2rag.extract.base import DOC_ORDER_KEY
from llama_index_e2rag.context.keys import RESPONSE_EVIDENCE_KEY
from llama_index_e2rag.answer.extractive import ExtractiveSynthesizer, split_sentences
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.schema import GraphNode, NodeKind

STORY = (
    "Mr. McGregor was planting cabbages in the morning. Peter squeezed under the gate!\n\n"
    "He ate some lettuces and some French beans. Then he felt rather sick.\n\n"
    "Peter lost one of his shoes among the cabbages. His mother made camomile tea."
)


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
    # Best evidence first, with the file it came from and (no graph, so no share of the story)
    # its absolute character offset.
    assert first == f"1. [garden.txt · character {offset:,}] {best}"
    evidence = response.metadata[RESPONSE_EVIDENCE_KEY]
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
    # No file name or title: the document is named by its id; the share is labelled as one.
    assert f"[d · {percent}% through the story] His mother made camomile tea." in text


def test_chapter_and_share_of_the_story_label_the_position(minilm):
    book = "CHAPTER I.\n\n" + STORY + "\n\nCHAPTER II.\n\nPeter came home to the fir tree."
    graph = NetworkXGraphStore()
    graph.upsert_nodes(
        [GraphNode(id="c", kind=NodeKind.CHUNK, text=book, doc_id="d", pos=(0, 0, 0),
                   span=(0, len(book)))]
    )
    nodes = [
        NodeWithScore(
            node=TextNode(
                text=sentence,
                metadata={"kind": "sentence", "pos": [0, book.index(sentence), 0], "doc_id": "d",
                          "title": "Peter in the Garden"},
            ),
            score=1.0,
        )
        for sentence in ("His mother made camomile tea.", "Peter came home to the fir tree.")
    ]
    lines = str(
        ExtractiveSynthesizer(embed_model=minilm, graph_store=graph, top_n=2, order="story")
        .synthesize("What happened?", nodes)
    ).splitlines()[1:]
    shares = [round(100 * book.index(n.node.text) / len(book)) for n in nodes]
    assert lines == [
        f"1. [Peter in the Garden · Chapter I · {shares[0]}% through the story] "
        "His mother made camomile tea.",
        f"2. [Peter in the Garden · Chapter II · {shares[1]}% through the story] "
        "Peter came home to the fir tree.",
    ]


def test_without_embedding_the_retriever_order_decides():
    synth = ExtractiveSynthesizer(top_n=1)
    nodes = list(reversed(_story_chunks()))  # the second chunk now ranks first
    nodes[0].score, nodes[1].score = 0.95, 0.5
    text = str(synth.synthesize("anything", nodes))
    assert "He ate some lettuces and some French beans." in text
    assert "McGregor" not in text


def _scored_sentences(pairs: list[tuple[str, float]]) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=text, metadata={"kind": "sentence"}), score=score)
        for text, score in pairs
    ]


@pytest.mark.spacy  # the answer-type cues are parsed by spaCy
def test_rank_by_score_keeps_the_retriever_order_untouched(minilm):
    """``rank_by="score"`` is the retriever's order as it came; ``auto`` and ``similarity``
    read the question and lead with the sentence that answers it."""
    nodes = _scored_sentences(
        [
            ("He ate some lettuces and some French beans.", 0.9),
            ("Peter lost one of his shoes among the cabbages.", 0.4),
        ]
    )
    query = "Where did Peter lose his shoe?"
    by_score = ExtractiveSynthesizer(embed_model=minilm, top_n=1, rank_by="score")
    response = by_score.synthesize(query, nodes)
    assert "lettuces" in str(response)
    evidence = response.metadata[RESPONSE_EVIDENCE_KEY]
    assert evidence[0]["offers_answer"] is None  # the question unread
    for rank_by in ("auto", "similarity"):
        synth = ExtractiveSynthesizer(embed_model=minilm, top_n=1, rank_by=rank_by)
        assert "shoes" in str(synth.synthesize(query, nodes)), rank_by


@pytest.mark.spacy  # the answer-type cues are parsed by spaCy
def test_a_sentence_resembling_the_question_does_not_lead_because_it_ranked_first(minilm):
    """Retriever rank 1 repeats the question's words but names no place; the sentence that
    names where leads. The rule, not the sentence: the first answer offers a new place."""
    nodes = _scored_sentences(
        [
            ("It was the second pair of shoes that Peter had lost in a fortnight!", 0.9),
            ("Peter lost one of his shoes under the gooseberry bush.", 0.7),
            ("His mother was not pleased.", 0.5),
        ]
    )
    response = ExtractiveSynthesizer(embed_model=minilm, top_n=3).synthesize(
        "Where did Peter lose his shoes?", nodes
    )
    evidence = response.metadata[RESPONSE_EVIDENCE_KEY]
    assert evidence[0]["offers_answer"] is True
    assert [e["offers_answer"] for e in evidence[1:]] == [False, False]
    assert "gooseberry bush" in evidence[0]["text"]


@pytest.mark.spacy  # the answer-type cues are parsed by spaCy
def test_question_words_outweigh_retriever_rank_for_what_questions(minilm):
    """No answer type for "what": the question's rarer words decide with relevance."""
    nodes = _scored_sentences(
        [
            ("Peter ran to the garden as fast as he could.", 0.9),
            ("Peter's mother gave him camomile tea at bed-time.", 0.3),
            ("Peter sat in the garden.", 0.2),
        ]
    )
    response = ExtractiveSynthesizer(top_n=1).synthesize(
        "What did Peter's mother give him at bed-time?", nodes
    )
    assert "camomile" in str(response)


#: Passages a retriever ranked between the top one and a low one: about Ichabod, none about a
#: chase or a bridge.
FILLER = [
    "Ichabod Crane was a schoolmaster in the valley.",
    "The schoolhouse stood on a lonely hill near a brook.",
    "Ichabod was fond of the good things of the table.",
    "Katrina Van Tassel was the daughter of a rich farmer.",
    "Ichabod told many stories of witchcraft by the fire.",
    "The party at the Van Tassel house lasted late into the night.",
    "Ichabod sang psalms in the church on Sundays.",
    "The wind moaned through the trees of the hollow.",
]
CHASE_QUESTION = "Who chased Ichabod across the bridge?"
#: Two sentences answering it about as well: question words and a person each.
COMPARABLE = (
    "An angry farmer chased Ichabod across the bridge at midnight.",
    "A tall soldier chased Ichabod across the bridge in the dark.",
)


def _passages(top: str, low: str) -> list[NodeWithScore]:
    """Ten retrieved passages: ``top`` first, ``low`` tenth, filler between."""
    texts = [top, *FILLER, low]
    meta = {"file_name": "hollow.txt"}
    return [
        NodeWithScore(node=TextNode(text=text, metadata=meta), score=1 - i / 20)
        for i, text in enumerate(texts)
    ]


def _leader(minilm: MiniLMEmbedding, nodes: list[NodeWithScore]) -> str:
    synth = ExtractiveSynthesizer(embed_model=minilm, top_n=3)
    return synth.synthesize(CHASE_QUESTION, nodes).metadata[RESPONSE_EVIDENCE_KEY][0]["text"]


@pytest.mark.parametrize("top", [0, 1], ids=["farmer-first", "soldier-first"])
def test_between_comparable_sentences_the_top_passage_leads(minilm, top):
    """Whichever of two comparably good sentences the retriever ranked first leads: a sentence
    of the tenth passage does not win on small differences of wording."""
    first, tenth = COMPARABLE[top], COMPARABLE[1 - top]
    assert _leader(minilm, _passages(first, tenth)) == first


def test_a_clearly_better_sentence_of_a_low_passage_still_leads(minilm):
    """The top passage neither names the chase nor a new person; the tenth does both."""
    weak = "Ichabod rode slowly home through the dark wood."
    strong = "Brom Bones, disguised as a horseman, chased Ichabod across the bridge."
    assert _leader(minilm, _passages(weak, strong)) == strong


def test_story_order_lists_evidence_in_narrative_order(minilm):
    synth = ExtractiveSynthesizer(embed_model=minilm, top_n=4, order="story")
    response = synth.synthesize("What happened to Peter in the garden?", _story_chunks())
    offsets = [e["char_offset"] for e in response.metadata[RESPONSE_EVIDENCE_KEY]]
    assert len(offsets) == 4 and offsets == sorted(offsets)


def test_duplicate_sentences_are_shown_once(minilm):
    chunks = _story_chunks() + _story_chunks()
    response = ExtractiveSynthesizer(embed_model=minilm, top_n=10).synthesize("Peter", chunks)
    texts = [e["text"] for e in response.metadata[RESPONSE_EVIDENCE_KEY]]
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
    assert re.fullmatch(r"1\. \[document 2 · character 12,345\] One sentence\.", line)


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
    assert f"1. [garden.txt · {percent}% through the story] {best}" in str(response)
    assert response.source_nodes[0].node.metadata["pos"][1] == offset


def test_index_answers_name_the_chapter_found_in_the_book(minilm):
    """End to end: chapter headings of an indexed book label the answer's position."""
    from llama_index.core import Document

    from llama_index_e2rag.extract.grounded import GroundedExtractor
    from llama_index_e2rag.index import E2RAGIndex

    book = (
        "CHAPTER I.\n\nMr. McGregor was planting cabbages in the morning.\n\n"
        "CHAPTER II. THE SHOES\n\nPeter lost one of his shoes among the cabbages.\n\n"
        "CHAPTER III.\n\nHis mother made camomile tea."
    )
    index = E2RAGIndex.from_documents(
        [Document(text=book, id_="book")], embed_model=minilm, extractors=[GroundedExtractor()]
    )
    response = index.as_query_engine(mode="grounded").query("Where did Peter lose his shoe?")
    first = response.metadata[RESPONSE_EVIDENCE_KEY][0]
    assert "shoes" in first["text"] and first["chapter"] == "Chapter II"
    label = r"^1\. \[book · Chapter II · \d+% through the story\] .*Peter lost"
    assert re.search(label, str(response), re.MULTILINE)
