"""``SentenceGraphBuilder``: SentGraph's offline stage (paper 004, §3.1) as a document builder.

Per document (``abuild``): sentence nodes, segments with a topic node each, the core /
supplementary split, ``child`` edges (role "core") from a topic to its core sentences and typed
``rst`` edges between sentences. Per batch (``alink``): ``bridge`` edges between the topics of
different documents, against the committed graph too, each owned by a batch document.

Relations come from the LLM-free rules of ``discourse`` (``relations="parser"``); bridges from
entity names in the text (``bridges="entities"``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Optional, Sequence

from llama_index_e2rag.extract.sentence_graph.bridges import (
    co_entity_bridges,
    group_by_owner,
    shared_entity_bridges,
    topic_texts,
)
from llama_index_e2rag.extract.sentence_graph.discourse import (
    OpeningCue,
    attach,
    core_scores,
    opening_cue,
    parser_relations,
    split_core,
)
from llama_index_e2rag.extract.sentence_graph.segments import (
    Segment,
    TopicSource,
    ner_entities,
    segment,
    sentence_nodes,
    staged_mention_entities,
    topic_entity,
    topic_node,
)
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode

if TYPE_CHECKING:
    from llama_index.core.schema import BaseNode

    from llama_index_e2rag.builders import BuildFailure

RelationSetting = Literal["auto", "parser"]
BridgeSetting = Literal["auto", "entities", "none"]
_RELATIONS = ("auto", "parser")
_BRIDGES = ("auto", "entities", "none")


class SentenceGraphBuilder:
    """Document builder writing SentGraph's sentence, topic, ``rst`` and ``bridge`` layers.

    ``E2RAGIndex.from_documents(docs, doc_builders=[SentenceGraphBuilder()])``.

    ``relations``: ``"parser"`` types relations from sentence-opening connectives (spaCy only
    for ambiguous openers); ``"auto"`` is the parser, the one relation source so far.
    ``bridges``: ``"entities"`` bridges a topic to the topics its text names (``"auto"`` is the
    same), ``"none"`` writes none. ``segment_sentences`` bounds a segment (one topic each);
    ``core_ratio`` is the share of the uncued sentences kept as core; ``topic_keys`` are the
    metadata keys naming a document's topic (else its most frequent named entity);
    ``co_entity_bridges`` adds bridges between topics naming the same rare entity;
    ``embed_context`` embeds each sentence as "topic: sentence" instead of the bare sentence.
    All settings are stored with the index (``to_config``) and restored on load.
    """

    config_name: ClassVar[str] = "sentence_graph"

    def __init__(
        self,
        *,
        relations: RelationSetting = "auto",
        bridges: BridgeSetting = "auto",
        segment_sentences: int = 40,
        core_ratio: float = 0.5,
        topic_keys: Sequence[str] = ("title",),
        co_entity_bridges: bool = False,
        max_bridges_per_topic: int = 10,
        embed_context: bool = False,
    ) -> None:
        if relations not in _RELATIONS:
            raise ValueError(f"relations must be one of {_RELATIONS}, got {relations!r}")
        if bridges not in _BRIDGES:
            raise ValueError(f"bridges must be one of {_BRIDGES}, got {bridges!r}")
        if segment_sentences < 1:
            raise ValueError(f"segment_sentences must be at least 1, got {segment_sentences}")
        if not 0 < core_ratio <= 1:
            raise ValueError(f"core_ratio must be in (0, 1], got {core_ratio}")
        if max_bridges_per_topic < 1:
            raise ValueError(
                f"max_bridges_per_topic must be at least 1, got {max_bridges_per_topic}"
            )
        self.relations = relations
        self.bridges = bridges
        self.segment_sentences = segment_sentences
        self.core_ratio = core_ratio
        self.topic_keys = tuple(topic_keys)
        self.co_entity_bridges = co_entity_bridges
        self.max_bridges_per_topic = max_bridges_per_topic
        self.embed_context = embed_context

    def to_config(self) -> dict[str, Any]:
        """The JSON settings the index stores to rebuild this builder on load."""
        return {
            "relations": self.relations,
            "bridges": self.bridges,
            "segment_sentences": self.segment_sentences,
            "core_ratio": self.core_ratio,
            "topic_keys": list(self.topic_keys),
            "co_entity_bridges": self.co_entity_bridges,
            "max_bridges_per_topic": self.max_bridges_per_topic,
            "embed_context": self.embed_context,
        }

    @classmethod
    def from_config(cls, params: dict[str, Any]) -> "SentenceGraphBuilder":
        return cls(**params)

    # -- DocumentBuilder ------------------------------------------------------------------------
    async def abuild(
        self,
        document: "BaseNode",
        doc_order: int,
        chunks: Sequence["BaseNode"],
        graph: GraphStore,
    ) -> tuple[list[GraphNode], list[GraphEdge], list["BuildFailure"]]:
        """Sentences, topics, ``child``/core and ``rst`` edges of one document.

        spaCy work (NER when no mentions are staged, ambiguous openers) runs in a worker thread
        so the event loop stays responsive.
        """
        from llama_index.core.schema import MetadataMode

        from llama_index_e2rag.extract.base import chunk_doc_id, chunk_offset

        text = document.get_content(metadata_mode=MetadataMode.NONE)
        doc_id = chunk_doc_id(chunks[0]) if chunks else document.doc_id
        chunk_starts = sorted((chunk_offset(c), c.node_id) for c in chunks)
        sentences = sentence_nodes(text, doc_id, doc_order, chunk_starts)
        if not sentences:
            return [], [], []
        nodes, edges = await asyncio.to_thread(
            self._build, text, dict(document.metadata), doc_id, doc_order, sentences, graph
        )
        return nodes, edges, []

    def _build(
        self,
        text: str,
        metadata: dict[str, Any],
        doc_id: str,
        order: int,
        sentences: list[GraphNode],
        graph: GraphStore,
    ) -> tuple[list[GraphNode], list[GraphEdge]]:
        """The synchronous part of ``abuild``: entities and cues per sentence, a topic per
        segment, then each segment's relations."""
        spacy = _SpacyOnDemand()
        entities = staged_mention_entities(graph, doc_id, sentences)
        source: TopicSource = "mention"
        if entities is None:
            entities, source = ner_entities(sentences, spacy.pipe), "ner"
        for node, found in zip(sentences, entities):
            node.attrs["entities"] = sorted(found)
        cues = [opening_cue(node.text, spacy.parse) for node in sentences]
        segments: list[Segment] = []
        for g, group in enumerate(segment(sentences, text, self.segment_sentences)):
            first = group[0].attrs["index"]
            found = entities[first : first + len(group)]
            entity, topic_source = topic_entity(metadata, group, found, self.topic_keys, source)
            topic = topic_node(doc_id, order, g, group, found, entity, topic_source)
            segments.append(Segment(g, group, topic))
        nodes: list[GraphNode] = []
        edges: list[GraphEdge] = []
        for seg in segments:
            first = seg.sentences[0].attrs["index"]
            edges += self._parser_layer(seg, entities, cues[first : first + len(seg.sentences)])
            nodes += [seg.topic, *seg.sentences]
        return nodes, edges

    def _parser_layer(
        self,
        seg: Segment,
        entities: list[set[str]],
        cues: list[Optional[OpeningCue]],
    ) -> list[GraphEdge]:
        """One segment's core split, attachments, ``child``/core and ``rst`` edges by the
        LLM-free rules; fills the sentences' SentGraph attrs."""
        group, topic = seg.sentences, seg.topic
        first = group[0].attrs["index"]
        texts = [node.text for node in group]
        found = entities[first : first + len(group)]
        is_core = split_core(core_scores(texts, found), cues, self.core_ratio)
        nucleus = attach(texts, is_core, cues)
        edges = []
        for i, node in enumerate(group):
            role = "core" if is_core[i] else "supplementary"
            node.attrs.update(sentgraph=role, segment=seg.index, topic_id=topic.id)
            if i in nucleus:
                node.attrs["nucleus_id"] = group[nucleus[i]].id
            if self.embed_context:
                node.attrs["embed_text"] = f"{topic.text}: {node.text}"
            if is_core[i]:
                edges.append(
                    GraphEdge(
                        source=topic.id,
                        target=node.id,
                        kind=EdgeKind.CHILD,
                        doc_id=node.doc_id,
                        role="core",
                    )
                )
        return edges + parser_relations(group, is_core, nucleus, cues)

    # -- cross-document links -------------------------------------------------------------------
    async def alink(
        self, staged: Sequence[tuple[str, GraphStore]], committed: GraphStore
    ) -> tuple[dict[str, list[GraphEdge]], list["BuildFailure"]]:
        """Bridges from and to the batch's topics, grouped by the batch document owning each.

        ``staged`` is the batch in order as ``(doc_id, staging graph)``; ``committed`` is the
        graph as committed, whose versions of the batch's documents are ignored (they are being
        replaced).
        """
        if self.bridges == "none":
            return {}, []
        batch_order = {doc_id: i for i, (doc_id, _) in enumerate(staged)}
        new = [t for doc_id, graph in staged for t in topic_texts(graph) if t.doc_id == doc_id]
        existing = topic_texts(committed, exclude=frozenset(batch_order))
        edges = shared_entity_bridges(new, existing, batch_order, self.max_bridges_per_topic)
        if self.co_entity_bridges:
            edges += co_entity_bridges(new, existing, batch_order, self.max_bridges_per_topic)
        return group_by_owner(edges), []


class _SpacyOnDemand:
    """The project's spaCy pipeline, loaded on the first sentence that needs it, with parses
    serialised like the grounded extractor's (spaCy inference is not promised thread-safe)."""

    def __init__(self) -> None:
        self._nlp: Optional[Any] = None

    def _run(self, work: Callable[[Any], Any]) -> Any:
        from llama_index_e2rag.extract.grounded import _PARSE_LOCK, load_spacy

        if self._nlp is None:
            self._nlp = load_spacy()
        with _PARSE_LOCK:
            return work(self._nlp)

    def parse(self, text: str) -> Any:
        return self._run(lambda nlp: nlp(text))

    def pipe(self, texts: list[str]) -> list[Any]:
        return self._run(lambda nlp: list(nlp.pipe(texts)))
