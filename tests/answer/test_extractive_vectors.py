"""The extractive answer embeds neither the question again (the retrieval's vector is in the
bundle) nor a sentence the index embedded already (its sentence nodes), and answers exactly as
when it embedded both itself.

Real components: a novel-like story (``novel_stories``) indexed offline (spaCy, MiniLM).
"""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core import Document
from llama_index.core.schema import QueryBundle
from novel_stories import VARIANTS, build

from llama_index_e2rag.answer.extractive import ExtractiveSynthesizer
from llama_index_e2rag.context.keys import RESPONSE_EVIDENCE_KEY
from llama_index_e2rag.embeddings import MiniLMEmbedding
from llama_index_e2rag.extract.chrono import ChronoLayerBuilder
from llama_index_e2rag.index import E2RAGIndex

STORY = build(VARIANTS[0])
QUESTIONS = (
    STORY.variant.after_question,
    STORY.variant.before_question,
    STORY.variant.plain_question,
    STORY.variant.weak_question,
    f"Who is {STORY.variant.heroine}?",
    f"Where did {STORY.variant.father} go?",
)


@pytest.fixture(scope="module")
def index(minilm) -> E2RAGIndex:
    return E2RAGIndex.from_documents(
        [Document(text=STORY.text, id_="story", metadata={"file_name": "story.txt"})],
        embed_model=minilm,
    )


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the offline embedding embeds from now on, in order."""
    texts: list[str] = []
    original = MiniLMEmbedding.embed

    def counting(self: MiniLMEmbedding, batch: Any) -> Any:
        texts.extend(batch)
        return original(self, batch)

    monkeypatch.setattr(MiniLMEmbedding, "embed", counting)
    return texts


@pytest.mark.parametrize("mode", ["narrative", "vector"])
def test_the_answer_reuses_vectors_and_stays_the_same(
    index: E2RAGIndex, mode: str, embedded: list[str]
) -> None:
    retriever = index.as_retriever(mode=mode)
    alone = ExtractiveSynthesizer(embed_model=index.embed_model, graph_store=index.graph_store)
    reusing = ExtractiveSynthesizer.from_index(index)
    reused = 0
    for question in QUESTIONS:
        bundle = QueryBundle(question)
        nodes = retriever.retrieve(bundle)
        assert bundle.embedding is not None  # the retrieval's question vector, kept
        expected = alone.synthesize(QueryBundle(question), nodes)

        embedded.clear()
        answer = reusing.synthesize(bundle, nodes)
        candidates = [e.text for e in reusing._candidates(nodes)]
        assert question not in embedded
        assert set(embedded) <= set(candidates)
        reused += len(candidates) - len(embedded)

        assert str(answer) == str(expected)
        assert [e["text"] for e in answer.metadata[RESPONSE_EVIDENCE_KEY]] == [
            e["text"] for e in expected.metadata[RESPONSE_EVIDENCE_KEY]
        ]
    assert reused > 0, "no candidate sentence's stored vector was used"


@pytest.fixture(scope="module")
def chrono_index(minilm) -> E2RAGIndex:
    return E2RAGIndex.from_documents(
        [Document(text=STORY.text, id_="story", metadata={"file_name": "story.txt"})],
        embed_model=minilm,
        doc_builders=[ChronoLayerBuilder(facts="events")],
    )


def test_a_chrono_passage_reuses_the_vectors_of_its_source_chunks_sentences(
    chrono_index: E2RAGIndex, embedded: list[str]
) -> None:
    """ChronoRAG's layer-0 chunks are derived text with ids of their own: their sentences are
    found among those the grounded extractor read in the source chunks holding them."""
    test_the_answer_reuses_vectors_and_stays_the_same(chrono_index, "chrono", embedded)


async def test_the_async_answer_reuses_them_too(index: E2RAGIndex, embedded: list[str]) -> None:
    question = STORY.variant.plain_question
    bundle = QueryBundle(question)
    nodes = await index.as_retriever().aretrieve(bundle)
    alone = ExtractiveSynthesizer(embed_model=index.embed_model, graph_store=index.graph_store)
    expected = await alone.asynthesize(QueryBundle(question), nodes)
    embedded.clear()
    reusing = ExtractiveSynthesizer.from_index(index)
    answer = await reusing.asynthesize(bundle, nodes)
    assert str(answer) == str(expected)
    assert question not in embedded and len(embedded) < len(reusing._candidates(nodes))


def test_a_blend_of_custom_embedding_strings_is_not_taken_for_the_question(
    index: E2RAGIndex, embedded: list[str]
) -> None:
    question = STORY.variant.plain_question
    bundle = QueryBundle(question, custom_embedding_strs=["a letter", "the garden"])
    nodes = index.as_retriever().retrieve(bundle)
    embedded.clear()
    ExtractiveSynthesizer.from_index(index).synthesize(bundle, nodes)
    assert question in embedded
