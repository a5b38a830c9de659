"""E²GraphRAG's entity layer (paper §3.1, plan §3.1, §3.3): mentions -> name groups -> entities.

The paper merges LightRAG entities of one type whose description embeddings have cosine above
θ_merge. With small embedding models, different people who share a surname score as high as one
person under two names, so fusion here is guarded by names: a pair merges only when its names are
compatible (or, with ``require_name_overlap=False``, merely not in conflict) and its cosine exceeds
θ, and no merge ever joins two names in conflict. Pure functions over ``GraphNode``s; the builder
embeds the groups' texts and writes the result. How readers find the layer's entities and look
their names up is ``entities``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Iterator, Optional, Sequence

import numpy as np

from llama_index_e2rag.extract.characters import character_node, characters, entity_node
from llama_index_e2rag.extract.event_graph.conflicts import SetConflicts
from llama_index_e2rag.extract.event_graph.entities import exact_keys
from llama_index_e2rag.extract.gender import FEMALE_TITLES, MALE_TITLES
from llama_index_e2rag.extract.linking import name_parts
from llama_index_e2rag.schema import (
    EdgeKind,
    GraphEdge,
    GraphNode,
    normalize_text,
    sort_by_position,
)

_UNKNOWN_TYPES = frozenset({"", "concept"})
_DIGITS = 6  # cosine precision that orders merges
#: Rows of the similarity matrix computed at once: 256 rows of 50,000 names are 50 MB.
_BLOCK = 256
#: Name pairs whose cosines are computed at once: each side's rows are copied, so 65,536 pairs
#: took 200 MB and were the peak of a million-word build's E²GraphRAG step; 4,096 take 12 MB.
_BATCH = 4096


def type_key(entity_type: Optional[str]) -> Optional[str]:
    """Comparable form of an entity type; ``None`` when unknown (missing or "concept")."""
    key = normalize_text(entity_type or "")
    return None if key in _UNKNOWN_TYPES else key


def types_agree(a: Optional[str], b: Optional[str]) -> bool:
    """Known types must be equal; an unknown type agrees with anything."""
    return _keys_agree(type_key(a), type_key(b))


def _keys_agree(a: Optional[str], b: Optional[str]) -> bool:
    return a is None or b is None or a == b


@dataclass
class Group:
    """LightRAG's V0 entity: one document's mentions of one exact name and type, in story order."""

    name: str
    entity_type: Optional[str]
    mentions: list[GraphNode] = field(default_factory=list)

    @property
    def descriptions(self) -> list[str]:
        """The mentions' distinct descriptions, in story order (offline mentions have none)."""
        seen: list[str] = []
        for mention in self.mentions:
            text = str(mention.attrs.get("description") or "").strip()
            if text and text not in seen:
                seen.append(text)
        return seen

    @property
    def description(self) -> str:
        """The descriptive text the paper compares: the descriptions joined, else the name."""
        return " ".join(self.descriptions) or self.name

    @property
    def text(self) -> str:
        """What to embed for fusion: "{name}: {descriptions}", or the name without any."""
        described = " ".join(self.descriptions)
        return f"{self.name}: {described}" if described else self.name

    @property
    def nominal(self) -> bool:
        """A person named by what they are ("the old servant"), not by a name."""
        return bool(self.mentions) and bool(self.mentions[0].attrs.get("nominal"))

    @cached_property
    def parts(self) -> tuple[tuple[str, ...], frozenset[str], bool, Optional[str]]:
        """Core tokens, genders its titles mark ("m"/"f"), whether it is a person's name, and
        its type key (computed once: fusion compares a group with many others)."""
        core, titles, person = name_parts(self.name, self.entity_type)
        genders = {"m" for t in titles if t in MALE_TITLES} | {
            "f" for t in titles if t in FEMALE_TITLES
        }
        return tuple(core), frozenset(genders), person, type_key(self.entity_type)


def mention_groups(mentions: Iterable[GraphNode]) -> list[Group]:
    """One document's mentions grouped by normalised name and type, in order of first appearance.

    The group's name is its first surface form. Mentions without a usable name are left out.
    """
    groups: dict[tuple[str, Optional[str]], Group] = {}
    for mention in sort_by_position(mentions):
        name = (mention.name or mention.text).strip()
        entity_type = mention.attrs.get("entity_type")
        key = (normalize_text(name), type_key(entity_type))
        if not key[0]:
            continue
        if key not in groups:
            groups[key] = Group(name=name, entity_type=entity_type)
        groups[key].mentions.append(mention)
    return list(groups.values())


def ambiguous_tokens(groups: Sequence[Group]) -> frozenset[str]:
    """Single name tokens that are the first or last name of two different longer person names
    of the document ("dursley" beside Vernon and Petunia Dursley), as ``linking._identity_keys``."""
    owners: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for group in groups:
        core, _, person, _ = group.parts
        if len(core) > 1 and person:
            owners[core[0]].add(core)
            owners[core[-1]].add(core)
    return frozenset(token for token, names in owners.items() if len(names) > 1)


def in_conflict(a: Group, b: Group, ambiguous: frozenset[str]) -> bool:
    """Whether two names cannot be one entity, whatever their embeddings say (plan §3.3).

    Known types differ, or one names a person by a noun phrase ("his sister") and the other does
    not; titles of different genders (Mr vs Mrs); two multi-word person names that
    share a name but not the first one ("Vernon Dursley" / "Petunia Dursley"; disjoint epithets
    such as "the boy who lived" / "Harry Potter" are left to the embeddings); or one is an
    ambiguous single token ("Dursley") and the other a different name (the ambiguous token's own
    forms, "Dursley" / "Mr. Dursley", stay joinable).
    """
    (core_a, gender_a, person_a, type_a), (core_b, gender_b, person_b, type_b) = a.parts, b.parts
    if not _keys_agree(type_a, type_b) or a.nominal != b.nominal:
        return True  # a person named by a noun phrase joins only others ("the old man")
    if gender_a and gender_b and not gender_a & gender_b:
        return True
    if (
        person_a
        and person_b
        and len(core_a) > 1
        and len(core_b) > 1
        and core_a[0] != core_b[0]
        and set(core_a) & set(core_b)
    ):
        return True
    return core_a != core_b and any(
        len(core) == 1 and core[0] in ambiguous for core in (core_a, core_b)
    )


def compatible(a: Group, b: Group, ambiguous: frozenset[str]) -> bool:
    """Fusion candidates by name: not in conflict, and one's core tokens contain the other's
    ("Miss Granger" ~ "Hermione Granger")."""
    core_a, core_b = set(a.parts[0]), set(b.parts[0])
    if not core_a or not core_b or in_conflict(a, b, ambiguous):
        return False
    return core_a <= core_b or core_b <= core_a


def _unit(vectors: np.ndarray) -> np.ndarray:
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def _name_pairs(groups: Sequence[Group]) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs i < j whose core tokens nest (one's all in the other's): a superset of the
    compatible pairs. Each group is paired only with the holders of its rarest token, since a
    group containing it must hold that token; pairing every two holders of each token grew with
    the square of a common word's groups ("door", "man") and held millions of pairs on a
    million-word text."""
    holders: dict[str, list[int]] = defaultdict(list)
    cores = [frozenset(group.parts[0]) for group in groups]
    for k, core in enumerate(cores):
        for token in core:
            holders[token].append(k)
    pairs: set[tuple[int, int]] = set()
    for k, core in enumerate(cores):
        if not core:
            continue
        rarest = min(core, key=lambda token: (len(holders[token]), token))
        for other in holders[rarest]:
            if other != k and core <= cores[other]:
                pairs.add((min(k, other), max(k, other)))
    if not pairs:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    first, second = np.array(sorted(pairs), dtype=np.int64).T
    return first, second


def _similar_pairs(unit: np.ndarray, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs i < j with cosine > θ, computed by row blocks (bounds memory on long books)."""
    found_i, found_j = [], []
    for start in range(0, len(unit), _BLOCK):
        rows, cols = np.nonzero(unit[start : start + _BLOCK] @ unit.T > theta)
        rows += start
        keep = cols > rows
        found_i.append(rows[keep])
        found_j.append(cols[keep])
    return np.concatenate(found_i), np.concatenate(found_j)


def _candidates(
    groups: Sequence[Group],
    vectors: np.ndarray,
    theta: float,
    require_name_overlap: bool,
    ambiguous: frozenset[str],
) -> list[tuple[int, int]]:
    """Fusion candidates, most similar first; cosines are rounded so that float noise does not
    decide between near-equal pairs (the indices do)."""
    unit = _unit(vectors)
    if require_name_overlap:
        first, second = _name_pairs(groups)
    else:
        first, second = _similar_pairs(unit, theta)
    cosines = np.concatenate(
        [
            np.einsum("ij,ij->i", unit[first[k : k + _BATCH]], unit[second[k : k + _BATCH]])
            for k in range(0, len(first), _BATCH)
        ]
        or [np.zeros(0, dtype=np.float32)]
    ).round(_DIGITS)
    above = cosines > theta
    first, second, cosines = first[above], second[above], cosines[above]
    order = np.lexsort((second, first, -cosines))
    fits = compatible if require_name_overlap else _not_in_conflict
    return [
        (i, j)
        for i, j in zip(first[order].tolist(), second[order].tolist(), strict=True)
        if fits(groups[i], groups[j], ambiguous)
    ]


def _not_in_conflict(a: Group, b: Group, ambiguous: frozenset[str]) -> bool:
    return not in_conflict(a, b, ambiguous)


def fuse(
    groups: Sequence[Group],
    vectors: np.ndarray,
    theta_merge: float,
    require_name_overlap: bool = True,
) -> list[list[int]]:
    """Sets of group indices to fuse, each sorted, in order of their first group.

    ``vectors`` has one row per group (the embedding of ``Group.text``). Candidate pairs are
    compatible names (any pair not in conflict when ``require_name_overlap`` is False) with cosine
    above θ; they are joined most similar first (ties by index), and a join is skipped when any
    two groups across the two sets are in conflict, so "Mr. Dursley" cannot chain Vernon and
    Petunia together (checked on each set's pooled features, ``conflicts.SetConflicts``, not pair
    by pair).
    """
    if len(vectors) != len(groups):
        raise ValueError(f"{len(vectors)} vectors for {len(groups)} groups")
    if not groups:
        return []
    ambiguous = ambiguous_tokens(groups)
    root = list(range(len(groups)))
    members = {i: [i] for i in range(len(groups))}
    pooled = {i: SetConflicts.of(group, ambiguous) for i, group in enumerate(groups)}

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    for i, j in _candidates(groups, vectors, theta_merge, require_name_overlap, ambiguous):
        ri, rj = find(i), find(j)
        if ri == rj or pooled[ri].clashes(pooled[rj]):
            continue
        keep, gone = min(ri, rj), max(ri, rj)
        root[gone] = keep
        pooled[keep].absorb(pooled.pop(gone))
        joined, added = members[keep], members.pop(gone)
        if len(joined) < len(added):  # extend the longer list: joins stay linear overall
            joined, added = added, joined
        joined.extend(added)
        members[keep] = joined
    return sorted(sorted(m) for m in members.values())


def _entity_node(doc_id: str, members: Sequence[Group]) -> GraphNode:
    """The fused entity: named after its most described member, placed at its first mention."""
    representative = max(members, key=lambda g: len(g.description))  # first on ties
    descriptions: list[str] = []
    for group in [representative, *members]:
        descriptions += [d for d in group.descriptions if d not in descriptions]
    description = " ".join(descriptions)
    first = sort_by_position(m for g in members for m in g.mentions)[0]
    known = [g.entity_type for g in members if type_key(g.entity_type)]
    return entity_node(doc_id, representative.name, first, {
        "event_graph": "entity",
        "entity_type": known[0] if known else members[0].entity_type,
        "aliases": [g.name for g in members],
        "mentions": sum(len(g.mentions) for g in members),
        "description": description,
    })


def entity_layer(
    doc_id: str,
    groups: Sequence[Group],
    events: Iterable[GraphNode],
    edges: Iterable[GraphEdge],
    vectors: np.ndarray,
    theta_merge: float,
    require_name_overlap: bool = True,
) -> tuple[list[GraphNode], "EntityEdges"]:
    """One document's entity nodes (story order) and their edges, all owned by ``doc_id``.

    Mentions that name a person become the document's ``characters`` (by name rules); the other
    ``groups`` (``mention_groups`` of the document's mentions, ``vectors`` their embeddings) are
    fused (see ``fuse``). ``edges`` may be any edges of the document: its ``participates``
    edges from a grouped mention to one of ``events`` are lifted to the mention's entity, once
    per entity and event, and its ``co_mention`` edges between mentions of two entities to one
    ``co_mention`` edge (earlier -> later entity) weighted by their number. Every mention also
    gets an ``instance_of`` edge to its entity.

    ``events`` and ``edges`` are read once, as they come (pages of a store), and only what the
    entities keep of them is held; the edges are returned as they are made, so a caller writing
    them a page at a time never holds a million-word document's edges at once.
    """
    people, rest = characters([m for group in groups for m in group.mentions])
    not_people = {m.id for m in rest}
    kept = [k for k, group in enumerate(groups) if group.mentions[0].id in not_people]
    others = [groups[k] for k in kept]
    fused = fuse(others, np.asarray(vectors)[kept], theta_merge, require_name_overlap)
    built = [
        (
            _entity_node(doc_id, [others[i] for i in s]),
            [m.id for i in s for m in others[i].mentions],
        )
        for s in fused
    ]
    built += [(character_node(doc_id, p), [m.id for m in p.mentions]) for p in people]
    built.sort(key=lambda pair: (pair[0].pos, pair[0].id))
    nodes = [entity for entity, _ in built]
    row_of = {mention_id: k for k, (_, ids) in enumerate(built) for mention_id in ids}
    event_order = {
        event_id: k for k, (_, event_id) in enumerate(sorted((e.pos, e.id) for e in events))
    }
    weights: dict[tuple[int, int], int] = defaultdict(int)
    lifted: dict[int, set[str]] = defaultdict(set)
    for edge in edges:
        if edge.kind == EdgeKind.PARTICIPATES:
            row = row_of.get(edge.source)
            if row is not None and edge.target in event_order:
                lifted[row].add(edge.target)
        elif edge.kind == EdgeKind.CO_MENTION and "event_graph" not in edge.attrs:
            a, b = row_of.get(edge.source), row_of.get(edge.target)
            if a is not None and b is not None and a != b:
                weights[(min(a, b), max(a, b))] += 1
    return nodes, EntityEdges(doc_id, nodes, row_of, weights, lifted, event_order)


@dataclass(frozen=True)
class EntityEdges:
    """An entity layer's edges, made afresh on every iteration from the few rows they come
    from, so they are never held whole and may be read twice (the LLM pass weighs chunks by
    them before they are written).

    ``instance_of`` mention -> entity; ``co_mention`` entity -> later entity, weight = the
    mention-level ``co_mention`` edges between them (lifting the extraction's own co-occurrence
    keeps its scope — a sentence for the grounded parse, a chunk for the LLM; pairing every
    entity of a chunk made 47,000 links from 658 entities of an 8,000-word book, most between
    words of unrelated sentences); ``participates`` entity -> each event a member mention takes
    part in, in story order."""

    doc_id: str
    entities: Sequence[GraphNode]
    row_of: dict[str, int]
    weights: dict[tuple[int, int], int]
    lifted: dict[int, set[str]]
    event_order: dict[str, int]

    def __iter__(self) -> Iterator[GraphEdge]:
        return _entity_edges(self)


def _entity_edges(layer: EntityEdges) -> Iterator[GraphEdge]:
    doc_id, entities, row_of = layer.doc_id, layer.entities, layer.row_of
    weights, lifted, event_order = layer.weights, layer.lifted, layer.event_order
    for mention_id, row in row_of.items():
        yield GraphEdge(
            source=mention_id, target=entities[row].id, kind=EdgeKind.INSTANCE_OF, doc_id=doc_id
        )
    for (i, j), weight in sorted(weights.items()):
        yield GraphEdge(
            source=entities[i].id,
            target=entities[j].id,
            kind=EdgeKind.CO_MENTION,
            doc_id=doc_id,
            attrs={"event_graph": "entity_link", "weight": weight},
        )
    for row, entity in enumerate(entities):
        for event_id in sorted(lifted.get(row, ()), key=event_order.__getitem__):
            yield GraphEdge(
                source=entity.id,
                target=event_id,
                kind=EdgeKind.PARTICIPATES,
                doc_id=doc_id,
                attrs={"event_graph": "lifted"},
            )


def same_entity_links(
    new_entities: Sequence[GraphNode], other_entities: Sequence[GraphNode]
) -> list[GraphEdge]:
    """Cross-document ``instance_of`` links (plan §2.2): later document's entity -> earlier one's.

    Linked when the two share a normalised alias, at least one of them has a known type (two
    untyped phrases such as "the garden" are not a character), and either their types agree or
    their names are the same (spaCy often types one name differently in two documents). Pairs
    are new × other and new × new (a batch of documents links among itself); entities of one
    document are never linked. "Later" is document order (``pos[0]``, then doc id); the link
    belongs to the later document, so deleting either document removes it.
    """
    new_ids = {e.id for e in new_entities}
    by_alias: dict[str, list[GraphNode]] = defaultdict(list)
    for entity in [*new_entities, *(e for e in other_entities if e.id not in new_ids)]:
        for alias in exact_keys(entity):
            by_alias[alias].append(entity)
    links: dict[tuple[str, str], GraphEdge] = {}
    for entity in new_entities:
        for alias in exact_keys(entity):
            for other in by_alias[alias]:
                if other.doc_id == entity.doc_id or not _same_entity(entity, other):
                    continue
                later, earlier = sorted(
                    (entity, other), key=lambda e: (e.pos[0], e.doc_id), reverse=True
                )
                links.setdefault(
                    (later.id, earlier.id),
                    GraphEdge(
                        source=later.id,
                        target=earlier.id,
                        kind=EdgeKind.INSTANCE_OF,
                        doc_id=later.doc_id,
                        attrs={"event_graph": "same_entity"},
                    ),
                )
    return list(links.values())


def _same_entity(a: GraphNode, b: GraphNode) -> bool:
    """Whether two entities sharing an alias are one (``same_entity_links``' type rule)."""
    type_a, type_b = a.attrs.get("entity_type"), b.attrs.get("entity_type")
    if type_key(type_a) is None and type_key(type_b) is None:
        return False
    same_name = normalize_text(a.name or "") == normalize_text(b.name or "")
    return same_name or types_agree(type_a, type_b)

