"""Where the stores live: the persist directory's ``e2rag/`` folder, finding it again, writes that
land there as documents commit, and imports without side effects."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document, StorageContext, load_index_from_storage
from llama_index.core.graph_stores.simple import SimpleGraphStore
from test_index import SEQUEL, STORY, load, make_index, vector_ids

from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.index import EMBEDDED_KINDS, E2RAGIndex
from llama_index_e2rag.persist.storage import E2RAG_DIR, POINTER
from llama_index_e2rag.schema import NodeKind, embeddable

ROOT = Path(__file__).resolve().parents[2]


def _consistent(index: E2RAGIndex) -> None:
    """Every embedded graph node has exactly one vector, and no vector lacks its node."""
    for kind in EMBEDDED_KINDS:
        embedded = {n.id for n in index.graph_store.nodes(kind) if embeddable(n)}
        assert vector_ids(index, kind) == embedded


def test_persist_writes_the_stores_and_a_pointer_llama_index_loads(tmp_path: Path) -> None:
    index = make_index()
    index.storage_context.persist(str(tmp_path))
    home = tmp_path / E2RAG_DIR
    assert {p.name for p in home.iterdir()} >= {"graph.sqlite", "vectors", "manifest.json"}
    assert not (home / "lexical").exists()  # the BM25 index is derived at the first query
    pointer = json.loads((tmp_path / "graph_store.json").read_text())
    assert dict(pointer["graph_dict"][POINTER])["home"] == str(home.resolve())
    assert not list(tmp_path.glob("e2rag_*__vector_store.json"))
    loaded = load(tmp_path)
    assert loaded.graph_store.to_dict() == index.graph_store.to_dict()
    _consistent(loaded)


def test_a_loaded_index_writes_each_document_to_its_folder_as_it_commits(tmp_path: Path) -> None:
    make_index().storage_context.persist(str(tmp_path))
    loaded = load(tmp_path)
    loaded.insert(Document(text=SEQUEL, id_="sequel"))
    # no persist: the graph and the vectors in the folder already hold the new document
    reopened = load(tmp_path)
    assert reopened.doc_order("sequel") == 1
    assert reopened.graph_store.nodes(NodeKind.CHUNK, "sequel")
    _consistent(reopened)
    reopened.delete_ref_doc("sequel")
    again = load(tmp_path)
    assert again.graph_store.nodes(doc_id="sequel") == [] and again.doc_order("sequel") is None
    _consistent(again)


def test_persisting_elsewhere_copies_the_store_and_continues_there(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    index = make_index()
    index.storage_context.persist(str(first))
    index.insert(Document(text=SEQUEL, id_="sequel"))
    index.storage_context.persist(str(second))
    index.delete_ref_doc("phantom")  # lands in the second folder only
    kept, moved = load(first), load(second)
    assert set(kept.graph_store.doc_orders()) == {"phantom", "sequel"}
    assert set(moved.graph_store.doc_orders()) == {"sequel"}
    _consistent(kept)
    _consistent(moved)


def test_a_moved_store_is_refused_with_the_fix_and_loads_with_persist_dir(tmp_path: Path) -> None:
    make_index().storage_context.persist(str(tmp_path / "old"))
    shutil.move(tmp_path / "old", tmp_path / "new")
    storage = StorageContext.from_defaults(persist_dir=str(tmp_path / "new"))
    with pytest.raises(E2RAGError, match="persist_dir="):
        load_index_from_storage(storage)
    index = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(tmp_path / "new")),
        persist_dir=str(tmp_path / "new"),
    )
    assert index.graph_store.nodes(NodeKind.CHUNK)
    _consistent(index)


def test_a_copy_loads_alike_until_its_original_is_saved_again_then_is_refused(
    tmp_path: Path,
) -> None:
    original, copy = tmp_path / "original", tmp_path / "copy"
    make_index().storage_context.persist(str(original))
    shutil.copytree(original, copy)
    # an untouched copy names the original's folder and the original's own save: same data
    assert load(copy).graph_store.to_dict() == load(original).graph_store.to_dict()
    grown = load(original)
    grown.insert(Document(text=SEQUEL, id_="sequel"))
    grown.storage_context.persist(str(original))
    with pytest.raises(E2RAGError, match="saved again since.*persist_dir="):
        load_index_from_storage(StorageContext.from_defaults(persist_dir=str(copy)))
    own = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(copy)), persist_dir=str(copy)
    )
    assert "sequel" not in own.ref_doc_info and "sequel" in load(original).ref_doc_info


def test_a_storage_context_holding_a_knowledge_graph_is_refused() -> None:
    graph = SimpleGraphStore()
    graph.upsert_triplet("Hermione", "studies", "rules")
    with pytest.raises(E2RAGError, match="graph_store"):
        make_index(storage_context=StorageContext.from_defaults(graph_store=graph))


def test_importing_any_module_but_the_index_changes_llama_index_only_by_our_registration() -> None:
    script = """
import importlib, pkgutil, sys
from llama_index.core.data_structs.registry import INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS as S
from llama_index.core.indices.registry import INDEX_STRUCT_TYPE_TO_INDEX_CLASS as I
from llama_index.core.vector_stores.simple import SimpleVectorStoreData
import llama_index_e2rag, lightrag_ext
before = (dict(S), dict(I), dict(vars(SimpleVectorStoreData)))
skip = {"llama_index_e2rag.index", "llama_index_e2rag.cli.entry", "llama_index_e2rag.cli.__main__",
        "llama_index_e2rag.app.demo",
        "llama_index_e2rag.maintenance.load", "llama_index_e2rag.maintenance.repair",
        "llama_index_e2rag.maintenance.migrate"}
names = [m.name for m in pkgutil.walk_packages(llama_index_e2rag.__path__, "llama_index_e2rag.")]
for name in names:
    if name not in skip:
        importlib.import_module(name)
assert "llama_index_e2rag.index" not in sys.modules, "a module imported the index"
assert (dict(S), dict(I), dict(vars(SimpleVectorStoreData))) == before, "registries changed"
ours = {"llama_index_e2rag.E2RAGIndex", "e2rag"}  # the package's lazy entries, and only those
assert {k for k in S if k in ours} == {k for k in I if k in ours} == ours
import llama_index_e2rag.schema
print(len(names))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 20


def test_loading_without_importing_the_package_names_the_import(tmp_path: Path) -> None:
    make_index().storage_context.persist(str(tmp_path))
    script = (
        "from llama_index.core import StorageContext, load_index_from_storage\n"
        f"storage = StorageContext.from_defaults(persist_dir={str(tmp_path)!r})\n"
        "print(type(load_index_from_storage(storage)).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode != 0 and "llama_index_e2rag.E2RAGIndex" in done.stderr
    fixed = "import llama_index_e2rag.index\n" + script
    done = subprocess.run(
        [sys.executable, "-c", fixed], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "E2RAGIndex" in done.stdout


def test_a_second_index_object_over_the_same_storage_context_shares_the_stores() -> None:
    index = make_index([Document(text=STORY, id_="phantom")])
    again = load_index_from_storage(index.storage_context)
    assert isinstance(again, E2RAGIndex) and again.stores is index.stores


MODES = ("narrative", "entity_event", "grounded", "chrono", "vector", "sentence_graph")
QUESTION = "What did Hermione do after the troll fight?"
_LOAD_IN_A_NEW_PROCESS = """
import json, sys
sys.path.insert(0, {tests!r})
from hash_embedding import HashEmbedding
from scripted_llm import ScriptedLLM
from llama_index.core import StorageContext, load_index_from_storage
from llama_index_e2rag.graph.postgres_store import PostgresGraphStore
from test_index import NAMES
index = load_index_from_storage(
    StorageContext.from_defaults(persist_dir={store!r}), embed_model=HashEmbedding(),
    llm=ScriptedLLM(names=NAMES), graph_store=PostgresGraphStore({dsn!r}, schema={schema!r}))
found = {{m: [n.node.node_id for n in index.as_retriever(mode=m).retrieve({question!r})]
         for m in {modes!r}}}
index.delete_ref_doc("book2")
print(json.dumps(found))
"""


@pytest.mark.postgres
def test_a_graph_in_postgresql_serves_another_process(
    tmp_path: Path, postgres_dsn: str, postgres_schema: str
) -> None:
    pytest.importorskip("psycopg")
    from llama_index_e2rag.extract.chrono import ChronoLayerBuilder
    from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder
    from llama_index_e2rag.graph.postgres_store import PostgresGraphStore

    graph = PostgresGraphStore(postgres_dsn, schema=postgres_schema)
    index = make_index(
        [Document(text=STORY, id_="book1"), Document(text=SEQUEL, id_="book2")],
        graph_store=graph,
        doc_builders=[ChronoLayerBuilder(facts="events"), SentenceGraphBuilder()],
    )
    expected = {
        m: [n.node.node_id for n in index.as_retriever(mode=m).retrieve(QUESTION)] for m in MODES
    }
    assert all(expected.values())
    index.storage_context.persist(str(tmp_path))
    assert not (tmp_path / E2RAG_DIR / "graph.sqlite").exists()  # the graph stays on the server
    script = _LOAD_IN_A_NEW_PROCESS.format(
        tests=str(ROOT / "tests"), store=str(tmp_path), dsn=postgres_dsn, schema=postgres_schema,
        question=QUESTION, modes=MODES,
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == expected
    # the other process's delete reached the shared graph and the store's vectors
    assert set(graph.doc_orders()) == {"book1"}
    reloaded = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(tmp_path)),
        embed_model=index.embed_model, graph_store=graph,
    )
    assert isinstance(reloaded, E2RAGIndex) and reloaded.doc_order("book2") is None
    _consistent(reloaded)


@pytest.mark.postgres
def test_a_server_graph_in_the_storage_context_needs_the_persist_dir(
    tmp_path: Path, postgres_dsn: str, postgres_schema: str
) -> None:
    pytest.importorskip("psycopg")
    from llama_index_e2rag.graph.postgres_store import PostgresGraphStore

    graph = PostgresGraphStore(postgres_dsn, schema=postgres_schema)
    make_index(graph_store=graph).storage_context.persist(str(tmp_path))
    storage = StorageContext.from_defaults(persist_dir=str(tmp_path), graph_store=graph)
    with pytest.raises(E2RAGError, match="persist_dir="):
        load_index_from_storage(storage, embed_model=HashEmbedding())
    index = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(tmp_path), graph_store=graph),
        embed_model=HashEmbedding(), persist_dir=str(tmp_path),
    )
    _consistent(index)
