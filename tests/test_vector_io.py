"""The fast SimpleVectorStore (de)serialisation gives exactly what llama-index's own path gives."""

from __future__ import annotations

import json

from dataclasses_json import DataClassJsonMixin
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.simple import SimpleVectorStore, SimpleVectorStoreData
from llama_index.core.vector_stores.types import VectorStoreQuery

from llama_index_e2rag import vector_io


def _store() -> SimpleVectorStore:
    store = SimpleVectorStore()
    store.add(
        [
            TextNode(id_="a", text="x", embedding=[1.0, 0.0], metadata={"kind": "chunk", "pos": [0, 1, 0]}),
            TextNode(id_="b", text="y", embedding=[0.0, 1.0], metadata={"kind": "event"}),
        ]
    )
    return store


def test_install_is_active_and_idempotent():
    assert vector_io.install() is True
    assert vector_io.install() is True
    assert "from_dict" in SimpleVectorStoreData.__dict__


def test_round_trip_matches_dataclasses_json(tmp_path):
    vector_io.install()
    store = _store()
    path = tmp_path / "v.json"
    store.persist(str(path))
    raw = json.loads(path.read_text())
    reference = DataClassJsonMixin.from_dict.__func__(SimpleVectorStoreData, raw)
    loaded = SimpleVectorStore.from_persist_path(str(path))
    assert loaded.data == reference
    assert raw == DataClassJsonMixin.to_dict(reference)
    result = loaded.query(VectorStoreQuery(query_embedding=[0.9, 0.1], similarity_top_k=1))
    assert result.ids == ["a"]


def test_missing_keys_default_like_the_original_decoder():
    vector_io.install()
    raw = {"embedding_dict": {"a": [1.0, 2.0]}}
    assert SimpleVectorStoreData.from_dict(raw) == DataClassJsonMixin.from_dict.__func__(
        SimpleVectorStoreData, raw
    )
