"""SentGraph's builder through the index: restored on load, bridging later inserts to committed
topics, and deleted or re-inserted documents taking their layers and the other documents'
bridges to them along, with the store's full check clean throughout."""

from __future__ import annotations

from pathlib import Path

from hash_embedding import HashEmbedding
from llama_index.core import Document

from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.schema import EdgeKind, NodeKind
from llama_index_e2rag.persist.check import full_check

ADA = Document(
    id_="ada",
    text="Ada Finch builds a boat in the yard. She sails it to Brookhaven in May.",
    metadata={"title": "Ada Finch"},
)
TOWN = Document(
    id_="town",
    text="Brookhaven is a harbour town on the coast. Ada Finch lives there with her dog.",
    metadata={"title": "Brookhaven"},
)


def _bridges(index: E2RAGIndex) -> set[tuple[str, str]]:
    graph = index.graph_store
    return {
        (graph.get_node(e.source).name, graph.get_node(e.target).name)
        for e in graph.edges(EdgeKind.BRIDGE)
    }


def _reload(index: E2RAGIndex, store: Path) -> E2RAGIndex:
    """Persist, run the full store check, load without passing the builder."""
    index.storage_context.persist(str(store))
    health = full_check(store)
    assert health.ok, health.problems
    return load_index(store, embed_model=HashEmbedding())


def test_the_builder_is_restored_and_bridges_later_inserts(tmp_path: Path) -> None:
    builder = SentenceGraphBuilder(max_bridges_per_topic=3)
    index = E2RAGIndex.from_documents([ADA], embed_model=HashEmbedding(), doc_builders=[builder])
    loaded = _reload(index, tmp_path / "store")
    (restored,) = loaded.doc_builders
    assert isinstance(restored, SentenceGraphBuilder)
    assert restored.to_config() == builder.to_config()
    loaded.insert(TOWN)
    assert _bridges(loaded) == {("Ada Finch", "Brookhaven"), ("Brookhaven", "Ada Finch")}
    _reload(loaded, tmp_path / "store")


def test_delete_and_reinsert_keep_the_store_clean(tmp_path: Path) -> None:
    store = tmp_path / "store"
    index = E2RAGIndex.from_documents(
        [ADA, TOWN], embed_model=HashEmbedding(), doc_builders=[SentenceGraphBuilder()]
    )
    ids = {n.id for n in index.graph_store.nodes(doc_id="town")}
    loaded = _reload(index, store)
    loaded.delete_ref_doc("town")
    graph = loaded.graph_store
    assert graph.nodes(NodeKind.TOPIC, "town") == []
    assert graph.nodes(NodeKind.SENTENCE, "town") == []
    assert _bridges(loaded) == set()
    assert {e.doc_id for e in graph.edges(EdgeKind.RST)} <= {"ada"}
    loaded = _reload(loaded, store)
    loaded.insert(TOWN)
    assert {n.id for n in loaded.graph_store.nodes(doc_id="town")} == ids
    assert _bridges(_reload(loaded, store)) == {
        ("Ada Finch", "Brookhaven"), ("Brookhaven", "Ada Finch")
    }
