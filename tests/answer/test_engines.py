"""``EngineFactory`` builds each mode's retriever and the engines over bare stores."""

from __future__ import annotations

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document

from llama_index_e2rag.answer.engines import EngineFactory
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.ingest.models import IndexModels
from llama_index_e2rag.modes import RETRIEVER_CLASSES

TEXT = "Ann met Bob at the harbour. Later Bob sailed away and Ann wept on the pier."


@pytest.fixture(scope="module")
def stores():
    return E2RAGIndex.from_documents([Document(text=TEXT, id_="d")], embed_model=HashEmbedding()).stores


def test_every_mode_gets_a_retriever_and_an_unknown_one_is_refused(stores) -> None:
    factory = EngineFactory(stores, IndexModels(embed_model=HashEmbedding()), passage_words=12)
    for mode in ("narrative", "grounded", "vector", "entity_event"):  # (others need layers)
        assert type(factory.retriever(mode)).__module__ == RETRIEVER_CLASSES[mode][0]
    assert factory.needs("narrative")["passage_words"] == 12
    with pytest.raises(ValueError, match="unknown retrieval mode"):
        factory.retriever("nope")


def test_without_an_llm_the_query_engine_answers_from_the_text(stores) -> None:
    factory = EngineFactory(stores, IndexModels(embed_model=HashEmbedding()), passage_words=30)
    answer = str(factory.query_engine().query("Where did Ann meet Bob?"))
    assert "harbour" in answer
    with pytest.raises(ValueError, match="hyde"):
        factory.query_engine(mode="narrative", hyde="entity")
    chat = factory.chat_engine()
    assert "harbour" in str(chat.chat("Where did Ann meet Bob?"))
