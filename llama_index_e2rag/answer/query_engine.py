"""Query engines over ``E2RAGIndex``: llama-index's ``RetrieverQueryEngine`` plus our context.

We do not write a query engine class. The answer step differs from llama-index's only in what the
LLM reads: instead of the retrieved chunks one after another, it reads the assembled context of
E²RAG §4 step 6 (passages in story order with positions, the linearised subgraph, node and edge
descriptions). ``NarrativeContextSynthesizer`` wraps a stock synthesizer to do exactly that and
hands the original chunks back as ``source_nodes``, so sync, async and streaming all work as
llama-index users expect. Without an LLM the offline ``ExtractiveSynthesizer`` answers instead.

Passages are shown in story order unless the retriever presents by relevance: a retriever with
``context_order == "retrieval"`` (``ChronoRetriever`` and ``VectorChunkRetriever`` with
``order="relevance"``) keeps its ranking in the prompt.
"""

from __future__ import annotations

import inspect
from typing import Any, Optional, Sequence

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.response.schema import RESPONSE_TYPE
from llama_index.core.llms import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers import BaseSynthesizer, get_response_synthesizer
from llama_index.core.response_synthesizers.base import QueryTextType
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.types import RESPONSE_TEXT_TYPE

from llama_index_e2rag.answer.extractive import ExtractiveSynthesizer
from llama_index_e2rag.context.evidence import ContextOrder, bundle_from_retrieved
from llama_index_e2rag.errors import MissingModelError
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.stores.port import Stores

NARRATIVE_QA_PROMPT = PromptTemplate(
    """You answer questions about a long narrative. The context below holds passages of the \
story (its heading says whether in story order or ranked by relevance), each with its position \
(document:character offset), followed by the entities and events found in them and how they \
relate. A character or situation can change over the story: use positions to tell earlier \
states from later ones, and prefer what the passages say over outside knowledge.

---Context---
{context_str}
---End of context---

Question: {query_str}
Answer (cite passage labels such as [P2] for the facts you use):
"""
)


class NarrativeContextSynthesizer(BaseSynthesizer):
    """Feeds the assembled narrative context to an inner synthesizer; keeps the real sources.

    ``order``: ``"story"`` (passages in narrative order) or ``"retrieval"`` (as ranked).
    """

    def __init__(
        self, inner: BaseSynthesizer, graph_store: GraphStore, order: ContextOrder = "story"
    ) -> None:
        super().__init__(
            llm=inner._llm,
            callback_manager=inner.callback_manager,
            streaming=inner._streaming,
        )
        self._inner = inner
        self._graph = graph_store
        self.order = order

    def _get_prompts(self) -> PromptDictType:
        """The inner synthesizer's prompts, under the usual names (``text_qa_template``...)."""
        return self._inner.get_prompts()

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        self._inner.update_prompts(prompts_dict)

    def _context_node(self, nodes: Sequence[NodeWithScore]) -> list[NodeWithScore]:
        bundle = bundle_from_retrieved(self._graph, nodes, self.order)
        return [NodeWithScore(node=TextNode(text=bundle.render()), score=None)]

    @staticmethod
    def _with_sources(
        response: RESPONSE_TYPE,
        nodes: Sequence[NodeWithScore],
        additional: Optional[Sequence[NodeWithScore]],
    ) -> RESPONSE_TYPE:
        sources = list(nodes) + list(additional or [])
        response.source_nodes = sources
        response.metadata = {n.node.node_id: n.node.metadata for n in sources}
        return response

    def synthesize(
        self,
        query: QueryTextType,
        nodes: list[NodeWithScore],
        additional_source_nodes: Optional[Sequence[NodeWithScore]] = None,
        **response_kwargs: Any,
    ) -> RESPONSE_TYPE:
        if not nodes:
            return self._inner.synthesize(query, nodes, **response_kwargs)
        response = self._inner.synthesize(query, self._context_node(nodes), **response_kwargs)
        return self._with_sources(response, nodes, additional_source_nodes)

    async def asynthesize(
        self,
        query: QueryTextType,
        nodes: list[NodeWithScore],
        additional_source_nodes: Optional[Sequence[NodeWithScore]] = None,
        **response_kwargs: Any,
    ) -> RESPONSE_TYPE:
        if not nodes:
            return await self._inner.asynthesize(query, nodes, **response_kwargs)
        response = await self._inner.asynthesize(
            query, self._context_node(nodes), **response_kwargs
        )
        return self._with_sources(response, nodes, additional_source_nodes)

    def get_response(
        self, query_str: str, text_chunks: Sequence[str], **response_kwargs: Any
    ) -> RESPONSE_TEXT_TYPE:
        return self._inner.get_response(query_str, text_chunks, **response_kwargs)

    async def aget_response(
        self, query_str: str, text_chunks: Sequence[str], **response_kwargs: Any
    ) -> RESPONSE_TEXT_TYPE:
        return await self._inner.aget_response(query_str, text_chunks, **response_kwargs)


#: What ``as_query_engine`` hands to the engine rather than to the retriever: every argument of
#: llama-index's ``RetrieverQueryEngine.from_args`` and ``get_response_synthesizer`` (read from
#: their signatures, so the split follows llama-index's own ``as_query_engine``).
ENGINE_ARGS: frozenset[str] = frozenset(
    name
    for fn in (RetrieverQueryEngine.from_args, get_response_synthesizer)
    for name, param in inspect.signature(fn).parameters.items()
    if param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL)
) - {"retriever", "llm", "cls"}
#: Engine arguments that both sides take (llama-index passes them to the retriever too).
SHARED_ARGS = frozenset({"callback_manager", "verbose"})
#: Engine arguments that do not shape the answer text: valid with the offline answer too.
PLUMBING_ARGS = frozenset(
    {"node_postprocessors", "response_synthesizer", "streaming", "use_async", *SHARED_ARGS}
)
_SYNTH_DEFAULTS = {
    name: param.default
    for name, param in inspect.signature(get_response_synthesizer).parameters.items()
}


def split_engine_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(engine arguments, retriever arguments)`` of one ``as_query_engine(**kwargs)`` call;
    ``callback_manager`` and ``verbose`` go to both, as in llama-index."""
    engine = {k: v for k, v in kwargs.items() if k in ENGINE_ARGS}
    retriever = {k: v for k, v in kwargs.items() if k not in ENGINE_ARGS or k in SHARED_ARGS}
    return engine, retriever


def answer_args(engine_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The engine arguments that shape how an LLM writes the answer (templates, response mode,
    output class …), those left at llama-index's defaults not counted."""
    return {
        k: v
        for k, v in engine_kwargs.items()
        if k not in PLUMBING_ARGS and not (k in _SYNTH_DEFAULTS and v == _SYNTH_DEFAULTS[k])
    }


def refuse_offline(args: dict[str, Any]) -> None:
    """One line for answer arguments given with no LLM to honour them."""
    if args:
        raise MissingModelError(
            f"{', '.join(sorted(args))} shape{'s' if len(args) == 1 else ''} the answer an LLM "
            "writes, and no LLM is configured: pass llm=... (or set Settings.llm), or leave "
            f"{'it' if len(args) == 1 else 'them'} out for the offline extractive answer"
        )


def build_query_engine(
    retriever: BaseRetriever,
    graph: GraphStore,
    embed_model: BaseEmbedding,
    answer_llm: Optional[LLM] = None,
    streaming: bool = False,
    stores: Optional[Stores] = None,
    **engine_kwargs: Any,
) -> RetrieverQueryEngine:
    """``RetrieverQueryEngine`` over ``retriever`` with the narrative prompt.

    ``answer_llm`` answers from the assembled narrative context (``graph`` supplies the
    subgraph); without one, answers are extractive (best evidence sentences with their
    positions, ranked with ``embed_model`` and the vectors ``stores`` hold). ``engine_kwargs`` are ``from_args``'s:
    ``node_postprocessors``, ``callback_manager``, a ``response_synthesizer`` of your own (used
    as given), or the synthesizer's (``response_mode``, ``text_qa_template`` …; these need an
    LLM). The answer is llama-index's call to ``answer_llm``, not ``LLMRunner``'s, so the
    runner's timeout does not bound it: set the timeout of the LLM's client (e.g.
    ``OpenAI(timeout=60)``). The retriever's own LLM calls (cues, HyDE) go through the runner.
    """
    unknown = set(engine_kwargs) - ENGINE_ARGS
    if unknown:
        raise TypeError(f"unknown query engine argument(s): {', '.join(sorted(unknown))}")
    postprocessors = engine_kwargs.pop("node_postprocessors", None)
    callback_manager = engine_kwargs.pop("callback_manager", None)
    synthesizer: Optional[BaseSynthesizer] = engine_kwargs.pop("response_synthesizer", None)
    if synthesizer is None and answer_llm is None:
        refuse_offline(answer_args(engine_kwargs))

        synthesizer = ExtractiveSynthesizer(
            embed_model=embed_model,
            graph_store=graph,
            streaming=streaming,
            callback_manager=callback_manager,
            stores=stores,
        )
    elif synthesizer is None:
        synth_args = {k: v for k, v in engine_kwargs.items() if k in _SYNTH_DEFAULTS}
        synth_args.setdefault("text_qa_template", NARRATIVE_QA_PROMPT)
        inner = get_response_synthesizer(
            llm=answer_llm, streaming=streaming, callback_manager=callback_manager, **synth_args
        )
        order = getattr(retriever, "context_order", "story")
        synthesizer = NarrativeContextSynthesizer(inner, graph, order)
    # The constructor, not ``from_args``: the latter reads ``Settings.llm``, which builds
    # llama-index's OpenAI default and fails offline even though the synthesizer is given.
    return RetrieverQueryEngine(
        retriever=retriever,
        response_synthesizer=synthesizer,
        node_postprocessors=postprocessors,
        callback_manager=callback_manager,
    )
