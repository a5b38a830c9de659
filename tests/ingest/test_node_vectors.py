"""What a node's vector is made of (GroundedKG-RAG's basic node embedding for events)."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.ingest.node_vectors import ALPHA, sources, vector
from llama_index_e2rag.schema import GraphNode, NodeKind

SENTENCE = "Harry opened the heavy door and went in."


def _node(kind: NodeKind, text: str, offset: int, **extra: object) -> GraphNode:
    return GraphNode(id=f"{kind.value}-{offset}", kind=kind, text=text, doc_id="d",
                     pos=(0, offset, 0), **extra)


@pytest.fixture
def graph() -> NetworkXGraphStore:
    g = NetworkXGraphStore()
    event = _node(NodeKind.EVENT, "Harry opened the heavy door", 0, name="Harry open door",
                  attrs={"sentence_text": SENTENCE})
    fact = _node(NodeKind.FACT, event.text, 1, attrs={"event_id": event.id})
    llm_event = _node(NodeKind.EVENT, "Harry enters the vault", 2, name="Harry enters")
    other_fact = _node(NodeKind.FACT, "A fact in words of its own", 3, attrs={"event_id": event.id})
    g.upsert_nodes([event, fact, llm_event, other_fact, _node(NodeKind.SENTENCE, SENTENCE, 4)])
    return g


def _random_vectors(texts: set[str]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {t: rng.normal(size=8).astype(np.float32) for t in sorted(texts)}


def test_an_event_grounded_in_a_sentence_is_made_of_its_name_and_that_sentence(graph) -> None:
    event = graph.get_node("event-0")
    assert sources(event, graph) == ("Harry open door", SENTENCE)
    embedded = _random_vectors({"Harry open door", SENTENCE})
    unit = {t: v / np.linalg.norm(v) for t, v in embedded.items()}
    mixed = ALPHA * unit["Harry open door"] + (1 - ALPHA) * unit[SENTENCE]
    got = vector(event, graph, embedded.__getitem__)
    assert got == pytest.approx(mixed / np.linalg.norm(mixed), abs=1e-6)


def test_a_fact_made_from_an_event_takes_the_events_vector(graph) -> None:
    fact, event = graph.get_node("fact-1"), graph.get_node("event-0")
    embedded = _random_vectors({"Harry open door", SENTENCE})
    assert sources(fact, graph) == sources(event, graph)
    assert np.array_equal(vector(fact, graph, embedded.__getitem__),
                          vector(event, graph, embedded.__getitem__))


def test_every_other_node_embeds_its_own_text(graph) -> None:
    for node_id in ("event-2", "fact-3", "sentence-4"):  # LLM event, rewritten fact, sentence
        node = graph.get_node(node_id)
        assert sources(node, graph) == (node.text,)
        embedded = _random_vectors({node.text})
        assert np.array_equal(vector(node, graph, embedded.__getitem__), embedded[node.text])


def test_a_sentence_with_an_embed_text_is_embedded_from_it_alone() -> None:
    g = NetworkXGraphStore()
    topical = _node(NodeKind.SENTENCE, SENTENCE, 0, attrs={"embed_text": f"Harry: {SENTENCE}"})
    chunk = _node(NodeKind.CHUNK, SENTENCE, 1, attrs={"embed_text": "ignored"})
    g.upsert_nodes([topical, chunk])
    assert sources(topical, g) == (f"Harry: {SENTENCE}",)
    embedded = _random_vectors({f"Harry: {SENTENCE}"})
    assert np.array_equal(vector(topical, g, embedded.__getitem__), embedded[f"Harry: {SENTENCE}"])
    assert sources(chunk, g) == (SENTENCE,)  # only sentences take an embed text
