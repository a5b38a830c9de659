"""E²GraphRAG entity fusion (plan §3.1, §3.3): name groups, the name guard, union order, the
entity layer's nodes and edges, and cross-document ``same_entity`` links.

Vectors are hand-made (rows of a Cholesky factor of a chosen cosine matrix), so the rules are
tested without an embedding model.
"""

from __future__ import annotations

import random
from typing import Optional, Sequence

import numpy as np
import pytest

from llama_index_e2rag.extract.event_graph.fusion import (
    Group,
    _candidates,
    ambiguous_tokens,
    compatible,
    entity_layer,
    fuse,
    in_conflict,
    mention_groups,
    same_entity_links,
)
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind, make_id

from .name_groups import random_groups

THETA = 0.5


def mention(
    name: str,
    offset: int,
    chunk: str = "c0",
    entity_type: Optional[str] = "person",
    description: Optional[str] = None,
    doc: str = "d",
) -> GraphNode:
    attrs = {"entity_type": entity_type} if entity_type is not None else {}
    if description is not None:
        attrs["description"] = description
    return GraphNode(
        id=f"{doc}-m{offset}",
        kind=NodeKind.MENTION,
        text=name,
        doc_id=doc,
        pos=(0, offset, 2),
        span=(offset, offset + len(name)),
        chunk_id=chunk,
        name=name,
        attrs=attrs,
    )


def event(offset: int, chunk: str = "c0", doc: str = "d") -> GraphNode:
    return GraphNode(
        id=f"{doc}-e{offset}",
        kind=NodeKind.EVENT,
        text=f"event {offset}",
        doc_id=doc,
        pos=(0, offset, 1),
        chunk_id=chunk,
    )


def takes_part(m: GraphNode, e: GraphNode, role: Optional[str] = None) -> GraphEdge:
    return GraphEdge(
        source=m.id, target=e.id, kind=EdgeKind.PARTICIPATES, doc_id=m.doc_id, role=role
    )


def groups_of(*names: str, entity_type: Optional[str] = "person") -> list[Group]:
    """One group per name, in the given order."""
    return mention_groups(mention(n, 10 * i, entity_type=entity_type) for i, n in enumerate(names))


def vectors(n: int, cos: float = 0.0, **pairs: float) -> np.ndarray:
    """``n`` unit vectors whose cosines are ``cos``, except pairs given as ``p0_1=0.9``."""
    sims = np.full((n, n), cos)
    for key, value in pairs.items():
        i, j = (int(x) for x in key[1:].split("_"))
        sims[i, j] = sims[j, i] = value
    np.fill_diagonal(sims, 1.0)
    return np.linalg.cholesky(sims).astype(np.float32)


def names_of(groups: Sequence[Group], sets: list[list[int]]) -> list[set[str]]:
    return [{groups[i].name for i in s} for s in sets]


def together(groups: Sequence[Group], sets: list[list[int]], *names: str) -> bool:
    return any(set(names) <= members for members in names_of(groups, sets))


# --- V0 groups ---------------------------------------------------------------------------------


def test_groups_join_exact_normalised_names_of_one_type_in_story_order():
    mentions = [
        mention("Miss Granger", 30),
        mention("Hermione", 5),
        mention("miss granger!", 50),
        mention("Hermione", 40, entity_type="location"),
    ]
    groups = mention_groups(mentions)
    assert [(g.name, g.entity_type) for g in groups] == [
        ("Hermione", "person"),
        ("Miss Granger", "person"),
        ("Hermione", "location"),
    ]
    assert [m.pos[1] for m in groups[1].mentions] == [30, 50]


def test_missing_and_concept_types_are_one_unknown_type():
    groups = mention_groups(
        [mention("Gringotts", 0, entity_type=None), mention("Gringotts", 9, entity_type="concept")]
    )
    assert len(groups) == 1 and len(groups[0].mentions) == 2


def test_group_description_joins_distinct_descriptions_and_falls_back_to_the_name():
    described, bare = mention_groups(
        [
            mention("Harry", 0, description="Harry is a boy."),
            mention("Harry", 5, description="Harry flies."),
            mention("Harry", 9, description="Harry is a boy."),
            mention("Ron", 12),
        ]
    )
    assert described.description == "Harry is a boy. Harry flies."
    assert described.text == "Harry: Harry is a boy. Harry flies."
    assert bare.description == bare.text == "Ron"


# --- the name guard ----------------------------------------------------------------------------


def test_a_short_form_is_compatible_with_the_full_name_containing_it():
    groups = groups_of("Miss Granger", "Hermione Granger", "Harry", "Harry Potter")
    amb = ambiguous_tokens(groups)
    assert compatible(groups[0], groups[1], amb)
    assert compatible(groups[2], groups[3], amb)
    assert not compatible(groups[0], groups[3], amb)


def test_two_person_names_sharing_a_name_but_not_the_first_name_conflict():
    vernon, petunia, harry, james, epithet = groups_of(
        "Vernon Dursley",
        "Petunia Dursley",
        "Harry James Potter",
        "James Potter",
        "the boy who lived",
    )
    assert in_conflict(vernon, petunia, frozenset())
    assert in_conflict(harry, james, frozenset())
    assert not in_conflict(harry, epithet, frozenset())  # disjoint: the embeddings decide


def test_titles_of_different_genders_conflict():
    mr, mrs, miss, dr = groups_of("Mr. McGregor", "Mrs McGregor", "Miss McGregor", "Dr McGregor")
    assert in_conflict(mr, mrs, frozenset()) and in_conflict(mr, miss, frozenset())
    assert not in_conflict(mrs, miss, frozenset())
    assert not in_conflict(mr, dr, frozenset())


def test_a_surname_shared_by_two_longer_names_is_ambiguous_against_any_other_name():
    groups = groups_of("Vernon Dursley", "Petunia Dursley", "Mr. Dursley", "Dursley")
    amb = ambiguous_tokens(groups)
    assert amb == {"dursley"}
    assert in_conflict(groups[2], groups[0], amb)
    assert in_conflict(groups[3], groups[1], amb)
    assert not in_conflict(groups[2], groups[3], amb)  # the same short form, titled or not


def test_known_types_that_differ_conflict_and_unknown_agrees_with_any():
    school = mention_groups([mention("Hogwarts", 0, entity_type="location")])[0]
    club = mention_groups([mention("Hogwarts", 0, entity_type="organization")])[0]
    untyped = mention_groups([mention("Hogwarts", 0, entity_type=None)])[0]
    assert in_conflict(school, club, frozenset())
    assert compatible(school, untyped, frozenset())


# --- fuse ----------------------------------------------------------------------------------------


def test_compatible_names_merge_exactly_when_cosine_exceeds_theta():
    groups = groups_of("Miss Granger", "Hermione Granger")
    assert fuse(groups, vectors(2, 0.58), THETA) == [[0, 1]]
    assert fuse(groups, vectors(2, 0.42), THETA) == [[0], [1]]
    assert fuse(groups, vectors(2, 0.58), 0.6) == [[0], [1]]


def test_people_sharing_a_surname_stay_apart_at_any_cosine():
    groups = groups_of("Vernon Dursley", "Mr. Dursley", "Petunia Dursley")
    for overlap in (True, False):
        sets = fuse(groups, vectors(3, 0.99), THETA, require_name_overlap=overlap)
        assert not together(groups, sets, "Vernon Dursley", "Petunia Dursley")
        assert not together(groups, sets, "Vernon Dursley", "Mr. Dursley")


def test_a_merge_never_joins_two_conflicting_names_through_a_third():
    groups = groups_of("Vernon Dursley", "the man", "Petunia Dursley")
    sets = fuse(groups, vectors(3, 0.99), THETA, require_name_overlap=False)
    assert not together(groups, sets, "Vernon Dursley", "Petunia Dursley")
    assert together(groups, sets, "Vernon Dursley", "the man")  # first on the index tie-break


def test_the_most_similar_pair_is_joined_first():
    groups = groups_of("Mr. Dursley", "Dursley", "Mrs. Dursley")
    assert names_of(groups, fuse(groups, vectors(3, 0.7, p1_2=0.9), THETA)) == [
        {"Mr. Dursley"},
        {"Dursley", "Mrs. Dursley"},
    ]
    assert names_of(groups, fuse(groups, vectors(3, 0.7, p0_1=0.9), THETA)) == [
        {"Mr. Dursley", "Dursley"},
        {"Mrs. Dursley"},
    ]


def test_mr_and_mrs_of_one_name_stay_apart():
    groups = groups_of("Mr. McGregor", "Mrs. McGregor")
    for overlap in (True, False):
        assert fuse(groups, vectors(2, 0.99), THETA, require_name_overlap=overlap) == [[0], [1]]


def test_types_that_disagree_stay_apart():
    groups = mention_groups(
        [mention("Hogwarts", 0, entity_type="location"), mention("Hogwarts", 5, entity_type="org")]
    )
    assert fuse(groups, vectors(2, 0.99), THETA, require_name_overlap=False) == [[0], [1]]


def test_disjoint_names_merge_on_cosine_only_without_the_overlap_requirement():
    groups = groups_of("the boy who lived", "Harry Potter")
    assert fuse(groups, vectors(2, 0.8), THETA) == [[0], [1]]
    assert fuse(groups, vectors(2, 0.8), THETA, require_name_overlap=False) == [[0, 1]]
    assert fuse(groups, vectors(2, 0.3), THETA, require_name_overlap=False) == [[0], [1]]


def test_cosines_equal_up_to_float_noise_are_joined_in_index_order():
    groups = groups_of("Mr. Dursley", "Dursley", "Mrs. Dursley")
    noisy = vectors(3, 0.9, p1_2=0.9000004)
    assert names_of(groups, fuse(groups, noisy, THETA)) == [
        {"Mr. Dursley", "Dursley"},
        {"Mrs. Dursley"},
    ]


def test_name_candidates_are_nested_names_not_every_two_sharing_a_word():
    from llama_index_e2rag.extract.event_graph.fusion import _name_pairs

    names = ["door", "red door", "green door", "old red door", "window"]
    groups = groups_of(*names, entity_type="concept")
    first, second = _name_pairs(groups)
    pairs = {(names[i], names[j]) for i, j in zip(first.tolist(), second.tolist())}
    assert pairs == {
        ("door", "red door"),
        ("door", "green door"),
        ("door", "old red door"),
        ("red door", "old red door"),
    }


def test_no_groups_no_sets():
    assert fuse([], np.zeros((0, 4), dtype=np.float32), THETA) == []


def test_fuse_needs_one_vector_per_group():
    with pytest.raises(ValueError):
        fuse(groups_of("Harry", "Ron"), vectors(3), THETA)


# --- entity layer --------------------------------------------------------------------------------


def granger_story() -> tuple[list[GraphNode], list[GraphNode], list[GraphEdge]]:
    mentions = [
        mention("Miss Granger", 0, "c0", description="A girl."),
        mention("Harry", 20, "c0"),
        mention("Hermione Granger", 40, "c1", description="A witch who knows every spell."),
        mention("Harry", 60, "c1"),
        mention("Miss Granger", 80, "c2", description="A girl."),
        mention("Harry", 90, "c2"),
        mention("Hagrid", 95, "c3"),
    ]
    events = [event(1, "c0"), event(45, "c1"), event(85, "c2")]
    edges = [
        takes_part(mentions[0], events[0], "A0"),
        takes_part(mentions[2], events[1]),
        takes_part(mentions[4], events[1]),  # the same event again, through another member
        takes_part(mentions[4], events[2], "A1"),
        takes_part(mentions[1], events[0]),
        GraphEdge(
            source=mentions[1].id, target="elsewhere", kind=EdgeKind.PARTICIPATES, doc_id="d"
        ),
    ]
    return mentions, events, edges


def build(mentions, events, edges, theta: float = THETA):
    groups = mention_groups(mentions)
    # Miss Granger ~ Hermione Granger at 0.6; everyone else far apart
    names = [g.name for g in groups]
    pairs = {f"p{names.index('Miss Granger')}_{names.index('Hermione Granger')}": 0.6}
    nodes, out = entity_layer(
        "d", groups, events, edges, vectors(len(groups), 0.1, **pairs), theta
    )
    return nodes, list(out)


def by_name(nodes: Sequence[GraphNode]) -> dict[str, GraphNode]:
    return {n.name: n for n in nodes}


def test_a_character_is_named_by_its_fullest_name_and_placed_at_its_first_mention():
    mentions, events, edges = granger_story()
    nodes, _ = build(mentions, events, edges)
    hermione = by_name(nodes)["Hermione Granger"]
    assert hermione.kind == NodeKind.ENTITY
    assert hermione.id == make_id("d", "eventgraph_entity", mentions[0].pos, "Hermione Granger")
    assert (hermione.pos, hermione.span, hermione.chunk_id) == (
        mentions[0].pos,
        mentions[0].span,
        "c0",
    )
    assert hermione.attrs == {
        "event_graph": "entity",
        "entity_type": "person",
        "aliases": ["Miss Granger", "Hermione Granger"],
        "mentions": 3,
        "description": "A girl. A witch who knows every spell.",
    }
    assert hermione.text == "Hermione Granger: A girl. A witch who knows every spell."


def test_entities_without_descriptions_are_their_name():
    mentions, events, edges = granger_story()
    nodes, _ = build(mentions, events, edges)
    harry = by_name(nodes)["Harry"]
    assert harry.text == "Harry" and harry.attrs["description"] == ""


def test_without_descriptions_the_longest_name_represents_the_entity():
    mentions = [mention("Miss Granger", 0), mention("Hermione Granger", 9)]
    nodes, _ = entity_layer("d", mention_groups(mentions), [], [], vectors(2, 0.9), THETA)
    assert [n.name for n in nodes] == ["Hermione Granger"]


def test_things_below_theta_stay_separate_nodes_and_people_join_by_name_at_any_cosine():
    mentions = [
        mention("the wand", 0, entity_type="concept"),
        mention("Miss Granger", 10),
        mention("the old wand", 20, entity_type="concept"),
        mention("Hermione Granger", 30),
    ]
    groups = mention_groups(mentions)
    for theta, things in ((0.7, 2), (0.5, 1)):
        nodes, _ = entity_layer("d", groups, [], [], vectors(4, 0.1, p0_2=0.6, p1_3=0.6), theta)
        assert [n.name for n in nodes if n.attrs["entity_type"] == "person"] == [
            "Hermione Granger"
        ]
        assert len([n for n in nodes if n.attrs["entity_type"] == "concept"]) == things


def test_every_mention_is_an_instance_of_its_entity():
    mentions, events, edges = granger_story()
    nodes, out = build(mentions, events, edges)
    entity_ids = {n.id for n in nodes}
    instance = {e.source: e.target for e in out if e.kind == EdgeKind.INSTANCE_OF}
    assert set(instance) == {m.id for m in mentions}
    assert set(instance.values()) == entity_ids
    hermione = by_name(nodes)["Hermione Granger"].id
    assert {m for m, e in instance.items() if e == hermione} == {
        mentions[0].id,
        mentions[2].id,
        mentions[4].id,
    }


def co_mention(a: GraphNode, b: GraphNode) -> GraphEdge:
    return GraphEdge(source=a.id, target=b.id, kind=EdgeKind.CO_MENTION, doc_id=a.doc_id)


def test_entity_links_lift_the_mentions_co_mentions_earlier_to_later_weighted_by_count():
    mentions, events, edges = granger_story()
    m = mentions
    edges += [
        co_mention(m[0], m[1]),  # Miss Granger ~ Harry
        co_mention(m[3], m[2]),  # Harry ~ Hermione Granger, written later -> earlier
        co_mention(m[4], m[5]),
        co_mention(m[0], m[4]),  # two mentions of one entity: no self link
        co_mention(m[1], m[6]),  # Harry ~ Hagrid
        GraphEdge(source=m[6].id, target="elsewhere", kind=EdgeKind.CO_MENTION, doc_id="d"),
    ]
    # Hagrid shares no chunk with Harry: the link comes from the extraction's edge alone
    nodes, out = build(mentions, events, edges)
    ids = {n.name: n.id for n in nodes}
    links = {(e.source, e.target): e.attrs for e in out if e.kind == EdgeKind.CO_MENTION}
    assert links == {
        (ids["Hermione Granger"], ids["Harry"]): {"event_graph": "entity_link", "weight": 3},
        (ids["Harry"], ids["Hagrid"]): {"event_graph": "entity_link", "weight": 1},
    }
    assert all(a.pos < b.pos for a in nodes for b in nodes if (a.id, b.id) in links)


def test_mentions_sharing_a_chunk_without_a_co_mention_edge_are_not_linked():
    mentions, events, edges = granger_story()
    _, out = build(mentions, events, edges)
    assert [e for e in out if e.kind == EdgeKind.CO_MENTION] == []


def test_lifted_participation_is_one_edge_per_entity_and_event():
    mentions, events, edges = granger_story()
    nodes, out = build(mentions, events, edges)
    ids = {n.name: n.id for n in nodes}
    lifted = [(e.source, e.target) for e in out if e.kind == EdgeKind.PARTICIPATES]
    assert sorted(lifted) == sorted(
        [
            (ids["Hermione Granger"], events[0].id),
            (ids["Hermione Granger"], events[1].id),
            (ids["Hermione Granger"], events[2].id),
            (ids["Harry"], events[0].id),
        ]
    )
    assert all(e.attrs == {"event_graph": "lifted"} for e in out if e.kind == EdgeKind.PARTICIPATES)


def test_events_and_edges_are_read_once_as_they_come():
    """A builder hands the layer pages of its store as one-shot iterators."""
    mentions, events, edges = granger_story()
    m = mentions
    edges += [co_mention(m[0], m[1]), co_mention(m[1], m[6])]
    from_lists = build(mentions, events, edges)
    from_iterators = build(mentions, iter(events[::-1]), iter(edges))
    assert from_iterators == from_lists


def test_the_layers_edges_read_twice_are_the_same_edges():
    """The LLM pass weighs chunks by the edges before they are written: a second read must
    give every edge again, not an exhausted generator."""
    mentions, events, edges = granger_story()
    groups = mention_groups(mentions)
    _, out = entity_layer("d", groups, iter(events), iter(edges), vectors(len(groups)), THETA)
    first = list(out)
    assert first and list(out) == first


def test_the_entity_layer_is_owned_by_its_document_and_in_story_order():
    mentions, events, edges = granger_story()
    nodes, out = build(mentions, events, edges)
    assert all(n.doc_id == "d" for n in nodes) and all(e.doc_id == "d" for e in out)
    assert [n.pos for n in nodes] == sorted(n.pos for n in nodes)


# --- same-entity links -------------------------------------------------------------------------


def entity(
    doc: str, order: int, aliases: Sequence[str], entity_type: Optional[str] = "person"
) -> GraphNode:
    return GraphNode(
        id=f"{doc}-{aliases[0]}",
        kind=NodeKind.ENTITY,
        text=aliases[-1],
        doc_id=doc,
        pos=(order, 0, 2),
        name=aliases[-1],
        attrs={"event_graph": "entity", "entity_type": entity_type, "aliases": list(aliases)},
    )


def test_a_later_documents_entity_links_to_an_earlier_one_sharing_an_alias():
    earlier = entity("a", 0, ["Miss Granger", "Hermione Granger"])
    later = entity("b", 1, ["hermione granger!"])
    for new, other in (([later], [earlier]), ([earlier], [later])):
        (link,) = same_entity_links(new, other)
        assert (link.source, link.target, link.doc_id) == (later.id, earlier.id, "b")
        assert link.kind == EdgeKind.INSTANCE_OF
        assert link.attrs == {"event_graph": "same_entity"}


def test_no_link_within_one_document():
    first = entity("a", 0, ["Harry"])
    second = entity("a", 0, ["Harry Potter", "Harry"])
    assert same_entity_links([first, second], [first, second]) == []


def test_no_link_without_a_shared_alias_or_with_types_that_disagree():
    harry = entity("a", 0, ["Harry Potter"])
    assert same_entity_links([entity("b", 1, ["Harry"])], [harry]) == []
    assert len(same_entity_links([entity("b", 1, ["Harry Potter"], "concept")], [harry])) == 1
    # an alias shared by names that differ needs agreeing types
    potter = entity("a", 0, ["Mr. Potter", "Harry Potter"])
    assert same_entity_links([entity("b", 1, ["Mr. Potter"], "location")], [potter]) == []
    assert len(same_entity_links([entity("b", 1, ["Mr. Potter"])], [potter])) == 1


def test_the_same_name_links_even_when_the_parser_typed_it_differently():
    """spaCy may call one band an ORG in one text and a PERSON in the next."""
    band = entity("a", 0, ["Lanternfield"], "org")
    assert len(same_entity_links([entity("b", 1, ["Lanternfield"], "person")], [band])) == 1


def test_two_untyped_phrases_are_not_one_character():
    garden = entity("a", 0, ["the garden"], None)
    assert same_entity_links([entity("b", 1, ["the garden"], "concept")], [garden]) == []


def test_a_batch_links_among_its_own_documents_once_per_pair():
    a, b, c = (entity(doc, k, ["Hagrid"]) for k, doc in enumerate("abc"))
    links = same_entity_links([b, c], [a, b])
    assert sorted((e.source, e.target, e.doc_id) for e in links) == [
        (b.id, a.id, "b"),
        (c.id, a.id, "c"),
        (c.id, b.id, "c"),
    ]


def test_a_person_named_by_a_noun_phrase_fuses_only_with_others_named_so():
    """A nominal person ("fine portrait-painter") never takes in noun phrases that are no
    person ("portrait", "family portraits"), however alike their embeddings, and the noun
    phrases still fuse among themselves."""
    found = [mention("fine portrait-painter", 0), mention("portrait-painter", 10),
             mention("portrait", 20, entity_type="concept"),
             mention("family portraits", 30, entity_type="concept")]
    for nominal in found[:2]:
        nominal.attrs["nominal"] = True
    groups = mention_groups(found)
    sets = fuse(groups, vectors(4, cos=0.95), THETA, require_name_overlap=False)
    for nominal in ("fine portrait-painter", "portrait-painter"):
        assert not any({nominal, "portrait"} <= s for s in names_of(groups, sets))
    assert together(groups, sets, "portrait", "family portraits")


def pairwise_fuse(groups, vectors_, theta, require_name_overlap):
    """``fuse`` as first written: every cross pair of two sets checked before a join."""
    ambiguous = ambiguous_tokens(groups)
    root = list(range(len(groups)))
    members = {i: [i] for i in range(len(groups))}

    def find(i):
        while root[i] != i:
            i = root[i]
        return i

    for i, j in _candidates(groups, vectors_, theta, require_name_overlap, ambiguous):
        ri, rj = find(i), find(j)
        if ri == rj or any(
            in_conflict(groups[x], groups[y], ambiguous) for x in members[ri] for y in members[rj]
        ):
            continue
        keep, gone = min(ri, rj), max(ri, rj)
        root[gone] = keep
        members[keep] = sorted(members[keep] + members.pop(gone))
    return sorted(members.values())


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("overlap", [True, False])
def test_fusion_joins_what_checking_every_cross_pair_joins(seed: int, overlap: bool) -> None:
    rng = random.Random(seed)
    groups = random_groups(rng, 60)
    # clustered vectors: many candidates above theta, so sets grow and meet conflicts
    centres = np.random.default_rng(seed).normal(size=(4, 16))
    rows = np.stack([centres[rng.randrange(4)] + 0.3 * rng.random() for _ in groups])
    expected = pairwise_fuse(groups, rows, 0.8, overlap)
    assert fuse(groups, rows, 0.8, overlap) == expected
    assert any(len(s) > 1 for s in expected)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("overlap", [True, False])
def test_fusion_does_not_depend_on_how_its_cosines_are_blocked(
    seed: int, overlap: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The similarity matrix and the pairs' cosines are computed in blocks to bound memory;
    blocks of a few rows or pairs (many blocks, a ragged last one) give the same sets."""
    from llama_index_e2rag.extract.event_graph import fusion

    rng = random.Random(seed)
    groups = random_groups(rng, 60)
    centres = np.random.default_rng(seed).normal(size=(4, 16))
    rows = np.stack([centres[rng.randrange(4)] + 0.3 * rng.random() for _ in groups])
    whole = fuse(groups, rows, 0.8, overlap)
    monkeypatch.setattr(fusion, "_BLOCK", 7)
    monkeypatch.setattr(fusion, "_BATCH", 3)
    assert fuse(groups, rows, 0.8, overlap) == whole
    assert any(len(s) > 1 for s in whole)
