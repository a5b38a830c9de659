"""Per-kind stores, FAISS files, ``check`` refusals and scores whatever the store's metric."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llama_index_e2rag.errors import VectorStoreError
from llama_index_e2rag.vectors.base import VectorRecord
from llama_index_e2rag.vectors.external import LlamaIndexVectors, stored_id

from .conftest import DIM, KINDS, assert_ranking, have, make_queries, make_records


def test_per_kind_faiss_stores_do_not_overwrite_each_other(tmp_path: Path):
    faiss = pytest.importorskip("faiss")
    FaissVectorStore = pytest.importorskip("llama_index.vector_stores.faiss").FaissVectorStore
    stores = {k: FaissVectorStore(faiss_index=faiss.IndexFlatIP(DIM)) for k in KINDS}
    vectors = LlamaIndexVectors(stores, dim=DIM)
    records = make_records(seed=9)
    vectors.add(records)
    vectors.persist(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len([n for n in names if n.endswith(".faiss")]) == 3
    assert len([n for n in names if n.endswith(".ids.json")]) == 3

    fresh = {k: FaissVectorStore(faiss_index=faiss.IndexFlatIP(DIM)) for k in KINDS}
    with pytest.raises(VectorStoreError):  # non-empty FAISS without its id map
        LlamaIndexVectors(vectors.stores["chunk"], dim=DIM).check()
    reopened = LlamaIndexVectors(fresh, dim=DIM, persist_dir=tmp_path)
    reopened.check()
    live = {r.id: r for r in records}
    for q in make_queries():
        for kind in KINDS:
            assert_ranking(reopened.search(kind, q, 5), live, kind, q, 5)
    assert reopened.count("event") == 24


def test_per_kind_qdrant_collections_and_one_shared_by_two_kinds(tmp_path: Path):
    pytest.importorskip("qdrant_client")
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    client = QdrantClient(location=":memory:")
    shared = QdrantVectorStore(collection_name="e2rag_entity_event", client=client)
    stores = {
        "chunk": QdrantVectorStore(collection_name="e2rag_chunk", client=client),
        "entity": shared,
        "event": shared,
    }
    vectors = LlamaIndexVectors(stores, dim=DIM)
    vectors.check()
    vectors.delete_doc("doc-a")  # no collection exists yet
    records = make_records(seed=13)
    vectors.add(records)
    live = {r.id: r for r in records}
    assert client.count("e2rag_chunk").count == 24
    assert client.count("e2rag_entity_event").count == 48
    for q in make_queries():
        for kind in KINDS:
            assert_ranking(vectors.search(kind, q, 5), live, kind, q, 5)
    # stored ids are uuid5 of the graph id; the graph id is in the payload; doc is ref_doc_id
    point = client.retrieve("e2rag_chunk", [stored_id("chunk:0")], with_payload=True)[0]
    assert point.payload["e2rag_id"] == "chunk:0" and point.payload["doc_id"] == live["chunk:0"].doc_id
    client.close()


def test_check_refuses_unusable_stores(tmp_path: Path):
    faiss = pytest.importorskip("faiss")
    from llama_index.vector_stores.faiss import FaissVectorStore

    bad = [
        FaissVectorStore(faiss_index=faiss.IndexIDMap(faiss.IndexFlatIP(DIM))),
        FaissVectorStore(faiss_index=faiss.IndexFlatIP(DIM + 1)),
    ]
    idmap = FaissVectorStore(faiss_index=faiss.IndexFlatIP(DIM))
    idmap.client.add(np.ones((2, DIM), dtype=np.float32))  # vectors the adapter knows nothing of
    bad.append(idmap)
    for store in bad:
        with pytest.raises(VectorStoreError) as err:
            LlamaIndexVectors(store, dim=DIM).check()
        assert "\n" not in str(err.value)

    if have("llama_index.vector_stores.lancedb"):
        from llama_index.vector_stores.lancedb import LanceDBVectorStore

        store = LanceDBVectorStore(uri=str(tmp_path / "l"), table_name="t", query_type="hybrid")
        with pytest.raises(VectorStoreError, match="query_type"):
            LlamaIndexVectors(store).check()
    if have("llama_index.vector_stores.qdrant"):
        from llama_index.vector_stores.qdrant import QdrantVectorStore
        from qdrant_client import QdrantClient
        from qdrant_client.http import models as rest

        client = QdrantClient(location=":memory:")
        store = QdrantVectorStore(
            collection_name="c", client=client,
            dense_config=rest.VectorParams(size=DIM + 2, distance=rest.Distance.COSINE),
        )
        with pytest.raises(VectorStoreError, match="dimension"):
            LlamaIndexVectors(store, dim=DIM).check()
        LlamaIndexVectors(QdrantVectorStore(collection_name="ok", client=client), dim=DIM).check()
        # an existing collection is checked too (one request, no embedding model)
        client.create_collection("manhattan", rest.VectorParams(size=DIM, distance=rest.Distance.MANHATTAN))
        with pytest.raises(VectorStoreError, match="Manhattan"):
            LlamaIndexVectors(QdrantVectorStore(collection_name="manhattan", client=client)).check()
        client.create_collection("wide", rest.VectorParams(size=DIM * 2, distance=rest.Distance.COSINE))
        with pytest.raises(VectorStoreError, match="dimension"):
            LlamaIndexVectors(QdrantVectorStore(collection_name="wide", client=client), dim=DIM).check()
        client.close()
    if have("llama_index.vector_stores.milvus") and have("milvus_lite"):
        from llama_index.vector_stores.milvus import MilvusVectorStore
        from milvus_lite.server_manager import server_manager_instance

        uri = str(tmp_path / "m.db")
        store = MilvusVectorStore(uri=uri, collection_name="c", dim=DIM)
        with pytest.raises(VectorStoreError, match="dim"):
            LlamaIndexVectors(store, dim=DIM * 2).check()
        store.client.close()
        server_manager_instance.release_server(uri)

    with pytest.raises(VectorStoreError):
        LlamaIndexVectors({})
    vectors = LlamaIndexVectors({"chunk": FaissVectorStore(faiss_index=faiss.IndexFlatIP(DIM))})
    with pytest.raises(VectorStoreError, match="no vector store for node kind"):
        vectors.add(make_records()[-1:])


def _metric_variants(tmp_path: Path) -> list[tuple[str, Any, Callable[[], None]]]:
    """Stores whose native score is not a cosine similarity (or not one we can trust)."""
    out: list[tuple[str, Any, Callable[[], None]]] = []
    if have("llama_index.vector_stores.qdrant"):
        from llama_index.vector_stores.qdrant import QdrantVectorStore
        from qdrant_client import QdrantClient
        from qdrant_client.http import models as rest

        client = QdrantClient(location=":memory:")
        for distance in (rest.Distance.EUCLID, rest.Distance.DOT):
            store = QdrantVectorStore(
                collection_name=f"m_{distance.value}", client=client,
                dense_config=rest.VectorParams(size=DIM, distance=distance),
            )
            out.append((f"qdrant-{distance.value}", store, lambda: None))
    if have("llama_index.vector_stores.chroma"):
        import chromadb
        from llama_index.vector_stores.chroma import ChromaVectorStore

        chroma = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
        for space in ("cosine", "ip"):
            collection = chroma.get_or_create_collection(
                f"m-{space}", embedding_function=None, configuration={"hnsw": {"space": space}}
            )
            out.append((f"chroma-{space}", ChromaVectorStore(chroma_collection=collection), lambda: None))
    if have("llama_index.vector_stores.milvus") and have("milvus_lite"):
        from llama_index.vector_stores.milvus import MilvusVectorStore
        from milvus_lite.server_manager import server_manager_instance

        uri = str(tmp_path / "m.db")
        store = MilvusVectorStore(uri=uri, collection_name="l2", dim=DIM, similarity_metric="L2")
        out.append(("milvus-L2", store, lambda: server_manager_instance.release_server(uri)))
    if have("faiss"):
        import faiss
        from llama_index.vector_stores.faiss import FaissVectorStore

        out.append(("faiss-IP", FaissVectorStore(faiss_index=faiss.IndexFlatIP(DIM)), lambda: None))
    return out


def test_scores_are_cosine_whatever_the_store_metric(tmp_path: Path):
    variants = _metric_variants(tmp_path)
    if not variants:
        pytest.skip("no vector store package installed")
    records = make_records(seed=17, per_kind=12)
    live = {r.id: r for r in records}
    try:
        for name, store, _ in variants:
            vectors = LlamaIndexVectors(store, dim=DIM)
            vectors.check()
            vectors.add(records)
            for q in make_queries(seed=4):
                for kind in KINDS:
                    hits = vectors.search(kind, q, 4)
                    try:
                        assert_ranking(hits, live, kind, q, 4)
                    except AssertionError as exc:
                        raise AssertionError(f"{name}: {exc}") from exc
    finally:
        for _, _, close in variants:
            close()


def test_first_add_without_dim_checks_the_stores_before_writing(tmp_path: Path):
    """The index opens the adapter without ``dim``: the first add learns it and checks with it."""
    faiss = pytest.importorskip("faiss")
    from llama_index.vector_stores.faiss import FaissVectorStore

    records = make_records(seed=2, per_kind=3)
    wide = [VectorRecord(r.id, r.kind, r.doc_id, r.text, np.tile(r.vector, 2)) for r in records]
    stores: list[tuple[str, Any]] = [
        ("faiss", FaissVectorStore(faiss_index=faiss.IndexFlatIP(DIM))),
    ]
    if have("llama_index.vector_stores.qdrant"):
        from llama_index.vector_stores.qdrant import QdrantVectorStore
        from qdrant_client import QdrantClient
        from qdrant_client.http import models as rest

        client = QdrantClient(location=":memory:")
        client.create_collection("c", rest.VectorParams(size=DIM, distance=rest.Distance.COSINE))
        stores.append(("qdrant", QdrantVectorStore(collection_name="c", client=client)))
    for name, store in stores:
        vectors = LlamaIndexVectors(store)
        vectors.check()  # nothing to compare with yet
        with pytest.raises(VectorStoreError, match=f"{DIM}-d.*{2 * DIM}-d") as err:
            vectors.add(wide)
        assert "failed to add" not in str(err.value), name  # our check, not the store's error
        assert vectors.dim is None and vectors.count() == 0, name
        vectors.add(records)  # the right dimension is adopted
        assert vectors.dim == DIM and vectors.count() == len(records), name
        with pytest.raises(VectorStoreError, match=f"this index embeds {DIM}-d"):
            asyncio.run(vectors.aadd(wide))
