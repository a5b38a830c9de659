"""Topic–topic bridges across documents, without an LLM.

The paper bridges topics with an LLM's background knowledge (prompt A.3). Offline we bridge what
the text itself states: a ``shared_entity`` bridge A → B when a sentence of A's segment names B's
topic entity (directed: A points at what it mentions, the hop a multi-hop question takes), and,
opt-in, a ``co_entity`` bridge when two topics name the same rare entity. Bridges only join
different documents, and each belongs to the batch document that created it (see ``owner``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind, normalize_text

#: A key mentioned by more than this share of the topics (and by ``MIN_HUB_TOPICS`` or more) is
#: a hub ("london") and bridges nothing.
MAX_DF = 0.5
MIN_HUB_TOPICS = 3


@dataclass
class TopicText:
    """A topic node and the texts of its segment's sentences."""

    topic: GraphNode
    texts: list[str]

    @property
    def doc_id(self) -> str:
        return self.topic.doc_id


def topic_texts(graph: GraphStore, exclude: frozenset[str] = frozenset()) -> list[TopicText]:
    """Every SentGraph topic of ``graph`` outside the documents ``exclude``, with its sentences.

    Reads all topic nodes and the text of every sentence once: O(corpus) per call, which
    ``alink`` makes once per batch for the committed graph (a store that can pick the
    sentences' texts and topics without building their nodes does: ``texts_by_attr``).
    """
    topics = {
        node.id: TopicText(node, [])
        for node in graph.nodes(NodeKind.TOPIC)
        if node.attrs.get("sentgraph") == "topic" and node.doc_id not in exclude
    }
    for topic_id, text in _sentence_topics(graph):
        holder = topics.get(topic_id)
        if holder is not None:
            holder.texts.append(text)
    return list(topics.values())


def _sentence_topics(graph: GraphStore) -> Iterable[tuple[Any, str]]:
    """``(attrs["topic_id"], text)`` of the sentences, in story order."""
    pick = getattr(graph, "texts_by_attr", None)
    if pick is not None:
        return pick(NodeKind.SENTENCE.value, "topic_id")
    return ((n.attrs.get("topic_id", ""), n.text) for n in graph.nodes(NodeKind.SENTENCE))


def owner(source_doc: str, target_doc: str, batch_order: Mapping[str, int]) -> str:
    """The document owning a bridge: the later batch document among its two ends, so that the
    edge is written once both ends exist and goes when either document is replaced."""
    ends = [doc for doc in (source_doc, target_doc) if doc in batch_order]
    if not ends:
        raise ValueError(f"a bridge {source_doc} -> {target_doc} touches no document of the batch")
    return max(ends, key=lambda doc: batch_order[doc])


def _keys_in(words: list[str], by_first: Mapping[str, Sequence[tuple[int, str]]]) -> set[str]:
    """The keys that occur in ``words`` as a run of whole words (``by_first``: each key's first
    word -> its (word count, key)); a lookup per word, not every n-gram of the text."""
    found = set()
    for i, word in enumerate(words):
        for n, key in by_first.get(word, ()):
            if " ".join(words[i : i + n]) == key:
                found.add(key)
    return found


def _document_frequency(
    keyed: Mapping[str, Sequence[int]], grams: Sequence[set[str]], topics: Sequence[TopicText]
) -> dict[str, int]:
    """How many topics mention each key, not counting those of the key's own documents."""
    mentioners: dict[str, list[int]] = defaultdict(list)
    for t, found in enumerate(grams):
        for key in found:
            mentioners[key].append(t)
    df = {}
    for key, owners in keyed.items():
        own = {topics[o].doc_id for o in owners}
        df[key] = sum(1 for t in mentioners[key] if topics[t].doc_id not in own)
    return df


def _idf(df: int, total: int) -> float:
    """Smoothed idf: a name few topics mention weighs more."""
    return math.log((total + 1) / (df + 1)) + 1.0


def _is_hub(df: int, total: int, max_df: float) -> bool:
    return df >= MIN_HUB_TOPICS and df > max_df * total


def _capped(edges: list[GraphEdge], max_per_topic: int) -> list[GraphEdge]:
    """The ``max_per_topic`` heaviest bridges out of each topic (ties: by target id)."""
    by_source: dict[str, list[GraphEdge]] = defaultdict(list)
    for edge in edges:
        by_source[edge.source].append(edge)
    kept = []
    for source in sorted(by_source):
        ranked = sorted(by_source[source], key=lambda e: (-e.attrs["weight"], e.target))
        kept += ranked[:max_per_topic]
    return kept


def _bridge(
    a: TopicText,
    b: TopicText,
    role: str,
    entities: list[str],
    weight: float,
    description: str,
    batch_order: Mapping[str, int],
) -> GraphEdge:
    return GraphEdge(
        source=a.topic.id,
        target=b.topic.id,
        kind=EdgeKind.BRIDGE,
        doc_id=owner(a.doc_id, b.doc_id, batch_order),
        role=role,
        attrs={
            "entities": entities,
            "weight": round(weight, 6),
            "source": "entities",
            "description": description,
        },
    )


def shared_entity_bridges(
    new: Sequence[TopicText],
    existing: Sequence[TopicText],
    batch_order: Mapping[str, int],
    max_per_topic: int = 10,
    max_df: float = MAX_DF,
) -> list[GraphEdge]:
    """Directed bridges A → B where A's sentences name B's topic entity (word n-grams of the
    normalised text against B's ``entity_keys``); at least one end is new.

    Weighted by the key's idf over the topics, so a rare name outranks a common one when the
    hub cap (``max_per_topic`` bridges out of a topic) bites.
    """
    topics = [*new, *existing]
    is_new = [True] * len(new) + [False] * len(existing)
    keyed: dict[str, list[int]] = defaultdict(list)
    for b, topic in enumerate(topics):
        for key in topic.topic.attrs.get("entity_keys", []):
            if key:
                keyed[key].append(b)
    by_first: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for key in keyed:
        words = key.split()
        if words:
            by_first[words[0]].append((len(words), key))
    grams = [_keys_in(normalize_text(" ".join(topic.texts)).split(), by_first) for topic in topics]
    df = _document_frequency(keyed, grams, topics)
    total = len(topics)
    found: dict[tuple[int, int], list[str]] = defaultdict(list)
    for a, keys in enumerate(grams):
        for key in sorted(keys):
            if _is_hub(df[key], total, max_df):
                continue
            for b in keyed[key]:
                if topics[a].doc_id != topics[b].doc_id and (is_new[a] or is_new[b]):
                    found[(a, b)].append(key)
    edges = [
        _bridge(
            topics[a],
            topics[b],
            "shared_entity",
            keys,
            max(_idf(df[key], total) for key in keys),
            f"mentions {topics[b].topic.text}",
            batch_order,
        )
        for (a, b), keys in found.items()
    ]
    return _capped(edges, max_per_topic)


def co_entity_bridges(
    new: Sequence[TopicText],
    existing: Sequence[TopicText],
    batch_order: Mapping[str, int],
    max_per_topic: int = 10,
    max_df: float = MAX_DF,
) -> list[GraphEdge]:
    """Bridges between topics of different documents that name the same rare entity
    (``attrs["entities"]``), one per pair, from the owner's topic to the other."""
    topics = [*new, *existing]
    holders: dict[str, list[int]] = defaultdict(list)
    for t, topic in enumerate(topics):
        for name in topic.topic.attrs.get("entities", {}):
            holders[name].append(t)
    total = len(topics)
    shared: dict[tuple[int, int], list[str]] = defaultdict(list)
    for name in sorted(holders):
        docs = {topics[t].doc_id for t in holders[name]}
        if len(docs) < 2 or _is_hub(len(holders[name]), total, max_df):
            continue
        for a in holders[name]:
            for b in holders[name]:
                if a < b and topics[a].doc_id != topics[b].doc_id and a < len(new):
                    shared[(a, b)].append(name)
    edges = []
    for (a, b), names in shared.items():
        first, second = _from_owner(topics[a], topics[b], batch_order)
        weight = max(_idf(len(holders[n]), total) for n in names)
        edges.append(
            _bridge(first, second, "co_entity", names, weight, f"both name {names[0]}", batch_order)
        )
    return _capped(edges, max_per_topic)


def _from_owner(
    a: TopicText, b: TopicText, batch_order: Mapping[str, int]
) -> tuple[TopicText, TopicText]:
    doc = owner(a.doc_id, b.doc_id, batch_order)
    return (a, b) if a.doc_id == doc else (b, a)


def group_by_owner(edges: Sequence[GraphEdge]) -> dict[str, list[GraphEdge]]:
    """``{owner doc_id: its bridges}``, the shape ``alink`` returns."""
    grouped: dict[str, list[GraphEdge]] = defaultdict(list)
    for edge in edges:
        grouped[edge.doc_id].append(edge)
    return dict(grouped)
