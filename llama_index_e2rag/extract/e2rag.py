"""E²RAG's LLM extraction (§4 step 2-3, Algorithms 1-2) as a llama-index ``TransformComponent``.

Per chunk an entity pass and a separate event pass (two LLM calls, as in the paper) or one
combined call. Every entity becomes a *mention* node of that chunk, with the description it has
there; mentions are never merged across chunks. Events keep title, description, participants and
date. Mentions link to the events of their own chunk whose text names them (``linking``).
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar, Optional, Sequence

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
from llama_index_e2rag.extract.chunk_graph import build_chunk_graph
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
from llama_index_e2rag.llm.runner import LLMRunner, run_sync

_MAX_REASON = 400


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

    #: Each chunk is extracted on its own: a long document may be extracted a group of chunks
    #: per call.
    chunk_local: ClassVar[bool] = True

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
