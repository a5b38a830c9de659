"""The retriever base (``retrievers/base.py``): one contract for the seven modes.

A caller's ``QueryBundle.embedding`` is the query's embedding in every mode (the embed model is
never asked for it, and the results are those of the query embedded by the index); the blocking
and async paths are one body; an LLM call of the async path is awaited on the event loop.
Real spaCy, MiniLM and stores; the LLM is the scripted one.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from llama_index.core import Document
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import QueryBundle
from pydantic import PrivateAttr
from scripted_llm import ScriptedLLM

from llama_index_e2rag.embeddings import MiniLMEmbedding
from llama_index_e2rag.extract.event_graph.builder import EventGraphBuilder
from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.llm.runner import LLMRunner
from llama_index_e2rag.retrievers.base import StoresRetriever, run_blocking
from llama_index_e2rag.retrievers.chrono import ChronoRetriever
from llama_index_e2rag.retrievers.entity_event import EntityEventRetriever
from llama_index_e2rag.retrievers.event_graph import EventGraphRetriever
from llama_index_e2rag.retrievers.grounded import GroundedGraphRetriever
from llama_index_e2rag.retrievers.narrative import NarrativeRetriever
from llama_index_e2rag.retrievers.sentence_graph import SentenceGraphRetriever
from llama_index_e2rag.retrievers.vector import VectorChunkRetriever

STORY = (
    "Mara kept the lighthouse on Greymoor Point. One winter night a ship ran aground on the "
    "rocks below, and Mara rowed out through the storm to bring the sailors ashore. "
    "The harbour master, Tobias Wren, had laughed at her warnings about the broken lamp. "
    "After the wreck, Tobias repaired the lamp himself and never laughed at Mara again. "
    "In spring the sailors returned with a new boat and named it after the keeper."
)
QUESTION = "What did Tobias do after the wreck?"
OTHER = "Who rowed out through the storm?"
MODES = ("narrative", "vector", "entity_event", "grounded", "sentence_graph", "event_graph")
SEVEN = (
    NarrativeRetriever, EntityEventRetriever, GroundedGraphRetriever, ChronoRetriever,
    SentenceGraphRetriever, EventGraphRetriever, VectorChunkRetriever,
)


class RecordingEmbedding(BaseEmbedding):
    """MiniLM that writes down every text it is asked to embed."""

    _inner: MiniLMEmbedding = PrivateAttr()
    _texts: list[str] = PrivateAttr(default_factory=list)

    def __init__(self, inner: MiniLMEmbedding) -> None:
        super().__init__(model_name="recording-minilm")
        self._inner = inner

    @property
    def texts(self) -> list[str]:
        return self._texts

    def _get_query_embedding(self, query: str) -> list[float]:
        self._texts.append(query)
        return self._inner.get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        self._texts.append(text)
        return self._inner.get_text_embedding(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._texts.extend(texts)
        return self._inner.get_text_embedding_batch(texts)


@pytest.fixture(scope="module")
def recording(minilm: MiniLMEmbedding) -> RecordingEmbedding:
    return RecordingEmbedding(minilm)


@pytest.fixture(scope="module")
def index(recording: RecordingEmbedding) -> E2RAGIndex:
    return E2RAGIndex.from_documents(
        [Document(text=STORY, id_="greymoor")],
        embed_model=recording,
        doc_builders=[SentenceGraphBuilder(), EventGraphBuilder()],
    )


def _results(nodes: list[Any]) -> list[tuple[str, float]]:
    return [(n.node.node_id, n.score) for n in nodes]


@pytest.mark.parametrize("mode", MODES)
def test_a_given_query_embedding_is_the_querys_and_is_not_computed_again(
    index: E2RAGIndex, recording: RecordingEmbedding, minilm: MiniLMEmbedding, mode: str
) -> None:
    retriever = index.as_retriever(mode=mode)
    embedded = _results(retriever.retrieve(QUESTION))
    assert QUESTION in recording.texts  # without one, the index embeds the question
    given = QueryBundle(QUESTION, embedding=minilm.get_query_embedding(QUESTION))
    recording.texts.clear()
    assert _results(retriever.retrieve(given)) == embedded
    assert _results(asyncio.run(retriever.aretrieve(given))) == embedded
    assert QUESTION not in recording.texts


def test_the_given_embedding_decides_what_the_dense_mode_finds(
    index: E2RAGIndex, minilm: MiniLMEmbedding
) -> None:
    retriever = index.as_retriever(mode="vector")  # the mode that reads nothing but the vector
    other = QueryBundle(QUESTION, embedding=minilm.get_query_embedding(OTHER))
    assert _results(retriever.retrieve(other)) == _results(retriever.retrieve(OTHER))


@pytest.mark.parametrize("retriever", SEVEN, ids=lambda cls: cls.__name__)
def test_every_mode_writes_its_retrieval_once_on_the_base(retriever: type) -> None:
    assert issubclass(retriever, StoresRetriever)
    assert "_run" in vars(retriever)
    assert not {"_retrieve", "_aretrieve", "retrieve", "aretrieve"} & set(vars(retriever))


def test_a_retriever_without_a_retrieval_cannot_be_made(index: E2RAGIndex) -> None:
    class Unwritten(StoresRetriever):
        pass

    with pytest.raises(TypeError, match="_run"):
        Unwritten(index._stores, index.embed_model)  # type: ignore[abstract]


def test_the_blocking_path_refuses_a_coroutine_that_waits_for_real() -> None:
    async def sleeps() -> None:
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="asynchronous"):
        run_blocking(sleeps())


class ThreadRecordingLLM(ScriptedLLM):
    """Notes which thread ran each async call and how many sync calls were made."""

    _async_threads: list[int] = PrivateAttr(default_factory=list)
    _sync_calls: int = PrivateAttr(default=0)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        self._sync_calls += 1
        return super().complete(prompt, formatted=formatted, **kwargs)

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        self._async_threads.append(threading.get_ident())
        return await super().acomplete(prompt, formatted=formatted, **kwargs)


def test_an_llm_call_of_the_async_path_is_awaited_on_the_event_loop(index: E2RAGIndex) -> None:
    llm = ThreadRecordingLLM()
    retriever = EventGraphRetriever(
        index._stores, index.embed_model, LLMRunner(llm), decompose="llm"
    )

    async def ask() -> int:
        await retriever.aretrieve(QUESTION)
        return threading.get_ident()

    loop_thread = asyncio.run(ask())
    assert llm._async_threads and set(llm._async_threads) == {loop_thread}
    assert llm._sync_calls == 0
