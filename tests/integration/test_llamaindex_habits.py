"""What a LlamaIndex user does with any index works here in every mode: engine arguments through
``as_query_engine``, ``as_chat_engine`` offline and with an LLM, and a store opened the same way
by ``load_index_from_storage`` and by the ``e2rag`` CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest
from llama_index.core import Document, StorageContext, load_index_from_storage
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import PromptTemplate
from llama_index.core.response_synthesizers import BaseSynthesizer
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from hash_embedding import HashEmbedding
from scripted_llm import ScriptedLLM

from llama_index_e2rag.answer.chat_engine import ExtractiveChatEngine
from llama_index_e2rag.errors import E2RAGError, MissingModelError
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.modes import RETRIEVER_MODES

PETER = (
    Path(__file__).resolve().parents[2] / "llama_index_e2rag" / "data" / "peter_rabbit.txt"
).read_text(encoding="utf-8")
HALF = PETER.index("\n", len(PETER) // 2)
QUESTION = "Where did Peter lose his shoes?"
ANSWER = "He lost them among the cabbages."


class KeepFirst(BaseNodePostprocessor):
    """Keeps the first ``n`` nodes and remembers what it was given."""

    n: int = 2
    seen: list[int] = []

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> list[NodeWithScore]:
        self.seen.append(len(nodes))
        return nodes[: self.n]


@pytest.fixture(scope="module")
def index() -> E2RAGIndex:
    from llama_index_e2rag import ChronoLayerBuilder, EventGraphBuilder, SentenceGraphBuilder

    docs = [
        Document(text=PETER[:HALF], id_="peter-1", metadata={"file_name": "peter_1.txt"}),
        Document(text=PETER[HALF:], id_="peter-2", metadata={"title": "Peter, part two"}),
    ]
    return E2RAGIndex.from_documents(
        docs,
        embed_model=HashEmbedding(),
        llm=None,
        doc_builders=[ChronoLayerBuilder(), SentenceGraphBuilder(), EventGraphBuilder()],
    )


def _with_llm(index: E2RAGIndex, llm: ScriptedLLM) -> E2RAGIndex:
    """The same stores, answered by ``llm``."""
    return E2RAGIndex(
        storage_context=index.storage_context,
        index_struct=index.index_struct,
        embed_model=HashEmbedding(),
        llm=llm,
    )


# -- as_query_engine(**kwargs) --------------------------------------------------------------------
@pytest.mark.parametrize("mode", RETRIEVER_MODES)
def test_engine_and_retriever_arguments_are_split_offline(index, mode) -> None:
    keep = KeepFirst(n=1, seen=[])
    engine = index.as_query_engine(mode=mode, node_postprocessors=[keep], budget_words=200)
    response = engine.query(QUESTION)
    assert keep.seen and keep.seen[0] > 1, "the postprocessor sees the retriever's results"
    assert len(response.source_nodes) == 1
    assert "extractive" in str(response)


@pytest.mark.parametrize("mode", RETRIEVER_MODES)
def test_engine_arguments_reach_the_engine_with_an_llm(index, mode) -> None:
    llm = ScriptedLLM(default_response=ANSWER)
    keep = KeepFirst(n=1, seen=[])
    engine = _with_llm(index, llm).as_query_engine(
        mode=mode, node_postprocessors=[keep], similarity_top_k=3
    )
    response = engine.query(QUESTION)
    assert keep.seen and len(response.source_nodes) == 1
    assert str(response).strip() == ANSWER


@pytest.mark.parametrize("mode", [m for m in RETRIEVER_MODES if m != "event_graph"])
def test_synthesizer_arguments_shape_the_llm_answer(index, mode) -> None:
    llm = ScriptedLLM(default_response=ANSWER)
    template = PromptTemplate("MINE\n{context_str}\nQ: {query_str}")
    engine = _with_llm(index, llm).as_query_engine(
        mode=mode, text_qa_template=template, response_mode="simple_summarize"
    )
    assert str(engine.query(QUESTION)).strip() == ANSWER
    assert llm.prompts[-1].startswith("MINE\n") and QUESTION in llm.prompts[-1]


def test_answer_arguments_without_an_llm_are_refused_in_one_line(index) -> None:
    for mode in ("narrative", "event_graph"):
        with pytest.raises(MissingModelError, match="response_mode.*llm=") as err:
            index.as_query_engine(mode=mode, response_mode="tree_summarize")
        assert "\n" not in str(err.value)
    llm = ScriptedLLM(default_response=ANSWER)
    with pytest.raises(E2RAGError, match="enrich_prompt"):
        _with_llm(index, llm).as_query_engine(mode="event_graph", text_qa_template="x")


@pytest.mark.parametrize("mode", ["narrative", "event_graph"])
def test_a_response_synthesizer_of_your_own_is_used(index, mode) -> None:
    class Fixed(BaseSynthesizer):
        def _get_prompts(self):
            return {}

        def _update_prompts(self, prompts_dict) -> None:
            pass

        def get_response(self, query_str, text_chunks, **kwargs):
            return f"{len(text_chunks)} chunks"

        async def aget_response(self, query_str, text_chunks, **kwargs):
            return self.get_response(query_str, text_chunks)

    fixed = Fixed(llm=ScriptedLLM())
    response = index.as_query_engine(mode=mode, response_synthesizer=fixed).query(QUESTION)
    assert str(response).endswith("chunks")


def test_an_unknown_argument_still_fails_in_the_retriever(index) -> None:
    with pytest.raises(TypeError, match="no_such_argument"):
        index.as_query_engine(no_such_argument=1)


def test_filters_pass_through_the_query_engine(index) -> None:
    only = MetadataFilters(filters=[MetadataFilter(key="doc_id", value="peter-2")])
    response = index.as_query_engine(mode="vector", filters=only).query(QUESTION)
    assert {n.node.metadata["doc_id"] for n in response.source_nodes} == {"peter-2"}


# -- as_chat_engine -------------------------------------------------------------------------------
def test_chat_works_offline_over_the_extractive_answer(index) -> None:
    chat = index.as_chat_engine(mode="vector", similarity_top_k=2)
    assert isinstance(chat, ExtractiveChatEngine)
    reply = chat.chat(QUESTION)
    assert "extractive" in str(reply) and len(reply.source_nodes) == 2
    assert [m.role for m in chat.chat_history] == [MessageRole.USER, MessageRole.ASSISTANT]
    streamed = chat.stream_chat("Who chased Peter?")
    assert "".join(streamed.response_gen).strip().startswith("Evidence for")
    assert len(chat.chat_history) == 4
    chat.reset()
    assert chat.chat_history == []


async def test_offline_chat_is_async_too(index) -> None:
    chat = index.as_chat_engine()
    reply = await chat.achat(QUESTION)
    assert reply.source_nodes
    streamed = await chat.astream_chat(QUESTION)
    assert "".join([t async for t in streamed.async_response_gen()]).startswith("Evidence for")


def test_offline_chat_refuses_llm_only_arguments_in_one_line(index) -> None:
    with pytest.raises(MissingModelError, match="system_prompt.*llm="):
        index.as_chat_engine(system_prompt="Be brief.")
    with pytest.raises(ValueError, match="chat_mode"):
        index.as_chat_engine(chat_mode="react")


def test_chat_with_an_llm_is_condense_plus_context_over_our_retriever(index) -> None:
    llm = ScriptedLLM(default_response=ANSWER)
    chat = _with_llm(index, llm).as_chat_engine(
        mode="vector", similarity_top_k=1, system_prompt="SYSTEM-NOTE"
    )
    assert isinstance(chat, CondensePlusContextChatEngine)
    assert chat._retriever.similarity_top_k == 1
    reply = chat.chat(QUESTION, chat_history=[ChatMessage(role="user", content="Hello")])
    assert str(reply) == ANSWER
    assert reply.source_nodes and reply.source_nodes[0].node.metadata["retriever"] == "vector"
    prompt = llm.prompts[-1]
    assert "SYSTEM-NOTE" in prompt and reply.source_nodes[0].node.get_content()[:40] in prompt
    context = _with_llm(index, llm).as_chat_engine(chat_mode="context", mode="grounded")
    assert isinstance(context, ContextChatEngine)


# -- one way to open a store ----------------------------------------------------------------------
def test_load_index_from_storage_and_the_cli_open_a_store_alike(index, tmp_path) -> None:
    from llama_index_e2rag.cli.store import load_store

    index.storage_context.persist(str(tmp_path))
    plain = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(tmp_path)), embed_model=HashEmbedding()
    )
    cli = load_store(tmp_path, embed_model=HashEmbedding())
    only = MetadataFilters(filters=[MetadataFilter(key="file_name", value="peter_1.txt")])
    for mode in RETRIEVER_MODES:
        for kwargs in ({}, {"filters": only}):
            got = [
                [(n.node.node_id, round(n.score or 0.0, 6), n.node.metadata.get("file_name"))
                 for n in loaded.as_retriever(mode=mode, **kwargs).retrieve(QUESTION)]
                for loaded in (plain, cli, index)
            ]
            assert got[0] == got[1] == got[2], (mode, kwargs)
    assert plain.stores.locks.home == cli.stores.locks.home
    assert plain.embed_model.model_name == cli.embed_model.model_name


@pytest.mark.parametrize("mode", RETRIEVER_MODES)
def test_every_result_names_its_source_by_file_name_or_title(index, mode) -> None:
    named = {"peter-1": ("file_name", "peter_1.txt"), "peter-2": ("title", "Peter, part two")}
    nodes = index.as_retriever(mode=mode, budget_words=400).retrieve(QUESTION)
    assert {n.node.metadata["doc_id"] for n in nodes} == set(named)
    for node in nodes:
        key, value = named[node.node.metadata["doc_id"]]
        assert node.node.metadata[key] == value
