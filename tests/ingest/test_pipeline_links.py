"""Cross-document links through the index: a builder's ``alink`` runs under the write lock, its
links commit with the batch, and deleting, re-inserting, persisting, loading and repairing keep
the store's full check clean.

``TopicBridges`` is a test-only builder: one topic per document (its title) and a bridge from
topic X to topic Y whenever X's text names Y's title. Whatever the batching, the same bridges
must exist; only their owner (the later document) depends on it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any, Sequence

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document
from llama_index.core.schema import TextNode

from llama_index_e2rag.extract.chrono import ChronoLayerBuilder
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.maintenance.repair import repair_store
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind, make_id
from llama_index_e2rag.persist.check import full_check

ADA = Document(id_="ada", text="Ada Finch builds a boat. She sails it to Brookhaven.",
               metadata={"title": "Ada Finch"})
TOWN = Document(id_="town", text="Brookhaven is a harbour town. Ada Finch lives there.",
                metadata={"title": "Brookhaven"})
MILL = Document(id_="mill", text="The old mill grinds corn by the river.",
                metadata={"title": "The Mill"})


class TopicBridges:
    """One unembedded topic per document; bridges between topics whose texts name each other,
    each pair owned by its later batch document (``earlier_owns``: by its earlier one)."""

    def __init__(self, earlier_owns: bool = False) -> None:
        self.earlier_owns = earlier_owns

    async def abuild(
        self, document: Document, doc_order: int, chunks: Sequence[TextNode], graph: GraphStore
    ) -> tuple[list[GraphNode], list[GraphEdge]]:
        title = document.metadata["title"]
        topic = GraphNode(
            id=make_id(document.id_, "test_topic", (0,), title), kind=NodeKind.TOPIC,
            text=title, name=title, doc_id=document.id_, pos=(doc_order, 0, 0),
            attrs={"embed": False},
        )
        return [topic], []

    async def alink(
        self, staged: Sequence[tuple[str, GraphStore]], committed: GraphStore
    ) -> tuple[dict[str, list[GraphEdge]], list[dict[str, str]]]:
        batch = [doc_id for doc_id, _ in staged]
        topics = {doc_id: graph.nodes(NodeKind.TOPIC)[0] for doc_id, graph in staged}
        texts = {doc_id: _text(graph, doc_id) for doc_id, graph in staged}
        outside = [t for t in committed.nodes(NodeKind.TOPIC) if t.doc_id not in topics]
        for topic in outside:
            topics[topic.doc_id], texts[topic.doc_id] = topic, _text(committed, topic.doc_id)
        links: dict[str, list[GraphEdge]] = {}
        for i, owner in enumerate(batch):  # each pair once
            pairs = batch[i + 1 :] if self.earlier_owns else batch[:i]
            for other in pairs + [t.doc_id for t in outside]:
                for a, b in ((owner, other), (other, owner)):
                    if topics[b].name in texts[a]:
                        links.setdefault(owner, []).append(GraphEdge(
                            source=topics[a].id, target=topics[b].id, kind=EdgeKind.BRIDGE,
                            role="mentions", doc_id=owner,
                        ))
        return links, []


def _text(graph: GraphStore, doc_id: str) -> str:
    return " ".join(c.text for c in graph.nodes(NodeKind.CHUNK, doc_id))


def _bridges(index: E2RAGIndex) -> set[tuple[str, str]]:
    """Bridges as (source title, target title)."""
    graph = index.graph_store
    return {
        (graph.get_node(e.source).name, graph.get_node(e.target).name)
        for e in graph.edges(EdgeKind.BRIDGE)
    }


BOTH_WAYS = {("Ada Finch", "Brookhaven"), ("Brookhaven", "Ada Finch")}


def _build(docs: Sequence[Document]) -> E2RAGIndex:
    return E2RAGIndex.from_documents(
        docs, embed_model=HashEmbedding(), doc_builders=[TopicBridges()]
    )


def _reload(index: E2RAGIndex, store: Path) -> E2RAGIndex:
    """Persist, check the whole store as ``e2rag show`` does, and load it again."""
    index.storage_context.persist(str(store))
    health = full_check(store)
    assert health.ok, health.problems
    return load_index(store, embed_model=HashEmbedding(), doc_builders=[TopicBridges()])


def test_one_batch_links_its_documents_both_ways(tmp_path: Path) -> None:
    index = _build([ADA, TOWN, MILL])
    assert _bridges(index) == BOTH_WAYS
    owners = {e.doc_id for e in index.graph_store.edges(EdgeKind.BRIDGE)}
    assert owners == {"town"}  # the later document of the pair
    assert _bridges(_reload(index, tmp_path / "store")) == BOTH_WAYS


def test_a_later_batch_links_to_committed_documents(tmp_path: Path) -> None:
    index = _build([ADA])
    assert _bridges(index) == set()
    index.insert(MILL)
    index.insert(TOWN)
    assert _bridges(index) == BOTH_WAYS
    assert _bridges(_reload(index, tmp_path / "store")) == BOTH_WAYS


@pytest.mark.parametrize("deleted", ["ada", "town"])
def test_deleting_either_end_removes_the_links_and_the_store_stays_clean(
    tmp_path: Path, deleted: str
) -> None:
    store = tmp_path / "store"
    loaded = _reload(_build([ADA, TOWN, MILL]), store)
    loaded.delete_ref_doc(deleted)
    assert _bridges(loaded) == set()
    loaded = _reload(loaded, store)  # the owner ("town") was re-sealed or went whole
    loaded.insert(ADA if deleted == "ada" else TOWN)
    assert _bridges(loaded) == BOTH_WAYS
    assert _bridges(_reload(loaded, store)) == BOTH_WAYS


def test_reinserting_a_linked_document_relinks_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    loaded = _reload(_build([ADA, TOWN]), store)
    alone = Document(id_="ada", text="Ada Finch stays home.", metadata={"title": "Ada Finch"})
    loaded.insert(alone)
    assert _bridges(loaded) == {("Brookhaven", "Ada Finch")}
    loaded.insert(ADA)
    assert _bridges(_reload(loaded, store)) == BOTH_WAYS


async def test_concurrent_inserts_see_each_other() -> None:
    """Links are made under the write lock, against the graph as committed: of two inserts
    staged at once, the one committing second links to the first."""
    class Slow(TopicBridges):  # reads the committed graph, then waits (as on an LLM call)
        async def alink(self, staged: Any, committed: GraphStore) -> Any:
            found = await super().alink(staged, committed)
            await asyncio.sleep(0.05)
            return found

    index = E2RAGIndex.from_documents([MILL], embed_model=HashEmbedding(), doc_builders=[Slow()])
    await asyncio.gather(index.ainsert(ADA), index.ainsert(TOWN))
    assert _bridges(index) == BOTH_WAYS


class Astray(TopicBridges):
    """Links everything as usual, then breaks each link the way ``mistake`` says."""

    def __init__(self, mistake: str) -> None:
        super().__init__()
        self.mistake = mistake

    async def alink(self, staged: Any, committed: GraphStore) -> Any:
        links, failures = await super().alink(staged, committed)
        if self.mistake == "owner":  # owned by a document that is not an end of it
            return {d: [e.model_copy(update={"doc_id": "mill"}) for e in es]
                    for d, es in links.items()}, failures
        # to the committed version of a document the batch replaces (its node ids change)
        (old,) = [t for t in committed.nodes(NodeKind.TOPIC) if t.doc_id == "ada"]
        (doc_id, graph), = staged
        topic = graph.nodes(NodeKind.TOPIC)[0]
        return {doc_id: [GraphEdge(source=topic.id, target=old.id, kind=EdgeKind.BRIDGE,
                                   role="mentions", doc_id=doc_id)]}, failures


@pytest.mark.parametrize(
    "mistake, message",
    [("owner", "must be owned by"), ("replaced", "neither the batch nor a committed")],
)
def test_a_link_a_builder_gets_wrong_is_refused_before_anything_is_written(
    mistake: str, message: str
) -> None:
    index = E2RAGIndex.from_documents([ADA, MILL], embed_model=HashEmbedding(),
                                      doc_builders=[TopicBridges()])
    index.add_doc_builders([Astray(mistake)])
    before = index.graph_store.to_dict()
    renamed = Document(id_="ada", text=ADA.text, metadata={"title": "Ada Finch Jr"})
    with pytest.raises(ValueError, match=message):
        index.insert(TOWN if mistake == "owner" else renamed)
    assert index.graph_store.to_dict() == before


@pytest.mark.parametrize(
    "failure, owner",
    [({"doc_id": "ada", "chunk_id": "", "reason": "r"}, "ada"),
     ({"chunk_id": "", "reason": "r"}, "town")],  # unnamed: the batch's last document
)
def test_link_failures_reach_the_extraction_report(failure: dict, owner: str) -> None:
    class Failing(TopicBridges):
        async def alink(self, staged: Any, committed: GraphStore) -> Any:
            links, _ = await super().alink(staged, committed)
            return links, [failure]

    index = E2RAGIndex.from_documents([ADA, TOWN], embed_model=HashEmbedding(),
                                      doc_builders=[Failing()])
    assert _bridges(index) == BOTH_WAYS
    assert {"doc_id": owner, "chunk_id": "", "reason": "r"} in index.extraction_report()


def test_repair_records_old_documents_and_keeps_their_links(tmp_path: Path) -> None:
    """A store saved before document records existed: repair records each document again,
    writing its links after the batch, so a link to a document re-recorded after its owner
    survives."""
    store = tmp_path / "store"
    index = E2RAGIndex.from_documents(
        [ADA, TOWN], embed_model=HashEmbedding(), doc_builders=[TopicBridges(earlier_owns=True)]
    )
    assert {e.doc_id for e in index.graph_store.edges(EdgeKind.BRIDGE)} == {"ada"}
    index.storage_context.persist(str(store))
    with sqlite3.connect(store / "e2rag" / "graph.sqlite") as db:
        db.execute("DELETE FROM e2rag_meta WHERE key LIKE 'doc:%'")
    report = repair_store(store, embed_model=HashEmbedding())
    assert any("recorded 2 document(s)" in a for a in report.actions), report.actions
    assert report.after is not None and report.after.ok, report.after
    loaded = load_index(store, embed_model=HashEmbedding(), doc_builders=[TopicBridges()])
    assert _bridges(loaded) == BOTH_WAYS


def test_repair_counts_the_links_it_cannot_keep(tmp_path: Path) -> None:
    """Only the linked-to document lacks its record: its old rows go with the links the
    recorded owner held into it, and the report says how many."""
    store = tmp_path / "store"
    index = E2RAGIndex.from_documents(
        [ADA, TOWN], embed_model=HashEmbedding(), doc_builders=[TopicBridges(earlier_owns=True)]
    )
    held = len(index.graph_store.edges(EdgeKind.BRIDGE))
    index.storage_context.persist(str(store))
    with sqlite3.connect(store / "e2rag" / "graph.sqlite") as db:
        db.execute("DELETE FROM e2rag_meta WHERE key = 'doc:town'")
    report = repair_store(store, embed_model=HashEmbedding())
    assert any(f"dropped {held} link(s)" in a for a in report.actions), report.actions
    assert report.after is not None and report.after.ok, report.after
    loaded = load_index(store, embed_model=HashEmbedding(), doc_builders=[TopicBridges()])
    assert _bridges(loaded) == set()


def test_added_builders_join_the_restored_ones(tmp_path: Path) -> None:
    """``add_doc_builders`` (``e2rag index --sentence-graph`` on an existing store) keeps the
    builders restored on load, skips one whose ``config_name`` is there, and runs the rest."""
    store = tmp_path / "store"
    E2RAGIndex.from_documents(
        [MILL], embed_model=HashEmbedding(), doc_builders=[ChronoLayerBuilder()]
    ).storage_context.persist(str(store))
    loaded = load_index(store, embed_model=HashEmbedding())
    (restored,) = loaded.doc_builders
    loaded.add_doc_builders([ChronoLayerBuilder(), TopicBridges()])
    assert [type(b) for b in loaded.doc_builders] == [ChronoLayerBuilder, TopicBridges]
    assert loaded.doc_builders[0] is restored
    loaded.insert_documents([ADA, TOWN])
    assert _bridges(loaded) == BOTH_WAYS
    assert {n.doc_id for n in loaded.graph_store.nodes(NodeKind.FACT)} >= {"ada", "town"}
