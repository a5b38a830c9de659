"""A character's later facet after a named event, on the real offline default (spaCy + MiniLM).

The E²RAG showcase: Hermione is rule-obsessed early on and breaks rules after "the troll
incident". ``entity_event`` must rank a chunk holding the story after the incident first (it
anchors the *after* clause on the incident's event), ``faithful=True`` must stay the paper's
algorithm (no anchoring), and ``chrono`` must return both facets, in story order.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core import Document

from llama_index_e2rag.index import E2RAGIndex

TEXT = (Path(__file__).parent / "data" / "greymoor.txt").read_text(encoding="utf-8")
ANCHOR = TEXT.index("the troll incident")
QUESTIONS = (
    "What rules did Hermione break after the troll incident?",
    "After the troll incident, how did Hermione treat the school rules?",
)


@pytest.fixture(scope="module")
def index() -> E2RAGIndex:
    from llama_index_e2rag.embeddings import MiniLMEmbedding
    from llama_index_e2rag.extract.chrono import ChronoLayerBuilder
    from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder

    return E2RAGIndex.from_documents(
        [Document(text=TEXT, id_="greymoor")],
        embed_model=MiniLMEmbedding(),
        llm=None,
        doc_builders=[ChronoLayerBuilder(), SentenceGraphBuilder()],
    )


def _span(node) -> tuple[int, int]:
    return node.node.start_char_idx, node.node.end_char_idx


@pytest.mark.parametrize("question", QUESTIONS)
def test_entity_event_ranks_the_story_after_the_anchor_first(index, question) -> None:
    nodes = index.as_retriever(mode="entity_event", similarity_top_k=5).retrieve(question)
    start, end = _span(nodes[0])
    assert end > ANCHOR, "the first chunk must hold story that follows the troll incident"
    before = [i for i, n in enumerate(nodes) if _span(n)[1] <= ANCHOR]
    after = [i for i, n in enumerate(nodes) if _span(n)[1] > ANCHOR]
    assert after and (not before or min(after) < min(before))


@pytest.mark.parametrize("question", QUESTIONS)
def test_anchoring_lifts_chunks_after_the_anchor_and_faithful_mode_does_not(index, question):
    anchored = index.as_retriever(mode="entity_event", similarity_top_k=5).retrieve(question)
    paper = index.as_retriever(
        mode="entity_event", similarity_top_k=5, faithful=True
    ).retrieve(question)
    paper_scores = {n.node.node_id: n.score for n in paper}
    for node in anchored:
        if node.node.node_id not in paper_scores:
            continue
        lifted = node.score - paper_scores[node.node.node_id]
        if _span(node)[1] <= ANCHOR - 2000:  # far before the incident: no bonus, the side cost
            assert lifted <= 1e-6
        elif _span(node)[0] >= ANCHOR:  # after it: a bonus, never a cost
            assert lifted >= -1e-6


@pytest.mark.parametrize("mode", ["entity_event", "sentence_graph"])
def test_a_budget_is_filled_without_repeats(index, mode: str) -> None:
    """Up to a budget well past what the 20 anchor candidates of sentence_graph hold."""
    for budget in (120, 400, 1000):
        nodes = index.as_retriever(mode=mode, budget_words=budget).retrieve(QUESTIONS[0])
        words = sum(len(n.node.get_content().split()) for n in nodes)
        assert budget - 60 <= words <= budget
        spans = sorted(_span(n) for n in nodes)
        assert all(a[1] <= b[0] + 1 for a, b in zip(spans, spans[1:])), "overlap taken twice"


@pytest.mark.parametrize("question", QUESTIONS)
def test_chrono_returns_both_facets_in_story_order(index, question) -> None:
    nodes = index.as_retriever(mode="chrono").retrieve(question)
    positions = [tuple(n.node.metadata["pos"]) for n in nodes]
    assert positions == sorted(positions)
    assert any(p[1] < ANCHOR for p in positions) and any(p[1] > ANCHOR for p in positions)
    paper = index.as_retriever(mode="chrono", faithful=True).retrieve(question)
    scores = [n.score for n in paper]
    assert scores == sorted(scores, reverse=True)
