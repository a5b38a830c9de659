"""``filters=MetadataFilters(...)``: the rule (operators, and/or/not, nesting) and every mode
keeping to the allowed documents while still filling its budget from them.

The index is the real offline default (spaCy + MiniLM) over three documents: two halves of the
Greymoor story and Peter Rabbit, with ``file_name`` and user metadata as ``SimpleDirectoryReader``
and a user would set them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core import Document
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llama_index_e2rag.retrievers.filters import check_filters, matches
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.modes import RETRIEVER_MODES

GREYMOOR = (Path(__file__).parent / "data" / "greymoor.txt").read_text(encoding="utf-8")
PETER = (
    Path(__file__).resolve().parents[2] / "llama_index_e2rag" / "data" / "peter_rabbit.txt"
).read_text(encoding="utf-8")
HALF = GREYMOOR.index("\n", len(GREYMOOR) // 2)
DOCS = {
    "greymoor-1": {"file_name": "greymoor_1.txt", "year": 1901, "tags": ["school", "magic"]},
    "greymoor-2": {"file_name": "greymoor_2.txt", "year": 1902, "tags": ["school"]},
    "peter": {"file_name": "peter_rabbit.txt", "year": 1902, "author": "Beatrix Potter"},
}
#: A question the Greymoor halves answer far better than Peter Rabbit does.
QUESTION = "What rules did Hermione break after the troll incident?"
BUDGET = 150


def f(key: str, value, op: FilterOperator = FilterOperator.EQ) -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=op)


# -- the rule -------------------------------------------------------------------------------------
META = {"doc_id": "d1", "file_name": "a.txt", "year": 1901, "tags": ["school", "magic"],
        "title": "The Greymoor Letters"}


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (f("file_name", "a.txt"), True),
        (f("file_name", "b.txt"), False),
        (f("file_name", "b.txt", FilterOperator.NE), True),
        (f("year", 1900, FilterOperator.GT), True),
        (f("year", 1901, FilterOperator.GT), False),
        (f("year", 1901, FilterOperator.GTE), True),
        (f("year", 1901, FilterOperator.LT), False),
        (f("year", 1901, FilterOperator.LTE), True),
        (f("doc_id", ["d1", "d2"], FilterOperator.IN), True),
        (f("doc_id", ["d2"], FilterOperator.IN), False),
        (f("doc_id", ["d2"], FilterOperator.NIN), True),
        (f("tags", "magic", FilterOperator.CONTAINS), True),
        (f("tags", "war", FilterOperator.CONTAINS), False),
        (f("title", "Greymoor", FilterOperator.CONTAINS), True),
        (f("title", "Greymoor", FilterOperator.TEXT_MATCH), True),
        (f("title", "greymoor", FilterOperator.TEXT_MATCH), False),
        (f("title", "greymoor", FilterOperator.TEXT_MATCH_INSENSITIVE), True),
        (f("tags", ["war", "magic"], FilterOperator.ANY), True),
        (f("tags", ["school", "war"], FilterOperator.ALL), False),
        (f("author", None, FilterOperator.IS_EMPTY), True),
        (f("author", "Potter"), False),  # a key the document lacks never equals a value
        (f("author", 1900, FilterOperator.GT), False),  # nor compares
        (f("title", 1900, FilterOperator.GT), False),  # another type: false, not an error
    ],
)
def test_each_operator(item: MetadataFilter, expected: bool) -> None:
    assert matches(MetadataFilters(filters=[item]), META) is expected


def test_conditions_and_nesting() -> None:
    yes, no = f("year", 1901), f("year", 1999)
    assert matches(MetadataFilters(filters=[yes, yes]), META)
    assert not matches(MetadataFilters(filters=[yes, no]), META)
    assert matches(MetadataFilters(filters=[yes, no], condition=FilterCondition.OR), META)
    assert matches(MetadataFilters(filters=[no], condition=FilterCondition.NOT), META)
    nested = MetadataFilters(
        filters=[
            f("file_name", "a.txt"),
            MetadataFilters(filters=[no, f("tags", "magic", FilterOperator.CONTAINS)],
                            condition=FilterCondition.OR),
        ]
    )
    assert matches(nested, META)
    nested.filters[1].filters[1] = no
    assert not matches(nested, META)


def test_bad_filters_are_refused_in_one_line() -> None:
    odd = MetadataFilter.model_construct(key="year", value=1, operator="fuzzy")
    with pytest.raises(ValueError, match="operator"):
        check_filters(MetadataFilters.model_construct(filters=[odd], condition="and"))
    with pytest.raises(TypeError, match="MetadataFilters"):
        check_filters({"file_name": "a.txt"})  # type: ignore[arg-type]


# -- every mode, on the offline default -----------------------------------------------------------
@pytest.fixture(scope="module")
def index() -> E2RAGIndex:
    from llama_index_e2rag import ChronoLayerBuilder, EventGraphBuilder, SentenceGraphBuilder
    from llama_index_e2rag.embeddings import MiniLMEmbedding

    texts = {"greymoor-1": GREYMOOR[:HALF], "greymoor-2": GREYMOOR[HALF:], "peter": PETER}
    docs = [Document(text=texts[d], id_=d, metadata=meta) for d, meta in DOCS.items()]
    return E2RAGIndex.from_documents(
        docs,
        embed_model=MiniLMEmbedding(),
        llm=None,
        doc_builders=[ChronoLayerBuilder(), SentenceGraphBuilder(), EventGraphBuilder()],
    )


def _docs(nodes) -> set[str]:
    return {n.node.metadata["doc_id"] for n in nodes}


def _words(nodes) -> int:
    return sum(len(n.node.get_content().split()) for n in nodes)


@pytest.mark.parametrize("mode", RETRIEVER_MODES)
def test_a_filtered_retrieval_fills_its_budget_from_the_allowed_document(index, mode) -> None:
    """The question is about Greymoor: unfiltered, Peter Rabbit barely ranks. Filtered to
    Peter Rabbit, the budget is still filled, from it alone (a post-filter would be empty)."""
    unfiltered = index.as_retriever(mode=mode, budget_words=BUDGET).retrieve(QUESTION)
    assert _docs(unfiltered) - {"peter"}, "the question must favour Greymoor unfiltered"
    only_peter = MetadataFilters(filters=[f("file_name", "peter_rabbit.txt")])
    nodes = index.as_retriever(mode=mode, budget_words=BUDGET, filters=only_peter).retrieve(
        QUESTION
    )
    assert _docs(nodes) == {"peter"}
    assert BUDGET - 60 <= _words(nodes) <= BUDGET
    assert {n.node.metadata["file_name"] for n in nodes} == {"peter_rabbit.txt"}


@pytest.mark.parametrize("mode", RETRIEVER_MODES)
def test_every_mode_keeps_to_the_documents_the_filter_allows(index, mode) -> None:
    cases = {
        "doc_id in": (MetadataFilters(filters=[f("doc_id", ["greymoor-2"], FilterOperator.IN)]),
                      {"greymoor-2"}),
        "year and": (MetadataFilters(filters=[f("year", 1902), f("author", "Beatrix Potter")]),
                     {"peter"}),
        "or": (MetadataFilters(filters=[f("year", 1901), f("author", "Beatrix Potter")],
                               condition=FilterCondition.OR), {"greymoor-1", "peter"}),
        "nested": (MetadataFilters(filters=[
            f("tags", "school", FilterOperator.CONTAINS),
            MetadataFilters(filters=[f("year", 1901, FilterOperator.GT)]),
        ]), {"greymoor-2"}),
    }
    for name, (filters, allowed) in cases.items():
        retriever = index.as_retriever(mode=mode, budget_words=BUDGET, filters=filters)
        nodes = retriever.retrieve(QUESTION)
        assert nodes, name
        assert _docs(nodes) <= allowed, name


@pytest.mark.parametrize("mode", RETRIEVER_MODES)
def test_a_filter_nothing_matches_returns_nothing(index, mode) -> None:
    nothing = MetadataFilters(filters=[f("file_name", "missing.txt")])
    assert index.as_retriever(mode=mode, filters=nothing).retrieve(QUESTION) == []


@pytest.mark.parametrize("mode", RETRIEVER_MODES)
def test_every_result_names_its_source_file(index, mode) -> None:
    nodes = index.as_retriever(mode=mode, budget_words=BUDGET).retrieve(QUESTION)
    assert nodes
    for node in nodes:
        meta = node.node.metadata
        assert meta["file_name"] == DOCS[meta["doc_id"]]["file_name"]


async def test_filters_apply_to_async_retrieval(index) -> None:
    only = MetadataFilters(filters=[f("doc_id", "greymoor-1")])
    for mode in RETRIEVER_MODES:
        nodes = await index.as_retriever(mode=mode, filters=only).aretrieve(QUESTION)
        assert nodes and _docs(nodes) == {"greymoor-1"}, mode
