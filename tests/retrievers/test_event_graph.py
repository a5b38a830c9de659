"""EventGraphRetriever and the two-stage engine on an event graph written by hand in the layout of
the plan (``docs/design/event_graph_plan.md`` §3.1): chunks, fused entities, ``graph_event``
nodes, lifted/extracted ``participates`` edges and ``co_mention`` entity links, with the
word-overlap test embedding (``HashEmbedding``) for every vector.

The story: Vernon works at Grunnings, letters come for Harry, Vernon burns them and flees to a
hut, Hagrid breaks the hut's door and gives Harry a cake.
"""

from __future__ import annotations

import asyncio
import json
from typing import Optional

import pytest
from hash_embedding import HashEmbedding, hash_vector
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import TextNode
from scripted_llm import ScriptedLLM

from llama_index_e2rag.context.keys import POS_KEY
from llama_index_e2rag.answer.event_graph_engine import build_event_graph_engine
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.ingest.pipeline import vector_record
from llama_index_e2rag.llm.runner import LLMRunner
from llama_index_e2rag.retrievers.event_graph import (
    EventGraphMissingError,
    EventGraphRetriever,
)
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind, make_id
from llama_index_e2rag.stores.port import CHUNK_NODE_ATTR, DocumentWrite, Stores

DOC = "story"
CHUNKS = [
    "Vernon Dursley worked at Grunnings, a firm that made drills.",
    "An owl brought a letter for Harry to Privet Drive.",
    "Vernon burned the letters for Harry and fled with the family to a hut on a rock.",
    "Hagrid broke down the door of the hut and gave Harry a birthday cake.",
]
#: (name, type, chunk numbers it is mentioned in, description)
ENTITIES = [
    ("Vernon Dursley", "person", [0, 2], "Harry's uncle, a director at Grunnings."),
    ("Grunnings", "organization", [0], "A firm that made drills."),
    ("Harry Potter", "person", [1, 2, 3], "A boy who lives with the Dursleys."),
    ("Hagrid", "person", [3], "The keeper of keys at Hogwarts."),
]
#: (title, description, chunk, date, participants)
EVENTS = [
    ("Vernon works at Grunnings", "Vernon Dursley is a director of the drill firm Grunnings.",
     0, None, ["Vernon Dursley", "Grunnings"]),
    ("Owl delivers letter", "An owl brings Harry a letter at Privet Drive.", 1, None,
     ["Harry Potter"]),
    ("Vernon burns the letters", "Vernon burns the letters in the fireplace.", 2, "1991-07-24",
     ["Vernon Dursley"]),
    ("Hagrid breaks the door", "Hagrid breaks the door of the hut on the rock at midnight.", 3,
     "1991-07-31", ["Hagrid", "Harry Potter"]),
]
QUESTION = "What did Vernon do about the letters?"


def _start(i: int) -> int:
    return sum(len(c) + 1 for c in CHUNKS[:i])


def chunk_id(i: int) -> str:
    return make_id(DOC, NodeKind.CHUNK, (0, _start(i), 0), CHUNKS[i])


def entity_id(name: str) -> str:
    chunk = next(e[2][0] for e in ENTITIES if e[0] == name)
    return make_id(DOC, "eventgraph_entity", (0, _start(chunk), 1), name)


def event_id(title: str) -> str:
    k = next(i for i, e in enumerate(EVENTS) if e[0] == title)
    return make_id(DOC, "graph_event", (0, _start(EVENTS[k][2]), k), title)


def write_story(
    stores: Stores, *, entities: bool = True, graph_events: bool = True, frames: bool = False
) -> None:
    """Commit the story: chunks, and (unless asked not to) the event graph of plan §3.1.

    ``frames`` adds per-chunk ``event`` nodes (the offline events), one per chunk, lifted to the
    entities of its chunk except the last one, which no entity takes part in."""
    nodes, edges = [], []
    for i, text in enumerate(CHUNKS):
        start = _start(i)
        chunk = TextNode(id_=chunk_id(i), text=text, start_char_idx=start,
                         end_char_idx=start + len(text), metadata={"file_name": "story.txt"})
        nodes.append(GraphNode(
            id=chunk_id(i), kind=NodeKind.CHUNK, text=text, doc_id=DOC, pos=(0, start, 0),
            span=(start, start + len(text)), attrs={CHUNK_NODE_ATTR: chunk.to_dict()},
        ))
    if entities:
        for name, type_, chunks, description in ENTITIES:
            start = _start(chunks[0])
            nodes.append(GraphNode(
                id=entity_id(name), kind=NodeKind.ENTITY, text=f"{name}: {description}",
                doc_id=DOC, pos=(0, start, 1), span=(start, start + len(name)),
                chunk_id=chunk_id(chunks[0]), name=name,
                attrs={"event_graph": "entity", "entity_type": type_, "aliases": [name],
                       "mentions": len(chunks), "description": description},
            ))
        for i, (a, _, ca, _) in enumerate(ENTITIES):
            for b, _, cb, _ in ENTITIES[i + 1:]:
                shared = len(set(ca) & set(cb))
                if shared:
                    edges.append(GraphEdge(
                        source=entity_id(a), target=entity_id(b), kind=EdgeKind.CO_MENTION,
                        doc_id=DOC, attrs={"event_graph": "entity_link", "weight": shared},
                    ))
    if graph_events:
        for k, (title, description, c, date, members) in enumerate(EVENTS):
            start = _start(c)
            nodes.append(GraphNode(
                id=event_id(title), kind=NodeKind.GRAPH_EVENT, text=f"{title}: {description}",
                doc_id=DOC, pos=(0, start, k), span=(start, start + len(CHUNKS[c])),
                chunk_id=chunk_id(c), name=title,
                attrs={"event_graph": "event", "title": title, "description": description,
                       "date": date, "source": members[0], "chunks": [chunk_id(c)],
                       "updates": 0},
            ))
            edges.append(GraphEdge(source=event_id(title), target=chunk_id(c),
                                   kind=EdgeKind.GROUNDED_IN, doc_id=DOC))
            edges += [
                GraphEdge(source=entity_id(m), target=event_id(title), kind=EdgeKind.PARTICIPATES,
                          doc_id=DOC, role="source" if m == members[0] else None,
                          attrs={"event_graph": "extracted"})
                for m in members
            ]
    if frames:
        for i, text in enumerate(CHUNKS):
            frame = GraphNode(
                id=f"frame-{i}", kind=NodeKind.EVENT, text=text, doc_id=DOC,
                pos=(0, _start(i), 2), chunk_id=chunk_id(i), attrs={},
            )
            nodes.append(frame)
            if i == len(CHUNKS) - 1:
                continue
            edges += [
                GraphEdge(source=entity_id(name), target=frame.id, kind=EdgeKind.PARTICIPATES,
                          doc_id=DOC, attrs={"event_graph": "lifted"})
                for name, _, chunks, _ in ENTITIES if i in chunks
            ]
    records = [vector_record(n, hash_vector(n.text)) for n in nodes]
    asyncio.run(stores.areplace_documents([DocumentWrite(DOC, 0, nodes, edges, records)]))


def make_index(**kwargs) -> E2RAGIndex:
    index = E2RAGIndex(nodes=[], embed_model=HashEmbedding(), llm=None)
    write_story(index.stores, **kwargs)
    return index


@pytest.fixture
def index() -> E2RAGIndex:
    return make_index()


def decomposition_answer(entities: list[str], sub_queries: list[str]) -> str:
    block = json.dumps({"entities": entities, "sub_queries": sub_queries})
    return f"Vernon burned the letters [Data: Chunks (C_1)].\n```json\n{block}\n```"


def scripted(entities: list[str], sub_queries: list[str], **kwargs) -> ScriptedLLM:
    return ScriptedLLM(handlers={
        "eventgraph_decompose": lambda prompt: decomposition_answer(entities, sub_queries),
        "eventgraph_enrich": lambda prompt: "Enriched answer [Data: Events (Event 1)].",
        **kwargs,
    })


def retriever_with(llm: Optional[ScriptedLLM], index: E2RAGIndex, **kwargs) -> EventGraphRetriever:
    runner = LLMRunner(llm, max_retries=0) if llm is not None else None
    return EventGraphRetriever(index.stores, HashEmbedding(), runner, **kwargs)


def roles(nodes) -> list[str]:
    return [n.node.metadata["evidence_role"] for n in nodes]


def ids(nodes) -> list[str]:
    return [n.node.node_id for n in nodes]


def test_sub_queries_reach_events_the_whole_question_misses(index) -> None:
    sub_queries = ["Vernon burns the letters", "Hagrid breaks the door of the hut"]
    llm = scripted(["Vernon Dursley", "Hagrid"], sub_queries)
    retriever = retriever_with(llm, index, event_top_k=1, chunk_top_k=2)
    nodes = retriever.retrieve(QUESTION)
    hagrid_event = event_id("Hagrid breaks the door")
    whole = index.stores.search(NodeKind.GRAPH_EVENT, hash_vector(QUESTION), 1)
    assert hagrid_event not in [hit.id for hit in whole]  # the whole question misses it
    events = {n.node.node_id: n.node.metadata for n in nodes if roles([n]) == ["event"]}
    assert hagrid_event in events
    assert events[hagrid_event]["sub_query"] == sub_queries[1]
    assert events[hagrid_event]["participants"] == ["Harry Potter", "Hagrid"]
    decomposition = nodes[0].node.metadata["decomposition"]
    assert decomposition == {
        "draft": "Vernon burned the letters [Data: Chunks (C_1)].",
        "entities": ["Vernon Dursley", "Hagrid"],
        "sub_queries": sub_queries,
        "how": "llm",
    }
    assert llm.calls_by_kind == {"eventgraph_decompose": 1}
    prompt = llm.prompts[0]
    assert "[C_1] (document 0, character" in prompt and QUESTION in prompt


def test_aligned_entities_are_joined_by_a_path_without_events(index) -> None:
    llm = scripted(["Vernon", "Hagrid"], ["Vernon burns the letters"])
    nodes = retriever_with(llm, index).retrieve(QUESTION)
    paths = sorted(
        (n for n in nodes if roles([n]) == ["path"]), key=lambda n: n.node.metadata["rank"]
    )
    # e1 -> e2 joins the two named entities; later pairs reach the cosine-only alignments
    assert paths[0].node.metadata["path"] == [
        entity_id("Vernon Dursley"), entity_id("Harry Potter"), entity_id("Hagrid")
    ]
    assert all(e.startswith("eventgraph_entity-") for p in paths for e in p.node.metadata["path"])
    text = paths[0].node.get_content()
    assert text == (
        "Vernon Dursley (Harry's uncle, a director at Grunnings) — Harry Potter (A boy who lives "
        "with the Dursleys) — Hagrid (The keeper of keys at Hogwarts)"
    )
    entities = {
        n.node.metadata["name"]: n.node.metadata["match"] for n in nodes if roles([n]) == ["entity"]
    }
    assert entities["Vernon Dursley"] == "variant" and entities["Hagrid"] == "exact"
    entity = next(n for n in nodes if n.node.node_id == entity_id("Hagrid"))
    assert entity.node.get_content() == "Hagrid: The keeper of keys at Hogwarts."
    event = next(n for n in nodes if n.node.node_id == event_id("Vernon burns the letters"))
    assert event.node.get_content() == (
        "Vernon burns the letters: Vernon burns the letters in the fireplace. (date: 1991-07-24)"
    )


def test_results_are_in_story_order_without_repeats_and_hide_bookkeeping(index) -> None:
    llm = scripted(["Vernon", "Hagrid"], ["Vernon burns the letters", "Hagrid breaks the door"])
    nodes = retriever_with(llm, index).retrieve(QUESTION)
    assert len(set(ids(nodes))) == len(nodes)
    positions = [(tuple(n.node.metadata[POS_KEY]), n.node.node_id) for n in nodes]
    assert positions == sorted(positions)
    assert set(roles(nodes)) == {"chunk", "event", "entity", "path"}
    for n in nodes:
        shown = n.node.get_content(metadata_mode="llm")
        assert "decomposition" not in shown and "graph_nodes" not in shown
        assert n.node.metadata["file_name"] == "story.txt"
    ranks = sorted(n.node.metadata["rank"] for n in nodes)
    assert ranks == list(range(len(nodes)))
    ranked = sorted(nodes, key=lambda n: n.node.metadata["rank"])
    assert roles(ranked)[:1] == ["chunk"] and roles(ranked)[1] == "event"
    order = ["chunk", "event", "path", "entity", "chunk"]
    positions_in_order = [order.index(r, 1 if i else 0) for i, r in enumerate(roles(ranked))]
    assert positions_in_order == sorted(positions_in_order)


def test_a_word_budget_keeps_the_evidence_order(index) -> None:
    llm = scripted(["Vernon", "Hagrid"], ["Vernon burns the letters"])
    full = retriever_with(llm, index).retrieve(QUESTION)
    budget = 30
    nodes = retriever_with(llm, index, budget_words=budget).retrieve(QUESTION)
    assert sum(len(n.node.get_content().split()) for n in nodes) <= budget
    assert len(nodes) < len(full)
    kept = {n.node.node_id for n in nodes}
    first = [n.node.node_id for n in sorted(full, key=lambda n: n.node.metadata["rank"])]
    assert first[0] in kept and first[-1] not in kept


def test_an_unreadable_decomposition_keeps_the_draft_and_parses_the_question(index) -> None:
    llm = ScriptedLLM(handlers={
        "eventgraph_decompose": lambda p: "My draft about Vernon.\n```json\n{not json\n```"
    })
    nodes = retriever_with(llm, index).retrieve(QUESTION)
    decomposition = nodes[0].node.metadata["decomposition"]
    assert decomposition["draft"] == "My draft about Vernon."
    assert decomposition["how"] == "llm_draft+parse"
    assert "Vernon" in decomposition["entities"] and decomposition["sub_queries"]


def test_parse_decomposition_without_an_llm(index) -> None:
    retriever = EventGraphRetriever(index.stores, HashEmbedding())
    nodes = asyncio.run(retriever.aretrieve(QUESTION))
    decomposition = nodes[0].node.metadata["decomposition"]
    assert decomposition["how"] == "parse" and decomposition["draft"] == ""
    assert "Vernon" in decomposition["entities"]
    assert entity_id("Vernon Dursley") in ids(nodes)
    assert event_id("Vernon burns the letters") in ids(nodes)


def test_lifted_event_nodes_stand_in_for_graph_events() -> None:
    index = make_index(graph_events=False, frames=True)
    retriever = EventGraphRetriever(index.stores, HashEmbedding(), decompose="parse",
                                    event_top_k=4)
    events = [n for n in retriever.retrieve("Hagrid broke the door") if roles([n]) == ["event"]]
    assert events and all(n.node.metadata["kind"] == "event" for n in events)
    assert "frame-3" not in ids(events)  # no entity takes part in it: not an event-graph event


def test_an_index_without_entities_names_the_fix() -> None:
    index = make_index(entities=False, graph_events=False)
    with pytest.raises(EventGraphMissingError) as error:
        EventGraphRetriever(index.stores, HashEmbedding())
    assert "index.add_layers([EventGraphBuilder()])" in str(error.value)  # no rebuild
    assert "e2rag index --store DIR --event-graph" in str(error.value)
    assert isinstance(error.value, ValueError)


def test_arguments_are_checked(index) -> None:
    with pytest.raises(ValueError, match="event_top_k"):
        EventGraphRetriever(index.stores, HashEmbedding(), event_top_k=0)
    with pytest.raises(ValueError, match="decompose"):
        EventGraphRetriever(index.stores, HashEmbedding(), decompose="guess")
    with pytest.raises(ValueError, match="budget_words"):
        EventGraphRetriever(index.stores, HashEmbedding(), budget_words=0)


def test_the_engine_drafts_then_enriches_in_two_calls(index) -> None:
    llm = scripted(["Vernon", "Hagrid"], ["Vernon burns the letters"])
    engine = build_event_graph_engine(
        retriever_with(llm, index), index.stores.graph, HashEmbedding(), llm
    )
    response = engine.query(QUESTION)
    assert str(response) == "Enriched answer [Data: Events (Event 1)]."
    assert llm.calls_by_kind == {"eventgraph_decompose": 1, "eventgraph_enrich": 1}
    enrich = llm.prompts[-1]
    assert "Vernon burned the letters [Data: Chunks (C_1)]." in enrich  # the draft
    for label in ("[Event 1]", "[Path 1]", "[Entity 1]", "[C_1]"):
        assert label in enrich
    assert enrich.index("-----Events-----") < enrich.index("-----Chunks-----")
    assert response.metadata["draft"] == "Vernon burned the letters [Data: Chunks (C_1)]."
    assert response.metadata["sub_queries"] == ["Vernon burns the letters"]
    assert {n.node.metadata["evidence_role"] for n in response.source_nodes} >= {"event", "path"}

    asyncio.run(engine.aquery(QUESTION))
    assert llm.calls_by_kind == {"eventgraph_decompose": 2, "eventgraph_enrich": 2}


def test_the_engine_prompts_can_be_replaced(index) -> None:
    llm = scripted(["Vernon"], ["Vernon burns the letters"])
    engine = build_event_graph_engine(
        retriever_with(llm, index), index.stores.graph, HashEmbedding(), llm
    )
    assert set(engine.get_prompts()) == {"decompose_prompt", "enrich_prompt"}
    engine.update_prompts({
        "enrich_prompt": PromptTemplate(
            "---Task: eventgraph_enrich---\nMINE {question}|{old_answer}|{evidence}"
        ),
    })
    engine.query(QUESTION)
    assert llm.prompts[-1].startswith("---Task: eventgraph_enrich---\nMINE ")


def test_the_engine_streams(index) -> None:
    llm = scripted(["Vernon"], ["Vernon burns the letters"])
    engine = build_event_graph_engine(
        retriever_with(llm, index), index.stores.graph, HashEmbedding(), llm, streaming=True
    )
    response = engine.query(QUESTION)
    assert "".join(response.response_gen) == "Enriched answer [Data: Events (Event 1)]."


def test_the_engine_answers_extractively_without_an_llm(index) -> None:
    retriever = EventGraphRetriever(index.stores, HashEmbedding())
    engine = build_event_graph_engine(retriever, index.stores.graph, HashEmbedding(), None)
    response = engine.query(QUESTION)
    assert str(response).startswith(f'Evidence for "{QUESTION}" (extractive answer, no LLM):')
    assert response.metadata["draft"] == "" and "Vernon" in response.metadata["entities"]
    assert response.source_nodes
