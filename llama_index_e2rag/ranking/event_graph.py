"""E²GraphRAG's context assembly (paper 001, §3.2) over a read-only view of the event graph.

Framework-free (numpy and networkx): local entity alignment, global event matching, the
matched events' neighbourhood (KG_sub), reasoning paths between consecutive aligned entities
and the order evidence fills a budget in are plain functions of an ``EventGraphView``, so they
can be tested without llama-index. Choices the paper leaves open (``docs/design/
event_graph_plan.md`` §3.4):

- alignment puts name matches before cosine ones: an exact alias, then a shared short form
  ("Harry" ~ "Harry Potter", ``linking.name_variants``), then the cosine of the name's
  embedding with the entity's; embeddings of bare names are too weak to rank alone. The
  relevance order the paths follow is the named entities in the question's order, then the
  cosine-only ones, so e1→e2 joins the entities the question names, not a weak neighbour;
- paths run on the entity graph without event nodes (the paper's "temporary graph"): the
  ``co_mention`` links between entities and the cross-document ``same_entity`` links. A path
  is a fewest-hops path of at most ``max_path_length`` edges; among equally short ones the
  strongest (least total ``1 / weight``; a same-entity hop costs nothing) wins, so it follows
  the pairs mentioned together most often.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import Callable, Hashable, Iterable, Iterator, Literal, Optional, Sequence, TypeVar

import networkx as nx
import numpy as np

from llama_index_e2rag.extract.event_graph.entities import NameForms, NameIndex, name_forms
from llama_index_e2rag.graph.node_rows import ids_of
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode
from llama_index_e2rag.vectors.nearest import NearestRows, unit_rows

MatchKind = Literal["exact", "variant", "cosine"]
#: Equally short candidate paths compared per pair (a dense graph may have very many).
MAX_TIED_PATHS = 64
#: ``event_graph`` attrs of the entity-to-entity edges paths may use, and the hop they make.
LINK_KINDS = {"entity_link": "co_mention", "same_entity": "same_entity"}
_TIERS: tuple[MatchKind, ...] = ("exact", "variant", "cosine")
T = TypeVar("T")


@dataclass
class EventGraphView:
    """The event graph as arrays: entity rows, event rows, participants and the entity graph.

    ``entity_vectors`` / ``event_vectors`` are unit rows aligned with ``entities`` / ``events``
    (zeros for a node without a vector); ``participants[event id]`` lists the entities taking
    part, in entity row order; ``graph`` holds every entity and only entity-entity links.
    ``entities`` and ``events`` may be ``NodeRows`` (read when used); ``forms`` are the
    entities' ``NameForms`` when already known (a persisted view), else derived from them.
    ``entity_search`` / ``event_search`` find the rows nearest to a batch of query vectors
    (``vectors.nearest``: exact, or through a saved HNSW graph for a large store); exact
    searches of the matrices when not given.
    """

    entities: Sequence[GraphNode]
    entity_vectors: np.ndarray
    events: Sequence[GraphNode]
    event_vectors: np.ndarray
    participants: dict[str, list[str]]
    graph: nx.Graph
    forms: Optional[list[NameForms]] = field(default=None, repr=False)
    entity_search: Optional[NearestRows] = field(default=None, repr=False)
    event_search: Optional[NearestRows] = field(default=None, repr=False)
    _row: dict[str, int] = field(init=False, repr=False)
    names: NameIndex = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._row = {e: i for i, e in enumerate(ids_of(self.entities))}
        if self.forms is None:
            self.forms = [name_forms(e) for e in self.entities]
        self.names = NameIndex(self.forms)
        if self.entity_search is None:
            self.entity_search = NearestRows(self.entity_vectors)
        if self.event_search is None:
            self.event_search = NearestRows(self.event_vectors)

    def entity(self, entity_id: str) -> GraphNode:
        """The entity node of ``entity_id``."""
        return self.entities[self._row[entity_id]]

    def entity_row(self, entity_id: str) -> int:
        """The row of ``entity_id``."""
        return self._row[entity_id]


@dataclass(frozen=True)
class Aligned:
    """An entity row aligned with a query entity name (``query``: its position in the list)."""

    idx: int
    score: float
    match: MatchKind
    query: int


@dataclass(frozen=True)
class Matched:
    """An event row matched by a sub-query (``sub_query``: its position in the list)."""

    idx: int
    score: float
    sub_query: int


@dataclass(frozen=True)
class Path:
    """A reasoning path: entity ids from one aligned entity to the next, and each hop's kind
    (``co_mention`` or ``same_entity``); ``pair`` are the two ends' positions in the aligned
    list."""

    entities: tuple[str, ...]
    hops: tuple[str, ...]
    pair: tuple[int, int]


def align_entities(
    view: EventGraphView, names: Sequence[str], vectors: Sequence[Sequence[float]], top_k: int
) -> list[Aligned]:
    """Local entity alignment: each query entity name's ``top_k`` entities (an exact alias, then
    a shared short form, then by cosine), in relevance order: the entities a name names, in the
    names' order, then those found by cosine alone (best first); each entity once. The named
    entities are looked up (``NameIndex``) and the cosine ones found for all names in one
    search (``EventGraphView.entity_search``), so an alignment does not visit every entity in
    Python nor scan them once per name."""
    search = view.entity_search
    assert search is not None  # set by the view itself
    named = [view.names.rows(name) for name in names[: len(vectors)]]
    units = unit_rows(vectors)
    nearest = search.top(vectors, top_k, exclude=[list(rows) for rows in named])
    candidates: list[tuple[tuple[int, int, int, float, int], Aligned]] = []
    for q, (rows, unit, by_cosine) in enumerate(zip(named, units, nearest)):
        found = np.fromiter(rows, np.int64, len(rows))
        tiers = np.fromiter((_TIERS.index(m) for m in rows.values()), np.int64, len(rows))
        cosines = search.scores(unit, found)
        ranked = [(int(tiers[i]), -float(cosines[i]), int(found[i]))
                  for i in np.lexsort((found, -cosines, tiers))[:top_k]]
        ranked += [(_TIERS.index("cosine"), -score, row)
                   for row, score in by_cosine[: top_k - len(ranked)]]
        for tier, negative, row in ranked:
            by_name = 0 if tier < _TIERS.index("cosine") else 1
            key = (by_name, q if by_name == 0 else 0, tier, negative, row)
            candidates.append((key, Aligned(row, -negative, _TIERS[tier], q)))
    found: dict[int, Aligned] = {}
    for _, aligned in sorted(candidates, key=lambda c: c[0]):
        found.setdefault(aligned.idx, aligned)
    return list(found.values())


def match_events(
    view: EventGraphView, vectors: Sequence[Sequence[float]], top_k: int
) -> list[Matched]:
    """Global event matching: per sub-query, in order, its ``top_k`` events by cosine (best
    first, all sub-queries in one search); an event matched by an earlier sub-query is not
    repeated."""
    search = view.event_search
    assert search is not None  # set by the view itself
    found: dict[int, Matched] = {}
    for q, best in enumerate(search.top(vectors, top_k)):
        for row, score in best:
            found.setdefault(row, Matched(row, score, q))
    return list(found.values())


def kg_sub(view: EventGraphView, events: Sequence[Matched]) -> list[tuple[str, Matched]]:
    """The matched events' neighbouring entities (KG_sub), each once with the first event that
    reached it, in event order."""
    found: dict[str, Matched] = {}
    for matched in events:
        for entity_id in view.participants.get(view.events[matched.idx].id, []):
            found.setdefault(entity_id, matched)
    return list(found.items())


#: A link of the entity graph: its two entities (in the order first linked), cost and hop.
Link = tuple[str, str, float, str]


def entity_links(entity_ids: Iterable[str], edges: Iterable[GraphEdge]) -> list[Link]:
    """The links of the graph paths are searched on, in the order each pair was first linked,
    with the cheapest cost found for it: of ``edges`` only the entity-entity ``co_mention``
    (``entity_link``) and ``instance_of`` (``same_entity``) links, so no path passes an event
    or a mention. ``link_graph`` rebuilds the graph, neighbour order included (the order tied
    paths are listed in), from them alone."""
    known = set(entity_ids)
    kinds = {EdgeKind.CO_MENTION: "entity_link", EdgeKind.INSTANCE_OF: "same_entity"}
    links: dict[frozenset[str], Link] = {}
    for edge in edges:
        link = edge.attrs.get("event_graph")
        if kinds.get(edge.kind) != link or edge.source == edge.target:
            continue
        if edge.source not in known or edge.target not in known:
            continue
        weight = float(edge.attrs.get("weight") or 1.0)
        cost = 0.0 if link == "same_entity" else 1.0 / max(weight, 1e-9)
        pair = frozenset((edge.source, edge.target))
        old = links.get(pair)
        if old is None:
            links[pair] = (edge.source, edge.target, cost, LINK_KINDS[link])
        elif cost < old[2]:
            links[pair] = (old[0], old[1], cost, LINK_KINDS[link])
    return list(links.values())


def link_graph(entity_ids: Iterable[str], links: Iterable[Link]) -> nx.Graph:
    """The entity graph of ``entity_links``' links."""
    graph = nx.Graph()
    graph.add_nodes_from(entity_ids)
    for source, target, cost, hop in links:
        graph.add_edge(source, target, cost=cost, hop=hop)
    return graph


def shortest_path(
    graph: nx.Graph, source: str, target: str, max_path_length: int
) -> Optional[list[str]]:
    """The strongest fewest-hops path of at most ``max_path_length`` edges, or None.

    Among the tied paths the first ``MAX_TIED_PATHS`` that ``nx.all_shortest_paths`` lists are
    compared. They are found here by reading only the nodes on such paths (``_on_paths``);
    ``nx.all_shortest_paths`` searches everything nearer than the target, which through a
    main character grows with the story."""
    if source == target or source not in graph or target not in graph:
        return None
    try:
        hops = nx.shortest_path_length(graph, source, target)
    except nx.NetworkXNoPath:
        return None
    if hops > max_path_length:
        return None
    candidates = _tied_paths(graph, source, target, hops)

    def cost(path: list[str]) -> tuple[float, list[str]]:
        return sum(graph[a][b]["cost"] for a, b in zip(path, path[1:])), path

    return min(candidates, key=cost)


def _tied_paths(graph: nx.Graph, source: str, target: str, hops: int) -> Iterable[list[str]]:
    """The ``hops``-edge paths from ``source`` to ``target`` to compare: all of them when there
    are at most ``MAX_TIED_PATHS`` (the strongest does not depend on their order), else the
    first ``MAX_TIED_PATHS`` in ``nx.all_shortest_paths``'s order (``_listed_first``)."""
    if hops == 1:
        return [[source, target]]
    level = _on_paths(graph, source, target, hops)
    rings: list[list[str]] = [[] for _ in range(hops + 1)]
    for node, depth in level.items():
        rings[depth].append(node)
    pred = {source: []}
    count = {source: 1}
    for depth in range(1, hops + 1):
        nearer = set(rings[depth - 1])
        for node in rings[depth]:
            links = graph[node]
            if len(nearer) < len(links):
                pred[node] = [n for n in nearer if n in links]
            else:
                pred[node] = [n for n in links if n in nearer]
            count[node] = sum(count[n] for n in pred[node])
    if count[target] > MAX_TIED_PATHS:
        pred = _listed_first(graph, source, level, hops)
    return islice(_read_back(pred, source, target), MAX_TIED_PATHS)


def _listed_first(
    graph: nx.Graph, source: str, level: dict[str, int], hops: int
) -> dict[str, list[str]]:
    """Each node's neighbours one level nearer the source in ``nx.all_shortest_paths``'s
    order: the order a breadth-first search from ``source`` found them.

    The search visits only the nodes of ``level`` (those on a path). Dropping the others keeps
    the order: a kept node's neighbours one level nearer the source are all kept, so it is
    found from the same node, in the same turn, as by a search of everything within reach,
    which through a main character's links is most of a long story."""
    pred: dict[str, list[str]] = {source: []}
    frontier = [source]
    for depth in range(1, hops + 1):
        found: list[str] = []
        for node in frontier:
            for near in graph[node]:
                if level.get(near) != depth:
                    continue
                if near not in pred:
                    pred[near] = []
                    found.append(near)
                pred[near].append(node)
        frontier = found
    return pred


def _read_back(pred: dict[str, list[str]], source: str, target: str) -> Iterator[list[str]]:
    """The paths ``pred`` holds, read back from ``target`` depth first."""
    if target == source:
        yield [source]
        return
    for before in pred[target]:
        for path in _read_back(pred, source, before):
            yield [*path, target]


def _on_paths(graph: nx.Graph, source: str, target: str, hops: int) -> dict[str, int]:
    """Each node on a ``hops``-edge path from ``source`` to ``target``, with its distance from
    ``source``. The two ends' neighbourhoods grow in turn, the one with fewer links to read
    first, until they touch; the middle is then read back towards each end."""
    ahead, behind = [{source}], [{target}]
    seen_ahead, seen_behind = {source}, {target}
    while len(ahead) + len(behind) < hops + 1:
        grow_ahead = sum(map(graph.degree, ahead[-1])) <= sum(map(graph.degree, behind[-1]))
        levels, seen = (ahead, seen_ahead) if grow_ahead else (behind, seen_behind)
        ring = {near for node in levels[-1] for near in graph[node]} - seen
        seen |= ring
        levels.append(ring)
    # a node on a path in the last ring ahead has its next node in the last ring behind
    middle = ahead[-1]
    kept_ahead = [{n for n in middle if _touches(graph, n, behind[-1])}]
    for ring in reversed(ahead[:-1]):
        kept_ahead.append({n for n in ring if _touches(graph, n, kept_ahead[-1])})
    kept_behind = [{n for n in behind[-1] if _touches(graph, n, kept_ahead[0])}]
    for ring in reversed(behind[:-1]):
        kept_behind.append({n for n in ring if _touches(graph, n, kept_behind[-1])})
    level = {n: d for d, ring in enumerate(reversed(kept_ahead)) for n in ring}
    level.update((n, hops - d) for d, ring in enumerate(reversed(kept_behind)) for n in ring)
    return level


def _touches(graph: nx.Graph, node: str, ring: set[str]) -> bool:
    """Whether ``node`` links to a node of ``ring``, reading the shorter of the two."""
    links = graph[node]
    if len(links) <= len(ring):
        return any(near in ring for near in links)
    return any(other in links for other in ring)


def reasoning_paths(
    graph: nx.Graph, aligned: Sequence[str], max_path_length: int
) -> list[Path]:
    """Paths e1→e2, e2→e3, … between consecutive aligned entities (relevance order); a pair
    without a path within ``max_path_length`` edges has none, and a path found twice is kept
    once."""
    paths: list[Path] = []
    seen: set[tuple[str, ...]] = set()
    for i in range(len(aligned) - 1):
        found = shortest_path(graph, aligned[i], aligned[i + 1], max_path_length)
        if found is None or tuple(found) in seen or tuple(reversed(found)) in seen:
            continue
        seen.add(tuple(found))
        hops = tuple(graph[a][b]["hop"] for a, b in zip(found, found[1:]))
        paths.append(Path(tuple(found), hops, (i, i + 1)))
    return paths


def evidence_order(
    chunks: Sequence[T],
    events: Sequence[T],
    paths: Sequence[T],
    entities: Sequence[T],
    neighbours: Sequence[T],
    key: Callable[[T], Hashable],
) -> list[T]:
    """The order evidence fills a budget in (plan §3.4): the best chunk, the matched events,
    the paths, the aligned entities, the events' other neighbours (KG_sub), the other chunks;
    each item once (first place wins)."""
    ordered: dict[Hashable, T] = {}
    for item in [*chunks[:1], *events, *paths, *entities, *neighbours, *chunks[1:]]:
        ordered.setdefault(key(item), item)
    return list(ordered.values())
