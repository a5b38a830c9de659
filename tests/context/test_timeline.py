"""Character timelines: name resolution, story order, cross-document joins and rendering.

The graphs are hand-built after the event graph layout (docs/design/event_graph_plan.md §3.1),
so these tests pin the reading rules without running any extraction.
"""

from __future__ import annotations

import json
import re
from itertools import pairwise
from typing import Any

import pytest

from llama_index_e2rag.errors import E2RAGError, EntityLookupError
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind, Position
from llama_index_e2rag.context.timeline import (
    Timeline,
    entity_timeline,
    format_timeline,
    timeline_dict,
)


def _node(
    node_id: str, kind: NodeKind, pos: Position, text: str, name: str | None = None, **attrs: Any
) -> GraphNode:
    doc = "a" if pos[0] == 0 else "b"
    return GraphNode(
        id=node_id,
        kind=kind,
        text=text,
        doc_id=doc,
        pos=pos,
        chunk_id=f"{doc}-c{pos[1] // 100}",
        name=name,
        attrs=attrs,
    )


def _entity(node_id: str, pos: Position, name: str, aliases: list[str]) -> GraphNode:
    return _node(
        node_id,
        NodeKind.ENTITY,
        pos,
        name,
        name,
        event_graph="entity",
        entity_type="person",
        aliases=aliases,
        mentions=1,
    )


def _edge(source: str, target: str, kind: EdgeKind, doc: str = "a", **attrs: Any) -> GraphEdge:
    return GraphEdge(source=source, target=target, kind=kind, doc_id=doc, attrs=attrs)


def _instance(mention: str, entity: str, doc: str = "a") -> GraphEdge:
    return _edge(mention, entity, EdgeKind.INSTANCE_OF, doc)


def _takes_part(entity: str, event: str, doc: str = "a") -> GraphEdge:
    return _edge(entity, event, EdgeKind.PARTICIPATES, doc, event_graph="lifted")


# Document "a": Hermione (three mentions, two events), Ron (one mention, one shared event, one
# of his own) and two Dursleys; inserted out of story order on purpose.
DOC_A_NODES = [
    _node(
        "m-h3",
        NodeKind.MENTION,
        (0, 300, 0),
        "Hermione",
        "Hermione",
        description="Hermione corrects Ron's pronunciation.",
    ),
    _node(
        "ev-shared",
        NodeKind.EVENT,
        (0, 310, 1),
        "Hermione corrects Ron",
        "correct",
        date="1991-10-31",
    ),
    _node(
        "m-h1",
        NodeKind.MENTION,
        (0, 40, 0),
        "Miss Granger",
        "Miss Granger",
        sentence_text="Miss Granger raised her hand   again.",
    ),
    _node("ev-ron", NodeKind.EVENT, (0, 210, 1), "Ron loses his rat", "lose"),
    _node("m-r1", NodeKind.MENTION, (0, 200, 0), "Ron", "Ron"),
    _node("ev-h", NodeKind.EVENT, (0, 50, 1), "Miss Granger raises her hand", "raise"),
    _node("m-h2", NodeKind.MENTION, (0, 120, 0), "Hermione Granger", "Hermione Granger"),
    _node("m-v", NodeKind.MENTION, (0, 5, 0), "Vernon Dursley", "Vernon Dursley"),
    _node("m-p", NodeKind.MENTION, (0, 8, 0), "Petunia Dursley", "Petunia Dursley"),
    _entity("ent-ron", (0, 200, 0), "Ron Weasley", ["Ron", "Ron Weasley"]),
    _entity(
        "ent-h", (0, 40, 0), "Hermione Granger", ["Miss Granger", "Hermione Granger", "Hermione"]
    ),
    _entity("ent-v", (0, 5, 0), "Vernon Dursley", ["Vernon Dursley"]),
    _entity("ent-p", (0, 8, 0), "Petunia Dursley", ["Petunia Dursley"]),
]
DOC_A_EDGES = [
    _instance("m-h2", "ent-h"),
    _instance("m-h1", "ent-h"),
    _instance("m-h3", "ent-h"),
    _instance("m-r1", "ent-ron"),
    _instance("m-v", "ent-v"),
    _instance("m-p", "ent-p"),
    _takes_part("ent-h", "ev-shared"),
    _takes_part("ent-h", "ev-h"),
    _takes_part("ent-ron", "ev-shared"),
    _takes_part("ent-ron", "ev-ron"),
    _edge("m-h3", "ev-shared", EdgeKind.PARTICIPATES),
    _edge("m-r1", "ev-ron", EdgeKind.PARTICIPATES),
    _edge("ent-h", "ent-ron", EdgeKind.CO_MENTION, event_graph="entity_link", weight=1),
]
# Document "b": the same Hermione again, joined to document "a" by a same_entity link.
DOC_B_NODES = [
    _node(
        "ev-b",
        NodeKind.GRAPH_EVENT,
        (1, 15, 0),
        "Troll attack: a troll corners Hermione",
        "Troll attack",
        event_graph="event",
        date="1991-10-31",
    ),
    _node("m-b1", NodeKind.MENTION, (1, 10, 0), "Hermione", "Hermione"),
    _entity("ent-hb", (1, 10, 0), "Hermione", ["Hermione"]),
]
DOC_B_EDGES = [
    _instance("m-b1", "ent-hb", "b"),
    _edge("ent-hb", "ev-b", EdgeKind.PARTICIPATES, "b", event_graph="extracted"),
]
SAME_ENTITY = _edge("ent-hb", "ent-h", EdgeKind.INSTANCE_OF, "b", event_graph="same_entity")


def _store(*, second_doc: bool = True) -> NetworkXGraphStore:
    store = NetworkXGraphStore()
    store.upsert_nodes(DOC_A_NODES)
    store.upsert_edges(DOC_A_EDGES)
    if second_doc:
        store.upsert_nodes(DOC_B_NODES)
        store.upsert_edges([*DOC_B_EDGES, SAME_ENTITY])
    return store


def _ids(timeline: Timeline) -> list[str]:
    return [entry.node_id for entry in timeline.entries]


def _lookup_error(store: NetworkXGraphStore, name: str) -> str:
    with pytest.raises(EntityLookupError) as caught:
        entity_timeline(store, name)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_entries_are_in_story_order_and_cover_exactly_the_entitys_mentions_and_events() -> None:
    store = _store(second_doc=False)
    timeline = entity_timeline(store, "Hermione Granger")
    keys = [(entry.pos, entry.node_id) for entry in timeline.entries]
    assert all(earlier <= later for earlier, later in pairwise(keys))
    mentions = {e.source for e in store.edges_of("ent-h", [EdgeKind.INSTANCE_OF], "in")}
    events = {e.target for e in store.edges_of("ent-h", [EdgeKind.PARTICIPATES], "out")}
    assert {e.node_id for e in timeline.entries if e.kind == "mention"} == mentions
    assert {e.node_id for e in timeline.entries if e.kind == "event"} == events
    assert len(timeline.entries) == len(mentions | events)


def test_entries_carry_the_position_label_and_chunk_of_their_node() -> None:
    entry = entity_timeline(_store(), "Hermione").entries[0]
    assert (entry.node_id, entry.doc_id, entry.chunk_id) == ("m-h1", "a", "a-c0")
    # without indexed chunks the story's length is unknown: the offset is the position
    assert entry.position == "a · character 40"


def test_entries_say_their_place_as_the_cli_does_when_the_chunks_are_indexed() -> None:
    """The document's file name, its chapter and the share of it, from its chunks (the way the
    extractive answer says positions: ``story_position``)."""
    store = _store()
    text = "CHAPTER I.\n" + "x" * 388
    store.upsert_nodes([
        GraphNode(id="a-c0", kind=NodeKind.CHUNK, text=text, doc_id="a", pos=(0, 0, 0),
                  span=(0, 400), attrs={"node": {"metadata": {"file_name": "stone.txt"}}})
    ])
    entries = {e.node_id: e for e in entity_timeline(store, "Hermione").entries}
    assert entries["m-h1"].position == "stone.txt · Chapter I · 10% through the story"
    assert entries["m-h3"].position == "stone.txt · Chapter I · 75% through the story"
    assert entries["m-h1"].pos[1] == 40  # the numbers stay for programs


def test_a_mention_reads_as_its_description_else_its_sentence_else_its_text() -> None:
    texts = {e.node_id: e.text for e in entity_timeline(_store(), "Hermione").entries}
    assert texts["m-h3"] == "Hermione corrects Ron's pronunciation."
    assert texts["m-h1"] == "Miss Granger raised her hand   again."
    assert texts["m-h2"] == "Hermione Granger"


def test_an_event_names_the_other_fused_entities_taking_part_and_its_date() -> None:
    entries = {e.node_id: e for e in entity_timeline(_store(), "Hermione").entries}
    assert entries["ev-shared"].participants == ("Ron Weasley",)
    assert entries["ev-shared"].date == "1991-10-31"
    assert entries["ev-h"].participants == () and entries["ev-h"].date is None


def test_a_partial_name_resolves_to_the_entity_whose_alias_it_shortens() -> None:
    store = _store(second_doc=False)
    assert entity_timeline(store, "Granger").entity.node_ids == ("ent-h",)
    assert entity_timeline(store, "Weasley").entity.name == "Ron Weasley"


def test_an_exact_alias_matches_regardless_of_case_and_punctuation() -> None:
    assert entity_timeline(_store(), "miss  GRANGER!").entity.node_ids == ("ent-h", "ent-hb")


def test_an_exact_alias_wins_over_short_forms_of_other_entities() -> None:
    store = _store()
    store.upsert_nodes([_entity("ent-d", (0, 2, 0), "Dursley", ["Dursley"])])
    assert entity_timeline(store, "Dursley").entity.node_ids == ("ent-d",)


def test_a_name_shared_by_two_entities_of_one_document_is_refused_naming_both() -> None:
    message = _lookup_error(_store(), "Dursley")
    for name, offset in (("Vernon Dursley", 5), ("Petunia Dursley", 8)):
        # each candidate with what tells it apart: its type, mentions and first appearance
        assert f"'{name}' (person, 1 mentions, first in a · character {offset})" in message
    assert "full name" in message


def _undecided(store: NetworkXGraphStore, name: str, *candidates: str) -> None:
    """A form the characters rules left apart (``candidates``), as the entity layer writes it."""
    node = _entity("ent-undecided", (0, 900, 0), name, [name])
    node.attrs["candidates"] = list(candidates)
    store.upsert_nodes([node])


def test_a_form_left_apart_lists_the_characters_it_may_be() -> None:
    store = _store(second_doc=False)
    _undecided(store, "Mr. Dursley", "Vernon Dursley", "Petunia Dursley")
    message = _lookup_error(store, "Mr. Dursley")
    assert "may name 2 different entities" in message
    assert "'Vernon Dursley' (person" in message and "'Petunia Dursley' (person" in message
    assert "'Mr. Dursley'" not in message.split("entities:")[1]


def test_a_form_left_apart_in_some_chunks_still_names_its_one_character() -> None:
    store = _store(second_doc=False)
    _undecided(store, "Granger", "Hermione Granger", "Hector Granger")
    store.upsert_nodes([_entity("ent-h2", (0, 950, 0), "Hermione Granger", ["Granger"])])
    assert entity_timeline(store, "Granger").entity.node_ids == ("ent-h2",)


def test_an_unknown_name_suggests_the_closest_entity_names() -> None:
    message = _lookup_error(_store(), "Hermoine")
    assert "no entity named 'Hermoine'" in message
    assert "Hermione Granger" in message
    assert "Dursley" not in message


def test_a_store_without_entities_says_to_build_the_event_graph() -> None:
    store = NetworkXGraphStore()
    store.upsert_nodes(n for n in DOC_A_NODES if n.kind != NodeKind.ENTITY)
    message = _lookup_error(store, "Hermione")
    assert "--event-graph" in message and "EventGraphBuilder()" in message


def test_the_lookup_error_is_a_library_error() -> None:
    assert issubclass(EntityLookupError, E2RAGError)


def test_same_entity_links_join_both_documents_into_one_timeline() -> None:
    timeline = entity_timeline(_store(), "Hermione")
    assert timeline.entity.doc_ids == ("a", "b")
    assert timeline.entity.name == "Hermione Granger"
    assert _ids(timeline)[-2:] == ["m-b1", "ev-b"]
    assert {e.doc_id for e in timeline.entries} == {"a", "b"}


def test_doc_id_keeps_only_that_documents_part_of_the_timeline() -> None:
    only_b = entity_timeline(_store(), "Hermione Granger", doc_id="b")
    assert _ids(only_b) == ["m-b1", "ev-b"]
    assert only_b.entity.doc_ids == ("b",) and only_b.entity.name == "Hermione"
    only_a = entity_timeline(_store(), "Hermione", doc_id="a")
    assert {e.doc_id for e in only_a.entries} == {"a"}


def test_doc_id_without_the_entity_is_refused() -> None:
    with pytest.raises(EntityLookupError, match="in document 'b'"):
        entity_timeline(_store(), "Ron", doc_id="b")


def test_another_entitys_mentions_and_events_never_appear() -> None:
    ids = set(_ids(entity_timeline(_store(), "Hermione")))
    assert not ids & {"m-r1", "ev-ron", "m-v", "m-p"}
    ron = set(_ids(entity_timeline(_store(), "Ron")))
    assert ron == {"m-r1", "ev-ron", "ev-shared"}


def test_format_timeline_has_a_header_and_one_line_per_entry() -> None:
    timeline = entity_timeline(_store(), "Hermione")
    header, counts, *lines = format_timeline(timeline).splitlines()
    assert header == "Hermione Granger (person); also Miss Granger, Hermione"
    assert counts == "4 mentions, 3 events in 2 document(s): a, b"
    assert len(lines) == len(timeline.entries)
    first = r"a · character 40 +mention +Miss Granger raised her hand again\."
    assert re.fullmatch(first, lines[0])
    assert lines[-1].endswith("event    Troll attack: a troll corners Hermione (date: 1991-10-31)")


def test_format_timeline_limit_says_how_many_entries_it_left_out() -> None:
    lines = format_timeline(entity_timeline(_store(), "Hermione"), limit=2).splitlines()
    assert len(lines) == 2 + 2 + 1
    assert lines[-1] == "... 5 more entries"


def test_timeline_dict_is_json_ready_and_keeps_every_entry() -> None:
    timeline = entity_timeline(_store(), "Hermione")
    data = json.loads(json.dumps(timeline_dict(timeline)))
    assert data["entity"]["aliases"] == ["Miss Granger", "Hermione"]
    assert (data["mentions"], data["events"]) == (4, 3)
    assert [e["node_id"] for e in data["entries"]] == _ids(timeline)
    assert data["entries"][0]["pos"] == [0, 40, 0]


def test_a_novels_timeline_reads_chapter_by_chapter() -> None:
    text = "CHAPTER I\nAnna came home.\n\nCHAPTER II\nAnna left.\nAnna wept.\n"
    store = NetworkXGraphStore()
    chunk = GraphNode(id="c0", kind=NodeKind.CHUNK, text=text, doc_id="a", pos=(0, 0, 0),
                      span=(0, len(text)))
    offsets = [text.index("Anna came"), text.index("Anna left"), text.index("Anna wept")]
    mentions = [_node(f"m{k}", NodeKind.MENTION, (0, at, 0), "Anna", "Anna")
                for k, at in enumerate(offsets)]
    store.replace_doc("a", 0, [chunk, *mentions, _entity("ent-a", (0, 10, 0), "Anna", [])],
                      [_instance(m.id, "ent-a") for m in mentions])
    timeline = entity_timeline(store, "Anna")
    assert [e.chapter for e in timeline.entries] == ["Chapter I", "Chapter II", "Chapter II"]
    _, _, *lines = format_timeline(timeline).splitlines()
    headings = [line for line in lines if line.startswith("── ")]
    assert headings == ["── a · Chapter I", "── a · Chapter II"]
    assert len(lines) == len(headings) + len(timeline.entries)
    assert lines[1].split()[:2] == [f"{100 * offsets[0] / len(text):.0f}%", "mention"]
    assert timeline_dict(timeline)["entries"][2]["chapter"] == "Chapter II"


def test_an_event_not_told_as_happening_is_no_part_of_the_course() -> None:
    store = _store(second_doc=False)
    events = [e.target for e in store.edges_of("ent-h", [EdgeKind.PARTICIPATES], "out")]
    wished = store.get_node(events[0])
    wished.attrs["realis"] = False  # as the grounded parse marks "would go", "wanted to go"
    store.upsert_nodes([wished])
    ids = _ids(entity_timeline(store, "Hermione Granger"))
    assert wished.id not in ids and set(events[1:]) <= set(ids)


def _course(nodes: list[GraphNode], takes_part: list[str]) -> NetworkXGraphStore:
    """Anna (entity ``ent-a``), her mentions among ``nodes`` and the events she takes part in."""
    store = NetworkXGraphStore()
    store.upsert_nodes([*nodes, _entity("ent-a", (0, 0, 0), "Anna Hale", ["Anna"])])
    mentions = [n.id for n in nodes if n.kind == NodeKind.MENTION and n.text == "Anna"]
    store.upsert_edges(
        [_instance(m, "ent-a") for m in mentions] + [_takes_part("ent-a", e) for e in takes_part]
    )
    return store


def test_an_events_clause_takes_the_subject_it_shares_and_nothing_else() -> None:
    shares = _node("ev-1", NodeKind.EVENT, (0, 30, 1), "carried herself\nwith dignity", "carry",
                   statement="She carried herself with dignity")
    other = _node("ev-2", NodeKind.EVENT, (0, 90, 1), "took out a case, then turned", "take",
                  statement="She took out a case, then")  # not subject + clause: kept as told
    bare = _node("ev-3", NodeKind.EVENT, (0, 150, 1), "Anna smiled", "smile")
    timeline = entity_timeline(_course([shares, other, bare], ["ev-1", "ev-2", "ev-3"]), "Anna")
    texts = {e.node_id: e.text for e in timeline.entries}
    assert texts == {"ev-1": "She carried herself with dignity", "ev-2": other.text,
                     "ev-3": bare.text}


def test_participants_are_people_and_places_not_noun_phrases_or_dates() -> None:
    event = _node("ev", NodeKind.EVENT, (0, 50, 1), "Anna met Tom at noon in Bath", "meet")
    others = [
        _node(f"ent-{kind}", NodeKind.ENTITY, (0, 50, 0), name, name, event_graph="entity",
              entity_type=kind, aliases=[name], mentions=1)
        for kind, name in (("PERSON", "Tom Hale"), ("GPE", "Bath"), ("concept", "great dignity"),
                           ("DATE", "noon"), ("person", "Mrs. Hale"))
    ]
    store = _course([event, *others], ["ev"])
    store.upsert_edges([_takes_part(o.id, "ev") for o in others])
    (entry,) = entity_timeline(store, "Anna").entries
    assert set(entry.participants) == {"Tom Hale", "Bath", "Mrs. Hale"}


def test_a_sentence_is_told_once_by_the_entry_that_says_most() -> None:
    nodes = [
        # sentence s1: two mentions and her event; s2: two mentions only; s3: an event whose
        # clause holds another event's clause (a participle inside its head's clause)
        _node("m-1", NodeKind.MENTION, (0, 10, 0), "Anna", "Anna", sentence_id="s1"),
        _node("m-2", NodeKind.MENTION, (0, 20, 0), "Anna", "Anna", sentence_id="s1"),
        _node("ev-1", NodeKind.EVENT, (0, 12, 1), "Anna waved", "wave", sentence_id="s1"),
        _node("m-3", NodeKind.MENTION, (0, 60, 0), "Anna", "Anna", sentence_id="s2"),
        _node("m-4", NodeKind.MENTION, (0, 70, 0), "Anna", "Anna", sentence_id="s2"),
        _node("ev-2", NodeKind.EVENT, (0, 100, 1), "Anna showed the house built by her father",
              "show", sentence_id="s3"),
        _node("ev-3", NodeKind.EVENT, (0, 120, 1), "built by her father", "build",
              sentence_id="s3"),
        _node("ev-4", NodeKind.EVENT, (0, 160, 1), "built a wall", "build", sentence_id="s4"),
    ]
    spans = {"ev-1": (10, 20), "ev-2": (100, 141), "ev-3": (122, 141), "ev-4": (160, 172)}
    for node in nodes:
        node.span = spans.get(node.id)
    timeline = entity_timeline(_course(nodes, ["ev-1", "ev-2", "ev-3", "ev-4"]), "Anna")
    assert _ids(timeline) == ["ev-1", "m-3", "ev-2", "ev-4"]
