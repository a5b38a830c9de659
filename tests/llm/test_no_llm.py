"""``NoLLM``: accepted where LlamaIndex insists on an LLM object, refused when called, and read as
"no LLM" by the index (extractive answers even when the index has an LLM of its own)."""

from __future__ import annotations

import pytest
from llama_index.core import Document, PromptTemplate, Settings
from llama_index.core.retrievers import QueryFusionRetriever

from hash_embedding import HashEmbedding
from scripted_llm import ScriptedLLM

from llama_index_e2rag import NoLLM
from llama_index_e2rag.errors import MissingModelError
from llama_index_e2rag.answer.extractive import ExtractiveSynthesizer
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.llm.runner import resolve_llm

STORY = "Peter lost one of his shoes among the cabbages. His mother made camomile tea."


@pytest.fixture(scope="module")
def index() -> E2RAGIndex:
    return E2RAGIndex.from_documents([Document(text=STORY)], embed_model=HashEmbedding(), llm=None)


def test_every_call_is_refused_in_one_line() -> None:
    llm = NoLLM()
    calls = [
        lambda: llm.complete("Generate 3 search queries"),
        lambda: llm.stream_complete("Generate 3 search queries"),
        lambda: llm.predict(PromptTemplate("Answer {question}"), question="who?"),
    ]
    for call in calls:
        with pytest.raises(MissingModelError, match="NoLLM stands in") as caught:
            call()
        assert "\n" not in str(caught.value)


def test_query_fusion_with_extra_queries_fails_instead_of_searching_its_prompt(index) -> None:
    fusion = QueryFusionRetriever([index.as_retriever()], llm=NoLLM(), num_queries=4,
                                  use_async=False)
    with pytest.raises(MissingModelError, match="num_queries=1"):
        fusion.retrieve("Where did Peter lose his shoes?")
    single = QueryFusionRetriever([index.as_retriever()], llm=NoLLM(), num_queries=1,
                                  use_async=False)
    assert single.retrieve("Where did Peter lose his shoes?")


def test_the_index_reads_it_as_no_llm(index, monkeypatch) -> None:
    assert resolve_llm(NoLLM()) is None
    monkeypatch.setattr(Settings, "_llm", NoLLM())
    assert resolve_llm() is None
    with_llm = E2RAGIndex(
        storage_context=index.storage_context, index_struct=index.index_struct,
        embed_model=HashEmbedding(), llm=ScriptedLLM(),
    )
    engine = with_llm.as_query_engine(llm=NoLLM())
    assert isinstance(engine._response_synthesizer, ExtractiveSynthesizer)
    assert "extractive answer, no LLM" in str(engine.query("Where did Peter lose his shoes?"))
