"""Scores a LlamaIndex user can use: 0-1 in every mode, the mode's own order, cutoffs that mean
something, and fair mixes in ``QueryFusionRetriever`` (``ranking/scores.py``).

On the real offline default (MiniLM + spaCy, LLM-free layers of every mode) over the bundled
*Tale of Peter Rabbit*. The questions on topic are about the story; those off topic are about
things it never mentions.
"""

from __future__ import annotations

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import QueryBundle

from llama_index_e2rag import NoLLM
from llama_index_e2rag.context.keys import SIGNALS_KEY
from llama_index_e2rag.app.demo import sample_document
from llama_index_e2rag.embeddings import MiniLMEmbedding
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.modes import RETRIEVER_MODES
from llama_index_e2rag.context.keys import RAW_SCORE_KEY
from llama_index_e2rag.context.keys import CONTINUATION_KEY

ON_TOPIC = [
    "Where did Peter lose his shoes?",
    "Who chased Peter round the garden?",
    "What did Peter's mother give him when he was ill?",
]
OFF_TOPIC = [
    "What is the capital of France and what is its population?",
    "How does a jet engine produce thrust?",
    "Which programming language has the borrow checker?",
]
#: One cutoff for every mode: scores share one scale.
CUTOFF = 0.3
#: Modes that return their evidence in story order by design (``order=`` of each retriever);
#: every other mode returns it best first.
STORY_ORDERED = {"chrono", "sentence_graph", "event_graph"}
FUSION_MODES = ["simple", "reciprocal_rerank", "relative_score", "dist_based_score"]
TOP = 6


@pytest.fixture(scope="module")
def embed(minilm: MiniLMEmbedding) -> MiniLMEmbedding:
    return minilm


@pytest.fixture(scope="module")
def index(embed) -> E2RAGIndex:
    from llama_index_e2rag import ChronoLayerBuilder, EventGraphBuilder, SentenceGraphBuilder

    return E2RAGIndex.from_documents(
        [sample_document()],
        embed_model=embed,
        llm=None,
        doc_builders=[ChronoLayerBuilder(), SentenceGraphBuilder(), EventGraphBuilder()],
    )


@pytest.fixture(scope="module")
def vector_index(index, embed) -> VectorStoreIndex:
    """A plain LlamaIndex index of the same story with the same embedding, chunked as ours is
    (cosines depend on the length of what is embedded; the narrative score is calibrated
    against chunks of this size)."""
    splitter = SentenceSplitter(chunk_size=index.chunk_size, chunk_overlap=index.chunk_overlap)
    return VectorStoreIndex.from_documents(
        [sample_document()], embed_model=embed, transformations=[splitter]
    )


@pytest.mark.parametrize("mode", RETRIEVER_MODES)
def test_every_mode_scores_on_0_to_1_keeping_its_raw_score_and_its_order(index, mode):
    retriever = index.as_retriever(mode=mode)
    for question in ON_TOPIC + OFF_TOPIC:
        raw = retriever._retrieve(QueryBundle(question))  # the mode before calibration
        results = retriever.retrieve(question)
        assert results, question
        assert [r.node.node_id for r in results] == [r.node.node_id for r in raw]
        for result, before in zip(results, raw):
            assert 0.0 <= result.score <= 1.0
            assert result.node.metadata[SIGNALS_KEY][RAW_SCORE_KEY] == before.score
            assert SIGNALS_KEY in result.node.excluded_llm_metadata_keys
        if mode not in STORY_ORDERED:  # what LlamaIndex users expect: scores never rise
            assert all(a.score >= b.score for a, b in zip(results, results[1:])), question
        # and the calibration is monotone: a higher raw score never gets a lower score, except
        # for a narrative continuation, scored from the hit it follows (``ranking.scores``)
        own = [r for r in results if CONTINUATION_KEY not in r.node.metadata[SIGNALS_KEY]]
        pairs = sorted((r.node.metadata[SIGNALS_KEY][RAW_SCORE_KEY], r.score) for r in own)
        assert [s for _, s in pairs] == sorted(s for _, s in pairs)


@pytest.mark.parametrize("mode", RETRIEVER_MODES)
def test_a_similarity_cutoff_removes_more_for_an_off_topic_question(index, mode):
    retriever = index.as_retriever(mode=mode)
    cutoff = SimilarityPostprocessor(similarity_cutoff=CUTOFF)

    def kept(questions: list[str]) -> float:
        shares = []
        for question in questions:
            results = retriever.retrieve(question)
            shares.append(len(cutoff.postprocess_nodes(results)) / len(results))
        return sum(shares) / len(shares)

    on, off = kept(ON_TOPIC), kept(OFF_TOPIC)
    assert on > off + 0.25, (on, off)


def test_the_default_mode_is_comparable_across_questions(index):
    """The best passage of an on-topic question outscores the best of any off-topic one: no
    per-question normalisation puts every top result at 1.0."""
    retriever = index.as_retriever()
    on = [retriever.retrieve(q)[0].score for q in ON_TOPIC]
    off = [max(r.score for r in retriever.retrieve(q)) for q in OFF_TOPIC]
    assert min(on) > max(off), (on, off)
    assert max(on) < 1.0


def _fusion(retrievers: list, mode: str) -> QueryFusionRetriever:
    return QueryFusionRetriever(
        retrievers, llm=NoLLM(), mode=mode, num_queries=1, similarity_top_k=TOP, use_async=False
    )


def _contributions(
    retrievers: list, fusion_mode: str, questions: list[str] = ON_TOPIC
) -> list[list[int]]:
    """Per question, how many of the fused top results came from each retriever."""
    fusion = _fusion(retrievers, fusion_mode)
    rows = []
    for question in questions:
        own = [{r.node.node_id for r in retriever.retrieve(question)} for retriever in retrievers]
        fused = [r.node.node_id for r in fusion.retrieve(question)]
        rows.append([sum(node_id in ids for node_id in fused) for ids in own])
    return rows


@pytest.mark.parametrize("fusion_mode", FUSION_MODES)
def test_fusing_two_of_our_modes_mixes_both(index, fusion_mode):
    ours = [index.as_retriever(), index.as_retriever(mode="grounded", similarity_top_k=3)]
    for counts in _contributions(ours, fusion_mode):
        assert min(counts) >= 1, counts


SIMPLE_OURS_ONLY = pytest.mark.xfail(
    strict=True,
    reason="simple keeps each result's own score, and for this question the calibration rates "
    "ours the likelier evidence: its best VectorStoreIndex chunk has cosine 0.45 (on FairytaleQA "
    "train, chunks of cosine 0.4-0.5 hold the gold section 12 % of the time), our passages at "
    "ranks 3-6 score 0.56-0.66 (passages scoring 0.5-0.7 there: 17-36 %); the rank- and "
    "score-normalising modes mix both",
)
#: Every fusion mode with every on-topic question; the one known miss is marked.
MIXES = [
    pytest.param(mode, question, marks=SIMPLE_OURS_ONLY)
    if (mode, question) == ("simple", ON_TOPIC[2])
    else (mode, question)
    for mode in FUSION_MODES
    for question in ON_TOPIC
]


@pytest.mark.parametrize(("fusion_mode", "question"), MIXES)
def test_fusing_ours_with_a_vector_store_index_mixes_both(
    index, vector_index, fusion_mode, question
):
    retrievers = [index.as_retriever(), vector_index.as_retriever(similarity_top_k=TOP)]
    counts = _contributions(retrievers, fusion_mode, [question])[0]
    assert min(counts) >= 1, counts
