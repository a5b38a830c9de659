"""GroundedGraphRetriever (GroundedKG-RAG §3.3–3.4) through E2RAGIndex, real spaCy and MiniLM."""

from __future__ import annotations

import math

import numpy as np
import pytest
from llama_index.core import Document

from llama_index_e2rag.app.demo import sample_document
from llama_index_e2rag.extract.grounded import GroundedExtractor
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.stores.node_embeddings import (
    attention_embeddings,
    basic_embeddings,
    graph_cache,
    l2_normalize,
    neighbor_embeddings,
)
from llama_index_e2rag.retrievers.grounded import GroundedGraphRetriever
from llama_index_e2rag.schema import EdgeKind, NodeKind, normalize_text

SHOES = "Where did Peter lose his shoes?"

#: Two tiny stories that differ in what lies in the chest; the crown is only in the sentence
#: *after* Anna opens hers, so only a neighbour-aware embedding links Anna's opening to a crown.
ANNA = "Anna opened the wooden chest. Inside it lay a golden crown covered in rubies."
BRUNO = "Bruno opened the chest. Inside it lay a rusty nail."

#: Cut into chunks of 40 tokens overlapping by 15, so neighbouring chunks share a sentence.
KEYS = (
    "Anna found a silver key under the old oak. Bruno baked brown bread for the village. "
    "Clara painted the barn red. Anna opened the iron gate with the silver key. "
    "Dora sang a sad song by the river. Bruno mended the broken cart. "
    "Clara fed the hungry goats. Anna gave the silver key to Dora."
)
GATE = "Anna opened the iron gate with the silver key."


@pytest.fixture(scope="module")
def extractor() -> GroundedExtractor:
    return GroundedExtractor()


@pytest.fixture(scope="module")
def peter(minilm, extractor) -> E2RAGIndex:
    """The bundled Peter Rabbit story, indexed offline as the demo does."""
    return E2RAGIndex.from_documents(
        [sample_document()], embed_model=minilm, extractors=[extractor]
    )


def _chests(minilm, extractor) -> E2RAGIndex:
    docs = [
        Document(text=ANNA, id_="anna", metadata={"file_name": "anna.txt"}),
        Document(text=BRUNO, id_="bruno", metadata={"file_name": "bruno.txt"}),
    ]
    return E2RAGIndex.from_documents(docs, embed_model=minilm, extractors=[extractor])


@pytest.fixture(scope="module")
def chests(minilm, extractor) -> E2RAGIndex:
    return _chests(minilm, extractor)


@pytest.fixture(scope="module")
def overlapping(minilm, extractor) -> E2RAGIndex:
    return E2RAGIndex.from_documents(
        [Document(text=KEYS, id_="keys")],
        embed_model=minilm,
        extractors=[extractor],
        chunk_size=40,
        chunk_overlap=15,
    )


def _grounded_spans(graph, node_id: str) -> list[tuple[int, int]]:
    return [
        tuple(graph.get_node(e.target).span)
        for e in graph.edges_of(node_id, [EdgeKind.GROUNDED_IN], "out")
    ]


def _evidence_key(graph, node_id: str) -> tuple:
    """What a graph node is evidence of, whichever chunk's copy it is: an event's span, an
    entity's name."""
    node = graph.get_node(node_id)
    if node.kind == NodeKind.EVENT:
        return ("event", tuple(node.span))
    return ("mention", normalize_text(node.name))


def _texts(results) -> list[str]:
    return [r.node.text for r in results]


# -- what comes back ---------------------------------------------------------------------------


def test_returns_grounded_sentences_with_positions(peter):
    results = peter.as_retriever(mode="grounded").retrieve(SHOES)
    assert isinstance(peter.as_retriever(mode="grounded"), GroundedGraphRetriever)
    spans = [tuple(r.node.metadata["span"]) for r in results]
    assert len(spans) == len(set(spans)), "a sentence must never come back twice"
    story = sample_document().text
    graph = peter.graph_store
    for r in results:
        sentence = graph.get_node(r.node.node_id)
        meta = r.node.metadata
        assert sentence is not None and sentence.kind == NodeKind.SENTENCE
        assert meta["pos"] == list(sentence.pos) and meta["doc_id"] == "peter_rabbit"
        assert meta["position"] == f"document 0, character {sentence.pos[1]}"
        start, end = meta["span"]
        assert story[start:end] == r.node.text
        assert meta["chunk_id"] == sentence.chunk_id and meta["file_name"] == "peter_rabbit.txt"
        assert r.node.ref_doc_id == "peter_rabbit"
        # Every listed graph node is grounded in this sentence or in its copy from an
        # overlapping chunk (the paper's grounded_texts).
        for node_id in meta["graph_nodes"]:
            assert any(start <= a and b <= end for a, b in _grounded_spans(graph, node_id))
        assert 1 <= meta["ret_count"] <= len(meta["graph_nodes"])
        assert meta["query_hits"] >= 1
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)
    # Both sentences that tell of Peter losing shoes are among the five best of 59.
    top = " ".join(_texts(results[:5]))
    assert "He lost one of his shoes among the cabbages" in top
    assert "pair of shoes that Peter had lost" in top


def test_bookkeeping_metadata_stays_out_of_llm_view(peter):
    node = peter.as_retriever(mode="grounded").retrieve(SHOES)[0].node
    llm_view = node.get_content(metadata_mode="llm")
    assert "graph_nodes" not in llm_view and "ret_count" not in llm_view
    assert "peter_rabbit.txt" in llm_view  # the source stays visible for citation
    assert f"position: {node.metadata['position']}" in llm_view  # so is the place in the story
    assert "pos:" not in llm_view


def test_story_order_sorts_by_position_after_choosing_the_best(peter):
    relevance = peter.as_retriever(mode="grounded", max_sentences=5).retrieve(SHOES)
    story = peter.as_retriever(mode="grounded", max_sentences=5, order="story").retrieve(SHOES)
    positions = [tuple(r.node.metadata["pos"]) for r in story]
    assert positions == sorted(positions)
    assert {r.node.node_id for r in story} == {r.node.node_id for r in relevance}
    assert [r.node.node_id for r in story] != [r.node.node_id for r in relevance]
    # The query engine shows the context in the order the retriever says it is in.
    assert peter.as_retriever(mode="grounded", order="story").context_order == "story"
    assert peter.as_retriever(mode="grounded").context_order == "retrieval"


def test_query_without_parsable_nodes_falls_back_to_the_whole_query(peter, extractor):
    assert extractor.query_nodes("camomile") == []  # no verb, no named entity
    results = peter.as_retriever(mode="grounded", similarity_top_k=3).retrieve("camomile")
    assert results and "camomile tea" in results[0].node.text


async def test_async_retrieval_matches_sync(peter):
    retriever = peter.as_retriever(mode="grounded", max_sentences=8)
    sync = retriever.retrieve(SHOES)
    asynchronous = await retriever.aretrieve(SHOES)
    assert [r.node.node_id for r in asynchronous] == [r.node.node_id for r in sync]
    assert [r.score for r in asynchronous] == pytest.approx([r.score for r in sync])


# -- the paper's filters -----------------------------------------------------------------------


def test_vector_sim_keeps_only_sentences_close_to_the_query(peter, minilm):
    everything = peter.as_retriever(mode="grounded").retrieve(SHOES)
    tau = 0.5
    filtered = peter.as_retriever(mode="grounded", vector_sim=tau).retrieve(SHOES)
    query = np.asarray(minilm.get_query_embedding(SHOES))
    for r in everything:  # the threshold is on cos(query, sentence), computed independently
        cosine = float(np.dot(query, minilm.get_text_embedding(r.node.text)))
        assert r.node.metadata["query_similarity"] == pytest.approx(cosine, abs=1e-4)
    expected = {r.node.node_id for r in everything if r.node.metadata["query_similarity"] >= tau}
    assert {r.node.node_id for r in filtered} == expected
    assert 0 < len(filtered) < len(everything)
    stricter = peter.as_retriever(mode="grounded", vector_sim=0.7).retrieve(SHOES)
    assert len(stricter) < len(filtered)


def test_ret_count_keeps_sentences_selected_through_several_nodes(peter):
    everything = peter.as_retriever(mode="grounded").retrieve(SHOES)
    filtered = peter.as_retriever(mode="grounded", ret_count=2).retrieve(SHOES)
    expected = {r.node.node_id for r in everything if r.node.metadata["ret_count"] >= 2}
    assert {r.node.node_id for r in filtered} == expected
    assert 0 < len(filtered) < len(everything)
    assert all(len(r.node.metadata["graph_nodes"]) >= 2 for r in filtered)
    assert any("pair of shoes that Peter had lost" in t for t in _texts(filtered))


def _timeline(graph, mention_id: str) -> set[str]:
    """The mentions linked to one by ``next`` edges between mentions: one entity's timeline."""
    seen, todo = {mention_id}, [mention_id]
    while todo:
        for edge in graph.edges_of(todo.pop(), [EdgeKind.NEXT], "both"):
            for other in (edge.source, edge.target):
                if other not in seen and graph.get_node(other).kind == NodeKind.MENTION:
                    seen.add(other)
                    todo.append(other)
    return seen


def test_a_character_split_over_chunks_weighs_as_one_entity(peter):
    """Mentions are per chunk, so Peter is one mention node per 256-token chunk, each grounded
    in a few sentences. As evidence each weighs like the whole character: all the sentences his
    timeline's mentions are grounded in (overlap copies of a sentence counted once)."""
    cache, graph = graph_cache(peter.stores), peter.graph_store
    rows = [
        i
        for i, node_id in enumerate(cache.node_ids)
        if (node := graph.get_node(node_id)).kind == NodeKind.MENTION and node.name == "Peter"
    ]
    assert len({graph.get_node(cache.node_ids[i]).chunk_id for i in rows}) >= 5
    entity = _timeline(graph, cache.node_ids[rows[0]])
    assert {cache.node_ids[i] for i in rows} <= entity
    spans = {span for node_id in entity for span in _grounded_spans(graph, node_id)}
    whole = {s for s in spans if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in spans)}
    assert len(whole) > max(len(cache.groundings(i)) for i in rows)
    for i in rows:
        assert cache.specificity(i) == pytest.approx(1 + math.log(len(whole)))


# -- overlapping chunks --------------------------------------------------------------------------


def test_overlap_copies_of_a_sentence_come_back_once_with_their_evidence_pooled(overlapping):
    graph = overlapping.graph_store
    gate_copies = [n for n in graph.nodes(kind=NodeKind.SENTENCE) if n.text == GATE]
    assert len({n.chunk_id for n in gate_copies}) == 2, "the gate sentence is in the overlap"
    for question in ("Who opened the gate with the silver key?", "What did Anna give Dora?"):
        results = overlapping.as_retriever(mode="grounded").retrieve(question)
        spans = [tuple(r.node.metadata["span"]) for r in results]
        assert len(spans) == len(set(spans))
        assert _texts(results).count(GATE) == 1
    results = overlapping.as_retriever(mode="grounded").retrieve(
        "Who opened the gate with the silver key?"
    )
    assert results[0].node.text == GATE
    meta = results[0].node.metadata
    # Graph nodes of both chunks led there; each entity or event counts once.
    sources = {graph.get_node(i).chunk_id for i in meta["graph_nodes"]}
    assert sources == {n.chunk_id for n in gate_copies}
    distinct = {_evidence_key(graph, i) for i in meta["graph_nodes"]}
    assert meta["ret_count"] == len(distinct) < len(meta["graph_nodes"])


def test_ret_count_does_not_count_overlap_copies_twice(overlapping):
    """Asked about Anna and Dora with K=3, the gate sentence is reached only through Anna, whose
    mention exists once in each of the two chunks sharing the sentence: one piece of evidence,
    not two."""
    question = "What did Anna give Dora?"
    everything = overlapping.as_retriever(mode="grounded", similarity_top_k=3).retrieve(question)
    gate = next(r for r in everything if r.node.text == GATE).node.metadata
    assert {_evidence_key(overlapping.graph_store, i) for i in gate["graph_nodes"]} == {
        ("mention", "anna")
    }
    assert len(gate["graph_nodes"]) == 2 and gate["ret_count"] == 1
    filtered = overlapping.as_retriever(
        mode="grounded", similarity_top_k=3, ret_count=2
    ).retrieve(question)
    assert GATE not in _texts(filtered)
    assert "Anna gave the silver key to Dora." in _texts(filtered)


# -- the paper's node-embedding variants ---------------------------------------------------------


def test_neighbor_variant_pulls_in_neighbour_context(chests, extractor, minilm):
    """Why the ranking changes.

    "the golden crown" parses to no node, so the whole query is the one query node. Under
    ``basic`` a node is its name plus its own sentence: neither opening event ("Anna opened the
    wooden chest", "Bruno opened the chest") says anything of a crown. Under ``neighbor`` each
    node also averages its neighbours' embeddings; Anna's opening event has the crown event
    ("Inside it lay a golden crown") as its ``next`` neighbour, Bruno's a rusty nail. So the
    crown query gains on Anna's event, and more than on Bruno's.
    """
    assert extractor.query_nodes("the golden crown") == []
    cache = graph_cache(chests.stores)
    query = l2_normalize(np.asarray(minilm.get_query_embedding("the golden crown")))

    def opening(who: str) -> int:
        return next(
            i
            for i, node_id in enumerate(cache.node_ids)
            if (node := chests.graph_store.get_node(node_id)).kind == NodeKind.EVENT
            and node.text.startswith(f"{who} opened")
        )

    def gain(row: int) -> float:
        basic = cache.matrix("basic", 0.5, 0.3)[row] @ query
        return float(cache.matrix("neighbor", 0.5, 0.3)[row] @ query - basic)

    assert gain(opening("Anna")) > 0
    assert gain(opening("Anna")) > gain(opening("Bruno"))


def test_attention_weighs_an_unlike_neighbour_less(chests, minilm):
    """Anna's opening event is most like its own participants (Anna, the wooden chest, same
    sentence) and least like the crown event; softmax attention therefore gives the crown a
    smaller weight than the plain mean does, so the crown query finds Anna's event less similar
    under ``attention`` than under ``neighbor`` — but more than under ``basic``, since the crown
    still has some weight (the paper's "more stable" variant sits between the two)."""
    cache = graph_cache(chests.stores)
    anna_event = next(
        i
        for i, node_id in enumerate(cache.node_ids)
        if (node := chests.graph_store.get_node(node_id)).kind == NodeKind.EVENT
        and node.text.startswith("Anna opened the wooden chest")
    )
    query = l2_normalize(np.asarray(minilm.get_query_embedding("the golden crown")))
    sims = {
        variant: float(cache.matrix(variant, 0.5, 0.3)[anna_event] @ query)
        for variant in ("basic", "neighbor", "attention")
    }
    assert sims["basic"] < sims["attention"] < sims["neighbor"]


def test_variant_math_on_hand_made_vectors():
    """The formulas themselves: α mixes name and grounded text, β mixes node and neighbours."""
    names = np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]], dtype=np.float32)
    texts = np.array([[0, 0, 0, 1.0]], dtype=np.float32)
    indptr, indices = np.array([0, 1, 1, 1]), np.array([0])
    base = basic_embeddings(names, indptr, indices, texts, alpha=0.5)
    assert base[0] == pytest.approx(np.array([1, 0, 0, 1]) / np.sqrt(2))
    assert base[1] == pytest.approx(names[1])  # grounded in nothing: its name alone
    # node 0 has two neighbours: 1 (orthogonal to it) and 2 (orthogonal too); node 2 none.
    sources, targets = np.array([0, 0, 1, 1]), np.array([1, 2, 0, 2])
    neighbor = neighbor_embeddings(base, sources, targets, beta=0.5)
    assert neighbor[2] == pytest.approx(base[2])  # no neighbours: unchanged
    expected = l2_normalize(0.5 * base[0] + 0.5 * l2_normalize(base[1] + base[2]))
    assert neighbor[0] == pytest.approx(expected)
    # Attention: neighbour 0 is more like node 1 than node 2 is, so it gets the larger weight.
    base2 = l2_normalize(np.array([[1.0, 0.2], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32))
    attn = attention_embeddings(base2, np.array([1, 1]), np.array([0, 2]), beta=0.5)
    plain = neighbor_embeddings(base2, np.array([1, 1]), np.array([0, 2]), beta=0.5)
    assert attn[1] @ base2[0] > plain[1] @ base2[0]
    with pytest.raises(ValueError, match="alpha"):
        basic_embeddings(names, indptr, indices, texts, alpha=1.5)


# -- the cache ----------------------------------------------------------------------------------


def test_node_embeddings_are_cached_and_rebuilt_after_insert_and_delete(minilm, extractor):
    index = _chests(minilm, extractor)
    first = graph_cache(index.stores)
    index.as_retriever(mode="grounded").retrieve("Who opened the chest?")
    assert graph_cache(index.stores) is first, "retrieval must reuse the cached node matrix"

    index.insert(Document(text="Clara buried a silver spoon.", id_="clara"))
    rebuilt = graph_cache(index.stores)
    assert rebuilt is not first and len(rebuilt.node_ids) > len(first.node_ids)
    found = _texts(index.as_retriever(mode="grounded").retrieve("Who buried the spoon?"))
    assert found[0] == "Clara buried a silver spoon."

    index.delete_ref_doc("anna")
    after = _texts(index.as_retriever(mode="grounded").retrieve("Who opened the chest?"))
    assert after and not any("Anna" in t or "crown" in t for t in after)


def test_bad_arguments_are_refused(chests):
    for kwargs, match in [
        ({"similarity_top_k": 0}, "similarity_top_k"),
        ({"embedding_variant": "gcn"}, "embedding_variant"),
        ({"alpha": -0.1}, "alpha"),
        ({"beta": 2}, "beta"),
        ({"vector_sim": 3}, "vector_sim"),
        ({"ret_count": 0}, "ret_count"),
        ({"order": "random"}, "order"),
        ({"max_sentences": 0}, "max_sentences"),
    ]:
        with pytest.raises(ValueError, match=match):
            chests.as_retriever(mode="grounded", **kwargs)
