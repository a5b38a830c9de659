"""E²GraphRAG's builder through the index: fused entities offline and with the scripted LLM,
cross-document entity links, timelines, persist/load, delete, and the failure report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import numpy as np
from hash_embedding import HashEmbedding, hash_vector
from llama_index.core import Document
from scripted_llm import ScriptedLLM

from llama_index_e2rag.extract.event_graph.builder import EventGraphBuilder
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind
from llama_index_e2rag.persist.check import full_check

NAMES = ["Hermione Granger", "Miss Granger", "Ron Weasley", "Neville Longbottom"]
TERM = Document(
    id_="term",
    text=(
        "Hermione Granger studied alone in the library. Ron Weasley mocked Hermione Granger "
        "in the Charms lesson.\n\nMiss Granger cried in the bathroom after the lesson. "
        "Neville Longbottom lost his toad on the train."
    ),
)
HALLOWEEN = Document(
    id_="halloween",
    text=(
        "On Halloween a troll entered the bathroom. Hermione Granger lied to the teachers to "
        "protect Ron Weasley after the troll fight."
    ),
)


def _entities(index: E2RAGIndex, doc_id: str | None = None) -> list[GraphNode]:
    return [
        e for e in index.graph_store.nodes(NodeKind.ENTITY, doc_id)
        if e.attrs.get("event_graph") == "entity"
    ]


def _same_entity_links(index: E2RAGIndex) -> list[tuple[str, str]]:
    graph = index.graph_store
    return sorted(
        (graph.get_node(e.source).doc_id, graph.get_node(e.target).doc_id)
        for e in graph.edges(EdgeKind.INSTANCE_OF)
        if e.attrs.get("event_graph") == "same_entity"
    )


def _reload(index: E2RAGIndex, store: Path, **kwargs: object) -> E2RAGIndex:
    index.storage_context.persist(str(store))
    health = full_check(store)
    assert health.ok, health.problems
    return load_index(store, embed_model=HashEmbedding(), **kwargs)


def _scripted_index(
    llm: ScriptedLLM, docs: list[Document], embed_model: object = None
) -> E2RAGIndex:
    """With the scripted LLM; the real offline embedding unless ``embed_model`` is given."""
    return E2RAGIndex.from_documents(
        docs, llm=llm, embed_model=embed_model, doc_builders=[EventGraphBuilder()]
    )


def test_every_mention_is_an_instance_of_one_entity_of_its_document() -> None:
    index = E2RAGIndex.from_documents(
        [TERM], embed_model=HashEmbedding(), doc_builders=[EventGraphBuilder()]
    )
    graph = index.graph_store
    entities = {e.id for e in _entities(index)}
    assert entities
    for mention in graph.nodes(NodeKind.MENTION):
        targets = [e.target for e in graph.edges_of(mention.id, [EdgeKind.INSTANCE_OF], "out")]
        assert len(targets) == 1 and targets[0] in entities
        assert graph.get_node(targets[0]).doc_id == mention.doc_id
    lifted = [e for e in graph.edges(EdgeKind.PARTICIPATES) if e.source in entities]
    assert lifted and all(graph.get_node(e.target).kind == NodeKind.EVENT for e in lifted)
    assert not graph.nodes(NodeKind.GRAPH_EVENT)  # no LLM: the frames are the events


class _TallyEmbedding(HashEmbedding):
    """The hash embedding, tallying each text it embeds."""

    tally: dict[str, int] = {}

    def _get_text_embedding(self, text: str) -> list[float]:
        self.tally[text] = self.tally.get(text, 0) + 1
        return super()._get_text_embedding(text)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embedding(text)


def test_texts_the_fusion_embeds_are_not_embedded_again_for_the_vectors() -> None:
    embed = _TallyEmbedding(tally={})
    index = E2RAGIndex.from_documents(
        [TERM], embed_model=embed, doc_builders=[EventGraphBuilder()]
    )
    names = {m.name for m in index.graph_store.nodes(NodeKind.MENTION)}
    assert names <= set(embed.tally)  # fusion and mention vectors both needed the names
    assert {t: n for t, n in embed.tally.items() if n > 1} == {}
    # the reused vectors are the texts' own: each entity's stored vector is its name's
    entities = _entities(index)
    stored = index.stores.vectors.get_embeddings([e.id for e in entities])
    for entity in entities:
        assert np.allclose(stored[entity.id], hash_vector(entity.text), atol=1e-6)


def test_the_llm_layer_fuses_names_and_grows_events_from_every_chunk() -> None:
    """On the real MiniLM embedding: the two names of one person fuse, the others do not."""
    llm = ScriptedLLM(names=NAMES, entity_types={n: "person" for n in NAMES})
    index = _scripted_index(llm, [TERM])
    hermione = [e for e in _entities(index) if "Hermione Granger" in e.attrs["aliases"]]
    assert len(hermione) == 1 and "Miss Granger" in hermione[0].attrs["aliases"]
    assert all(len(e.attrs["aliases"]) == 1 for e in _entities(index) if e.id != hermione[0].id)
    events = index.graph_store.nodes(NodeKind.GRAPH_EVENT)
    assert events and llm.calls_by_kind["eventgraph_update"] > 0
    graph = index.graph_store
    for event in events:  # every event is told in chunks of its document and has an entity
        told = graph.edges_of(event.id, [EdgeKind.GROUNDED_IN], "out")
        assert told and {graph.get_node(e.target).kind for e in told} == {NodeKind.CHUNK}
        assert graph.edges_of(event.id, [EdgeKind.PARTICIPATES], "in")
    assert index.extraction_report() == []


def test_malformed_output_for_one_ego_network_costs_only_its_calls() -> None:
    """Small chunks give Neville's ego network a chunk of its own; every update call on that
    chunk answers garbage. Only those calls are lost and reported."""
    marker = "Neville Longbottom lost his toad"

    def build(broken: bool) -> E2RAGIndex:
        llm = ScriptedLLM(names=NAMES, entity_types={n: "person" for n in NAMES})
        if broken:
            def answer(prompt: str) -> str:
                if marker in prompt.partition("Text:")[2]:
                    return "no JSON here"
                return json.dumps(llm.event_updates_of(prompt))

            llm.handlers = {"eventgraph_update": answer}
        return E2RAGIndex.from_documents(
            [TERM], llm=llm, embed_model=HashEmbedding(), chunk_size=24, chunk_overlap=0,
            doc_builders=[EventGraphBuilder()],
        )

    clean, broken = build(False), build(True)
    report = broken.extraction_report()
    lost = {f["chunk_id"] for f in report}
    assert report and all("event_graph update" in f["reason"] for f in report)
    assert all(marker in broken.graph_store.get_node(c).text for c in lost)
    kept = {e.id for e in clean.graph_store.nodes(NodeKind.GRAPH_EVENT)
            if not set(e.attrs["chunks"]) & lost}
    assert kept and kept <= {e.id for e in broken.graph_store.nodes(NodeKind.GRAPH_EVENT)}


def test_documents_share_an_entity_through_links_that_go_with_either(tmp_path: Path) -> None:
    index = E2RAGIndex.from_documents(
        [TERM], embed_model=HashEmbedding(), doc_builders=[EventGraphBuilder()]
    )
    index.insert(HALLOWEEN)
    assert ("halloween", "term") in _same_entity_links(index)
    timeline = index.entity_timeline("Hermione Granger")
    assert {entry.doc_id for entry in timeline.entries} == {"term", "halloween"}
    loaded = _reload(index, tmp_path / "store")
    (restored,) = loaded.doc_builders
    assert isinstance(restored, EventGraphBuilder)
    loaded.delete_ref_doc("term")
    assert _same_entity_links(loaded) == []
    assert _entities(loaded, "term") == [] and _entities(loaded, "halloween")
    left = loaded.entity_timeline("Hermione Granger")
    assert {entry.doc_id for entry in left.entries} == {"halloween"}
    _reload(loaded, tmp_path / "store")


def test_the_event_graph_mode_needs_the_layer() -> None:
    from llama_index_e2rag.retrievers.event_graph import EventGraphMissingError

    index = E2RAGIndex.from_documents([TERM], embed_model=HashEmbedding())
    with pytest.raises(EventGraphMissingError, match="--event-graph"):
        index.as_retriever(mode="event_graph")


def test_the_query_engine_drafts_then_enriches_with_an_llm() -> None:
    llm = ScriptedLLM(names=NAMES, entity_types={n: "person" for n in NAMES})
    index = _scripted_index(llm, [TERM, HALLOWEEN], HashEmbedding())
    before = llm.calls_by_kind
    response = index.as_query_engine(mode="event_graph").query(
        "How did Hermione Granger act after the troll fight?"
    )
    calls = llm.calls_by_kind - before
    assert calls["eventgraph_decompose"] == 1 and calls["eventgraph_enrich"] == 1
    assert response.source_nodes
    assert set(response.metadata) >= {"draft", "entities", "sub_queries"}

