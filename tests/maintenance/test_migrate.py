"""Stores written by llama-index-e2rag 0.1.0 (``data/store_0_1_0``, made by
``data/make_store_0_1_0.py`` with the 0.1.0 release) load and convert without loss."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import StorageContext, load_index_from_storage
from scripted_llm import ScriptedLLM

from llama_index_e2rag.cli.entry import main
from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.persist.ownership import mark
from llama_index_e2rag.schema import CHUNK_NODE_ATTR, NodeKind
from test_index import NAMES

LEGACY = Path(__file__).parents[1] / "data" / "store_0_1_0"


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(LEGACY, store)
    return store


def _old_struct(store: Path) -> dict:
    data = json.loads((store / "index_store.json").read_text())
    (entry,) = data["index_store/data"].values()
    return json.loads(entry["__data__"])


def _old_vectors(store: Path) -> dict[str, dict[str, list[float]]]:
    return {
        path.name.split("__")[0][len("e2rag_"):]: json.loads(path.read_text())["embedding_dict"]
        for path in store.glob("e2rag_*__vector_store.json")
    }


def _load(store: Path) -> E2RAGIndex:
    index = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(store)),
        embed_model=HashEmbedding(dim=32),
        llm=ScriptedLLM(names=NAMES),
    )
    assert isinstance(index, E2RAGIndex)
    return index


def _check_everything_kept(index: E2RAGIndex, struct: dict, vectors: dict) -> None:
    old_graph = json.loads(struct["graph_json"])
    assert sorted(n["id"] for n in old_graph["nodes"]) == sorted(
        n.id for n in index.graph_store.nodes()
    )
    assert len(old_graph["edges"]) == len(index.graph_store.edges())
    assert index.graph_store.doc_orders() == struct["doc_order"]
    assert index.extraction_report() == struct["failures"]
    for kind, table in vectors.items():
        stored = index.stores.embeddings(list(table))
        assert set(stored) == set(table)
        for node_id, vector in table.items():
            assert stored[node_id] == pytest.approx(vector, abs=1e-6)


def test_a_0_1_0_store_loads_with_everything(legacy: Path) -> None:
    struct, vectors = _old_struct(legacy), _old_vectors(legacy)
    index = _load(legacy)
    _check_everything_kept(index, struct, vectors)
    hits = index.as_retriever(mode="vector", similarity_top_k=2).retrieve("the troll fight")
    assert "troll" in hits[0].node.get_content()
    assert hits[0].node.metadata["file_name"] == "book1.txt"  # chunk metadata from the docstore
    seeds = index.as_retriever(mode="entity_event", similarity_top_k=2).retrieve(
        "What did Hermione do after the troll fight?"
    )
    assert seeds and seeds[0].node.metadata["doc_id"] == "book1"


def test_a_store_converted_without_chunks_in_its_graph_reads_them_from_the_docstore(
    legacy: Path,
) -> None:
    """Conversions before chunks were copied into the graph left them in the docstore only."""
    index = _load(legacy)
    chunks = index.graph_store.nodes(NodeKind.CHUNK)
    for node in chunks:
        node.attrs.pop(CHUNK_NODE_ATTR)
    index.graph_store.upsert_nodes(chunks)
    assert not any(CHUNK_NODE_ATTR in n.attrs for n in index.graph_store.nodes(NodeKind.CHUNK))
    hits = index.as_retriever(mode="vector", similarity_top_k=2).retrieve("the troll fight")
    assert "troll" in hits[0].node.get_content()
    assert hits[0].node.metadata["file_name"] == "book1.txt"


def test_persisting_a_converted_store_writes_the_new_layout(legacy: Path) -> None:
    struct, vectors = _old_struct(legacy), _old_vectors(legacy)
    question = "Harry saw his parents in the mirror"
    before = _load(legacy).as_retriever(mode="vector", similarity_top_k=3).retrieve(question)
    _load(legacy).storage_context.persist(str(legacy))
    assert not list(legacy.glob("e2rag_*__vector_store.json"))
    assert (legacy / "e2rag" / "graph.sqlite").is_file()
    assert _old_struct(legacy)["graph_json"] == ""
    again = _load(legacy)
    _check_everything_kept(again, struct, vectors)
    after = again.as_retriever(mode="vector", similarity_top_k=3).retrieve(question)
    assert [n.node.node_id for n in after] == [n.node.node_id for n in before]


def test_the_cli_loader_reads_a_0_1_0_store_also_once_claimed(legacy: Path) -> None:
    """``e2rag index`` claims the folder (``e2rag/owner.json``) before it loads the store: the
    0.1.0 store must still load with its vectors (its files, not the new folder, are the
    store until a conversion commits)."""
    struct, vectors = _old_struct(legacy), _old_vectors(legacy)
    _check_everything_kept(load_index(legacy, embed_model=HashEmbedding(dim=32)), struct, vectors)
    mark(legacy)
    index = load_index(legacy, embed_model=HashEmbedding(dim=32))
    _check_everything_kept(index, struct, vectors)
    index.storage_context.persist(str(legacy))
    _check_everything_kept(load_index(legacy, embed_model=HashEmbedding(dim=32)), struct, vectors)


def test_persisting_a_converted_store_elsewhere_leaves_the_0_1_0_store_as_it_was(
    legacy: Path, tmp_path: Path
) -> None:
    struct, vectors = _old_struct(legacy), _old_vectors(legacy)
    before = {p.name: p.read_bytes() for p in legacy.iterdir()}
    _load(legacy).storage_context.persist(str(tmp_path / "new"))
    assert {p.name: p.read_bytes() for p in legacy.iterdir()} == before
    assert not list((tmp_path / "new").glob("e2rag_*__vector_store.json"))
    _check_everything_kept(_load(tmp_path / "new"), struct, vectors)
    _check_everything_kept(_load(legacy), struct, vectors)


def test_e2rag_migrate_converts_in_place(legacy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    struct, vectors = _old_struct(legacy), _old_vectors(legacy)
    assert main(["migrate", "--store", str(legacy)]) == 0
    assert "converted" in capsys.readouterr().out
    assert not list(legacy.glob("e2rag_*__vector_store.json"))
    assert not (legacy / "e2rag" / "migration.json").exists()  # the conversion's record
    _check_everything_kept(_load(legacy), struct, vectors)
    assert len(_load(legacy).graph_store.nodes(NodeKind.CHUNK)) == 5
    assert main(["migrate", "--store", str(legacy)]) == 1  # nothing left to convert
    assert "no llama-index-e2rag 0.1.0 store" in capsys.readouterr().err


def test_migrate_refuses_a_folder_that_is_no_store(tmp_path: Path) -> None:
    from llama_index_e2rag.maintenance.migrate import migrate_store

    with pytest.raises(E2RAGError, match="0.1.0"):
        migrate_store(tmp_path)


def test_the_narrative_mode_asks_to_reindex_a_0_1_0_store(legacy: Path) -> None:
    index = _load(legacy)  # 0.1.0 built no passages; every other mode works (above)
    with pytest.raises(E2RAGError, match="index its documents again"):
        index.as_retriever().retrieve("What did Hermione do after the troll fight?")


def test_repair_sends_a_0_1_0_store_to_migrate_and_writes_nothing(legacy: Path) -> None:
    from llama_index_e2rag.maintenance.repair import repair_store

    (legacy / "e2rag").mkdir()  # as a conversion killed before its commit may leave it
    (legacy / "e2rag" / "owner.json").write_text("")
    before = {p.name: p.read_bytes() for p in legacy.rglob("*") if p.is_file()}
    with pytest.raises(E2RAGError, match="e2rag migrate --store"):
        repair_store(legacy, embed_model=HashEmbedding(dim=32))
    assert {p.name: p.read_bytes() for p in legacy.rglob("*") if p.is_file()} == before
