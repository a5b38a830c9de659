"""SentGraph's units: sentence nodes, the segments they are grouped in, the named entities of each
sentence and the topic node of each segment.

A multi-hop paragraph or a news article is one segment (the paper's "document"); a book is cut
at paragraph breaks into segments of at most ``max_sentences`` sentences, each with its own
topic, so that a topic stays a summary of nearby text.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Optional, Sequence

from llama_index_e2rag.extract.base import span_nodes
from llama_index_e2rag.extract.linking import locate_name, name_occurs_in
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import GraphNode, NodeKind, Span, make_id, name_type, normalize_text
from llama_index_e2rag.text import paragraph_spans, split_sentences

if TYPE_CHECKING:
    from llama_index.core.schema import BaseNode

SENTENCE_ID_KIND = "sentgraph_sentence"
TOPIC_ID_KIND = "sentgraph_topic"
#: Entity labels (spaCy's, or an LLM extractor's types) that are not names.
_NOT_NAMED = frozenset(
    {"concept", "date", "time", "cardinal", "ordinal", "quantity", "percent", "money"}
)
#: spaCy labels kept as sentence entities when the builder runs NER itself.
NAMED_LABELS = frozenset(
    {"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART"}
)
_PARENTHETICAL = re.compile(r"\s*\([^)]*\)")
_ARTICLES = ("the ", "a ", "an ")
#: Words of a sentence a fallback topic is named after.
FALLBACK_TOPIC_WORDS = 8

TopicSource = Literal["title", "ner", "mention", "fallback"]
#: ``texts -> spaCy Docs`` (``nlp.pipe``), called only when the graph has no mentions.
Ner = Callable[[list[str]], Sequence[Any]]


@dataclass
class Segment:
    """Consecutive sentences of one document under one topic node."""

    index: int
    sentences: list[GraphNode]
    topic: GraphNode


def sentence_nodes(
    text: str, doc_id: str, order: int, chunks: Sequence["BaseNode"] = ()
) -> list[GraphNode]:
    """The document's sentences as nodes, each mapped to the extraction chunk holding its
    start; rebuilding a document gives the same ids."""
    return span_nodes(
        text, split_sentences(text), doc_id=doc_id, order=order, chunks=chunks,
        kind=NodeKind.SENTENCE, id_kind=SENTENCE_ID_KIND, attrs=lambda i: {"index": i},
    )


def segment(sentences: list[GraphNode], text: str, max_sentences: int) -> list[list[GraphNode]]:
    """Sentences grouped into segments: whole paragraphs packed up to ``max_sentences``, and a
    longer paragraph cut into runs of ``max_sentences``."""
    starts = [node.pos[1] for node in sentences]
    groups: list[list[GraphNode]] = []
    current: list[GraphNode] = []
    for para_start, para_end in paragraph_spans(text):
        first = bisect.bisect_left(starts, para_start)
        paragraph = sentences[first : bisect.bisect_left(starts, para_end)]
        if current and len(current) + len(paragraph) > max_sentences:
            groups.append(current)
            current = []
        while len(paragraph) > max_sentences:
            groups.append(paragraph[:max_sentences])
            paragraph = paragraph[max_sentences:]
        current += paragraph
    if current:
        groups.append(current)
    return groups


def _is_named(entity_type: Optional[str]) -> bool:
    return (entity_type or "concept").strip().lower() not in _NOT_NAMED


def staged_mention_entities(
    graph: GraphStore, doc_id: str, sentences: Sequence[GraphNode]
) -> Optional[list[set[str]]]:
    """Named entities per sentence from the mentions chunk extractors staged, or None if none.

    Grounded mentions carry their occurrences (``attrs["spans"]``); an LLM extractor's mentions
    do not, so their names are looked for in each sentence of their chunk, in full (a last name
    alone would make "Marie Curie" a mention of "Pierre Curie").
    """
    mentions = [
        m for m in graph.nodes(NodeKind.MENTION, doc_id) if _is_named(name_type(m))
    ]
    if not mentions:
        return None
    starts = [node.pos[1] for node in sentences]
    found: list[set[str]] = [set() for _ in sentences]
    for mention in mentions:
        name = name_key(mention.name or mention.text)
        if not name:
            continue
        spans = mention.attrs.get("spans")
        if spans:
            for start, _ in spans:
                at = bisect.bisect_right(starts, start) - 1
                if at >= 0:
                    found[at].add(name)
            continue
        for i, node in enumerate(sentences):
            if node.chunk_id == mention.chunk_id and name_occurs_in(name, node.text):
                found[i].add(name)
    return found


def ner_entities(sentences: Sequence[GraphNode], ner: Ner) -> list[set[str]]:
    """Named entities per sentence from spaCy NER, for documents staged without mentions."""
    docs = ner([node.text for node in sentences])
    return [
        {name_key(ent.text) for ent in doc.ents if ent.label_ in NAMED_LABELS} - {""}
        for doc in docs
    ]


def name_key(name: str) -> str:
    """A name's normalised form without a leading article ("The Beatles" → "beatles"), so that
    a name counts once however a sentence introduces it."""
    key = normalize_text(name)
    for article in _ARTICLES:
        if key.startswith(article) and len(key) > len(article):
            return key[len(article) :]
    return key


def entity_keys(name: str) -> list[str]:
    """Normalised forms under which a topic entity is looked for in other documents' text:
    without a parenthetical ("Dmitri Varfolomeyev (footballer, born 1978)" → "dmitri
    varfolomeyev"), and without a leading article."""
    full = normalize_text(_PARENTHETICAL.sub("", name)) or normalize_text(name)
    short = name_key(full)
    return [full] if short == full else [full, short]


def topic_entity(
    metadata: Mapping[str, Any],
    sentences: Sequence[GraphNode],
    entities: Sequence[set[str]],
    keys: Sequence[str],
    entity_source: TopicSource,
) -> tuple[str, TopicSource]:
    """The segment's topic entity and where it came from.

    The first non-empty metadata value among ``keys`` (a title names what the document is
    about), else the segment's most frequent named entity (ties: the earliest), else the opening
    words of its first sentence.
    """
    for key in keys:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split()), "title"
    counts = Counter(name for found in entities for name in found)
    if counts:
        order = [name for found in entities for name in sorted(found)]
        best = max(counts, key=lambda name: (counts[name], -order.index(name)))
        return _surface(best, sentences), entity_source
    words = sentences[0].text.split()[:FALLBACK_TOPIC_WORDS] if sentences else []
    return " ".join(words), "fallback"


def _surface(name: str, sentences: Sequence[GraphNode]) -> str:
    """A normalised name as first written in the segment ("ada finch" → "Ada Finch")."""
    for node in sentences:
        span = locate_name([name], node.text)
        if span is not None:
            return node.text[span[0] : span[1]]
    return name


def topic_node(
    doc_id: str,
    order: int,
    g: int,
    sentences: Sequence[GraphNode],
    entities: Sequence[set[str]],
    entity: str,
    source: TopicSource,
) -> GraphNode:
    """Segment ``g``'s topic: named after its entity, spanning the segment, never embedded."""
    start = sentences[0].span[0] if sentences and sentences[0].span else 0
    end = sentences[-1].span[1] if sentences and sentences[-1].span else start
    span: Span = (start, end)
    counts = Counter(name for found in entities for name in found)
    return GraphNode(
        id=make_id(doc_id, TOPIC_ID_KIND, (g, start), entity),
        kind=NodeKind.TOPIC,
        text=entity,
        doc_id=doc_id,
        pos=(order, start, 0),
        span=span,
        name=entity,
        attrs={
            "sentgraph": "topic",
            "embed": False,
            "entity_keys": entity_keys(entity),
            "entities": dict(sorted(counts.items())),
            "segment": g,
            "source": source,
        },
    )
