"""Ingestion on Ray: a build staged on a local Ray cluster's workers commits the same nodes, edges
and vectors as a build in one process (offline and with a scripted LLM whose answers the workers
share through the driver's cache), a worker killed mid-build leaves the store as it was and a
re-run completes, and without Ray one line names the extra."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from llama_index.core import Document
from scripted_llm import ScriptedLLM

from llama_index_e2rag.app.demo import sample_document
from llama_index_e2rag.errors import MissingExtraError
from llama_index_e2rag.extract.chrono import ChronoLayerBuilder
from llama_index_e2rag.extract.event_graph.builder import EventGraphBuilder
from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.ingest import ray_workers
from llama_index_e2rag.ingest.embedding import StagedVectors
from llama_index_e2rag.ingest.ray_workers import RayIngest, merge_vectors, ray_option
from llama_index_e2rag.modes import RETRIEVER_MODES

TESTS = Path(__file__).resolve().parents[1]
NAMES = ["Peter", "Mr. McGregor", "Mrs. Rabbit", "Benjamin"]
#: the ``ray=`` of these tests: two workers of the test module's local cluster
TWO_WORKERS = RayIngest(workers=2)


def documents(count: int = 3, words: int = 300) -> list[Document]:
    """The bundled story cut at paragraph ends into ``count`` documents of about ``words``."""
    paragraphs = [p for p in sample_document().text.split("\n\n") if p.strip()]
    docs, current = [], []
    for paragraph in paragraphs:
        current.append(paragraph)
        if sum(len(p.split()) for p in current) >= words:
            docs.append(Document(text="\n\n".join(current), id_=f"part-{len(docs)}"))
            current = []
        if len(docs) == count:
            break
    return docs


def builders() -> list[Any]:
    """Every document layer (the chrono, sentence_graph and event_graph modes read them)."""
    return [ChronoLayerBuilder(facts="events"), SentenceGraphBuilder(), EventGraphBuilder()]


def contents(index: E2RAGIndex) -> tuple[dict, set, dict]:
    """Nodes (id -> kind, text, attrs), edges and vectors of an index, for comparing builds."""
    graph = index.graph_store
    nodes = {n.id: (n.kind, n.text, n.pos, n.attrs) for page in graph.scan_nodes() for n in page}
    edges = {
        (e.source, e.target, e.kind, e.key, e.doc_id) for page in graph.scan_edges() for e in page
    }
    vectors = index._stores.vectors.get_embeddings(sorted(nodes))
    return nodes, edges, vectors


def assert_same(ray_built: E2RAGIndex, single: E2RAGIndex) -> None:
    nodes, edges, vectors = contents(ray_built)
    want_nodes, want_edges, want_vectors = contents(single)
    assert nodes == want_nodes
    assert edges == want_edges
    assert vectors.keys() == want_vectors.keys() and vectors
    for node_id, vector in want_vectors.items():
        # batches of other texts around a text change the float sums, not the vector
        np.testing.assert_allclose(vectors[node_id], vector, atol=1e-5, err_msg=node_id)


@pytest.fixture(scope="module")
def ray_cluster(offline: None) -> Iterator[Any]:
    """One local cluster of two worker CPUs for the module; the workers import this checkout
    and the tests' helpers (the scripted LLM) as the driver does."""
    import ray
    path = os.pathsep.join([str(TESTS.parent), str(TESTS), os.environ.get("PYTHONPATH", "")])
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}},
    )
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # KillingBuilder
    yield ray
    ray.shutdown()


def test_an_offline_build_on_ray_equals_the_single_process_build(ray_cluster, minilm, nlp):
    docs = documents()
    single = E2RAGIndex.from_documents(docs, embed_model=minilm, doc_builders=builders())
    on_ray = E2RAGIndex.from_documents(
        documents(), embed_model=minilm, doc_builders=builders(), ray=TWO_WORKERS
    )
    assert_same(on_ray, single)
    assert on_ray.extraction_report() == single.extraction_report()
    for mode in RETRIEVER_MODES:
        question = "Why did Peter lose his jacket?"
        got = [n.node.node_id for n in on_ray.as_retriever(mode=mode).retrieve(question)]
        assert got == [n.node.node_id for n in single.as_retriever(mode=mode).retrieve(question)]


def test_an_llm_build_on_ray_equals_it_and_shares_the_answer_cache(ray_cluster, tmp_path):
    from hash_embedding import HashEmbedding

    def build(cache: Path, **kwargs: Any) -> E2RAGIndex:
        return E2RAGIndex.from_documents(
            documents(),
            llm=ScriptedLLM(names=NAMES),
            embed_model=HashEmbedding(),
            doc_builders=builders(),
            cache_dir=str(cache),
            **kwargs,
        )

    single = build(tmp_path / "single")
    on_ray = build(tmp_path / "ray", ray=TWO_WORKERS)
    assert_same(on_ray, single)
    calls = single.llm_stats()["calls"]
    assert calls > 0 and on_ray.llm_stats()["calls"] == calls  # the workers' spending counted
    # the driver kept every worker's answers: a re-run on Ray pays for none of them again
    again = build(tmp_path / "ray", ray=TWO_WORKERS)
    assert again.llm_stats()["calls"] == 0
    assert again.llm_stats()["cache_hits"] == calls
    assert_same(again, single)


def test_a_ray_build_commits_into_a_postgres_graph_as_one_process_does(
    ray_cluster, postgres_dsn, postgres_schema
):
    from hash_embedding import HashEmbedding

    from llama_index_e2rag.graph.postgres_store import PostgresGraphStore

    def build(**kwargs: Any) -> E2RAGIndex:
        return E2RAGIndex.from_documents(
            documents(), llm=ScriptedLLM(names=NAMES), embed_model=HashEmbedding(), **kwargs
        )

    graph = PostgresGraphStore(postgres_dsn, schema=postgres_schema)
    assert_same(build(graph_store=graph, ray=TWO_WORKERS), build())


class KillingBuilder:
    """A document builder whose worker process dies while it builds ``doomed`` as long as the
    ``flag`` file exists (a killed machine, not an exception)."""

    def __init__(self, flag: Path) -> None:
        self.flag = flag

    async def abuild(self, document, order, chunks, graph):  # noqa: ANN001 - the protocol's
        if document.id_ == "doomed" and self.flag.exists():
            os._exit(1)
        return [], []


def test_a_killed_worker_leaves_the_store_as_it_was_and_a_rerun_completes(
    ray_cluster, hash_embed, nlp, tmp_path
):
    flag = tmp_path / "kill"
    flag.touch()
    first, *rest = documents(4, words=150)
    index = E2RAGIndex.from_documents(
        [first], embed_model=hash_embed, doc_builders=[KillingBuilder(flag)]
    )
    before = contents(index)
    batch = [*rest[:-1], Document(text=rest[-1].text, id_="doomed")]
    with pytest.raises(ray_cluster.exceptions.RayActorError):
        index.insert_documents(batch, ray=TWO_WORKERS)
    after = contents(index)
    assert after[:2] == before[:2] and after[2].keys() == before[2].keys()
    assert set(index.graph_store.doc_orders()) == {first.id_}
    flag.unlink()
    index.insert_documents(batch, ray=TWO_WORKERS)
    assert set(index.graph_store.doc_orders()) == {first.id_, *(d.id_ for d in batch)}


def test_without_ray_one_line_names_the_extra(monkeypatch, hash_embed):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(MissingExtraError) as caught:
        ray_workers.import_ray()
    assert str(caught.value) == (
        "building on Ray needs Ray: pip install 'llama-index-e2rag[ray]'"
    )
    index = E2RAGIndex(nodes=[], embed_model=hash_embed, ray=True)
    with pytest.raises(MissingExtraError):
        index.insert_documents(documents(1), ray=True)
    assert index.graph_store.doc_orders() == {}


def test_ray_option_reads_true_an_address_or_settings():
    assert ray_option(None) is None and ray_option(False) is None
    assert ray_option(True) == RayIngest()
    assert ray_option("auto") == RayIngest(address="auto")
    assert ray_option(TWO_WORKERS) is TWO_WORKERS
    with pytest.raises(TypeError):
        ray_option(2)


def test_merged_vectors_keep_each_text_once_with_its_row():
    first = StagedVectors({"a": 0, "b": 1}, np.array([[1, 0], [0, 1]], dtype=np.float32))
    second = StagedVectors({"b": 0, "c": 1}, np.array([[0, 1], [1, 1]], dtype=np.float32))
    merged = merge_vectors([first, second])
    assert sorted(merged.rows) == ["a", "b", "c"]
    assert merged.of("a").tolist() == [1, 0]
    assert merged.of("b").tolist() == [0, 1]
    assert merged.of("c").tolist() == [1, 1]
    assert len(merge_vectors([])) == 0
