"""The base of every retriever over ``Stores``: the contract, in the spirit of llama-index's
``BasePGRetriever``.

A subclass passes ``stores``, ``embed_model``, ``budget_words`` and ``filters`` to
``StoresRetriever.__init__`` (checked here, in one line each) and writes its retrieval once, as
``async def _run(query, io)``: ``io`` (``RetrievalIO``) is how that one body waits, blocking
under ``retrieve`` and awaiting under ``aretrieve``. The blocking path runs the coroutine without
an event loop (``run_blocking``; it never suspends, since every wait in it is a blocking call),
so the sync API works from threads and inside running loops alike; the async path awaits the
embed model, the vector stores and the LLM for real, and runs CPU or store work that has no
async form in a thread (``io.offload``). ``query_bundle.embedding``, when the caller gives one, is
the query's embedding in every mode (``_query_embedding``): the embed model is not asked for it;
otherwise the one computed is kept there, as llama-index's vector retrievers do.

A retrieval reads the graph, the vectors and the chunks many times; a commit landing between two
of those reads would mix two states (a node found by search whose rows are gone, say). Each
``retrieve`` therefore holds the stores' read lock (``locks.py``): commits of this or another
process wait until it returns, and it waits for a commit under way.

It is also the one place where what every mode shares happens to the results: ``filters``
(``filters.py``: each retriever restricts its candidates to the allowed documents before
ranking; this base drops whatever graph expansion still brought in from other documents), the
source's ``file_name`` / ``title`` on every result, and the score on the 0-1 scale of
``ranking.scores`` (``_calibrate``; the mode's raw score stays in ``signals["raw_score"]``, the
order of the results is the mode's own).
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from typing import Any, Awaitable, Callable, Coroutine, Optional, Sequence, TypeVar

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, QueryType
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_e2rag.context.evidence import ContextOrder
from llama_index_e2rag.context.keys import RAW_SCORE_KEY, SIGNALS_KEY
from llama_index_e2rag.retrievers.budget import check_budget
from llama_index_e2rag.retrievers.filters import (
    DocScope,
    asearch,
    check_filters,
    resolve_scope,
    result_doc_id,
    search,
    with_source,
)
from llama_index_e2rag.ranking.scores import cosine_score
from llama_index_e2rag.stores.port import Stores
from llama_index_e2rag.vectors.base import VectorHit

T = TypeVar("T")


class RetrievalIO:
    """How one retrieval waits: ``aio=False`` calls the blocking forms (``retrieve``),
    ``aio=True`` awaits the async ones (``aretrieve``). The retrieval itself is written once."""

    def __init__(self, aio: bool) -> None:
        self.aio = aio

    async def call(
        self,
        blocking: Callable[..., T],
        awaited: Callable[..., Awaitable[T]],
        *args: Any,
        **kwargs: Any,
    ) -> T:
        """One I/O call (an LLM, an embedding, a vector store) in its blocking or async form."""
        return await awaited(*args, **kwargs) if self.aio else blocking(*args, **kwargs)

    async def offload(self, work: Callable[..., T], *args: Any) -> T:
        """CPU or store work without an async form: in-line when blocking, in a thread when
        awaited, so the event loop stays free meanwhile."""
        return await asyncio.to_thread(work, *args) if self.aio else work(*args)

    async def embed_queries(self, model: BaseEmbedding, texts: Sequence[str]) -> list[Embedding]:
        """Query embeddings of ``texts`` (awaited concurrently on the async path)."""
        if self.aio:
            return list(await asyncio.gather(*(model.aget_query_embedding(t) for t in texts)))
        return [model.get_query_embedding(t) for t in texts]

    async def search(
        self, stores: Stores, scope: Optional[DocScope], *query: Any
    ) -> list[VectorHit]:
        """``filters.search`` (``query``: node kind, vector, top k) blocking or awaited."""
        return await self.call(search, asearch, stores, scope, *query)


#: The two ways a retrieval waits.
BLOCKING, AWAITED = RetrievalIO(aio=False), RetrievalIO(aio=True)


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a retrieval under ``BLOCKING``) without a loop.

    Every wait of such a coroutine is a blocking call, so it finishes on its first step; no loop
    is created, which keeps the sync API usable from threads and from inside running loops.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the blocking retrieval path awaited real asynchronous I/O")


class StoresRetriever(BaseRetriever):
    """A retriever over an index's ``Stores`` (abstract: subclasses write ``_run``).

    Args:
        stores: the index's ``Stores`` (``index.as_retriever(...)`` passes them).
        embed_model: the embedding the index was embedded with.
        budget_words: fill this many words instead of a number of results (``None``: off).
        filters: ``MetadataFilters`` on document metadata (checked now: a bad operator fails
            here, in one line).
    """

    def __init__(
        self,
        stores: Stores,
        embed_model: BaseEmbedding,
        budget_words: Optional[int] = None,
        filters: Optional[MetadataFilters] = None,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        check_budget(budget_words)
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self._stores = stores
        self.filters = check_filters(filters)
        self._embed_model = embed_model
        self.budget_words = budget_words

    @property
    def context_order(self) -> ContextOrder:
        """The order the answer LLM reads the results in: the story's (default), or the
        retriever's ranking (``"retrieval"``)."""
        return "story"

    @abstractmethod
    async def _run(self, query: QueryBundle, io: RetrievalIO) -> list[NodeWithScore]:
        """The mode's retrieval, written once; ``io`` says whether its calls block or await."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return run_blocking(self._run(query_bundle, BLOCKING))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await self._run(query_bundle, AWAITED)

    async def _query_embedding(self, query: QueryBundle, io: RetrievalIO) -> Embedding:
        """The caller's ``query.embedding`` when given (the embed model is not asked), else the
        embed model's: of the query text, or the mean over ``custom_embedding_strs`` when the
        caller gave several (llama-index's ``QueryBundle`` convention). Kept in the bundle, as
        llama-index's vector retrievers keep it, so that the answer synthesizer reading the same
        bundle does not embed the question again."""
        if query.embedding is None:
            texts = query.embedding_strs or [query.query_str]
            model = self._embed_model
            if len(texts) == 1:
                query.embedding = (await io.embed_queries(model, texts))[0]
            else:
                query.embedding = await io.call(
                    model.get_agg_embedding_from_queries,
                    model.aget_agg_embedding_from_queries,
                    texts,
                )
        return query.embedding

    def _scope(self) -> Optional[DocScope]:
        """The documents this retrieval may use (``None``: all); resolved per retrieval, since
        documents come and go."""
        return resolve_scope(self._stores, self.filters)

    def _calibrate(self, raw: float, signals: dict[str, float]) -> float:
        """The 0-1 score of a raw score (default: a cosine, clipped); ``signals`` is the
        result's ``metadata["signals"]``, for modes whose calibration needs more than ``raw``."""
        return cosine_score(raw)

    def _finish(self, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
        scope = self._scope()
        if scope is not None:
            nodes = [item for item in nodes if scope.allows(result_doc_id(item))]
        for item in nodes:
            if item.score is not None:
                signals = _signals_of(item)
                signals[RAW_SCORE_KEY] = item.score
                item.score = self._calibrate(item.score, signals)
        return with_source(self._stores, nodes)

    def retrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        with self._stores.reading():
            return self._finish(super().retrieve(str_or_query_bundle))

    async def aretrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        async with self._stores.areading():
            return self._finish(await super().aretrieve(str_or_query_bundle))


def _signals_of(item: NodeWithScore) -> dict[str, float]:
    """The result's ``signals`` dict (created when the mode records none), kept out of what
    the LLM reads and what is embedded, like the rest of the bookkeeping."""
    node = item.node
    for excluded in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
        if SIGNALS_KEY not in excluded:
            excluded.append(SIGNALS_KEY)
    return node.metadata.setdefault(SIGNALS_KEY, {})
