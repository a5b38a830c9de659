"""``E2RAGIndex.add_layers``: a layer added to stored documents is the layer a build with it
makes, without extracting anything again, and commits all or nothing."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core import Document
from extract.test_chrono import HARBOUR, MOUNTAIN, chrono_llm

from llama_index_e2rag.extract.chrono import ChronoLayerBuilder
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.ingest.layers import LayersAdded, missing_builders
from llama_index_e2rag.llm.runner import LLMRunner
from llama_index_e2rag.schema import NodeKind

CHRONO_KINDS = ("chrono_summary", "chrono_relations")


def _docs() -> list[Document]:
    return [Document(text=HARBOUR, id_="harbour"), Document(text=MOUNTAIN, id_="mountain")]


def _chrono(llm) -> ChronoLayerBuilder:
    return ChronoLayerBuilder(LLMRunner(llm, max_retries=0, backoff=0.0), chunk_tokens=20,
                              group_size=2)


def _edges(index: E2RAGIndex) -> set[tuple[str, str, str, str]]:
    return {(e.source, e.target, e.kind.value, e.role or "") for e in index.graph_store.edges()}


def test_added_layer_equals_a_build_with_it_and_nothing_is_extracted_again(hash_embed) -> None:
    llm = chrono_llm()
    # small chunks: the builders read the text rebuilt from several stored chunks
    index = E2RAGIndex.from_documents(_docs(), llm=llm, embed_model=hash_embed, chunk_size=40)
    stored = {n.id: n for n in index.graph_store.nodes()}
    vectors = index.stores.embeddings(list(stored))
    extraction_calls = dict(llm.calls_by_kind)

    report = index.add_layers([_chrono(llm)])

    assert report.names == ["chrono"] and report.documents == 2 and report.nodes > 0
    calls = {k: n for k, n in llm.calls_by_kind.items() if k not in CHRONO_KINDS}
    assert calls == extraction_calls  # no extraction call again
    assert all(llm.calls_by_kind[kind] > 0 for kind in CHRONO_KINDS)
    after = {n.id: n for n in index.graph_store.nodes()}
    assert len(after) == len(stored) + report.nodes
    assert all(after[i].text == n.text and after[i].pos == n.pos for i, n in stored.items())
    kept = index.stores.embeddings(list(stored))
    assert kept.keys() == vectors.keys()
    assert all(np.allclose(kept[i], vectors[i], atol=1e-6) for i in vectors)

    reference_llm = chrono_llm()
    reference = E2RAGIndex.from_documents(
        _docs(), llm=reference_llm, embed_model=hash_embed, chunk_size=40,
        doc_builders=[_chrono(reference_llm)],
    )
    expected = {n.id for n in reference.graph_store.nodes()}
    assert set(after) == expected and _edges(index) == _edges(reference)
    wanted = reference.stores.embeddings(sorted(expected))
    got = index.stores.embeddings(sorted(expected))
    assert got.keys() == wanted.keys()
    assert all(np.allclose(got[i], wanted[i], atol=1e-6) for i in wanted)
    assert [type(b).__name__ for b in index.doc_builders] == ["ChronoLayerBuilder"]
    assert index.as_retriever(mode="chrono").retrieve("Who lit the lamp?")


def test_a_layer_already_built_is_skipped_without_a_write(hash_embed) -> None:
    llm = chrono_llm()
    index = E2RAGIndex.from_documents(_docs(), llm=llm, embed_model=hash_embed,
                                      doc_builders=[_chrono(llm)])
    version = index.graph_store.version
    assert index.add_layers([ChronoLayerBuilder()]) == LayersAdded()
    assert index.graph_store.version == version
    assert missing_builders(index.doc_builders, [ChronoLayerBuilder(), ChronoLayerBuilder()]) == []


class _Failing:
    """A builder that breaks on the second document."""

    def __init__(self) -> None:
        self.seen = 0

    async def abuild(self, document, doc_order, chunks, graph):
        self.seen += 1
        if self.seen == 2:
            raise RuntimeError("builder broke")
        return [], []


def test_a_failing_builder_leaves_the_store_and_the_builders_as_they_were(hash_embed) -> None:
    llm = chrono_llm()
    index = E2RAGIndex.from_documents(_docs(), llm=llm, embed_model=hash_embed)
    nodes = {n.id for n in index.graph_store.nodes()}
    version = index.graph_store.version
    with pytest.raises(RuntimeError, match="builder broke"):
        index.add_layers([_chrono(llm), _Failing()])
    assert index.graph_store.version == version
    assert {n.id for n in index.graph_store.nodes()} == nodes
    assert not index.graph_store.nodes(NodeKind.FACT) and index.doc_builders == []


def test_a_failed_commit_keeps_the_builders_the_store_records(
    hash_embed, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = chrono_llm()
    index = E2RAGIndex.from_documents(_docs(), llm=llm, embed_model=hash_embed)

    async def disk_full(*args, **kwargs) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(index.stores, "areplace_documents", disk_full)
    with pytest.raises(OSError):
        index.add_layers([_chrono(llm)])
    assert index.doc_builders == [] and not index.graph_store.nodes(NodeKind.FACT)
    monkeypatch.undo()
    assert index.add_layers([_chrono(llm)]).documents == 2  # and it can be retried
    assert index.graph_store.nodes(NodeKind.FACT)


def test_layers_with_links_between_documents_equal_a_build_with_them(
    hash_embed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline (spaCy parse, no LLM): SentGraph's bridges and E²GraphRAG's same-entity links
    join the documents exactly as when the layers were built with them."""
    from llama_index.core import Settings
    from cli.test_entry import BAND, SONG, WEATHER

    from llama_index_e2rag.extract.event_graph.builder import EventGraphBuilder
    from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder

    monkeypatch.setattr(Settings, "_llm", None)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def docs() -> list[Document]:
        return [Document(text=t, id_=n) for n, t in (("song", SONG), ("band", BAND),
                                                     ("weather", WEATHER))]

    index = E2RAGIndex.from_documents(docs(), embed_model=hash_embed)
    report = index.add_layers([SentenceGraphBuilder(), EventGraphBuilder()])
    assert report.names == ["sentence_graph", "event_graph"] and report.documents == 3
    reference = E2RAGIndex.from_documents(
        docs(), embed_model=hash_embed, doc_builders=[SentenceGraphBuilder(), EventGraphBuilder()]
    )
    assert {n.id for n in index.graph_store.nodes()} == {
        n.id for n in reference.graph_store.nodes()
    }
    assert _edges(index) == _edges(reference)
    assert [e for e in index.graph_store.edges() if e.kind.value == "bridge"]
    assert index.as_retriever(mode="sentence_graph").retrieve("Who plays drums?")


def test_nodes_without_offsets_are_refused_rather_than_misplaced(hash_embed) -> None:
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    nodes = [
        TextNode(text=text, id_=f"hand-{i}",
                 relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="notes")})
        for i, text in enumerate((HARBOUR, MOUNTAIN))
    ]
    llm = chrono_llm()
    index = E2RAGIndex(nodes=nodes, llm=llm, embed_model=hash_embed)
    version = index.graph_store.version
    with pytest.raises(ValueError, match="insert it again as a Document"):
        index.add_layers([_chrono(llm)])
    assert index.graph_store.version == version and index.doc_builders == []
