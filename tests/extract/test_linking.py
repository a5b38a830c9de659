"""Linking rules: name forms, word boundaries, same-chunk bipartite edges, story order."""

from __future__ import annotations

from llama_index_e2rag.extract.linking import (
    bipartite_edges,
    co_occurrence_edges,
    locate_name,
    name_occurs_in,
    name_variants,
    story_chain_edges,
    story_order_edges,
)
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind


def mention(node_id, name, chunk, offset, doc="d", entity_type="Person"):
    return GraphNode(
        id=node_id,
        kind=NodeKind.MENTION,
        text=f"{name}: someone",
        doc_id=doc,
        pos=(0, offset, 0),
        chunk_id=chunk,
        name=name,
        attrs={"entity_type": entity_type},
    )


def event(node_id, text, chunk, offset, participants=(), doc="d"):
    return GraphNode(
        id=node_id,
        kind=NodeKind.EVENT,
        text=text,
        doc_id=doc,
        pos=(0, offset, 0),
        chunk_id=chunk,
        name=text.split(":")[0],
        attrs={"participants": list(participants)},
    )


def pairs(edges):
    return {(e.source, e.target) for e in edges}


def test_name_variants_drop_titles_articles_and_possessives():
    assert name_variants("Professor Minerva McGonagall") == [
        "professor minerva mcgonagall",
        "minerva mcgonagall",
        "mcgonagall",
        "minerva",
    ]
    assert name_variants("Miss Granger") == ["miss granger", "granger"]
    assert name_variants("The Dursleys'") == ["the dursleys", "dursleys"]
    hermione = name_variants("Hermione Granger", "Person")
    assert hermione == ["hermione granger", "granger", "hermione"]
    # not a person: no first/last-name forms ("Sorcerer's Stone" is not "stone")
    assert name_variants("Sorcerer's Stone", "Object") == ["sorcerer stone"]
    assert name_variants("Old Brown", "Creature") == ["old brown", "brown"]
    assert name_variants("Mother") == ["mother"]  # a lone title is a name


def test_matching_is_word_bounded():
    assert not name_occurs_in("Ron", "Ronald bought an iron cauldron")
    assert name_occurs_in("Ron", "Ron's wand snapped")
    assert name_occurs_in("ron", "RON shouted")
    assert not name_occurs_in("Ann", "Anne and Hannah left")


def test_short_forms_and_possessives_match():
    assert name_occurs_in("Miss Granger", "Granger raised her hand")
    assert name_occurs_in("Hermione Granger", "Hermione raised her hand", "Person")
    assert not name_occurs_in("Hermione Granger", "Hermione raised her hand", "Location")
    assert name_occurs_in("Harry's broom", "the broom of Harry's broom cupboard") is True
    assert name_occurs_in("Zoë", "Zoe smiled")
    assert not name_occurs_in("Sorcerer's Stone", "a stone fell", "Object")


def test_locate_prefers_the_full_name_over_a_short_form():
    text = "Granger looked up. Miss Granger, said Snape."
    assert locate_name(["Miss Granger"], text) == (19, 31)
    assert locate_name(["Miss Granger"], "Only Granger here.") == (5, 12)
    assert locate_name(["Harry's broom"], "Then Harry's broom bucked") == (5, 18)
    assert locate_name(["Ron", "Harry"], "Harry and Ron") == (0, 5)
    assert locate_name(["Ron"], "Ronald and iron") is None


def test_bipartite_edges_stay_inside_the_chunk():
    harry_1 = mention("m1", "Harry", "c1", 0)
    harry_2 = mention("m2", "Harry", "c2", 100)
    ev_1 = event("e1", "Match: Harry catches the Snitch", "c1", 0)
    ev_2 = event("e2", "Detention: Harry serves detention", "c2", 100)
    assert pairs(bipartite_edges([harry_1, harry_2], [ev_1, ev_2])) == {("m1", "e1"), ("m2", "e2")}


def test_bipartite_edges_use_title_description_and_participants():
    ron = mention("m1", "Ron", "c1", 0)
    hermione = mention("m2", "Miss Granger", "c1", 5)
    neville = mention("m3", "Neville", "c1", 9)
    ev_desc = event("e1", "Spell: Granger fixes the spell for Ron", "c1", 0)
    ev_part = event("e2", "Argument: he storms off", "c1", 3, participants=["Ron"])
    ev_none = event("e3", "Iron gate: the gate creaks", "c1", 4)
    edges = bipartite_edges([ron, hermione, neville], [ev_desc, ev_part, ev_none])
    assert pairs(edges) == {("m1", "e1"), ("m2", "e1"), ("m1", "e2")}
    assert all(e.kind is EdgeKind.PARTICIPATES and e.doc_id == "d" for e in edges)


def test_co_occurrence_edges_pair_nodes_of_one_chunk_in_story_order():
    late = mention("m1", "Ron", "c1", 50)
    early = mention("m2", "Harry", "c1", 10)
    other = mention("m3", "Snape", "c2", 200)
    ev_a = event("e1", "A: x", "c1", 10)
    ev_b = event("e2", "B: y", "c1", 40)
    edges = co_occurrence_edges([late, early, other], [ev_a, ev_b])
    assert {(e.source, e.target, e.kind) for e in edges} == {
        ("m2", "m1", EdgeKind.CO_MENTION),
        ("e1", "e2", EdgeKind.CO_EVENT),
    }


def test_story_order_edges_chain_events_and_each_entity_timeline():
    graph = NetworkXGraphStore()
    nodes = [
        mention("m1", "Hermione Granger", "c1", 0),
        mention("m2", "Ron", "c1", 10),
        mention("m3", "Miss Granger", "c2", 100),
        mention("m4", "Hermione", "c3", 200),
        mention("m5", "Ron's", "c3", 210),
        mention("m6", "Vernon Dursley", "c1", 20),
        mention("m7", "Petunia Dursley", "c2", 120),
        mention("m8", "Dursley", "c3", 220),
        mention("x1", "Hermione Granger", "c9", 5, doc="other"),
        event("e2", "Later: b", "c2", 110),
        event("e1", "First: a", "c1", 5),
        event("e3", "Last: c", "c3", 230),
        event("x2", "Elsewhere: z", "c9", 0, doc="other"),
    ]
    graph.upsert_nodes(nodes)
    edges = story_order_edges(graph, "d")
    assert all(e.kind is EdgeKind.NEXT and e.doc_id == "d" for e in edges)
    assert pairs(edges) == {
        ("e1", "e2"),
        ("e2", "e3"),  # events in story order, not insertion order
        ("m1", "m3"),
        ("m3", "m4"),  # Hermione's timeline through her short forms
        ("m2", "m5"),  # Ron, possessive dropped
        # "Dursley" is ambiguous between Vernon and Petunia: no edge for m6, m7, m8
    }


def test_overlap_copies_stay_on_the_story_chain_in_position_ordinal_id_order():
    """Overlapping chunks read the same event twice (one node per chunk): both copies stay on
    the chain; ties at one position go by ordinal, then id."""
    copy_1 = event("ev-b", "Snitch: Harry catches it", "c1", 100)
    copy_2 = event("ev-a", "Snitch: Harry catches it", "c2", 100)
    glare = event("ev-c", "Glare: Snape glares", "c2", 100)
    copy_1.pos, copy_2.pos, glare.pos = (0, 100, 2), (0, 100, 0), (0, 100, 1)
    rain = event("ev-z", "Rain: it rains", "c1", 10)
    later = event("ev-0", "Theft: Hermione steals", "c3", 200)
    harry_1 = mention("m-b", "Harry", "c1", 100)
    harry_2 = mention("m-a", "Harry", "c2", 100)
    elsewhere = event("x", "Other: z", "c9", 150, doc="other")
    nodes = [later, copy_1, glare, elsewhere, harry_1, rain, copy_2, harry_2]

    edges = story_chain_edges(nodes, "d")
    assert [(e.source, e.target) for e in edges] == [
        ("ev-z", "ev-a"),
        ("ev-a", "ev-c"),
        ("ev-c", "ev-b"),
        ("ev-b", "ev-0"),
        ("m-a", "m-b"),  # same position and ordinal: by id
    ]
    graph = NetworkXGraphStore()
    graph.upsert_nodes(nodes)
    assert story_order_edges(graph, "d") == edges  # the graph form is the same rule
