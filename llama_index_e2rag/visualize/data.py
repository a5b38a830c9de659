"""What the story page shows, read from the graph: the axis, an overview, a query's subgraph, a
character's timeline and the evidence passages.

Framework-free reads of a ``GraphStore`` plus plain ``Evidence`` records (``evidence_from_results``
turns a retriever's ``NodeWithScore`` list into them), so ``E2RAGIndex.visualize`` and
``e2rag show --html`` share it and tests need no index. Every list is bounded and says when it
was cut, so a novel's page stays small.
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Optional, Sequence

from llama_index_e2rag.context.keys import EVIDENCE_KEY, POS_KEY
from llama_index_e2rag.context.evidence import format_position
from llama_index_e2rag.errors import EntityLookupError
from llama_index_e2rag.extract.characters import characters
from llama_index_e2rag.extract.linking import name_variants
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind, Position, normalize_text
from llama_index_e2rag.context.story_position import StoryPositions
from llama_index_e2rag.context.timeline import entity_timeline
from llama_index_e2rag.extract.event_graph.entities import fused_entities
from llama_index_e2rag.visualize.layout import StoryAxis, bin_counts, story_axis

#: Graph nodes drawn for one query, edges among them, entries of a timeline, main characters'
#: lanes, characters of text per passage or hover title: a novel's page stays a few hundred KB.
MAX_NODES = 150
MAX_EDGES = 400
MAX_TIMELINE = 300
MAX_CHARACTERS = 6
MAX_PASSAGE_CHARS = 1200
MAX_TITLE_CHARS = 300
#: Slices of the story the overview counts mentions and events in.
OVERVIEW_BINS = 80
#: Edges of the query's subgraph (``grounded_in`` would point at sentences not drawn).
SUBGRAPH_EDGES = (
    EdgeKind.PARTICIPATES,
    EdgeKind.CO_MENTION,
    EdgeKind.CO_EVENT,
    EdgeKind.NEXT,
    EdgeKind.RELATION,
    EdgeKind.INSTANCE_OF,
    EdgeKind.RST,
)
#: Node kinds a passage's own graph is made of, when its retriever names no graph nodes.
_GROUNDED_KINDS = (NodeKind.MENTION, NodeKind.EVENT)


@dataclass(frozen=True)
class Evidence:
    """One retrieved passage: its rank, where it sits, its text and the graph nodes behind it."""

    rank: int
    node_id: str
    doc_id: str
    pos: Optional[Position]
    text: str
    score: Optional[float] = None
    chunk_id: Optional[str] = None
    span: Optional[tuple[int, int]] = None
    source: Optional[str] = None
    graph_node_ids: tuple[str, ...] = ()
    #: The position as the CLI says it ("peter_rabbit.txt · 29% through the story"), set by
    #: ``collect_page`` from the graph.
    where: Optional[str] = None

    @property
    def position(self) -> str:
        if self.where is not None:
            return self.where
        return format_position(self.pos) if self.pos is not None else "position unknown"


@dataclass(frozen=True)
class Mark:
    """A graph node placed on the story axis: ``x`` in [0, 1], ``lane`` its row label, ``ranks``
    the evidence passages it belongs to."""

    node_id: str
    kind: str
    lane: str
    x: float
    pos: Position
    label: str
    text: str
    ranks: tuple[int, ...] = ()
    #: The position as the CLI says it (``StoryPositions.describe``).
    where: Optional[str] = None
    #: A timeline entry's list heading (its chapter, with the document's name when the timeline
    #: spans several; None before a document's first heading) and its share of the document
    #: ("42%"): the list reads chapter by chapter, as ``e2rag timeline`` does.
    chapter: Optional[str] = None
    share: Optional[str] = None

    @property
    def position(self) -> str:
        return self.where if self.where is not None else format_position(self.pos)


@dataclass(frozen=True)
class Link:
    """An edge between two drawn marks."""

    source: str
    target: str
    kind: str
    role: Optional[str] = None


@dataclass(frozen=True)
class Lane:
    """A main character's mentions counted per slice of the story."""

    name: str
    total: int
    counts: tuple[int, ...]


@dataclass(frozen=True)
class Overview:
    """Mentions and events per slice of the story, and the main characters' lanes."""

    mentions: tuple[int, ...]
    events: tuple[int, ...]
    characters: tuple[Lane, ...]


@dataclass(frozen=True)
class TimelineView:
    """A character's entries in story order; ``source`` says where they come from."""

    name: str
    source: str
    marks: tuple[Mark, ...]
    total: int


@dataclass
class StoryPage:
    """Everything one page shows; ``notes`` say what was cut to keep it small."""

    axis: StoryAxis
    overview: Overview
    query: Optional[str] = None
    mode: Optional[str] = None
    evidence: tuple[Evidence, ...] = ()
    marks: tuple[Mark, ...] = ()
    links: tuple[Link, ...] = ()
    timeline: Optional[TimelineView] = None
    notes: list[str] = field(default_factory=list)


def evidence_from_results(results: Iterable[Any]) -> list[Evidence]:
    """A retriever's ``NodeWithScore`` list as ``Evidence``, in its rank order (reads the
    metadata every retriever sets: ``pos``, ``doc_id``, ``chunk_id``, ``graph_nodes``)."""
    found = []
    for rank, result in enumerate(results, start=1):
        node = result.node
        meta = node.metadata
        pos = meta.get(POS_KEY)
        span = meta.get("span") or (node.start_char_idx, node.end_char_idx)  # chunks: their own
        found.append(
            Evidence(
                rank=rank,
                node_id=node.node_id,
                doc_id=str(meta.get("doc_id", node.ref_doc_id or "")),
                pos=tuple(int(p) for p in pos) if pos else None,  # type: ignore[arg-type]
                text=node.get_content(),
                score=result.score,
                chunk_id=meta.get("chunk_id"),
                span=(int(span[0]), int(span[1])) if span and None not in span[:2] else None,
                source=meta.get("file_name") or meta.get("title"),
                graph_node_ids=tuple(str(i) for i in meta.get(EVIDENCE_KEY) or ()),
            )
        )
    return found


def collect_page(
    graph: GraphStore,
    *,
    query: Optional[str] = None,
    evidence: Sequence[Evidence] = (),
    entity: Optional[str] = None,
    mode: Optional[str] = None,
) -> StoryPage:
    """The page's data: always the overview; the query's subgraph and evidence when a query was
    asked; ``entity``'s timeline when named (``EntityLookupError`` when nothing matches)."""
    positions = StoryPositions(graph)
    axis = _axis(graph, positions)
    page = StoryPage(axis=axis, overview=_overview(graph, axis), query=query, mode=mode)
    if query is not None:
        page.evidence = tuple(_clip_evidence(e, positions) for e in evidence)
        page.marks, page.links = _subgraph(graph, axis, evidence, page.notes, positions)
    if entity is not None:
        page.timeline = _timeline(graph, axis, entity, positions)
        if page.timeline.total > len(page.timeline.marks):
            page.notes.append(
                f"timeline: showing the first {len(page.timeline.marks)} of "
                f"{page.timeline.total} entries"
            )
    return page


def _axis(graph: GraphStore, positions: StoryPositions) -> StoryAxis:
    """Documents by doc order, each as long as its chunks reach (or its farthest node)."""
    lengths: dict[str, int] = {}
    for chunk in graph.nodes(NodeKind.CHUNK):
        end = chunk.span[1] if chunk.span else chunk.pos[1] + len(chunk.text)
        lengths[chunk.doc_id] = max(lengths.get(chunk.doc_id, 0), end)
    orders = graph.doc_orders()
    missing = [doc_id for doc_id in orders if doc_id not in lengths]
    for doc_id in missing:
        lengths[doc_id] = max(
            (n.pos[1] + len(n.text) for n in graph.nodes(doc_id=doc_id)), default=1
        )
    axis = story_axis((order, doc_id, lengths[doc_id]) for doc_id, order in orders.items())
    chapters = []
    for doc_id, order in orders.items():
        found = positions.story(doc_id)  # read once for the axis and every position
        if found is not None:
            chapters += [(axis.x((order, start)), label) for start, label in found.headings]
    return replace(axis, chapters=tuple(sorted(chapters)))


def _overview(graph: GraphStore, axis: StoryAxis) -> Overview:
    mentions = graph.nodes(NodeKind.MENTION)
    events = graph.nodes(NodeKind.EVENT) + graph.nodes(NodeKind.GRAPH_EVENT)
    return Overview(
        mentions=tuple(bin_counts((axis.x(m.pos) for m in mentions), OVERVIEW_BINS)),
        events=tuple(bin_counts((axis.x(e.pos) for e in events), OVERVIEW_BINS)),
        characters=tuple(_character_lanes(mentions, axis)),
    )


def _mention_name(mention: GraphNode) -> str:
    return mention.name or mention.text


def _character_lanes(mentions: list[GraphNode], axis: StoryAxis) -> list[Lane]:
    """The most mentioned characters (``extract.characters``), one lane each, named by the
    fullest name the story gives them; a form left undecided between several is no lane."""
    people, _ = characters(mentions)
    ranked = sorted(
        (p for p in people if not p.candidates),
        key=lambda p: (-sum(p.counts.values()), normalize_text(p.name)),
    )
    return [
        Lane(
            name=person.name,
            total=sum(person.counts.values()),
            counts=tuple(bin_counts((axis.x(m.pos) for m in person.mentions), OVERVIEW_BINS)),
        )
        for person in ranked[:MAX_CHARACTERS]
    ]


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def _around(sentence: str, name: str, limit: int = MAX_TITLE_CHARS) -> str:
    """The part of a long sentence around ``name``, so a clipped entry still shows it."""
    sentence = " ".join(sentence.split())
    at = sentence.lower().find(name.lower())
    if len(sentence) <= limit or at < 0:
        return _clip(sentence, limit)
    start = max(0, min(at - limit // 2, len(sentence) - limit))
    text = sentence[start : start + limit]
    return ("\u2026" if start else "") + text + ("\u2026" if start + limit < len(sentence) else "")


def _clip_evidence(evidence: Evidence, positions: StoryPositions) -> Evidence:
    """The passage clipped to the page's size, its position said as the CLI says it."""
    where = (
        positions.describe(evidence.doc_id, evidence.pos[1], evidence.source)
        if evidence.pos is not None
        else f"{evidence.source or evidence.doc_id} · position unknown"
    )
    return replace(evidence, text=_clip(evidence.text, MAX_PASSAGE_CHARS), where=where)


def _grounded_nodes(
    graph: GraphStore, evidence: Evidence, cache: dict[str, list[GraphNode]]
) -> list[GraphNode]:
    """A passage's mentions and events: those of its chunk inside its span (the narrative mode
    returns sentence passages and names no graph nodes itself)."""
    if evidence.chunk_id is None:
        return []
    if evidence.doc_id not in cache:
        cache[evidence.doc_id] = [
            n for kind in _GROUNDED_KINDS for n in graph.nodes(kind, evidence.doc_id)
        ]
    start, end = evidence.span if evidence.span is not None else (None, None)
    return [
        n
        for n in cache[evidence.doc_id]
        if n.chunk_id == evidence.chunk_id
        and (start is None or end is None or start <= n.pos[1] < end)
    ]


def _subgraph(
    graph: GraphStore,
    axis: StoryAxis,
    evidence: Sequence[Evidence],
    notes: list[str],
    positions: StoryPositions,
) -> tuple[tuple[Mark, ...], tuple[Link, ...]]:
    """The retrieved passages' graph nodes (best-ranked passages first when cut) as marks, and
    the edges among them."""
    ranks: dict[str, list[int]] = {}
    nodes: dict[str, GraphNode] = {}
    cache: dict[str, list[GraphNode]] = {}
    for item in sorted(evidence, key=lambda e: e.rank):
        named = graph.get_nodes(item.graph_node_ids) if item.graph_node_ids else []
        for node in named or _grounded_nodes(graph, item, cache):
            if node.kind in (NodeKind.CHUNK, NodeKind.PASSAGE):
                continue  # the passages are drawn from the evidence itself
            nodes.setdefault(node.id, node)
            ranks.setdefault(node.id, []).append(item.rank)
    kept = list(nodes.values())[:MAX_NODES]
    if len(nodes) > len(kept):
        notes.append(
            f"subgraph: showing {len(kept)} of {len(nodes)} graph nodes (best passages first)"
        )
    lanes = _lanes(kept)
    marks = tuple(
        Mark(
            node_id=n.id,
            kind=n.kind.value,
            lane=lanes[n.id],
            x=axis.x(n.pos),
            pos=n.pos,
            label=_clip(n.name or n.text, 40),
            text=_clip(_node_text(n), MAX_TITLE_CHARS),
            ranks=tuple(dict.fromkeys(ranks[n.id])),
            where=positions.describe(n.doc_id, n.pos[1]),
        )
        for n in sorted(kept, key=lambda n: (n.pos, n.id))
    )
    edges = graph.subgraph_edges([m.node_id for m in marks], SUBGRAPH_EDGES)
    if len(edges) > MAX_EDGES:
        notes.append(f"subgraph: showing {MAX_EDGES} of {len(edges)} edges")
    links = tuple(
        Link(e.source, e.target, e.kind.value, e.role)
        for e in sorted(edges, key=lambda e: (_EDGE_ORDER[e.kind], e.source, e.target))[:MAX_EDGES]
    )
    return marks, links


#: Which edges survive a cut first: what happened to whom before who was near whom.
_EDGE_ORDER = {kind: i for i, kind in enumerate(SUBGRAPH_EDGES)}


def _node_text(node: GraphNode) -> str:
    """What a hover shows: an event's clause, a mention's description or sentence."""
    if node.kind == NodeKind.MENTION:
        described = node.attrs.get("description")
        return f"{node.name or node.text}: {described}" if described else node.name or node.text
    return node.text


def _lanes(nodes: Sequence[GraphNode]) -> dict[str, str]:
    """A lane per character for the subgraph's most frequent mention names, one for the other
    mentions, and one per other node kind."""
    mentions = [n for n in nodes if n.kind == NodeKind.MENTION]
    counts = Counter(normalize_text(_mention_name(m)) for m in mentions)
    top = {name for name, _ in counts.most_common(MAX_CHARACTERS) if counts[name] > 1}
    names: dict[str, str] = {}
    lanes = {}
    for node in nodes:
        if node.kind != NodeKind.MENTION:
            lanes[node.id] = node.kind.value.replace("_", " ")
            continue
        key = normalize_text(_mention_name(node))
        if key in top:
            lanes[node.id] = names.setdefault(key, f"mention: {_mention_name(node)}")
        else:
            lanes[node.id] = "mention: others"
    return lanes


def _timeline(
    graph: GraphStore, axis: StoryAxis, name: str, positions: StoryPositions
) -> TimelineView:
    """``entity_timeline`` when the store has the event graph's fused entities; otherwise the
    mentions carrying the name, in story order."""
    if fused_entities(graph):
        found = entity_timeline(graph, name)
        several = len(found.entity.doc_ids) > 1
        marks = [
            Mark(
                node_id=entry.node_id,
                kind=entry.kind,
                lane=entry.kind,
                x=axis.x(entry.pos),
                pos=entry.pos,
                label=_clip(entry.text, 40),
                text=_clip(entry.text, MAX_TITLE_CHARS)
                + (f" [with {', '.join(entry.participants)}]" if entry.participants else ""),
                where=entry.position,
                chapter=_heading(positions, entry.doc_id, entry.chapter, several),
                share=entry.where,
            )
            for entry in found.entries
        ]
        return TimelineView(
            name=found.entity.name,
            source="event graph (fused entity: its mentions and events)",
            marks=tuple(marks[:MAX_TIMELINE]),
            total=len(marks),
        )
    mentions = graph.nodes(NodeKind.MENTION)
    hits = [m for m in mentions if _names_match(name, m)]
    if not hits:
        raise _no_mentions(name, mentions)
    several = len({m.doc_id for m in hits}) > 1
    marks = []
    for m in sorted(hits, key=lambda m: (m.pos, m.id)):
        chapter, percent = positions.place(m.doc_id, m.pos[1])
        marks.append(
            Mark(
                node_id=m.id,
                kind="mention",
                lane="mention",
                x=axis.x(m.pos),
                pos=m.pos,
                label=_clip(_mention_name(m), 40),
                text=_around(str(m.attrs.get("sentence_text") or _node_text(m)), _mention_name(m)),
                where=positions.describe(m.doc_id, m.pos[1]),
                chapter=_heading(positions, m.doc_id, chapter, several),
                share=f"{percent:.0f}%" if percent is not None else None,
            )
        )
    return TimelineView(
        name=name,
        source="mentions of this name (build the event graph for fused entities and events)",
        marks=tuple(marks[:MAX_TIMELINE]),
        total=len(marks),
    )


def _heading(
    positions: StoryPositions, doc_id: str, chapter: Optional[str], several: bool
) -> Optional[str]:
    """The list heading of an entry in ``chapter`` of ``doc_id``: the chapter, led by the
    document's name when the timeline spans several documents (their chapters repeat)."""
    if not several:
        return chapter
    story = positions.story(doc_id)
    source = (story.source if story else None) or doc_id
    return f"{source} \u00b7 {chapter}" if chapter else source


def _names_match(name: str, mention: GraphNode) -> bool:
    """The name, or a short form of it, names the mention ("Peter" ~ "Peter Rabbit")."""
    entity_type = mention.attrs.get("entity_type")
    asked = set(name_variants(name, entity_type))
    told = set(name_variants(_mention_name(mention), entity_type))
    return normalize_text(name) in told or normalize_text(_mention_name(mention)) in asked


def _no_mentions(name: str, mentions: list[GraphNode]) -> EntityLookupError:
    names = sorted({normalize_text(_mention_name(m)) for m in mentions})
    close = difflib.get_close_matches(normalize_text(name), names, n=5, cutoff=0.6)
    hint = f"; closest: {', '.join(close)}" if close else ""
    return EntityLookupError(f"no mention named {name!r} in the story{hint}")
