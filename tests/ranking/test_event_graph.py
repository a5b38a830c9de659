"""E²GraphRAG's context assembly on hand-made views (no stores, no llama-index).

Vectors are hand-made on a few axes so every ranking step follows from the numbers.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from llama_index_e2rag.ranking.event_graph import (
    EventGraphView,
    align_entities,
    entity_links,
    evidence_order,
    kg_sub,
    link_graph,
    match_events,
    reasoning_paths,
    shortest_path,
)
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind


def entity_graph(entity_ids: list[str], edges: list[GraphEdge]) -> Any:
    """The graph a view searches paths on, as ``ranking.event_graph`` builds it."""
    return link_graph(entity_ids, entity_links(entity_ids, edges))


def entity(name: str, at: int, aliases: Optional[list[str]] = None) -> GraphNode:
    return GraphNode(
        id=f"ent-{name}", kind=NodeKind.ENTITY, text=name, doc_id="d", pos=(0, at, 0), name=name,
        attrs={"event_graph": "entity", "entity_type": "person",
               "aliases": aliases or [name], "description": ""},
    )


def event(title: str, at: int) -> GraphNode:
    return GraphNode(
        id=f"ev-{title}", kind=NodeKind.GRAPH_EVENT, text=title, doc_id="d", pos=(0, at, 0),
        name=title, attrs={"event_graph": "event"},
    )


def link(a: str, b: str, weight: int = 1) -> GraphEdge:
    return GraphEdge(source=f"ent-{a}", target=f"ent-{b}", kind=EdgeKind.CO_MENTION, doc_id="d",
                     attrs={"event_graph": "entity_link", "weight": weight})


def unit(*values: float) -> list[float]:
    v = np.asarray(values, dtype=np.float32)
    return list(v / np.linalg.norm(v))


def view_of(entities, vectors, events=(), event_vectors=(), participants=None, edges=()):
    return EventGraphView(
        entities=list(entities),
        entity_vectors=np.asarray(vectors, dtype=np.float32),
        events=list(events),
        event_vectors=np.asarray(event_vectors, dtype=np.float32).reshape(len(events), -1)
        if events else np.zeros((0, 0), dtype=np.float32),
        participants=participants or {},
        graph=entity_graph([e.id for e in entities], edges),
    )


def test_alignment_puts_name_matches_before_cosine_ones() -> None:
    vernon = entity("Vernon Dursley", 0)
    petunia = entity("Petunia Dursley", 10)
    harry = entity("Harry Potter", 20, ["Harry Potter", "the boy"])
    view = view_of([vernon, petunia, harry], [unit(1, 0, 0), unit(0, 1, 0), unit(0, 0, 1)])
    # the name's vector points at Petunia, but "Vernon" is a short form of Vernon's name only
    aligned = align_entities(view, ["Vernon"], [unit(0.1, 1, 0)], top_k=2)
    assert [(view.entities[a.idx].name, a.match) for a in aligned] == [
        ("Vernon Dursley", "variant"), ("Petunia Dursley", "cosine")
    ]
    # an exact alias beats a shared short form; one entity is aligned once over all names
    aligned = align_entities(
        view, ["the boy", "Harry"], [unit(1, 0, 0), unit(0, 0, 1)], top_k=1
    )
    assert [(view.entities[a.idx].name, a.match, a.query) for a in aligned] == [
        ("Harry Potter", "exact", 0)
    ]


def test_events_are_matched_per_sub_query_in_order_with_their_neighbours() -> None:
    people = [entity("Ann", 0), entity("Bob", 5), entity("Cid", 9)]
    events = [event("storm", 1), event("wedding", 2), event("trial", 3)]
    view = view_of(
        people, [unit(1, 0), unit(0, 1), unit(1, 1)],
        events, [unit(1, 0, 0), unit(0, 1, 0), unit(0.2, 0, 1)],
        participants={"ev-trial": ["ent-Ann", "ent-Cid"], "ev-storm": ["ent-Bob"]},
    )
    matched = match_events(view, [unit(0, 0, 1), unit(1, 0.5, 0)], top_k=2)
    assert [(view.events[m.idx].name, m.sub_query) for m in matched] == [
        ("trial", 0), ("storm", 0), ("wedding", 1)  # storm is sub-query 1's best: already there
    ]
    assert [(e, view.events[m.idx].name) for e, m in kg_sub(view, matched)] == [
        ("ent-Ann", "trial"), ("ent-Cid", "trial"), ("ent-Bob", "storm")
    ]


def _chain_graph():
    """A - B - D - C on co_mention links; an event X joins A and C directly."""
    names = ["A", "B", "C", "D"]
    edges = [link("A", "B"), link("B", "D"), link("D", "C")]
    edges += [
        GraphEdge(source="ent-A", target="ev-X", kind=EdgeKind.PARTICIPATES, doc_id="d",
                  attrs={"event_graph": "extracted"}),
        GraphEdge(source="ent-C", target="ev-X", kind=EdgeKind.PARTICIPATES, doc_id="d",
                  attrs={"event_graph": "extracted"}),
        # a mention-level co_mention (no event_graph attr) is no entity link either
        GraphEdge(source="ent-A", target="ent-C", kind=EdgeKind.CO_MENTION, doc_id="d"),
    ]
    return entity_graph([f"ent-{n}" for n in names], edges)


def test_paths_avoid_event_nodes_even_when_shorter() -> None:
    graph = _chain_graph()
    assert "ev-X" not in graph
    assert shortest_path(graph, "ent-A", "ent-C", 4) == ["ent-A", "ent-B", "ent-D", "ent-C"]


def test_path_length_is_capped() -> None:
    graph = _chain_graph()
    assert shortest_path(graph, "ent-A", "ent-C", 3) is not None
    assert shortest_path(graph, "ent-A", "ent-C", 2) is None
    assert reasoning_paths(graph, ["ent-A", "ent-C"], 2) == []


def test_equally_short_paths_prefer_the_strongest_links() -> None:
    edges = [link("A", "B", 1), link("B", "C", 1), link("A", "D", 3), link("D", "C", 3)]
    graph = entity_graph(["ent-A", "ent-B", "ent-C", "ent-D"], edges)
    assert shortest_path(graph, "ent-A", "ent-C", 4) == ["ent-A", "ent-D", "ent-C"]


def test_paths_join_consecutive_aligned_entities_across_documents() -> None:
    same = GraphEdge(source="ent-C2", target="ent-C", kind=EdgeKind.INSTANCE_OF, doc_id="d2",
                     attrs={"event_graph": "same_entity"})
    edges = [link("A", "B"), link("B", "C"), same, link("C2", "E")]
    graph = entity_graph(["ent-A", "ent-B", "ent-C", "ent-C2", "ent-E"], edges)
    paths = reasoning_paths(graph, ["ent-A", "ent-C", "ent-E"], 4)
    assert [(p.entities, p.hops, p.pair) for p in paths] == [
        (("ent-A", "ent-B", "ent-C"), ("co_mention", "co_mention"), (0, 1)),
        (("ent-C", "ent-C2", "ent-E"), ("same_entity", "co_mention"), (1, 2)),
    ]


def test_evidence_order_and_no_repeats() -> None:
    order = evidence_order(
        chunks=["c1", "c2", "c3"],
        events=["e1", "e2"],
        paths=["p1"],
        entities=["n1", "n2"],
        neighbours=["n2", "n3"],
        key=lambda x: x,
    )
    assert order == ["c1", "e1", "e2", "p1", "n1", "n2", "n3", "c2", "c3"]
