"""``IndexModels`` resolves the models lazily, once, without an index."""

from __future__ import annotations

import pytest
from hash_embedding import HashEmbedding
from scripted_llm import ScriptedLLM

from llama_index_e2rag.extract.e2rag import EntityEventExtractor
from llama_index_e2rag.ingest.models import IndexModels
from llama_index_e2rag.llm.no_llm import NoLLM


def test_without_an_llm_the_default_extractor_is_the_offline_one() -> None:
    models = IndexModels(embed_model=HashEmbedding())
    assert models.llm is None and models.llm_runner is None
    assert models.extractors == []  # chosen by the first build, not before
    (extractor,) = models.resolve_extractors()
    assert type(extractor).__name__ == "GroundedExtractor"
    assert models.resolve_extractors()[0] is extractor  # once


def test_with_an_llm_the_runner_is_built_once_and_drives_the_extractor() -> None:
    models = IndexModels(llm=ScriptedLLM(names=["Ann"]), embed_model=HashEmbedding(), combined=True)
    runner = models.llm_runner
    assert runner is not None and models.llm_runner is runner
    (extractor,) = models.resolve_extractors()
    assert isinstance(extractor, EntityEventExtractor) and extractor.combined


def test_chunking_defaults_follow_the_embedding_and_given_values_win() -> None:
    capped = IndexModels(embed_model=HashEmbedding())
    limit = getattr(HashEmbedding(), "max_length", None)
    if limit:
        assert capped.chunk_size <= limit
    assert 0 < capped.chunk_overlap < capped.chunk_size
    given = IndexModels(embed_model=HashEmbedding(), chunk_size=300, chunk_overlap=7)
    assert (given.chunk_size, given.chunk_overlap) == (300, 7)
    assert given.splitter.chunk_size == 300 and given.splitter is given.splitter


def test_another_embedding_than_the_builds_warns() -> None:
    models = IndexModels(embed_model=HashEmbedding(), built_with=lambda: "some-other-model")
    with pytest.warns(UserWarning, match="some-other-model"):
        models.embed_model


def test_an_engine_given_nollm_answers_without_one() -> None:
    models = IndexModels(llm=ScriptedLLM(names=["Ann"]), embed_model=HashEmbedding())
    assert models.answer_llm(None) is models.llm
    assert models.answer_llm(NoLLM()) is None
