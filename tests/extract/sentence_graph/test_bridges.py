"""SentGraph's cross-document bridges (``SentenceGraphBuilder.alink``): a topic points at the
topics its text names, across the batch and the committed graph, owned by a batch document."""

from __future__ import annotations

from typing import Optional

import pytest
from llama_index.core import Document

from llama_index_e2rag.extract.sentence_graph.bridges import TopicText, owner, shared_entity_bridges
from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind

HARBOUR = (
    "The harbour of Genoa was painted many times in the 1890s. The best known view was made by "
    "Ada Finch from a fishing boat. Critics in Leeds praised its colours."
)
FINCH = (
    "Ada Finch was an English painter born in Leeds in 1861. She studied in Paris and travelled "
    "along the Italian coast."
)
REYES = "Tomas Reyes built fishing boats in Lisbon. He sold them to traders from Porto."


async def stage(
    builder: SentenceGraphBuilder, doc_id: str, text: str, title: Optional[str] = None
) -> tuple[str, NetworkXGraphStore]:
    """A staging graph holding what ``abuild`` made of one document."""
    metadata = {"title": title} if title else {}
    nodes, edges, _ = await builder.abuild(
        Document(text=text, id_=doc_id, metadata=metadata), 0, [], NetworkXGraphStore()
    )
    graph = NetworkXGraphStore()
    graph.upsert_nodes(nodes)
    graph.upsert_edges(edges)
    return doc_id, graph


def commit(*staged: tuple[str, NetworkXGraphStore]) -> NetworkXGraphStore:
    committed = NetworkXGraphStore()
    for _, graph in staged:
        committed.upsert_nodes(graph.nodes())
        committed.upsert_edges(graph.edges())
    return committed


def topic(graph: NetworkXGraphStore) -> GraphNode:
    (node,) = graph.nodes(NodeKind.TOPIC)
    return node


@pytest.fixture
def builder() -> SentenceGraphBuilder:
    return SentenceGraphBuilder()


async def link(
    builder: SentenceGraphBuilder,
    staged: list[tuple[str, NetworkXGraphStore]],
    committed: NetworkXGraphStore,
) -> set[tuple[str, str, str, str]]:
    """Bridges as ``(owner, source doc, target doc, role)``."""
    links, failures = await builder.alink(staged, committed)
    assert failures == []
    doc_of = {}
    for graph in [committed, *(g for _, g in staged)]:
        doc_of.update({n.id: n.doc_id for n in graph.nodes(NodeKind.TOPIC)})
    out = set()
    for doc_id, edges in links.items():
        for edge in edges:
            assert edge.kind == EdgeKind.BRIDGE and edge.doc_id == doc_id
            out.add((doc_id, doc_of[edge.source], doc_of[edge.target], edge.role))
    return out


async def test_documents_sharing_a_character_are_bridged_once_directed(
    builder: SentenceGraphBuilder,
) -> None:
    harbour = await stage(builder, "harbour", HARBOUR, "Harbour of Genoa")
    finch = await stage(builder, "finch", FINCH, "Ada Finch")
    # one batch: the bridge goes from the mentioning topic to Ada Finch's, owned by the later doc
    links, _ = await builder.alink([harbour, finch], NetworkXGraphStore())
    (edge,) = links["finch"]
    assert (edge.source, edge.target) == (topic(harbour[1]).id, topic(finch[1]).id)
    assert edge.role == "shared_entity" and edge.attrs["entities"] == ["ada finch"]
    assert edge.attrs["description"] == "mentions Ada Finch" and edge.attrs["weight"] > 0
    assert list(links) == ["finch"]
    # batch order decides the owner
    assert await link(builder, [finch, harbour], NetworkXGraphStore()) == {
        ("harbour", "harbour", "finch", "shared_entity")
    }


async def test_bridges_reach_the_committed_graph_both_ways(builder: SentenceGraphBuilder) -> None:
    harbour = await stage(builder, "harbour", HARBOUR, "Harbour of Genoa")
    finch = await stage(builder, "finch", FINCH, "Ada Finch")
    expected = ("harbour", "finch", "shared_entity")
    assert await link(builder, [harbour], commit(finch)) == {("harbour", *expected)}
    assert await link(builder, [finch], commit(harbour)) == {("finch", *expected)}


async def test_no_bridge_between_unrelated_documents(builder: SentenceGraphBuilder) -> None:
    finch = await stage(builder, "finch", FINCH, "Ada Finch")
    reyes = await stage(builder, "reyes", REYES, "Tomas Reyes")
    assert await link(builder, [finch, reyes], NetworkXGraphStore()) == set()


async def test_the_batch_replaces_its_committed_versions(builder: SentenceGraphBuilder) -> None:
    old_harbour = await stage(builder, "harbour", HARBOUR + " Tomas Reyes built the boat.", None)
    reyes = await stage(builder, "reyes", REYES, "Tomas Reyes")
    committed = commit(old_harbour, reyes)
    assert await link(builder, [old_harbour], committed) == {
        ("harbour", "harbour", "reyes", "shared_entity")
    }
    new_harbour = await stage(builder, "harbour", HARBOUR, None)
    assert await link(builder, [new_harbour], committed) == set()


async def test_bridges_none_writes_nothing() -> None:
    quiet = SentenceGraphBuilder(bridges="none")
    harbour = await stage(quiet, "harbour", HARBOUR, "Harbour of Genoa")
    finch = await stage(quiet, "finch", FINCH, "Ada Finch")
    assert await quiet.alink([harbour, finch], NetworkXGraphStore()) == ({}, [])


async def test_co_entity_bridges_are_opt_in(builder: SentenceGraphBuilder) -> None:
    # both name Leeds; neither names the other's topic (no Ada Finch in this harbour text)
    harbour_text = HARBOUR.replace("Ada Finch", "a local painter")
    harbour = await stage(builder, "harbour", harbour_text, "Harbour of Genoa")
    finch = await stage(builder, "finch", FINCH, "Ada Finch")
    assert await link(builder, [harbour, finch], NetworkXGraphStore()) == set()
    co = SentenceGraphBuilder(co_entity_bridges=True)
    links, _ = await co.alink([harbour, finch], NetworkXGraphStore())
    (edge,) = links["finch"]
    assert edge.role == "co_entity" and "leeds" in edge.attrs["entities"]
    assert edge.source == topic(finch[1]).id  # from the owner's topic


def _topic_text(doc_id: str, name: str, text: str) -> TopicText:
    node = GraphNode(
        id=f"topic-{doc_id}",
        kind=NodeKind.TOPIC,
        text=name,
        doc_id=doc_id,
        pos=(0, 0, 0),
        attrs={"sentgraph": "topic", "entity_keys": [name.lower()], "entities": {}},
    )
    return TopicText(node, [text])


def test_hub_names_and_the_per_topic_cap() -> None:
    london = _topic_text("london", "London", "London is a city.")
    finch = _topic_text("finch", "Ada Finch", "Ada Finch lived in London.")
    others = [
        _topic_text(f"d{i}", f"Person {chr(65 + i)}", f"Person {chr(65 + i)} visited London.")
        for i in range(3)
    ]
    order = {t.doc_id: i for i, t in enumerate([london, finch, *others])}
    edges = shared_entity_bridges([london, finch, *others], [], order)
    # London is named by 4 of 5 topics: a hub, bridged by nobody
    assert all(e.target != london.topic.id for e in edges)
    reader = _topic_text("reader", "Reader", "Person A met Person B and Person C and Ada Finch.")
    order["reader"] = len(order)
    edges = shared_entity_bridges([reader], [finch, *others], order, max_per_topic=2)
    assert len(edges) == 2 and all(e.source == reader.topic.id for e in edges)
    assert all(e.doc_id == "reader" for e in edges)


def test_owner_is_the_later_batch_document() -> None:
    assert owner("a", "b", {"a": 0, "b": 1}) == "b"
    assert owner("a", "old", {"a": 0}) == "a"
    with pytest.raises(ValueError, match="no document of the batch"):
        owner("x", "y", {"a": 0})


def _all_grams(words: list[str], keys: set[str]) -> set[str]:
    """The definition: every n-gram of the words (n up to the longest key) that is a key."""
    longest = max((len(key.split()) for key in keys), default=0)
    grams = {" ".join(words[i : i + n]) for n in range(1, longest + 1)
             for i in range(len(words) - n + 1)}
    return grams & keys


def test_keys_found_by_first_word_equal_the_ngram_definition() -> None:
    import random
    from collections import defaultdict

    from llama_index_e2rag.extract.sentence_graph.bridges import _keys_in

    rng = random.Random(3)
    vocab = ["ada", "finch", "of", "leeds", "the", "harbour", "mr", "x"]
    for _ in range(500):
        words = [rng.choice(vocab) for _ in range(rng.randint(0, 30))]
        keys = {" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 4)))
                for _ in range(rng.randint(0, 8))}
        keys |= {"ada  finch", " leeds", "finch "}  # irregular spacing never matches
        by_first: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for key in keys:
            if key.split():
                by_first[key.split()[0]].append((len(key.split()), key))
        assert _keys_in(words, by_first) == _all_grams(words, keys)
