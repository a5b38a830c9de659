"""``SentenceGraphBuilder``: SentGraph's offline stage (paper 004, §3.1) as a document builder.

Per document (``abuild``): sentence nodes, segments with a topic node each, the core /
supplementary split, ``child`` edges (role "core") from a topic to its core sentences and typed
``rst`` edges between sentences. Per batch (``alink``): ``bridge`` edges between the topics of
different documents, against the committed graph too, each owned by a batch document.

With an LLM (``relations="llm"``, or ``"auto"`` when a runner resolves) each segment's
relations come from the paper's N-N and N-S prompts (``llm_relations``) through the index's
``LLMRunner`` (cache, retries, accounting); a segment whose calls fail keeps the LLM-free rules
of ``discourse`` and is reported. Bridges come from entity names in the text, plus, with an
LLM, the triples of the paper's bridging prompt (``bridges_llm``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Optional, Sequence

from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType

from llama_index_e2rag.extract.base import chunk_doc_id
from llama_index_e2rag.extract.builders import OptionalLLM
from llama_index_e2rag.extract.sentence_graph.bridges import (
    TopicText,
    co_entity_bridges,
    group_by_owner,
    shared_entity_bridges,
    topic_texts,
)
from llama_index_e2rag.extract.sentence_graph.bridges_llm import llm_bridges
from llama_index_e2rag.extract.sentence_graph.discourse import (
    OpeningCue,
    attach,
    core_scores,
    opening_cue,
    parser_relations,
    split_core,
)
from llama_index_e2rag.extract.sentence_graph.llm_relations import (
    SegmentRelations,
    llm_segment_relations,
)
from llama_index_e2rag.extract.sentence_graph.prompts import BRIDGE_PROMPT, NN_PROMPT, NS_PROMPT
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
from llama_index_e2rag.extract.spacy_model import PARSE_LOCK, load_spacy
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode

if TYPE_CHECKING:
    from llama_index.core.schema import BaseNode

    from llama_index_e2rag.extract.builders import BuildFailure
    from llama_index_e2rag.llm.runner import LLMRunner

logger = logging.getLogger(__name__)

RelationSetting = Literal["auto", "llm", "parser"]
BridgeSetting = Literal["auto", "llm", "entities", "none"]
_RELATIONS = ("auto", "llm", "parser")
_BRIDGES = ("auto", "llm", "entities", "none")


class SentenceGraphBuilder(OptionalLLM, PromptMixin):
    """Document builder writing SentGraph's sentence, topic, ``rst`` and ``bridge`` layers.

    ``E2RAGIndex.from_documents(docs, doc_builders=[SentenceGraphBuilder()])``; the index hands
    the builder its LLM runner (``use_llm_runner``).

    ``relations``: ``"llm"`` asks the paper's N-N and N-S prompts per segment (needs an LLM);
    ``"parser"`` types relations from sentence-opening connectives (spaCy only for ambiguous
    openers); ``"auto"`` is the LLM when one is given or configured, else the parser. A segment
    whose LLM calls fail gets the parser's relations and shows in ``index.extraction_report()``.
    ``bridges``: ``"entities"`` bridges a topic to the topics its text names; ``"llm"`` adds the
    ``related`` bridges of the paper's bridging prompt (needs an LLM); ``"auto"`` is ``"llm"``
    when an LLM resolves, else ``"entities"``; ``"none"`` writes none. ``segment_sentences``
    bounds a segment (one topic each); ``core_ratio`` is the share of the uncued sentences kept
    as core by the parser; ``topic_keys`` are the metadata keys naming a document's topic (else
    its most frequent named entity); ``co_entity_bridges`` adds bridges between topics naming
    the same rare entity; ``embed_context`` embeds each sentence as "topic: sentence" instead of
    the bare sentence. The settings are stored with the index (``to_config``) and restored on
    load; prompts (``nn_prompt``, ``ns_prompt``, ``bridge_prompt``) are not, so pass the builder
    again when loading if you changed them.
    """

    config_name: ClassVar[str] = "sentence_graph"

    def __init__(
        self,
        llm_runner: Optional["LLMRunner"] = None,
        *,
        relations: RelationSetting = "auto",
        bridges: BridgeSetting = "auto",
        segment_sentences: int = 40,
        core_ratio: float = 0.5,
        topic_keys: Sequence[str] = ("title",),
        co_entity_bridges: bool = False,
        max_bridges_per_topic: int = 10,
        embed_context: bool = False,
        nn_prompt: Optional[BasePromptTemplate] = None,
        ns_prompt: Optional[BasePromptTemplate] = None,
        bridge_prompt: Optional[BasePromptTemplate] = None,
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
        self._keep_runner(llm_runner)
        self.relations = relations
        self.bridges = bridges
        self.segment_sentences = segment_sentences
        self.core_ratio = core_ratio
        self.topic_keys = tuple(topic_keys)
        self.co_entity_bridges = co_entity_bridges
        self.max_bridges_per_topic = max_bridges_per_topic
        self.embed_context = embed_context
        self.nn_prompt = nn_prompt or NN_PROMPT
        self.ns_prompt = ns_prompt or NS_PROMPT
        self.bridge_prompt = bridge_prompt or BRIDGE_PROMPT

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

    # -- prompts --------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {
            "nn_prompt": self.nn_prompt,
            "ns_prompt": self.ns_prompt,
            "bridge_prompt": self.bridge_prompt,
        }

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if "nn_prompt" in prompts_dict:
            self.nn_prompt = prompts_dict["nn_prompt"]
        if "ns_prompt" in prompts_dict:
            self.ns_prompt = prompts_dict["ns_prompt"]
        if "bridge_prompt" in prompts_dict:
            self.bridge_prompt = prompts_dict["bridge_prompt"]

    # -- DocumentBuilder ------------------------------------------------------------------------
    async def abuild(
        self,
        document: "BaseNode",
        doc_order: int,
        chunks: Sequence["BaseNode"],
        graph: GraphStore,
    ) -> tuple[list[GraphNode], list[GraphEdge], list["BuildFailure"]]:
        """Sentences, topics, ``child``/core and ``rst`` edges of one document, and the
        segments whose LLM calls failed (``{"doc_id", "chunk_id", "reason"}``).

        spaCy work (NER when no mentions are staged, ambiguous openers) runs in a worker thread
        so the event loop stays responsive; the LLM calls of all segments run concurrently.
        """
        from llama_index.core.schema import MetadataMode


        text = document.get_content(metadata_mode=MetadataMode.NONE)
        doc_id = chunk_doc_id(chunks[0]) if chunks else document.doc_id
        sentences = sentence_nodes(text, doc_id, doc_order, chunks)
        if not sentences:
            return [], [], []
        runner = self._runner_for(self.relations, "relations", "parser")
        segments, entities, cues = await asyncio.to_thread(
            self._prepare, text, dict(document.metadata), doc_id, doc_order, sentences, graph
        )
        answers: list[Optional[SegmentRelations] | BaseException] = [None] * len(segments)
        if runner is not None:
            answers = await asyncio.gather(
                *(self._llm_layer(runner, seg, cues) for seg in segments),
                return_exceptions=True,
            )
        nodes: list[GraphNode] = []
        edges: list[GraphEdge] = []
        failures: list[BuildFailure] = []
        for seg, answer in zip(segments, answers):
            if isinstance(answer, BaseException):
                if not isinstance(answer, Exception):
                    raise answer  # cancellation and the like are not build failures
                failures.append(_segment_failure(seg, answer))
                answer = None
            if answer is None:
                answer = self._parser_relations(seg, entities, cues)
            edges += self._emit(seg, answer)
            nodes += [seg.topic, *seg.sentences]
        return nodes, edges, failures

    def _prepare(
        self,
        text: str,
        metadata: dict[str, Any],
        doc_id: str,
        order: int,
        sentences: list[GraphNode],
        graph: GraphStore,
    ) -> tuple[list[Segment], list[set[str]], list[Optional[OpeningCue]]]:
        """The synchronous part of ``abuild``: entities and cues per sentence (document
        order), and the segments with a topic each."""
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
        return segments, entities, cues

    async def _llm_layer(
        self, runner: "LLMRunner", seg: Segment, cues: list[Optional[OpeningCue]]
    ) -> SegmentRelations:
        """One segment's relations from the N-N and N-S prompts; satellites are attached
        locally by the parser's rule, which the opening connectives still inform."""
        texts = [node.text for node in seg.sentences]
        first = seg.sentences[0].attrs["index"]
        seg_cues = cues[first : first + len(texts)]
        return await llm_segment_relations(
            runner,
            self.nn_prompt,
            self.ns_prompt,
            seg,
            seg.topic.text,
            lambda is_core: attach(texts, is_core, seg_cues),
        )

    def _parser_relations(
        self,
        seg: Segment,
        entities: list[set[str]],
        cues: list[Optional[OpeningCue]],
    ) -> SegmentRelations:
        """One segment's core split, attachments and ``rst`` edges by the LLM-free rules."""
        group = seg.sentences
        first = group[0].attrs["index"]
        texts = [node.text for node in group]
        found = entities[first : first + len(group)]
        seg_cues = cues[first : first + len(group)]
        is_core = split_core(core_scores(texts, found), seg_cues, self.core_ratio)
        nucleus = attach(texts, is_core, seg_cues)
        return SegmentRelations(
            is_core, nucleus, parser_relations(group, is_core, nucleus, seg_cues)
        )

    def _emit(self, seg: Segment, relations: SegmentRelations) -> list[GraphEdge]:
        """Fill the sentences' SentGraph attrs; the ``child``/core and ``rst`` edges."""
        group, topic = seg.sentences, seg.topic
        edges = []
        for i, node in enumerate(group):
            core = relations.is_core[i]
            node.attrs.update(
                sentgraph="core" if core else "supplementary", segment=seg.index, topic_id=topic.id
            )
            if i in relations.nucleus:
                node.attrs["nucleus_id"] = group[relations.nucleus[i]].id
            if self.embed_context:
                node.attrs["embed_text"] = f"{topic.text}: {node.text}"
            if core:
                edges.append(
                    GraphEdge(
                        source=topic.id,
                        target=node.id,
                        kind=EdgeKind.CHILD,
                        doc_id=node.doc_id,
                        role="core",
                    )
                )
        return edges + relations.edges

    # -- cross-document links -------------------------------------------------------------------
    async def alink(
        self, staged: Sequence[tuple[str, GraphStore]], committed: GraphStore
    ) -> tuple[dict[str, list[GraphEdge]], list["BuildFailure"]]:
        """Bridges from and to the batch's topics, grouped by the batch document owning each,
        and the LLM bridging calls that failed (each naming its batch ``doc_id``).

        ``staged`` is the batch in order as ``(doc_id, staging graph)``; ``committed`` is the
        graph as committed, whose versions of the batch's documents are ignored (they are being
        replaced).
        """
        if self.bridges == "none":
            return {}, []
        runner = self._runner_for(self.bridges, "bridges", "entities")
        batch_order = {doc_id: i for i, (doc_id, _) in enumerate(staged)}
        new = [t for doc_id, graph in staged for t in topic_texts(graph) if t.doc_id == doc_id]
        existing = topic_texts(committed, exclude=frozenset(batch_order))
        edges = shared_entity_bridges(new, existing, batch_order, self.max_bridges_per_topic)
        if self.co_entity_bridges:
            edges += co_entity_bridges(new, existing, batch_order, self.max_bridges_per_topic)
        failures: list[BuildFailure] = []
        if runner is not None and new:
            related, failures = await llm_bridges(
                runner,
                self.bridge_prompt,
                [t.topic for t in new],
                _neighbours_first(existing, edges),
                batch_order,
            )
            edges += related
        return group_by_owner(edges), failures


def _neighbours_first(existing: Sequence[TopicText], edges: Sequence[GraphEdge]) -> list[GraphNode]:
    """The committed topics for the LLM's entity lists, those already bridged to the batch
    first: a call holds only so many names, and those are the likeliest relations."""
    bridged = {end for edge in edges for end in (edge.source, edge.target)}
    topics = [t.topic for t in existing]
    return sorted(topics, key=lambda topic: topic.id not in bridged)


def _segment_failure(seg: Segment, error: Exception) -> "BuildFailure":
    """A segment whose LLM calls failed: it keeps the parser's relations and is reported."""
    reason = f"{type(error).__name__}: {error}"
    first, last = seg.sentences[0], seg.sentences[-1]
    doc_id = first.doc_id
    logger.warning(
        "sentence graph: segment %d of %s fell back to the parser relations (%s)",
        seg.index,
        doc_id,
        reason,
    )
    return {
        "doc_id": doc_id,
        "chunk_id": first.chunk_id or "",
        "reason": f"sentence graph: segment {seg.index} (characters {first.span[0]}-"
        f"{last.span[1]}) got the parser relations, its LLM calls failed: {reason}",
    }


class _SpacyOnDemand:
    """The project's spaCy pipeline, loaded on the first sentence that needs it, with parses
    serialised like the grounded extractor's (spaCy inference is not promised thread-safe)."""

    def __init__(self) -> None:
        self._nlp: Optional[Any] = None

    def _run(self, work: Callable[[Any], Any]) -> Any:
        if self._nlp is None:
            self._nlp = load_spacy()
        with PARSE_LOCK:
            return work(self._nlp)

    def parse(self, text: str) -> Any:
        return self._run(lambda nlp: nlp(text))

    def pipe(self, texts: list[str]) -> list[Any]:
        return self._run(lambda nlp: list(nlp.pipe(texts)))
