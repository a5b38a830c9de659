"""Retrievers, query engines and chat engines over a store, for ``E2RAGIndex.as_*``.

Each mode's retriever gets the stores, the embedding and what that mode needs besides (the
extractors' parser, the passage length, the LLM runner), resolved here from ``IndexModels`` so
retrievers never see the index. Engines answer with the index's LLM unless given one; with none,
answers are extractive.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Optional

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.llms import LLM

from llama_index_e2rag.answer.chat_engine import build_chat_engine
from llama_index_e2rag.answer.query_engine import build_query_engine, split_engine_kwargs
from llama_index_e2rag.ingest.models import IndexModels
from llama_index_e2rag.llm.runner import LLMRunner
from llama_index_e2rag.modes import DEFAULT_MODE, RETRIEVER_CLASSES, RETRIEVER_MODES
from llama_index_e2rag.retrievers.parsing import extractors_parser
from llama_index_e2rag.stores.port import Stores

if TYPE_CHECKING:
    from llama_index.core.chat_engine.types import BaseChatEngine

__all__ = ["EngineFactory"]


class EngineFactory:
    """Builds ``as_retriever`` / ``as_query_engine`` / ``as_chat_engine`` results over
    ``stores`` with ``models`` (``passage_words``: the narrative mode's passage length)."""

    def __init__(self, stores: Stores, models: IndexModels, passage_words: int) -> None:
        self.stores = stores
        self.models = models
        self.passage_words = passage_words

    def retriever(self, mode: str = DEFAULT_MODE, **kwargs: Any) -> BaseRetriever:
        """The retriever of ``mode``; ``kwargs`` win over what the mode is given by default."""
        if mode not in RETRIEVER_CLASSES:
            raise ValueError(
                f"unknown retrieval mode {mode!r}; choose one of {', '.join(RETRIEVER_MODES)}"
            )
        module_name, class_name = RETRIEVER_CLASSES[mode]
        retriever_cls = getattr(importlib.import_module(module_name), class_name)
        needs = {**self.needs(mode), **kwargs}  # the caller's arguments win
        return retriever_cls(self.stores, self.models.embed_model, **needs)

    def needs(self, mode: str) -> dict[str, Any]:
        """What a mode needs besides the stores and the embedding (resolved here, typed)."""
        needs: dict[str, Any] = {}
        if mode in ("narrative", "grounded", "entity_event", "event_graph"):
            needs["parser"] = extractors_parser(self.models.extractors)
        if mode == "narrative":
            needs["passage_words"] = self.passage_words
        if mode in ("entity_event", "sentence_graph", "event_graph"):
            needs["llm_runner"] = self.models.llm_runner
        return needs

    def query_engine(
        self,
        mode: str = DEFAULT_MODE,
        hyde: Optional[str] = None,
        llm: Optional[LLM] = None,
        streaming: bool = False,
        **kwargs: Any,
    ) -> BaseQueryEngine:
        """``E2RAGIndex.as_query_engine`` (its docstring says what each argument does)."""
        engine_kwargs, kwargs = split_engine_kwargs(kwargs)
        answer_llm = self.models.answer_llm(llm)
        llm = answer_llm if llm is not None else None  # a NoLLM given: no LLM at all
        if mode == "event_graph":
            # E²GraphRAG's engine pulls in its prompts and path search (a quarter second)
            from llama_index_e2rag.answer.event_graph_engine import build_event_graph_engine

            if llm is not None:  # the draft call uses the same model as the answer
                kwargs.setdefault("llm_runner", LLMRunner(llm))
            return build_event_graph_engine(
                self.retriever(mode=mode, **kwargs),  # type: ignore[arg-type]
                self.stores.graph,
                self.models.embed_model,
                answer_llm,
                streaming=streaming,
                stores=self.stores,
                **engine_kwargs,
            )
        if hyde is not None:
            if mode != "entity_event":
                raise ValueError(f"hyde variants apply to mode='entity_event', not {mode!r}")
            kwargs["hyde"] = hyde
        if llm is not None and mode == "entity_event":
            kwargs.setdefault("llm", llm)
        return build_query_engine(
            self.retriever(mode=mode, **kwargs),
            self.stores.graph,
            self.models.embed_model,
            answer_llm,
            streaming=streaming,
            stores=self.stores,
            **engine_kwargs,
        )

    def chat_engine(
        self,
        chat_mode: str = "condense_plus_context",
        llm: Optional[LLM] = None,
        mode: str = DEFAULT_MODE,
        **kwargs: Any,
    ) -> "BaseChatEngine":
        """``E2RAGIndex.as_chat_engine``: llama-index's engine of ``chat_mode`` with an LLM, else
        the offline extractive one."""
        chat_llm = self.models.answer_llm(llm)
        return build_chat_engine(
            chat_mode,
            chat_llm,
            lambda rest: self.retriever(mode=mode, **rest),
            lambda rest: self.query_engine(mode=mode, llm=chat_llm, **rest),
            kwargs,
        )
