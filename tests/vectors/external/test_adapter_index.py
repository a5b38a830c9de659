"""``E2RAGIndex`` over real llama-index vector stores, end to end: build, persist, close, reopen in
a NEW PROCESS, retrieve in every mode, delete a document.

The stores are the specs of ``conftest.SPECS`` that define ``native_count`` (run here and again
in the child process, as a user would after a restart). A store whose packages are missing is
skipped (its marker, ``tests/dependencies.py``). Vector search through the index must
agree with the embedded default vectors (the same cosine top-k; nodes of equal score may come in
any order, so retrieval modes, which can follow that order, are compared with the same store).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document, StorageContext, load_index_from_storage
from scripted_llm import ScriptedLLM

from llama_index_e2rag.errors import VectorStoreError
from llama_index_e2rag.extract.chrono import ChronoLayerBuilder
from llama_index_e2rag.extract.event_graph.builder import EventGraphBuilder
from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder
from llama_index_e2rag.index import E2RAGIndex, EMBEDDED_KINDS, RETRIEVER_MODES
from llama_index_e2rag.schema import embeddable

from test_index import CHUNK_SIZE, NAMES, SEQUEL, STORY

from .conftest import SPECS, Spec, open_spec

TESTS = Path(__file__).resolve().parents[2]
REPO = TESTS.parent
DIM = HashEmbedding().dim
GONE, KEPT = "phantom", "sequel"  # the document deleted in the child, the one kept
QUERIES = (
    "Why did Hermione lie to the teachers after the troll fight?",
    "What did Harry see in the mirror at night?",
    "Who lost his toad on the train?",
)
INDEX_SPECS = [spec.param() for spec in SPECS if spec.counts]


# -- shared with the child process (it imports this module) -------------------------------------
def results_of(index: E2RAGIndex) -> dict[str, list[list[list[Any]]]]:
    """``[node id, score]`` lists per mode and query, in the order retrieved."""
    out = {}
    for mode in RETRIEVER_MODES:
        retriever = index.as_retriever(mode=mode)
        out[mode] = [
            [[n.node.node_id, n.score] for n in retriever.retrieve(query)]
            for query in QUERIES
        ]
    return out


def search_of(index: E2RAGIndex, top_k: int = 8) -> dict[str, list[list[list[Any]]]]:
    """``[node id, cosine]`` of the vector search per embedded kind and query."""
    embed = HashEmbedding()
    queries = [embed.get_query_embedding(q) for q in QUERIES]
    return {
        kind.value: [[[h.id, h.score] for h in index.stores.search(kind, q, top_k)] for q in queries]
        for kind in EMBEDDED_KINDS
    }


def vector_counts(index: E2RAGIndex) -> dict[str, list[int]]:
    """Per embedded kind: ``[vectors in the store, embeddable graph nodes]``."""
    return {
        kind.value: [
            index.stores.vectors.count(kind.value),
            sum(embeddable(n) for n in index.graph_store.nodes(kind)),
        ]
        for kind in EMBEDDED_KINDS
    }


def missing_vectors(index: E2RAGIndex) -> list[str]:
    """Embeddable graph nodes whose vector the store cannot return."""
    ids = [n.id for kind in EMBEDDED_KINDS for n in index.graph_store.nodes(kind) if embeddable(n)]
    found = index.stores.vectors.get_embeddings(ids)
    return [i for i in ids if i not in found]


def live_stores(index: E2RAGIndex) -> dict[str, Any]:
    return index.stores.vectors.stores  # type: ignore[attr-defined]


# -- helpers ------------------------------------------------------------------------------------
def docs() -> list[Document]:
    return [Document(text=STORY, id_=GONE), Document(text=SEQUEL, id_=KEPT)]


def build(llm: ScriptedLLM, **kwargs: Any) -> E2RAGIndex:
    return E2RAGIndex.from_documents(
        docs(),
        llm=llm,
        embed_model=HashEmbedding(),
        chunk_size=CHUNK_SIZE,
        chunk_overlap=0,
        # the chrono, sentence_graph and event_graph modes need their layers
        doc_builders=[ChronoLayerBuilder(facts="events"), SentenceGraphBuilder(),
                      EventGraphBuilder()],
        **kwargs,
    )


def store_kwargs(spec: Spec, ns: dict[str, Any]) -> dict[str, Any]:
    if spec.per_kind:
        return {"vector_stores": ns["stores"]}
    if spec.via_storage_context:
        return {"storage_context": StorageContext.from_defaults(vector_store=ns["store"])}
    return {"vector_store": ns["store"]}


_CHILD = """
import json, sys
sys.path[:0] = [{repo!r}, {tests!r}]
PATH = {path!r}
DIM = {dim}
{code}
from hash_embedding import HashEmbedding
from llama_index.core import StorageContext, load_index_from_storage
from scripted_llm import ScriptedLLM
from llama_index_e2rag import E2RAGIndex
from vectors.external.test_adapter_index import (GONE, NAMES, live_stores, missing_vectors,
                                                 results_of, search_of, vector_counts)

if {per_kind!r}:
    context, kwargs = StorageContext.from_defaults(persist_dir={persist!r}), dict(vector_stores=stores)
else:
    context, kwargs = StorageContext.from_defaults(persist_dir={persist!r}, vector_store=store), {{}}
index = load_index_from_storage(
    context, embed_model=HashEmbedding(), llm=ScriptedLLM(names=NAMES), **kwargs
)
assert isinstance(index, E2RAGIndex)
out = dict(results=results_of(index), search=search_of(index), counts=vector_counts(index),
           missing=missing_vectors(index))
out["gone_ids"] = [n.id for n in index.graph_store.nodes(doc_id=GONE)]
index.delete_ref_doc(GONE)
out["after"] = results_of(index)
out["counts_after"] = vector_counts(index)
out["native_after"] = native_count(live_stores(index))
out["leftover"] = sorted(index.stores.vectors.get_embeddings(out["gone_ids"]))
out["graph_left"] = len(index.graph_store.nodes(doc_id=GONE))
print("RESULT" + json.dumps(out))
close()
"""


def run_child(spec: Spec, path: Path, persist_dir: Path) -> dict[str, Any]:
    script = _CHILD.format(
        repo=str(REPO), tests=str(TESTS), path=str(path), code=textwrap.dedent(spec.code), dim=DIM,
        per_kind=spec.per_kind, persist=str(persist_dir),
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env,
        cwd=str(REPO), check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


@dataclass
class Built:
    """What the in-process index saw before it was persisted and its store closed."""

    spec: Spec
    path: Path
    persist_dir: Path
    results: dict[str, Any]
    search: dict[str, Any]
    counts: dict[str, list[int]]
    native: int
    missing: list[str]
    label: str


# -- fixtures -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def embedded_cosines() -> dict[str, list[dict[str, float]]]:
    """The same build on the embedded default vectors: every node's cosine per kind and query."""
    everything = search_of(build(ScriptedLLM(names=NAMES)), top_k=10_000)
    return {kind: [dict(hits) for hits in per_query] for kind, per_query in everything.items()}


@pytest.fixture(scope="module", params=INDEX_SPECS)
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    spec: Spec = request.param
    path = tmp_path_factory.mktemp(spec.name)
    ns = open_spec(spec, path, DIM)
    try:
        index = build(ScriptedLLM(names=NAMES), **store_kwargs(spec, ns))
        persist_dir = path / "index"
        done = Built(
            spec, path, persist_dir, results_of(index), search_of(index), vector_counts(index),
            ns["native_count"](live_stores(index)), missing_vectors(index),
            index.stores.vectors.label,  # type: ignore[attr-defined]
        )
        index.storage_context.persist(str(persist_dir))
    finally:
        ns["close"]()  # local Qdrant and Milvus Lite admit one process per path
    return done


@pytest.fixture(scope="module")
def reopened(built: Built) -> dict[str, Any]:
    """The child process's view: reopened, loaded, retrieved, then ``GONE`` deleted."""
    return run_child(built.spec, built.path, built.persist_dir)


# -- tests --------------------------------------------------------------------------------------
def test_every_embedded_node_has_its_vector_in_the_store(built: Built) -> None:
    assert built.missing == []
    for kind, (in_store, in_graph) in built.counts.items():
        assert in_store == in_graph, kind
    total = sum(n for n, _ in built.counts.values())
    assert total > 0 and built.native == total  # the store's own count: no stray rows
    for kind in ("chunk", "mention", "event", "fact", "passage"):
        assert built.counts[kind][0] > 0, kind  # the story exercises every populated kind


def assert_cosine_top_k(hits: list[list[Any]], cosines: dict[str, float], top_k: int) -> None:
    """``hits`` is a top-k of ``cosines``: right scores, right length, best first."""
    want = sorted(cosines.values(), reverse=True)[:top_k]
    assert [s for _, s in hits] == pytest.approx(want, abs=2e-4)
    assert len({i for i, _ in hits}) == len(hits)
    for node_id, score in hits:
        assert cosines[node_id] == pytest.approx(score, abs=2e-4), node_id


def assert_same_results(got: list, want: list, mode: str) -> None:
    """The same nodes in the same order, with the same scores, for every query."""
    for got_hits, want_hits in zip(got, want, strict=True):
        assert [i for i, _ in got_hits] == [i for i, _ in want_hits], mode
        got_scores = [s if s is None else pytest.approx(s, abs=1e-5) for _, s in got_hits]
        assert got_scores == [s for _, s in want_hits], mode


def test_vector_search_agrees_with_the_embedded_vectors(built: Built, embedded_cosines: dict) -> None:
    for kind, per_query in built.search.items():
        for hits, cosines in zip(per_query, embedded_cosines[kind], strict=True):
            assert_cosine_top_k(hits, cosines, 8)
    assert all(any(built.results[mode]) for mode in RETRIEVER_MODES)  # every mode finds something


def test_reopened_in_a_new_process_retrieves_the_same(
    built: Built, reopened: dict, embedded_cosines: dict
) -> None:
    assert reopened["missing"] == []
    assert reopened["counts"] == built.counts
    for mode in RETRIEVER_MODES:
        assert_same_results(reopened["results"][mode], built.results[mode], mode)
    for kind, per_query in reopened["search"].items():
        for hits, cosines in zip(per_query, embedded_cosines[kind], strict=True):
            assert_cosine_top_k(hits, cosines, 8)


def test_delete_ref_doc_leaves_nothing_in_the_store_nor_results(built: Built, reopened: dict) -> None:
    gone = set(reopened["gone_ids"])
    before = {n for mode in RETRIEVER_MODES for query in built.results[mode] for n, _ in query}
    assert gone & before  # the deleted document was being retrieved
    assert reopened["graph_left"] == 0 and reopened["leftover"] == []
    for kind, (in_store, in_graph) in reopened["counts_after"].items():
        assert in_store == in_graph, kind
    kept = sum(n for n, _ in reopened["counts_after"].values())
    assert 0 < kept < sum(n for n, _ in built.counts.values())
    assert reopened["native_after"] == kept
    for mode in RETRIEVER_MODES:
        after = {n for query in reopened["after"][mode] for n, _ in query}
        assert not after & gone, mode
        assert after, mode  # the kept document is still retrieved


def test_loading_without_the_store_names_it(built: Built) -> None:
    context = StorageContext.from_defaults(persist_dir=str(built.persist_dir))
    with pytest.raises(VectorStoreError) as err:
        load_index_from_storage(context, embed_model=HashEmbedding(), llm=ScriptedLLM(names=NAMES))
    assert built.label in str(err.value) and "pass that store again" in str(err.value)


# -- stores that cannot work are refused before any LLM call -------------------------------------
def _faiss_idmap(path: Path) -> Any:
    import faiss
    from llama_index.vector_stores.faiss import FaissVectorStore

    return FaissVectorStore(faiss_index=faiss.IndexIDMap(faiss.IndexFlatIP(DIM)))


def _faiss_unknown_rows(path: Path) -> Any:
    import faiss
    import numpy as np
    from llama_index.vector_stores.faiss import FaissVectorStore

    index = faiss.IndexFlatIP(DIM)
    index.add(np.ones((3, DIM), dtype=np.float32))  # rows no id map names
    return FaissVectorStore(faiss_index=index)


def _lancedb_hybrid(path: Path) -> Any:
    from llama_index.vector_stores.lancedb import LanceDBVectorStore

    return LanceDBVectorStore(uri=str(path / "lance"), table_name="t", query_type="hybrid")


def _qdrant_two_local_clients(path: Path) -> Any:
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import AsyncQdrantClient, QdrantClient

    return QdrantVectorStore(
        collection_name="c", client=QdrantClient(":memory:"), aclient=AsyncQdrantClient(":memory:")
    )


def _qdrant_manhattan(path: Path) -> Any:
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient
    from qdrant_client.http import models as rest

    client = QdrantClient(":memory:")
    client.create_collection("c", rest.VectorParams(size=DIM, distance=rest.Distance.MANHATTAN))
    return QdrantVectorStore(collection_name="c", client=client)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        pytest.param(_faiss_idmap, "IndexIDMap", marks=pytest.mark.faiss, id="faiss-idmap"),
        pytest.param(_faiss_unknown_rows, "id map", marks=pytest.mark.faiss,
                     id="faiss-unmapped-rows"),
        pytest.param(_lancedb_hybrid, "query_type", marks=pytest.mark.lancedb, id="lancedb-hybrid"),
        pytest.param(_qdrant_two_local_clients, "local client and aclient",
                     marks=pytest.mark.qdrant, id="qdrant-two-local"),
        pytest.param(_qdrant_manhattan, "Manhattan", marks=pytest.mark.qdrant,
                     id="qdrant-manhattan"),
    ],
)
def test_unusable_store_is_refused_before_extraction(
    make: Callable[[Path], Any], match: str, tmp_path: Path
) -> None:
    llm = ScriptedLLM(names=NAMES)
    with pytest.raises(VectorStoreError, match=match):
        build(llm, vector_store=make(tmp_path))
    assert llm.prompts == []


@pytest.mark.qdrant
def test_a_collection_of_another_dimension_is_refused_before_extraction() -> None:
    """The index checks its embedding's dimension against the stores before extraction."""
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient
    from qdrant_client.http import models as rest

    client = QdrantClient(":memory:")
    client.create_collection("c", rest.VectorParams(size=16, distance=rest.Distance.COSINE))
    llm = ScriptedLLM(names=NAMES)
    with pytest.raises(VectorStoreError, match="16"):
        build(llm, vector_store=QdrantVectorStore(collection_name="c", client=client))
    assert client.count("c", exact=True).count == 0 and llm.prompts == []


@pytest.mark.qdrant
def test_per_kind_stores_without_every_kind_cost_no_extraction() -> None:
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    client = QdrantClient(":memory:")
    stores = {"mention": QdrantVectorStore("m", client=client), "event": QdrantVectorStore("e", client=client)}
    llm = ScriptedLLM(names=NAMES)
    with pytest.raises(VectorStoreError, match="no store for node kind"):
        build(llm, vector_stores=stores)
    assert llm.prompts == []
