"""E²GraphRAG's two-stage answer (paper 001, §3.2): draft, decomposition, evidence, enriched.

The retriever makes the first call (figure 7: the draft answer from the chunks and the question's
decomposition) and returns the evidence with the decomposition on every item; this engine makes
the second (figure 8: the draft enriched with the events, paths, entities and chunks, labelled
"Event 1", "Path 1", "Entity 1", "C_1" so the answer can cite them). Two LLM calls per question,
as in the paper. Without an LLM the answer is the offline extractive one over the same evidence.
"""

from __future__ import annotations

from typing import Any, AsyncGenerator, Generator, List, Optional, Sequence

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from llama_index.core.response_synthesizers import BaseSynthesizer
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from llama_index_e2rag.answer.extractive import ExtractiveSynthesizer
from llama_index_e2rag.answer.query_engine import ENGINE_ARGS, answer_args, refuse_offline
from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.extract.event_graph.prompts import ENRICH_PROMPT
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.retrievers.event_graph import EventGraphRetriever
from llama_index_e2rag.stores.port import Stores

#: Sections of figure 8's ``{evidence}``, in the order the paper ranks them.
_SECTIONS = (("event", "Events"), ("path", "Paths"), ("entity", "Entities"), ("chunk", "Chunks"))
#: ``{old_answer}`` when the retriever made no draft (offline decomposition or a failed call).
NO_DRAFT = "NONE"


def enrich_evidence(nodes: Sequence[NodeWithScore]) -> str:
    """Figure 8's ``{evidence}``: events, paths, entities, then chunks, each section in the
    retriever's evidence order, every item under its label."""
    ranked = sorted(nodes, key=lambda n: n.node.metadata.get("rank", 0))
    parts = []
    for role, title in _SECTIONS:
        items = [n for n in ranked if n.node.metadata.get("evidence_role") == role]
        if not items:
            continue
        lines = [f"-----{title}-----"]
        for item in items:
            meta = item.node.metadata
            text = item.node.get_content(metadata_mode=MetadataMode.NONE)
            lines.append(f"[{meta.get('label', '')}] ({meta.get('position', '')})\n{text}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def decomposition_of(nodes: Sequence[NodeWithScore]) -> dict[str, Any]:
    """The retriever's decomposition (on every item), or an empty one when nothing came back."""
    for item in nodes:
        found = item.node.metadata.get("decomposition")
        if found:
            return dict(found)
    return {"draft": "", "entities": [], "sub_queries": [], "how": None}


class EventGraphQueryEngine(BaseQueryEngine):
    """Retrieve with ``EventGraphRetriever``, then enrich its draft (``llm``) or answer
    extractively (``synthesizer``, when there is no LLM).

    Prompts: ``decompose_prompt`` (the retriever's, figure 7) and ``enrich_prompt`` (figure 8,
    variables ``question``, ``old_answer``, ``evidence``), both through ``update_prompts``.
    ``node_postprocessors`` apply to the retrieved evidence before the second stage, as in
    llama-index's ``RetrieverQueryEngine``.
    """

    def __init__(
        self,
        retriever: EventGraphRetriever,
        llm: Optional[LLM] = None,
        synthesizer: Optional[BaseSynthesizer] = None,
        enrich_prompt: Any = None,
        streaming: bool = False,
        callback_manager: Optional[CallbackManager] = None,
        node_postprocessors: Optional[List[BaseNodePostprocessor]] = None,
    ) -> None:
        if llm is None and synthesizer is None:
            raise ValueError("EventGraphQueryEngine needs an llm or an offline synthesizer")
        super().__init__(callback_manager=callback_manager or retriever.callback_manager)
        self._retriever = retriever
        self._llm = llm
        self._synthesizer = synthesizer
        self._enrich_prompt = enrich_prompt
        self._streaming = streaming
        self._postprocessors = list(node_postprocessors or [])
        for postprocessor in self._postprocessors:
            postprocessor.callback_manager = self.callback_manager

    @property
    def retriever(self) -> EventGraphRetriever:
        return self._retriever

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _get_prompts(self) -> PromptDictType:
        return {
            "decompose_prompt": self._retriever.get_prompts()["decompose_prompt"],
            "enrich_prompt": self._enrich_prompt or ENRICH_PROMPT,
        }

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if "decompose_prompt" in prompts_dict:
            self._retriever.update_prompts({"decompose_prompt": prompts_dict["decompose_prompt"]})
        self._enrich_prompt = prompts_dict.get("enrich_prompt", self._enrich_prompt)

    def retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._postprocess(self._retriever.retrieve(query_bundle), query_bundle)

    async def aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._postprocess(await self._retriever.aretrieve(query_bundle), query_bundle)

    def _postprocess(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle
    ) -> list[NodeWithScore]:
        for postprocessor in self._postprocessors:
            nodes = postprocessor.postprocess_nodes(nodes, query_bundle=query_bundle)
        return nodes

    # -- llama-index entry points -------------------------------------------------------------
    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        # the decomposition is read before the postprocessors, which may drop every item
        retrieved = self._retriever.retrieve(query_bundle)
        decomposition = decomposition_of(retrieved)
        nodes = self._postprocess(retrieved, query_bundle)
        if self._llm is None:
            response = self._synthesizer.synthesize(query_bundle, nodes)  # type: ignore[union-attr]
            return _with_metadata(response, nodes, decomposition)
        prompt, args = self._enrich_args(query_bundle, nodes, decomposition)
        if self._streaming:
            gen: Generator[str, None, None] = self._llm.stream(prompt, **args)
            return StreamingResponse(
                response_gen=gen, source_nodes=nodes, metadata=_metadata(decomposition)
            )
        answer = self._llm.predict(prompt, **args)
        return Response(answer, source_nodes=nodes, metadata=_metadata(decomposition))

    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        retrieved = await self._retriever.aretrieve(query_bundle)
        decomposition = decomposition_of(retrieved)
        nodes = self._postprocess(retrieved, query_bundle)
        if self._llm is None:
            response = await self._synthesizer.asynthesize(  # type: ignore[union-attr]
                query_bundle, nodes
            )
            return _with_metadata(response, nodes, decomposition)
        prompt, args = self._enrich_args(query_bundle, nodes, decomposition)
        if self._streaming:
            agen: AsyncGenerator[str, None] = await self._llm.astream(prompt, **args)
            return AsyncStreamingResponse(
                response_gen=agen, source_nodes=nodes, metadata=_metadata(decomposition)
            )
        answer = await self._llm.apredict(prompt, **args)
        return Response(answer, source_nodes=nodes, metadata=_metadata(decomposition))

    def _enrich_args(
        self,
        query_bundle: QueryBundle,
        nodes: Sequence[NodeWithScore],
        decomposition: dict[str, Any],
    ) -> tuple[Any, dict[str, str]]:
        """Figure 8 and its variables: the question, the draft, the labelled evidence."""
        args = {
            "question": query_bundle.query_str,
            "old_answer": decomposition.get("draft") or NO_DRAFT,
            "evidence": enrich_evidence(nodes),
        }
        return self._get_prompts()["enrich_prompt"], args


def _metadata(decomposition: dict[str, Any]) -> dict[str, Any]:
    keys = ("draft", "entities", "sub_queries", "how")
    return {k: decomposition.get(k) for k in keys}


def _with_metadata(
    response: RESPONSE_TYPE, nodes: Sequence[NodeWithScore], decomposition: dict[str, Any]
) -> RESPONSE_TYPE:
    """The offline answer with the decomposition beside the synthesizer's own metadata."""
    response.source_nodes = list(nodes)
    response.metadata = {**(response.metadata or {}), **_metadata(decomposition)}
    return response


def build_event_graph_engine(
    retriever: EventGraphRetriever,
    graph: GraphStore,
    embed_model: BaseEmbedding,
    llm: Optional[LLM],
    streaming: bool = False,
    stores: Optional[Stores] = None,
    **engine_kwargs: Any,
) -> EventGraphQueryEngine:
    """The ``mode="event_graph"`` query engine: two LLM stages with ``llm`` (the retriever's
    runner should wrap the same LLM, for the draft), the extractive answer without one (with
    the vectors ``stores`` hold).

    ``engine_kwargs`` are those of ``as_query_engine``: ``node_postprocessors`` and
    ``callback_manager`` apply; a ``response_synthesizer`` of your own writes the answer from the
    evidence instead of the enrich stage; the synthesizer's own arguments (``response_mode``,
    ``text_qa_template`` …) have no stage to shape here and are refused in one line.
    """
    unknown = set(engine_kwargs) - ENGINE_ARGS
    if unknown:
        raise TypeError(f"unknown query engine argument(s): {', '.join(sorted(unknown))}")
    postprocessors = engine_kwargs.pop("node_postprocessors", None)
    callback_manager = engine_kwargs.pop("callback_manager", None)
    synthesizer = engine_kwargs.pop("response_synthesizer", None)
    common: dict[str, Any] = {
        "streaming": streaming,
        "callback_manager": callback_manager,
        "node_postprocessors": postprocessors,
    }
    if synthesizer is not None:
        return EventGraphQueryEngine(retriever, synthesizer=synthesizer, **common)
    shaping = answer_args(engine_kwargs)
    if llm is None:
        refuse_offline(shaping)
    elif shaping:
        raise E2RAGError(
            f"mode='event_graph' writes its answer with its enrich prompt, so "
            f"{', '.join(sorted(shaping))} do(es) not apply: change the prompt with "
            "engine.update_prompts({'enrich_prompt': ...}), or pass response_synthesizer=..."
        )
    if llm is not None:
        return EventGraphQueryEngine(retriever, llm=llm, **common)

    offline = ExtractiveSynthesizer(
        embed_model=embed_model,
        graph_store=graph,
        streaming=streaming,
        callback_manager=callback_manager,
        stores=stores,
    )
    return EventGraphQueryEngine(retriever, synthesizer=offline, **common)
