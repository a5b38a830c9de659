"""Query engines: the narrative context reaches the LLM; sync, async and streaming all work."""

from __future__ import annotations

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.query_engine import RetrieverQueryEngine
from scripted_llm import ScriptedLLM
from test_index import NAMES, STORY, chunk_containing, make_index

from llama_index_e2rag.extract.e2rag import EntityEventExtractor
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.llm.runner import LLMRunner
from llama_index_e2rag.answer.query_engine import NarrativeContextSynthesizer

QUESTION = "What did Hermione do after the troll fight?"
ANSWER = "She lied to protect her friends."


@pytest.fixture
def llm() -> ScriptedLLM:
    return ScriptedLLM(names=NAMES, default_response=ANSWER)


@pytest.fixture
def index(llm: ScriptedLLM) -> E2RAGIndex:
    return make_index(llm=llm)


def _answer_prompt(llm: ScriptedLLM) -> str:
    (prompt,) = [p for p in llm.prompts if "---Context---" in p]
    return prompt


def _check_sources(index: E2RAGIndex, response: object) -> None:
    sources = response.source_nodes  # type: ignore[attr-defined]
    assert sources[0].node.node_id == chunk_containing(index, "troll fight").id
    assert all(s.node.metadata["retriever"] == "entity_event" for s in sources)


def test_sync_query_feeds_the_assembled_context(index: E2RAGIndex, llm: ScriptedLLM) -> None:
    engine = index.as_query_engine(mode="entity_event", similarity_top_k=2)
    assert isinstance(engine, RetrieverQueryEngine)
    response = engine.query(QUESTION)
    assert isinstance(response, Response) and str(response) == ANSWER
    _check_sources(index, response)
    prompt = _answer_prompt(llm)
    assert f"Question: {QUESTION}" in prompt
    early = prompt.index("Hermione studied alone")
    late = prompt.index("Hermione lied to the teachers")
    assert prompt.index("[P1]") < early < prompt.index("[P2]") < late  # story order, labelled
    assert "Relations among them" in prompt and "-[participates]->" in prompt
    # the per-chunk evidence metadata is for other engines: here the subgraph is shown once
    assert "evidence:" not in prompt and prompt.count("Relations among them") == 1
    assert set(response.metadata) == {s.node.node_id for s in response.source_nodes}


async def test_async_query(index: E2RAGIndex, llm: ScriptedLLM) -> None:
    response = await index.as_query_engine(mode="entity_event", similarity_top_k=2).aquery(QUESTION)
    assert str(response) == ANSWER
    _check_sources(index, response)
    assert "Passages in story order" in _answer_prompt(llm)


def test_streaming_query(index: E2RAGIndex) -> None:
    response = index.as_query_engine(mode="entity_event", similarity_top_k=2, streaming=True).query(QUESTION)
    assert isinstance(response, StreamingResponse)
    assert "".join(response.response_gen) == ANSWER
    _check_sources(index, response)


async def test_async_streaming_query(index: E2RAGIndex) -> None:
    response = await index.as_query_engine(mode="entity_event", similarity_top_k=2, streaming=True).aquery(QUESTION)
    assert isinstance(response, AsyncStreamingResponse)
    assert "".join([t async for t in response.async_response_gen()]) == ANSWER
    _check_sources(index, response)


def test_hyde_query_engine_drafts_once(index: E2RAGIndex, llm: ScriptedLLM) -> None:
    response = index.as_query_engine(mode="entity_event", hyde="hyp_embedding").query(QUESTION)
    assert str(response) == ANSWER
    assert llm.calls_by_kind["hypothetical_answer"] == 1
    assert llm.calls_by_kind["query_cues"] == 0


def test_hyde_is_refused_for_other_modes(index: E2RAGIndex) -> None:
    with pytest.raises(ValueError, match="mode='entity_event'"):
        index.as_query_engine(mode="vector", hyde="comb_extraction")


def test_vector_mode_engine(index: E2RAGIndex, llm: ScriptedLLM) -> None:
    response = index.as_query_engine(mode="vector", similarity_top_k=2).query(QUESTION)
    assert str(response) == ANSWER
    assert response.source_nodes[0].node.metadata["retriever"] == "vector"
    prompt = _answer_prompt(llm)
    # the vanilla baseline presents by relevance unless asked for story order
    assert "[P1]" in prompt and "Passages ranked by relevance" in prompt
    best = response.source_nodes[0].node.get_content()
    assert prompt.index(best) < prompt.index("[P2]")
    index.as_query_engine(mode="vector", similarity_top_k=2, order="story").query(QUESTION)
    last = [p for p in llm.prompts if "---Context---" in p][-1]
    assert "Passages in story order" in last


def test_our_retriever_in_their_engine(index: E2RAGIndex, llm: ScriptedLLM) -> None:
    retriever = index.as_retriever(mode="entity_event", similarity_top_k=2)
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
    response = engine.query(QUESTION)
    assert str(response) == ANSWER
    (prompt,) = [p for p in llm.prompts if QUESTION in p and "Task: query_cues" not in p]
    assert "position: document 0, character" in prompt
    assert "graph_nodes" not in prompt and "seed_scores" not in prompt
    # the evidence that led to each chunk reaches the LLM: descriptions and subgraph edges
    assert prompt.count("evidence: ") == len(response.source_nodes) == 2
    assert "[mention] Hermione:" in prompt and "[event]" in prompt
    assert "-[participates]->" in prompt
    late = chunk_containing(index, "troll fight")
    (source,) = [s for s in response.source_nodes if s.node.node_id == late.id]
    for node_id in source.node.metadata["graph_nodes"]:
        node = index.graph_store.get_node(node_id)
        assert node.text.strip() in source.node.metadata["evidence"]
    assert "evidence" not in source.node.get_content(metadata_mode="embed")


def test_without_an_llm_answers_are_extractive() -> None:
    extractor = EntityEventExtractor(llm_runner=LLMRunner(ScriptedLLM(names=NAMES)))
    index = E2RAGIndex.from_documents(
        [Document(text=STORY, id_="phantom")],
        embed_model=HashEmbedding(),
        extractors=[extractor],
        chunk_size=40,
        chunk_overlap=0,
    )
    engine = index.as_query_engine(mode="vector", similarity_top_k=2)
    assert not isinstance(engine._response_synthesizer, NarrativeContextSynthesizer)
    response = engine.query(QUESTION)
    assert "Hermione lied to the teachers" in str(response)
    assert "no LLM" in str(response)


def test_answer_prompt_is_replaceable_like_any_engine_prompt(
    index: E2RAGIndex, llm: ScriptedLLM
) -> None:
    from llama_index.core.prompts import PromptTemplate

    engine = index.as_query_engine(mode="entity_event", similarity_top_k=2)
    assert "response_synthesizer:text_qa_template" in engine.get_prompts()
    engine.update_prompts(
        {"response_synthesizer:text_qa_template": PromptTemplate("MINE {context_str}|{query_str}")}
    )
    engine.query(QUESTION)
    (prompt,) = [p for p in llm.prompts if p.startswith("MINE ")]
    assert prompt.startswith("MINE Passages in story order") and prompt.endswith(QUESTION)
