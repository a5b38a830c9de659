"""Character timelines: a fused entity's mentions and events in story order, with positions.

Framework-free reads of the E²GraphRAG entity layer (plan §3.1): ``E2RAGIndex.entity_timeline``
and ``e2rag timeline`` call ``entity_timeline`` and render it with ``format_timeline`` or
``timeline_dict``. A character that spans documents is one connected component of cross-document
``instance_of`` links, so it gets one timeline.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from llama_index_e2rag.errors import EntityLookupError
from llama_index_e2rag.extract.event_graph.entities import (
    entity_names,
    fused_entities,
    is_fused_entity,
    name_forms,
)
from llama_index_e2rag.extract.linking import name_variants
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.modes import layer_missing_python
from llama_index_e2rag.schema import (
    EdgeKind,
    GraphNode,
    NodeKind,
    Position,
    normalize_text,
    sort_by_position,
)
from llama_index_e2rag.context.story_position import StoryPositions

#: Node kinds an entity ``participates`` in: lifted frames/E²RAG events and LLM graph events.
_EVENT_KINDS = frozenset({NodeKind.EVENT, NodeKind.GRAPH_EVENT})
_SUGGESTIONS = 5
#: Entity types a timeline does not name among an event's participants: the parse's other
#: noun phrases ("great dignity", "his hat") are fused as ``concept`` entities, and a date or a
#: number is no one who takes part (the event's date is shown as such).
NOT_PARTICIPANTS = frozenset(
    {"concept", "date", "time", "cardinal", "ordinal", "quantity", "percent", "money"}
)


@dataclass(frozen=True)
class TimelineEntity:
    """The fused entity a timeline follows: one or several linked per-document entity nodes."""

    name: str
    aliases: tuple[str, ...]
    entity_type: str | None
    doc_ids: tuple[str, ...]
    node_ids: tuple[str, ...]


@dataclass(frozen=True)
class TimelineEntry:
    """One mention of the entity or one event it takes part in, where the story tells it."""

    kind: Literal["mention", "event"]
    node_id: str
    doc_id: str
    pos: Position
    #: "peter_rabbit.txt · Chapter 3 · 93% through the story" (``pos`` holds the numbers)
    position: str
    chunk_id: str | None
    text: str
    date: str | None = None
    participants: tuple[str, ...] = ()
    #: The chapter the entry is told in, and its own part of ``position`` ("Chapter 3" /
    #: "93% through the story"), so a timeline can be read chapter by chapter.
    chapter: str | None = None
    where: str = ""


@dataclass(frozen=True)
class Timeline:
    """An entity and its entries in story order."""

    entity: TimelineEntity
    entries: tuple[TimelineEntry, ...]

    @property
    def mention_count(self) -> int:
        return sum(1 for entry in self.entries if entry.kind == "mention")

    @property
    def event_count(self) -> int:
        return sum(1 for entry in self.entries if entry.kind == "event")


def entity_timeline(graph: GraphStore, name: str, *, doc_id: str | None = None) -> Timeline:
    """The timeline of the entity ``name`` resolves to; ``doc_id`` keeps one document's part.

    Raises ``EntityLookupError`` when ``name`` matches no entity or several different ones.
    """
    members = _resolve(graph, name, doc_id)
    if doc_id is not None:
        members = [m for m in members if m.doc_id == doc_id]
    member_ids = {m.id for m in members}
    positions = StoryPositions(graph)
    entries: dict[str, TimelineEntry] = {}
    for entity in members:
        for edge in graph.edges_of(entity.id, [EdgeKind.INSTANCE_OF], "in"):
            mention = graph.get_node(edge.source)
            if mention is not None and mention.kind == NodeKind.MENTION:
                entries.setdefault(mention.id, _mention_entry(mention, positions))
        for edge in graph.edges_of(entity.id, [EdgeKind.PARTICIPATES], "out"):
            event = graph.get_node(edge.target)
            if event is None or event.attrs.get("realis") is False:
                continue  # the grounded parse's states, wishes and hypotheticals: no course
            if event.kind in _EVENT_KINDS and event.id not in entries:
                entries[event.id] = _event_entry(graph, event, member_ids, positions)
    told = _told_by_others(graph, list(entries.values()))
    kept = (e for e in entries.values() if e.node_id not in told)
    ordered = sorted(kept, key=lambda e: (e.pos, e.node_id))
    return Timeline(entity=_entity(members), entries=tuple(_once(ordered)))


def _told_by_others(graph: GraphStore, entries: list[TimelineEntry]) -> set[str]:
    """Entries another entry already tells: a mention in the sentence of one of the
    character's events (the event says what the character does there) or of an earlier
    mention, and an event whose
    clause lies inside another event's ("the house inhabited by him" inside "He pointed out
    the house inhabited by him")."""
    nodes = {node.id: node for node in graph.get_nodes(e.node_id for e in entries)}
    events = [nodes[e.node_id] for e in entries if e.kind == "event" and e.node_id in nodes]
    by_events = {event.attrs.get("sentence_id") for event in events} - {None}
    told: set[str] = set()
    for entry in sorted(entries, key=lambda e: (e.pos, e.node_id)):
        sentence = nodes[entry.node_id].attrs.get("sentence_id") if entry.node_id in nodes else None
        if entry.kind == "mention" and sentence is not None:
            if sentence in by_events:
                told.add(entry.node_id)
            by_events.add(sentence)  # two mentions in one sentence: the sentence once
    spans: dict[tuple[str, object], list[tuple[int, int]]] = {}
    for event in events:
        if event.span:
            spans.setdefault((event.doc_id, event.attrs.get("sentence_id")), []).append(event.span)
    for event in events:
        if event.span and any(
            other != event.span and other[0] <= event.span[0] and event.span[1] <= other[1]
            for other in spans[(event.doc_id, event.attrs.get("sentence_id"))]
        ):
            told.add(event.id)
    return told


def _once(entries: list[TimelineEntry]) -> list[TimelineEntry]:
    """Each place in the story once: chunks overlap, so a sentence told in two of them is
    extracted twice, as two nodes at the same offset with the same text."""
    seen: set[tuple[str, str, int, str]] = set()
    kept = []
    for entry in entries:
        key = (entry.kind, entry.doc_id, entry.pos[1], entry.text)
        if key not in seen:
            seen.add(key)
            kept.append(entry)
    return kept


def _exact(query: str, entity: GraphNode) -> bool:
    return name_forms(entity).match(query) == "exact"


def _partial(query: str, entity: GraphNode) -> bool:
    """A short form of the query equals a short form of a name ("Hermione" ~ "Hermione
    Granger")."""
    return name_forms(entity).match(query) is not None


def _component(graph: GraphStore, start: GraphNode) -> list[GraphNode]:
    """``start`` and every entity joined to it by cross-document ``same_entity`` links."""
    found = {start.id: start}
    todo = [start.id]
    while todo:
        for edge in graph.edges_of(todo.pop(), [EdgeKind.INSTANCE_OF], "both"):
            if edge.attrs.get("event_graph") != "same_entity":
                continue
            for end in (edge.source, edge.target):
                node = graph.get_node(end) if end not in found else None
                if node is not None and is_fused_entity(node):
                    found[end] = node
                    todo.append(end)
    return sort_by_position(found.values())


def _resolve(graph: GraphStore, name: str, doc_id: str | None) -> list[GraphNode]:
    """The members of the one entity component ``name`` names (exact aliases before short
    forms); refuses when it names none or several components."""
    entities = fused_entities(graph)
    if not entities:
        raise EntityLookupError(
            f"no entity named {name!r}: "
            + layer_missing_python("event_graph", "a character's timeline")
        )
    for matches in (_exact, _partial):
        components: dict[frozenset[str], tuple[list[GraphNode], list[GraphNode]]] = {}
        for entity in entities:
            if not matches(name, entity):
                continue
            members = _component(graph, entity)
            if doc_id is not None and all(m.doc_id != doc_id for m in members):
                continue
            key = frozenset(m.id for m in members)
            components.setdefault(key, (members, []))[1].append(entity)
        people = {k: v for k, v in components.items() if not _left_apart(v[1])}
        if len(people) == 1:
            # a form some mentions leave undecided ("Captain Wentworth" in a chunk without
            # either Wentworth brother) still names the one character it names elsewhere
            return next(iter(people.values()))[0]
        if components:
            raise _ambiguous(graph, name, [hits for _, hits in components.values()], entities)
    raise _unknown(name, entities, doc_id)


def _left_apart(hits: list[GraphNode]) -> bool:
    """Entities of a name form the characters rules could not decide between (``candidates``)."""
    return all(entity.attrs.get("candidates") for entity in hits)


def _ambiguous(
    graph: GraphStore, name: str, candidates: list[list[GraphNode]], entities: list[GraphNode]
) -> EntityLookupError:
    """Lists the characters ``name`` may mean, each with its canonical name and a detail that
    tells them apart; a form left apart stands for the characters it could be."""
    named: dict[tuple[str, str], GraphNode] = {(e.doc_id, e.name or ""): e for e in entities}
    hits: dict[str, GraphNode] = {}
    for entity in (e for component in candidates for e in component):
        for other in entity.attrs.get("candidates") or [entity.name]:
            found = named.get((entity.doc_id, str(other)))
            if found is not None and not found.attrs.get("candidates"):
                hits.setdefault(found.id, found)
    if not hits:  # nothing but undecided forms: list them as they are
        hits = {e.id: e for component in candidates for e in component}
    positions = StoryPositions(graph)
    listed = "; ".join(_detail(entity, positions) for entity in sort_by_position(hits.values()))
    several_docs = len({e.doc_id for e in hits.values()}) > 1
    more = " or choose a document (doc_id=, e2rag timeline --doc)" if several_docs else ""
    return EntityLookupError(
        f"{name!r} may name {len(hits)} different entities: {listed}; pass the full name{more}"
    )


def _detail(entity: GraphNode, positions: StoryPositions) -> str:
    """'John Cavendish' (PERSON, 331 mentions, first in pg863 · Chapter I · 0% ...)."""
    kind = entity.attrs.get("entity_type")
    count = entity.attrs.get("mentions")
    facts = [str(kind)] if kind else []
    if count:
        facts.append(f"{count} mentions")
    facts.append("first in " + positions.describe(entity.doc_id, entity.pos[1]))
    return f"{entity.name!r} ({', '.join(facts)})"


def _unknown(name: str, entities: list[GraphNode], doc_id: str | None) -> EntityLookupError:
    """No match: name the closest entities (by any alias or its short forms) so a typo is one
    retry away."""
    pool = [e for e in entities if doc_id is None or e.doc_id == doc_id]
    owner: dict[str, str] = {}
    for entity in pool:
        for alias in entity_names(entity):
            for form in name_variants(alias, entity.attrs.get("entity_type")):
                owner.setdefault(form, entity.name or alias)
    close = difflib.get_close_matches(
        normalize_text(name), list(owner), n=max(len(owner), 1), cutoff=0.6
    )
    names = list(dict.fromkeys(owner[alias] for alias in close))[:_SUGGESTIONS]
    where = f" in document {doc_id!r}" if doc_id is not None else ""
    hint = f"; closest: {', '.join(names)}" if names else f"; none close among {len(pool)}"
    return EntityLookupError(f"no entity named {name!r}{where}{hint}")


def _entity(members: list[GraphNode]) -> TimelineEntity:
    """The component as one entity: the earliest member's name, the first known type, every
    alias once."""
    first = members[0]
    aliases: dict[str, str] = {}
    for member in members:
        for alias in entity_names(member):
            aliases.setdefault(normalize_text(alias), alias)
    types = (m.attrs.get("entity_type") for m in members)
    return TimelineEntity(
        name=first.name or first.text,
        aliases=tuple(a for a in aliases.values() if a != first.name),
        entity_type=next((str(t) for t in types if t), None),
        doc_ids=tuple(dict.fromkeys(m.doc_id for m in members)),
        node_ids=tuple(m.id for m in members),
    )


def _mention_entry(mention: GraphNode, positions: StoryPositions) -> TimelineEntry:
    """A mention reads as its description, else its sentence, else its own text."""
    attrs = mention.attrs
    text = attrs.get("description") or attrs.get("sentence_text") or mention.text
    return TimelineEntry(
        kind="mention",
        node_id=mention.id,
        doc_id=mention.doc_id,
        pos=mention.pos,
        position=positions.describe(mention.doc_id, mention.pos[1]),
        chunk_id=mention.chunk_id,
        text=str(text),
        **_chapter(positions, mention),
    )


def _chapter(positions: StoryPositions, node: GraphNode) -> dict[str, Any]:
    """The ``chapter`` and ``where`` fields of an entry at ``node``."""
    chapter, percent = positions.place(node.doc_id, node.pos[1])
    where = f"{percent:.0f}%" if percent is not None else f"character {node.pos[1]:,}"
    return {"chapter": chapter, "where": where}


def _event_entry(
    graph: GraphStore, event: GraphNode, member_ids: set[str], positions: StoryPositions
) -> TimelineEntry:
    """An event with its date and the other fused entities taking part (who else is there)."""
    sources = graph.get_nodes(
        e.source for e in graph.edges_of(event.id, [EdgeKind.PARTICIPATES], "in")
    )
    others = (
        n.name
        for n in sort_by_position(sources)
        if is_fused_entity(n)
        and n.id not in member_ids
        and str(n.attrs.get("entity_type") or "").lower() not in NOT_PARTICIPANTS
    )
    date = event.attrs.get("date")
    return TimelineEntry(
        kind="event",
        node_id=event.id,
        doc_id=event.doc_id,
        pos=event.pos,
        position=positions.describe(event.doc_id, event.pos[1]),
        chunk_id=event.chunk_id,
        text=_clause_with_subject(event),
        date=str(date) if date else None,
        participants=tuple(dict.fromkeys(n for n in others if n)),
        **_chapter(positions, event),
    )


def _clause_with_subject(event: GraphNode) -> str:
    """The event's clause, with the subject it shares with a conjoined verb put in front
    ("carried himself with great dignity" -> "He carried himself with great dignity"): the
    parse's statement (extract/statements.py) where it is exactly that subject plus the clause."""
    clause = _one_line(event.text)
    statement = _one_line(str(event.attrs.get("statement") or ""))
    if statement.endswith(" " + clause) and len(statement) > len(clause):
        return statement
    return event.text


def _one_line(text: str) -> str:
    return " ".join(text.split())


def format_timeline(timeline: Timeline, *, limit: int | None = None) -> str:
    """Plain text for the CLI: a header, then one line per entry in story order."""
    entity = timeline.entity
    kind = f" ({entity.entity_type})" if entity.entity_type else ""
    aliases = f"; also {', '.join(entity.aliases)}" if entity.aliases else ""
    counts = f"{timeline.mention_count} mentions, {timeline.event_count} events"
    lines = [
        f"{entity.name}{kind}{aliases}",
        f"{counts} in {len(entity.doc_ids)} document(s): {', '.join(entity.doc_ids)}",
    ]
    shown = timeline.entries if limit is None else timeline.entries[: max(limit, 0)]
    if any(entry.chapter for entry in shown):
        lines.extend(_by_chapter(shown))
    else:
        width = max((len(entry.position) for entry in shown), default=0)
        lines.extend(_entry_line(entry, width) for entry in shown)
    hidden = len(timeline.entries) - len(shown)
    if hidden:
        lines.append(f"... {hidden} more entries")
    return "\n".join(lines)


def _by_chapter(entries: Sequence[TimelineEntry]) -> list[str]:
    """A heading line per chapter (and document), then its entries with their share of the
    story: a novel's timeline reads as the character's course, chapter by chapter."""
    lines: list[str] = []
    current: tuple[str, str | None] | None = None
    width = max((len(entry.where) for entry in entries), default=0)
    for entry in entries:
        here = (entry.doc_id, entry.chapter)
        if here != current:
            current = here
            lines.append(f"── {entry.position.rsplit(' · ', 1)[0]}")
        lines.append("  " + _entry_line(entry, width, entry.where))
    return lines


def _entry_line(entry: TimelineEntry, width: int, where: str | None = None) -> str:
    date = f" (date: {entry.date})" if entry.date else ""
    others = f" [with {', '.join(entry.participants)}]" if entry.participants else ""
    place = entry.position if where is None else where
    return f"{place:<{width}}  {entry.kind:<7}  {_one_line(entry.text)}{date}{others}"


def timeline_dict(timeline: Timeline) -> dict[str, Any]:
    """JSON-ready form of a timeline (for ``--json``)."""
    entity = timeline.entity
    return {
        "entity": {
            "name": entity.name,
            "aliases": list(entity.aliases),
            "entity_type": entity.entity_type,
            "doc_ids": list(entity.doc_ids),
            "node_ids": list(entity.node_ids),
        },
        "mentions": timeline.mention_count,
        "events": timeline.event_count,
        "entries": [_entry_dict(entry) for entry in timeline.entries],
    }


def _entry_dict(entry: TimelineEntry) -> dict[str, Any]:
    return {
        "kind": entry.kind,
        "node_id": entry.node_id,
        "doc_id": entry.doc_id,
        "pos": list(entry.pos),
        "position": entry.position,
        "chunk_id": entry.chunk_id,
        "text": entry.text,
        "date": entry.date,
        "participants": list(entry.participants),
        "chapter": entry.chapter,
    }
