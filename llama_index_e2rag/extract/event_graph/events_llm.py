"""E²GraphRAG's event layer with an LLM (paper 001, §3.1, figure 6): events grown over the
entities' ego networks.

Every fused entity v with at least ``min_mentions`` mentions walks the chunks its mentions are
in, heaviest first (T_v). For each chunk one call shows the LLM the chunk and R_event(v), the
events already linked to v or to one of v's neighbours; the answer refines listed events
(``updated_events``) and tells new ones (``new_events``), and every event it names is linked to v.

The paper walks the entities one after the other. We walk them in *waves* (plan §2.3): a wave is
a greedy set of at most ``wave_size`` entities, no two of them neighbours, taken in entity order
(mention count descending, then first appearance). The entities of a wave run concurrently;
each sees the events as they stood at the wave's start plus its own changes, and after the wave
the changes are applied entity by entity in entity order. Neighbours share chunks, so they
never race on the same text; the same input and answers give the same graph, and a rebuild
sends the same prompts (the LLM cache answers them).

A call that fails (``LLMOutputError``, ``LLMTimeoutError``, any exception of the LLM) costs only
its (entity, chunk) step, reported as a failure of that chunk. Pure: no llama-index index
machinery; the caller passes an ``LLMRunner`` (or anything with its ``astructured``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, AbstractSet, Mapping, Optional, Sequence, Union

from llama_index_e2rag.extract.event_graph.prompts import (
    EVENTGRAPH_UPDATE,
    EventUpdateAnswer,
    NewEvent,
    UpdatedEvent,
    format_events,
)
from llama_index_e2rag.extract.event_graph.waves import (  # noqa: F401 - re-exported (lived here)
    EgoInput,
    entity_chunks,
    entity_order,
    mention_count,
    neighbour_sets,
    waves,
)
from llama_index_e2rag.schema import (
    EdgeKind,
    GraphEdge,
    GraphNode,
    NodeKind,
    make_id,
    normalize_text,
)

if TYPE_CHECKING:
    from llama_index_e2rag.llm.runner import LLMRunner, PromptLike

logger = logging.getLogger(__name__)

#: Longest failure reason kept (as ``extract/e2rag.py``): an LLM error may quote a whole answer.
_MAX_REASON = 400


@dataclass
class EventPass:
    """The pass's ``graph_event`` nodes, ``participates`` / ``grounded_in`` edges, the failed
    (entity, chunk) steps as ``{"chunk_id", "reason"}``, and what it cost."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]
    failures: list[dict[str, str]]
    calls: int = 0
    waves: int = 0


@dataclass
class _Event:
    """An event as it grows; ``key`` is its node id, or a provisional key while only the walk
    that told it knows it (ids are given when the wave is applied, so they do not depend on
    which concurrent walk finished first)."""

    key: str
    title: str
    description: str
    date: Optional[str]
    source: str
    chunk: GraphNode  # the chunk that first told it
    k: int  # its number among the events first told in that chunk
    chunks: list[str]
    updates: int = 0
    #: ``{entity id: role}``; role "source" or None.
    entities: dict[str, Optional[str]] = field(default_factory=dict)

    def copy(self) -> "_Event":
        """A copy a walk may change without touching the wave's snapshot."""
        return replace(self, chunks=list(self.chunks), entities=dict(self.entities))


@dataclass
class _Update:
    """An answer's refinement of a listed event, with the description the walk saw (a wave
    mate may have changed it meanwhile)."""

    key: str
    chunk: GraphNode
    item: UpdatedEvent
    seen: str


@dataclass
class _New:
    """An answer's new event, under the provisional key the walk gave it."""

    key: str
    chunk: GraphNode
    item: NewEvent
    source_entities: list[str]


_Change = Union[_Update, _New]


@dataclass
class _Walk:
    """One entity's changes in its wave, in the order they happened, and its failed steps."""

    changes: list[_Change] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)
    calls: int = 0


# -- the pass -----------------------------------------------------------------------------------


async def extract_events(
    runner: "LLMRunner",
    prompt: "PromptLike",
    ego: EgoInput,
    *,
    wave_size: int = 8,
    max_chunks_per_entity: Optional[int] = None,
    min_mentions: int = 1,
    max_description_words: Optional[int] = 200,
    max_listed_events: Optional[int] = 20,
) -> EventPass:
    """The document's ``graph_event`` nodes and edges from one update call per (entity, chunk).

    A call lists at most ``max_listed_events`` of R_event (None: all, as the paper): the events
    already told in that chunk (what another entity's call found there, the likeliest to be told
    again), then the entity's own events before its neighbours', each group nearest to the chunk
    in the story first; the kept ones are shown in story order. Without a cap the list of a main
    character's ego network grows with the book and every call re-sends it (measured: about
    30,000 prompt tokens per call on three short novels with the scripted LLM).

    ``prompt`` receives ``existing_events`` (``format_events``) and ``input_text``. An event's
    description is what the latest answer made of it, capped at ``max_description_words``
    keeping the *last* words: the prompt asks for old and new details merged, so the newest
    details are at the end (None: no cap; the paper's final summary rewrite is not done).
    """
    if max_chunks_per_entity is not None and max_chunks_per_entity < 1:
        raise ValueError(f"max_chunks_per_entity must be at least 1, got {max_chunks_per_entity}")
    if max_description_words is not None and max_description_words < 1:
        raise ValueError(f"max_description_words must be at least 1, got {max_description_words}")
    if max_listed_events is not None and max_listed_events < 1:
        raise ValueError(f"max_listed_events must be at least 1, got {max_listed_events}")
    pass_ = _Pass(
        runner, prompt, ego, max_chunks_per_entity, max_description_words, max_listed_events
    )
    plan = waves(entity_order(ego, min_mentions), pass_.neighbours, wave_size)
    for wave in plan:
        snapshot = dict(pass_.events)
        results = await asyncio.gather(
            *(pass_.walk(entity, snapshot) for entity in wave), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result  # calls' errors are caught in the walk: this is cancellation or a bug
        for entity, walk in zip(wave, results):
            assert isinstance(walk, _Walk)
            pass_.apply(entity, walk)
    nodes, edges = pass_.emit()
    return EventPass(nodes, edges, pass_.failures, pass_.calls, len(plan))


class _Pass:
    """The state of one document's pass: the events so far, by key, and the failures."""

    def __init__(
        self,
        runner: "LLMRunner",
        prompt: "PromptLike",
        ego: EgoInput,
        max_chunks: Optional[int],
        max_words: Optional[int],
        max_listed: Optional[int] = None,
    ) -> None:
        self.runner = runner
        self.prompt = prompt
        self.ego = ego
        self.max_chunks = max_chunks
        self.max_words = max_words
        self.max_listed = max_listed
        self.neighbours = neighbour_sets(ego)
        self.names = _name_index(ego.entities)
        self.events: dict[str, _Event] = {}
        self.told_in: dict[str, int] = {}  # chunk id -> events first told there
        self.failures: list[dict[str, str]] = []
        self.calls = 0

    # walking (concurrent within a wave; reads the snapshot, writes only its own copies)

    async def walk(self, entity: GraphNode, snapshot: Mapping[str, _Event]) -> _Walk:
        """One entity's calls over its chunks, each seeing the walk's own earlier changes."""
        walk = _Walk()
        own: dict[str, _Event] = {}
        told: Counter[str] = Counter()  # new events this walk told, per chunk
        ego_ids = self.neighbours.get(entity.id, set()) | {entity.id}
        for chunk in entity_chunks(self.ego, entity.id, self.max_chunks):
            current = {**snapshot, **own}
            listed = self.listed(entity, chunk, current, ego_ids)
            walk.calls += 1
            try:
                answer = await self.runner.astructured(
                    self.prompt,
                    EventUpdateAnswer,
                    kind=EVENTGRAPH_UPDATE,
                    existing_events=format_events([(e.title, e.description) for e in listed]),
                    input_text=chunk.text,
                )
            except Exception as exc:  # noqa: BLE001 - any LLM error costs only this step
                walk.failures.append(_failure(entity, chunk, exc))
                continue
            by_title: dict[str, str] = {}
            for event in listed:
                by_title.setdefault(normalize_text(event.title), event.key)
            new_items = list(answer.new_events)
            for item in answer.updated_events:
                key = by_title.get(normalize_text(item.original_title))
                if key is None:  # not a listed event: keep it as a new one
                    new_items.append(
                        NewEvent(
                            title=item.title or item.original_title,
                            description=item.description,
                            date=item.date,
                        )
                    )
                    continue
                target = own.get(key) or current[key]
                change = _Update(key, chunk, item, target.description)
                own[key] = self.updated(target.copy(), change, entity.id)
                walk.changes.append(change)
            for item in new_items:
                key = f"new:{entity.id}:{len(walk.changes)}"
                change = _New(key, chunk, item, self.source_entities(entity, item))
                k = self.told_in.get(chunk.id, 0) + told[chunk.id]
                told[chunk.id] += 1
                own[key] = self.created(change, entity, k)
                walk.changes.append(change)
        return walk

    def listed(
        self,
        entity: GraphNode,
        chunk: GraphNode,
        current: Mapping[str, _Event],
        ego_ids: AbstractSet[str],
    ) -> list[_Event]:
        """R_event for one call, capped (``extract_events``), in story order."""
        known = [e for e in current.values() if ego_ids & e.entities.keys()]
        if self.max_listed is not None and len(known) > self.max_listed:
            at = chunk.pos[1]

            def nearest(event: _Event) -> tuple:
                elsewhere = chunk.id not in event.chunks
                neighbours_only = entity.id not in event.entities
                return (elsewhere, neighbours_only, abs(event.chunk.pos[1] - at),
                        _story_key(event))

            known = sorted(known, key=nearest)[: self.max_listed]
        return sorted(known, key=_story_key)

    # applying (after the wave, entity by entity in entity order)

    def apply(self, entity: GraphNode, walk: _Walk) -> None:
        """Replay one walk's changes on the shared events; new events get their ids here."""
        self.failures += walk.failures
        self.calls += walk.calls
        ids: dict[str, str] = {}
        for change in walk.changes:
            if isinstance(change, _Update):
                key = ids.get(change.key, change.key)
                self.events[key] = self.updated(self.events[key].copy(), change, entity.id)
            else:
                k = self.told_in.get(change.chunk.id, 0)
                self.told_in[change.chunk.id] = k + 1
                event = self.created(change, entity, k)
                event.key = make_id(
                    self.ego.doc_id,
                    NodeKind.GRAPH_EVENT,
                    (change.chunk.pos[0], change.chunk.pos[1], k),
                    event.title,
                )
                ids[change.key] = event.key
                self.events[event.key] = event

    def updated(self, event: _Event, change: _Update, entity_id: str) -> _Event:
        """``event`` refined by an update: new title and date if given, the merged description,
        the chunk, the count, the entity's link.

        When a wave mate changed the description after this walk saw it, the update does not
        replace the mate's text: what it added to the description it saw (the text after it,
        when it extends it, else all of it) is appended.
        """
        item = change.item
        event.title = item.title or event.title
        description = item.description
        if description and event.description != change.seen:
            added = description.removeprefix(change.seen).strip() or description
            description = f"{event.description} {added}"
        event.description = _cap(description or event.description, self.max_words)
        event.date = item.date or event.date
        if change.chunk.id not in event.chunks:
            event.chunks.append(change.chunk.id)
        event.updates += 1
        event.entities.setdefault(entity_id, None)
        return event

    def created(self, change: _New, entity: GraphNode, k: int) -> _Event:
        """A new event told in ``change.chunk``, linked to the walking entity and its source."""
        item = change.item
        event = _Event(
            key=change.key,
            title=item.title,
            description=_cap(item.description, self.max_words),
            date=item.date,
            source=item.source or (entity.name or ""),
            chunk=change.chunk,
            k=k,
            chunks=[change.chunk.id],
        )
        event.entities[entity.id] = None
        for source_id in change.source_entities:
            event.entities[source_id] = "source"
        return event

    def source_entities(self, entity: GraphNode, item: NewEvent) -> list[str]:
        """The entities the answer's source names (the walking entity when it names none)."""
        if not item.source:
            return [entity.id]
        return self.names.get(normalize_text(item.source), [])[:1]

    # output

    def emit(self) -> tuple[list[GraphNode], list[GraphEdge]]:
        """``graph_event`` nodes in story order, their ``participates`` and ``grounded_in``
        edges."""
        doc_id = self.ego.doc_id
        nodes: list[GraphNode] = []
        edges: list[GraphEdge] = []
        for event in sorted(self.events.values(), key=_story_key):
            chunks = sorted((self.ego.chunks[c] for c in event.chunks), key=lambda c: (c.pos, c.id))
            start = event.chunk.pos
            nodes.append(
                GraphNode(
                    id=event.key,
                    kind=NodeKind.GRAPH_EVENT,
                    text=f"{event.title}: {event.description}"
                    if event.description
                    else event.title,
                    doc_id=doc_id,
                    pos=(start[0], start[1], event.k),
                    span=event.chunk.span,
                    chunk_id=event.chunk.id,
                    name=event.title,
                    attrs={
                        "event_graph": "event",
                        "title": event.title,
                        "description": event.description,
                        "date": event.date,
                        "source": event.source,
                        "chunks": [c.id for c in chunks],
                        "updates": event.updates,
                    },
                )
            )
            edges += [
                GraphEdge(
                    source=entity_id,
                    target=event.key,
                    kind=EdgeKind.PARTICIPATES,
                    doc_id=doc_id,
                    role=role,
                    attrs={"event_graph": "extracted"},
                )
                for entity_id, role in event.entities.items()
            ]
            edges += [
                GraphEdge(source=event.key, target=c.id, kind=EdgeKind.GROUNDED_IN, doc_id=doc_id)
                for c in chunks
            ]
        return nodes, edges


def _story_key(event: _Event) -> tuple:
    """Events in the order they were first told (provisional ones after settled ones of the
    same chunk, in the walk's order)."""
    return (event.chunk.pos, event.chunk.id, event.k, event.key)


def _name_index(entities: Sequence[GraphNode]) -> dict[str, list[str]]:
    """Normalised name and aliases -> entity ids, in the entities' given order."""
    index: dict[str, list[str]] = {}
    for entity in entities:
        names = [entity.name or "", *entity.attrs.get("aliases", [])]
        for name in dict.fromkeys(normalize_text(n) for n in names if n):
            if name:
                index.setdefault(name, []).append(entity.id)
    return index


def _cap(text: str, max_words: Optional[int]) -> str:
    """The last ``max_words`` words of ``text`` (all of it without a cap)."""
    words = text.split()
    if max_words is None or len(words) <= max_words:
        return text
    return " ".join(words[-max_words:])


def _failure(entity: GraphNode, chunk: GraphNode, exc: Exception) -> dict[str, str]:
    """A failed (entity, chunk) step; the chunk keeps what other entities found in it."""
    name = entity.name or entity.id
    reason = f"event_graph update for {name} failed: {type(exc).__name__}: {exc}"
    if len(reason) > _MAX_REASON:
        reason = reason[: _MAX_REASON - 3] + "..."
    logger.warning("event graph: chunk %s, entity %s: %s", chunk.id, name, reason)
    return {"chunk_id": chunk.id, "reason": reason}
