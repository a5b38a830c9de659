"""E²RAG's LLM extraction (§4 step 2-3, Algorithms 1-2) as a llama-index ``TransformComponent``.

Per chunk an entity pass and a separate event pass (two LLM calls, as in the paper) or one
combined call. Every entity becomes a *mention* node of that chunk, with the description it has
there; mentions are never merged across chunks. Events keep title, description, participants and
date. Mentions link to the events of their own chunk whose text names them (``linking``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional, Sequence

from llama_index.core.async_utils import get_asyncio_module
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent
from pydantic import Field

from llama_index_e2rag.extract.base import (
    DOC_ORDER_KEY,
    attach_graph,
    chunk_doc_id,
    chunk_offset,
    record_failure,
)
from llama_index_e2rag.extract.linking import (
    bipartite_edges,
    chunk_node_id,
    co_occurrence_edges,
    locate_name,
)
from llama_index_e2rag.extract.prompts import (
    COMBINED_EXTRACTION,
    COMBINED_EXTRACTION_PROMPT,
    ENTITY_EXTRACTION,
    ENTITY_EXTRACTION_PROMPT,
    EVENT_EXTRACTION,
    EVENT_EXTRACTION_PROMPT,
    CombinedExtraction,
    EntityExtraction,
    EventExtraction,
    ExtractedEntity,
    ExtractedEvent,
)
from llama_index_e2rag.llm import LLMRunner, run_sync
from llama_index_e2rag.schema import GraphEdge, GraphNode, NodeKind, Position, normalize_text

_MAX_REASON = 400


def build_chunk_graph(
    entities: Sequence[ExtractedEntity],
    events: Sequence[ExtractedEvent],
    *,
    text: str,
    doc_id: str,
    chunk_id: str,
    doc_order: int = 0,
    chunk_start: int = 0,
) -> tuple[list[GraphNode], list[GraphEdge]]:
    """Mention and event nodes of one chunk with their bipartite and co-occurrence edges.

    Framework-agnostic (``lightrag_ext`` calls it with LightRAG's chunk fields). Positions are
    absolute: a mention sits at the first occurrence of its name (or a short form) in the chunk,
    an event at the first occurrence of one of its participants; both fall back to the chunk
    start. Ids come from ``chunk_node_id`` over (doc, chunk, kind, position, text): rebuilding
    the same input with the same answers gives the same graph, and an event read by two
    overlapping chunks is two nodes, each linked only within its own chunk.
    """
    chunk_span = (chunk_start, chunk_start + len(text))
    mentions: list[GraphNode] = []
    seen: set[str] = set()
    types_by_name: dict[str, str] = {}
    for entity in entities:
        name = entity.name.strip()
        key = normalize_text(name)
        if not key or key in seen:
            continue
        seen.add(key)
        types_by_name[key] = entity.type
        found = locate_name([name], text, entity.type)
        span = (chunk_start + found[0], chunk_start + found[1]) if found else chunk_span
        pos = (doc_order, span[0] if found else chunk_start, len(mentions))
        description = entity.description.strip()
        mentions.append(
            _described_node(
                NodeKind.MENTION,
                name,
                description,
                doc_id=doc_id,
                chunk_id=chunk_id,
                pos=pos,
                span=span,
                attrs={"entity_type": entity.type, "description": description},
            )
        )

    event_nodes: list[GraphNode] = []
    for event in events:
        description = event.description.strip()
        title = event.title.strip() or " ".join(description.split()[:8])
        if not title:
            continue
        participants = [p.strip() for p in event.participants if p and p.strip()]
        offsets = [
            found[0]
            for p in participants
            if (found := locate_name([p], text, types_by_name.get(normalize_text(p))))
        ]
        pos = (doc_order, chunk_start + min(offsets, default=0), len(event_nodes))
        event_nodes.append(
            _described_node(
                NodeKind.EVENT,
                title,
                description,
                doc_id=doc_id,
                chunk_id=chunk_id,
                pos=pos,
                span=chunk_span,
                attrs={
                    "description": description,
                    "participants": participants,
                    "date": event.date,
                },
            )
        )
    edges = bipartite_edges(mentions, event_nodes) + co_occurrence_edges(mentions, event_nodes)
    return mentions + event_nodes, edges


def _described_node(
    kind: NodeKind,
    name: str,
    description: str,
    *,
    doc_id: str,
    chunk_id: str,
    pos: Position,
    span: tuple[int, int],
    attrs: dict[str, Any],
) -> GraphNode:
    """A mention or event of one chunk; ``"<name>: <description>"`` is the text that is embedded."""
    node_text = f"{name}: {description}" if description else name
    return GraphNode(
        id=chunk_node_id(doc_id, chunk_id, kind, pos, node_text),
        kind=kind,
        text=node_text,
        doc_id=doc_id,
        pos=pos,
        span=span,
        chunk_id=chunk_id,
        name=name,
        attrs=attrs,
    )


def _reason(kind: str, exc: BaseException) -> str:
    reason = f"{kind} failed: {type(exc).__name__}: {exc}"
    return reason if len(reason) <= _MAX_REASON else reason[: _MAX_REASON - 3] + "..."


class EntityEventExtractor(TransformComponent, PromptMixin):
    """Entity mentions, events and their links for each chunk, extracted by an LLM.

    Args:
        llm_runner: the ``LLMRunner`` (cache, retries, concurrency and accounting live there).
        combined: one call per chunk for entities and events instead of two passes.
        entity_prompt / event_prompt / combined_prompt: override the default prompts (also via
            ``update_prompts({"entity_prompt": ...})``); they receive ``{text}``.
        show_progress: progress bar over chunks.

    A chunk whose pass fails (after the runner's retries and JSON repair) keeps whatever the other
    pass found and carries the failure reason (``record_failure``); it stays indexed as text.
    """

    llm_runner: LLMRunner = Field(exclude=True)
    combined: bool = False
    entity_prompt: BasePromptTemplate = Field(default=ENTITY_EXTRACTION_PROMPT, exclude=True)
    event_prompt: BasePromptTemplate = Field(default=EVENT_EXTRACTION_PROMPT, exclude=True)
    combined_prompt: BasePromptTemplate = Field(default=COMBINED_EXTRACTION_PROMPT, exclude=True)
    show_progress: bool = False

    def __init__(
        self,
        llm_runner: LLMRunner,
        combined: bool = False,
        entity_prompt: Optional[BasePromptTemplate] = None,
        event_prompt: Optional[BasePromptTemplate] = None,
        combined_prompt: Optional[BasePromptTemplate] = None,
        show_progress: bool = False,
    ) -> None:
        super().__init__(
            llm_runner=llm_runner,
            combined=combined,
            entity_prompt=entity_prompt or ENTITY_EXTRACTION_PROMPT,
            event_prompt=event_prompt or EVENT_EXTRACTION_PROMPT,
            combined_prompt=combined_prompt or COMBINED_EXTRACTION_PROMPT,
            show_progress=show_progress,
        )

    @classmethod
    def class_name(cls) -> str:
        return "EntityEventExtractor"

    def _get_prompts(self) -> PromptDictType:
        return {
            "entity_prompt": self.entity_prompt,
            "event_prompt": self.event_prompt,
            "combined_prompt": self.combined_prompt,
        }

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        for name in ("entity_prompt", "event_prompt", "combined_prompt"):
            if name in prompts_dict:
                setattr(self, name, prompts_dict[name])

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        return run_sync(self.acall(nodes, **kwargs))

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Extract all chunks concurrently; the runner's ``num_workers`` bounds LLM calls."""
        show_progress = kwargs.get("show_progress", self.show_progress)
        jobs = [self._extract_chunk(node) for node in nodes]
        if show_progress:
            await get_asyncio_module(True).gather(*jobs, desc="E2RAG extraction")
        else:
            await asyncio.gather(*jobs)
        self.llm_runner.flush()
        return list(nodes)

    async def _extract_chunk(self, node: BaseNode) -> None:
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        if not text.strip():
            return
        entities, events, errors = await self._run_passes(text)
        if entities or events:
            nodes, edges = build_chunk_graph(
                entities,
                events,
                text=text,
                doc_id=chunk_doc_id(node),
                chunk_id=node.node_id,
                doc_order=int(node.metadata.get(DOC_ORDER_KEY, 0)),
                chunk_start=chunk_offset(node),
            )
            attach_graph(node, nodes, edges)
        for error in errors:
            record_failure(node, error)

    async def _run_passes(
        self, text: str
    ) -> tuple[list[ExtractedEntity], list[ExtractedEvent], list[str]]:
        runner = self.llm_runner
        if self.combined:
            try:
                both = await runner.astructured(
                    self.combined_prompt, CombinedExtraction, kind=COMBINED_EXTRACTION, text=text
                )
            except Exception as exc:  # noqa: BLE001 - a failed chunk is recorded, not fatal
                return [], [], [_reason(COMBINED_EXTRACTION, exc)]
            return both.entities, both.events, []
        entity_result, event_result = await asyncio.gather(
            runner.astructured(
                self.entity_prompt, EntityExtraction, kind=ENTITY_EXTRACTION, text=text
            ),
            runner.astructured(
                self.event_prompt, EventExtraction, kind=EVENT_EXTRACTION, text=text
            ),
            return_exceptions=True,
        )
        errors = []
        entities: list[ExtractedEntity] = []
        events: list[ExtractedEvent] = []
        for kind, result in ((ENTITY_EXTRACTION, entity_result), (EVENT_EXTRACTION, event_result)):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result  # cancellation and the like are not extraction failures
                errors.append(_reason(kind, result))
            elif isinstance(result, EntityExtraction):
                entities = result.entities
            elif isinstance(result, EventExtraction):
                events = result.events
        return entities, events, errors
