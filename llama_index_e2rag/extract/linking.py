"""Linking rules of the entity–event graph: name matching, bipartite, co-occurrence and story edges.

Pure functions over ``GraphNode``s (no LLM, no llama-index index classes) so the LlamaIndex
extractor and ``lightrag_ext`` build identical graphs. Matching is on ``normalize_text`` forms and
word-bounded, so "Ron" never matches "Ronald" or "iron".
"""

from __future__ import annotations

import re
from collections import defaultdict
from itertools import combinations, pairwise
from typing import Iterable, Optional, Sequence, Union

from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import (
    EdgeKind,
    GraphEdge,
    GraphNode,
    NodeKind,
    Span,
    make_id,
    name_type,
    normalize_text,
    sort_by_position,
)

#: Titles dropped to get a name's short form ("Miss Granger" ~ "Granger"). A leading title also
#: marks the name as a person's, which enables the first/last-name short forms.
HONORIFICS = frozenset(
    """mr mrs ms miss mister master madam madame mme mlle monsieur sir dame lady lord dr doctor
    professor prof captain capt uncle aunt auntie king queen prince princess saint st rev reverend
    father mother brother sister""".split()
)
_ARTICLES = frozenset({"the", "a", "an"})
#: Types (as the extraction prompt names them) whose multi-word names have first/last-name forms.
PERSON_TYPES = frozenset({"person", "people", "character", "human", "creature", "animal"})
#: Leading words of character names that are not first names ("Old Brown" is not "old").
_NOT_FIRST_NAMES = frozenset("old young little big great good poor dear new grand".split())
_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b|(?<=s)['’](?!\w)", re.IGNORECASE)


def chunk_node_id(
    doc_id: str, chunk_id: str, kind: Union[NodeKind, str], pos: Iterable[int], text: str
) -> str:
    """``make_id`` scoped to a chunk: every extracted node belongs to the chunk it came from.

    Chunks overlap (the index's default overlap is > 0), so one sentence can be read by two
    chunks at the same absolute position. Keyed by position and text alone, both chunks would
    produce the same node id, the later one would take it over, and the earlier chunk's edges
    would point into another chunk. Keying by chunk too gives each chunk its own node.
    """
    return make_id(f"{doc_id}\x1f{chunk_id}", kind, pos, text)


def _tokens(name: str) -> list[str]:
    """Normalised tokens of a name without possessive endings."""
    return normalize_text(_POSSESSIVE.sub("", name)).split()


def _core_tokens(name: str) -> tuple[list[str], bool]:
    """Tokens without leading articles and titles, and whether a title was dropped."""
    tokens = _tokens(name)
    while tokens and tokens[0] in _ARTICLES:
        tokens = tokens[1:]
    titled = False
    while len(tokens) > 1 and tokens[0] in HONORIFICS:
        tokens, titled = tokens[1:], True
    return tokens, titled


def _is_person(entity_type: Optional[str], titled: bool) -> bool:
    return titled or (entity_type or "").strip().lower() in PERSON_TYPES


def name_variants(name: str, entity_type: Optional[str] = None) -> list[str]:
    """Normalised forms a name may take in text, longest first.

    The full form, the form without articles/titles/possessives, and for a multi-word person name
    (typed as a person, or carrying a title) its last and first name: "Professor Minerva
    McGonagall" -> ["professor minerva mcgonagall", "minerva mcgonagall", "mcgonagall", "minerva"].
    """
    full = " ".join(_tokens(name))
    core, titled = _core_tokens(name)
    variants = [full, " ".join(core)]
    if len(core) > 1 and _is_person(entity_type, titled):
        variants.append(core[-1])
        if core[0] not in _NOT_FIRST_NAMES:
            variants.append(core[0])
    seen: list[str] = []
    for variant in variants:
        if len(variant) > 1 and variant not in seen:
            seen.append(variant)
    return seen


def _pattern(variant: str) -> re.Pattern[str]:
    """Word-bounded regex of a normalised variant over raw text (any punctuation or a possessive
    between words, as in "Harry's broom" for "harry broom")."""
    words = (re.escape(word) for word in variant.split())
    joiner = r"(?:['’]s)?[\W_]+"
    return re.compile(r"(?<!\w)" + joiner.join(words) + r"(?!\w)", re.IGNORECASE)


def name_occurs_in(name: str, text: str, entity_type: Optional[str] = None) -> bool:
    """Whether the name, or one of its short forms, occurs word-bounded in ``text``."""
    haystack = f" {normalize_text(_POSSESSIVE.sub('', text))} "
    return any(f" {variant} " in haystack for variant in name_variants(name, entity_type))


def locate_name(
    names: Iterable[str], text: str, entity_type: Optional[str] = None
) -> Optional[Span]:
    """Span (relative to ``text``) of the earliest of the names' first occurrences.

    A name occurs where its longest form that appears in the text first appears: "Miss Granger"
    is found at "Miss Granger", and at "Granger" only if the full form is absent.
    """
    best: Optional[Span] = None
    for name in names:
        for variant in name_variants(name, entity_type):
            match = _pattern(variant).search(text)
            if match:
                if best is None or match.start() < best[0]:
                    best = (match.start(), match.end())
                break
    return best


def _event_match_text(event: GraphNode) -> str:
    """What a mention's name is looked for in: the event's title, description and participants."""
    participants = event.attrs.get("participants") or []
    return " \n ".join([event.text, *[str(p) for p in participants]])


def bipartite_edges(mentions: Sequence[GraphNode], events: Sequence[GraphNode]) -> list[GraphEdge]:
    """``participates`` edges mention -> event when the mention's name occurs in the event.

    Only within one chunk (a mention is tied to the events told where it appears). E²RAG's Eq. 1
    matches ``Name(v) ⊂ Desc(e)``; we also match the title and the participant list, because LLM
    descriptions often use pronouns where the participant list names the entity outright.
    """
    by_chunk: dict[Optional[str], list[GraphNode]] = defaultdict(list)
    for event in events:
        by_chunk[event.chunk_id].append(event)
    match_text = {event.id: _event_match_text(event) for event in events}
    edges = []
    for mention in mentions:
        name = mention.name or mention.text
        entity_type = name_type(mention)
        for event in by_chunk.get(mention.chunk_id, []):
            if name_occurs_in(name, match_text[event.id], entity_type):
                edges.append(
                    GraphEdge(
                        source=mention.id,
                        target=event.id,
                        kind=EdgeKind.PARTICIPATES,
                        doc_id=mention.doc_id,
                    )
                )
    return edges


def _pairwise(nodes: Sequence[GraphNode], kind: EdgeKind) -> list[GraphEdge]:
    by_chunk: dict[Optional[str], list[GraphNode]] = defaultdict(list)
    for node in nodes:
        by_chunk[node.chunk_id].append(node)
    edges = []
    for group in by_chunk.values():
        for first, second in combinations(sort_by_position(group), 2):
            edges.append(
                GraphEdge(source=first.id, target=second.id, kind=kind, doc_id=first.doc_id)
            )
    return edges


def co_occurrence_edges(
    mentions: Sequence[GraphNode], events: Sequence[GraphNode]
) -> list[GraphEdge]:
    """``co_mention`` / ``co_event`` edges between each pair of one chunk, earlier -> later."""
    return _pairwise(mentions, EdgeKind.CO_MENTION) + _pairwise(events, EdgeKind.CO_EVENT)


def _chain(nodes: Sequence[GraphNode], doc_id: str) -> list[GraphEdge]:
    return [
        GraphEdge(source=a.id, target=b.id, kind=EdgeKind.NEXT, doc_id=doc_id)
        for a, b in pairwise(nodes)
    ]


def _identity_keys(mentions: Sequence[GraphNode]) -> dict[str, str]:
    """Mention id -> the name key of the entity it refers to, resolved conservatively.

    The key is the name without articles, titles and possessives. A one-word key ("granger") is
    folded into a longer person name ("hermione granger") only if exactly one such name in the
    document has it as first or last name; "Dursley" beside Vernon and Petunia Dursley stays apart.
    """
    keys: dict[str, str] = {}
    owners: dict[str, set[str]] = defaultdict(set)
    for mention in mentions:
        core, titled = _core_tokens(mention.name or mention.text)
        key = " ".join(core)
        keys[mention.id] = key
        if len(core) > 1 and _is_person(name_type(mention), titled):
            owners[core[0]].add(key)
            owners[core[-1]].add(key)
    for mention_id, key in keys.items():
        if len(owners.get(key, ())) == 1:
            keys[mention_id] = next(iter(owners[key]))
    return keys


def story_chain_edges(nodes: Sequence[GraphNode], doc_id: str) -> list[GraphEdge]:
    """``next`` edges of one document's nodes: event -> following event, and each entity's
    timeline (a mention -> the next mention of the same name key, see ``_identity_keys``).

    The pure core of ``story_order_edges`` (``lightrag_ext`` calls it on a layer's node list).
    Story order is ``sort_by_position``: position, then ordinal, then id. An event told in the
    overlap of two chunks is extracted by both, as two nodes at (nearly) the same position; the
    chain runs through both copies, one after the other, and retrievers, which rank chunks,
    count such an event once per chunk they return. Mentions without a usable name are left
    out of the timelines; nodes of other kinds or documents are ignored.
    """
    mine = [n for n in nodes if n.doc_id == doc_id]
    events = sort_by_position(n for n in mine if n.kind == NodeKind.EVENT)
    mentions = sort_by_position(n for n in mine if n.kind == NodeKind.MENTION)
    keys = _identity_keys(mentions)
    timelines: dict[str, list[GraphNode]] = defaultdict(list)
    for mention in mentions:
        if keys[mention.id]:
            timelines[keys[mention.id]].append(mention)
    edges = _chain(events, doc_id)
    for timeline in timelines.values():
        edges.extend(_chain(timeline, doc_id))
    return edges


def story_order_edges(graph: GraphStore, doc_id: str) -> list[GraphEdge]:
    """``next`` edges of a document in a graph store (``story_chain_edges`` of its events and
    mentions); the index calls it after each document."""
    nodes = graph.nodes(NodeKind.EVENT, doc_id) + graph.nodes(NodeKind.MENTION, doc_id)
    return story_chain_edges(nodes, doc_id)


def name_parts(name: str, entity_type: Optional[str] = None) -> tuple[list[str], list[str], bool]:
    """A name's core tokens, the titles dropped in front of them, and whether it is a person's
    name: the parts ``name_variants`` and ``_identity_keys`` reason with, for entity fusion.

    "Mrs. Petunia Dursley" -> (["petunia", "dursley"], ["mrs"], True).
    """
    tokens = _tokens(name)
    core, titled = _core_tokens(name)
    titles = [token for token in tokens[: len(tokens) - len(core)] if token in HONORIFICS]
    return core, titles, _is_person(entity_type, titled)
