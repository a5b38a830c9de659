"""Where an index's stores live: the ``e2rag/`` folder of a persist directory, and how it is found.

``StorageContext.persist(dir)`` writes llama-index's docstore and index store, then calls
``persist`` on the storage context's ``graph_store`` slot. The index puts a ``StoresSlot`` there,
which saves our stores into ``dir/e2rag/`` (the SQLite graph, the embedded vectors, a
manifest) and leaves in ``graph_store.json`` a pointer to that folder. That file is the
only one ``StorageContext.from_defaults(persist_dir=dir)`` loads whatever the user passes, so
``load_index_from_storage`` finds the stores again with llama-index's own calls.

Once persisted (or loaded), the stores are databases in that folder: each insert or delete is
written there as it commits, and ``persist`` only checkpoints and writes llama-index's JSON
files, each atomically (``llama_files``) and checksummed (``checksums``). What is derived from
the whole store (the BM25 index, the retrievers' read models) is derived at the first query
after a write, not at ``persist``.

Nothing is lost: the graph is the record. Each commit stores, in the graph's own transaction,
each document's record (hash, vector counts, digest) and the index settings (``INDEX_META``), so
after a crash at any point the graph says what every other file should hold. Opening a store
checks the files against it (``store_check``) and brings llama-index's docstore and the index
struct, saved only by ``persist``, up to the graph.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any, Mapping, Optional

from llama_index.core.graph_stores.simple import (
    DEFAULT_PERSIST_FNAME as DEFAULT_GRAPH_STORE_FILE,
)
from llama_index.core.graph_stores.simple import SimpleGraphStore
from llama_index.core.storage.storage_context import StorageContext
from llama_index.core.vector_stores.simple import SimpleVectorStore

from llama_index_e2rag.disk.checksums import E2RAG_DIR, Checksums, file_sum
from llama_index_e2rag.errors import E2RAGError, StoreDamagedError, VectorStoreError
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.persist import legacy
from llama_index_e2rag.persist import check as store_check
from llama_index_e2rag.persist.legacy import Conversion
from llama_index_e2rag.persist.llama_files import before_persist, check_local, make_atomic, write_checked
from llama_index_e2rag.graph.sqlite_store import GRAPH_FILE, SQLiteGraphStore
from llama_index_e2rag.stores.lexical import LexicalIndex
from llama_index_e2rag.stores.locks import StoreLocks
from llama_index_e2rag.persist.ownership import MANIFEST_FILE, POINTER, STORE_FORMAT, claim
from llama_index_e2rag.stores.port import Stores
from llama_index_e2rag.vectors.base import VectorStorage
from llama_index_e2rag.schema import EMBEDDED_KINDS
from llama_index_e2rag.vectors.embedded import EmbeddedVectors
from llama_index_e2rag.vectors.external import LlamaIndexVectors

#: The parts of our folder (``checksums.E2RAG_DIR``) inside a persist directory.
VECTORS_DIR = "vectors"
VECTOR_COPY_DIR = "vector_copy"
LEXICAL_DIR = "lexical"
#: Checksums of the BM25 files, saved with them.
LEXICAL_SUMS = "sums.json"
STORE_VERSION = 1
#: ``config["vectors"]`` of an index whose vectors are in its own folder.
EMBEDDED = "embedded"
#: Graph metadata key of the index struct's settings and LLM spending (JSON).
INDEX_META = "index"


def repair_hint(persist_dir: Path) -> str:
    return f"run: e2rag repair --store {persist_dir}"


class StoresSlot:
    """Occupies ``StorageContext.graph_store`` so that ``persist`` saves our stores too.

    It serves only ``persist``; llama-index's knowledge-graph indices cannot share the slot
    (give them a storage context of their own).
    """

    def __init__(
        self,
        stores: Stores,
        home: Optional[Path],
        label: str,
        conversion: Optional[Conversion] = None,
    ) -> None:
        self.stores = stores
        self.home = home
        #: a 0.1.0 store converted in memory, which the next persist commits
        self.conversion = conversion
        #: a tqdm bar over the saving steps (the index's ``show_progress``)
        self.show_progress = False
        #: where the vectors live: ``EMBEDDED`` or the external store's name
        self.label = label

    def persist(self, persist_path: str, fs: Any = None) -> None:
        """Save the stores beside ``persist_path`` and write the pointer in its place; then
        finish a conversion from 0.1.0 committed there (``legacy.finish_conversion``)."""
        check_local(fs)
        self.convert(Path(persist_path).parent)  # (done already, before llama-index's files)
        self.save_stores(Path(persist_path))
        legacy.finish_conversion(Path(persist_path).parent)

    def convert(self, folder: Path) -> None:
        """Commit a pending 0.1.0 conversion into ``folder`` (``legacy.Conversion``); the
        storage context's docstore and index store call this before they write their files."""
        conversion, self.conversion = self.conversion, None  # (the commit writes the index
        if conversion is None:  # store, which calls back here to find nothing pending)
            return
        try:
            conversion.commit(self.save_stores, Path(folder))
        except BaseException:
            self.conversion = conversion
            raise

    def save_stores(self, pointer: Path) -> None:
        """Our stores into ``e2rag/`` beside ``pointer``, then the pointer (alone: no commit or
        retrieval of any process runs meanwhile)."""
        claim(pointer.parent)  # (llama-index's files may have come first: claimed there too)
        home = pointer.parent.resolve() / E2RAG_DIR
        locks = self.stores.locks
        if locks.home is None or locks.home != home:
            locks.bind(home)  # a first save, or a copy: lock the folder written to
        with locks.writer(), locks.committing():
            save(self.stores, home, self.show_progress)
            self.home = home
            write_pointer(pointer, home, new_save_id())
        bind(self.stores, home)


def new_save_id() -> str:
    """A fresh id for the pointer of one save (see ``find_home``)."""
    return uuid.uuid4().hex


def write_pointer(path: Path, home: Path, saved: Optional[str] = None) -> None:
    """``graph_store.json`` at ``path``: a valid, empty llama-index graph file naming ``home``
    and the save that wrote it (``saved``, unique per ``persist``)."""
    triples = [["home", str(home)], ["format", STORE_FORMAT]]
    if saved is not None:
        triples.append(["saved", saved])
    write_checked(str(path), json.dumps({"graph_dict": {POINTER: triples}}))


def _pointer(slot: Any) -> dict[str, str]:
    return dict((rel, obj) for rel, obj in slot.get(POINTER))


def pointer_home(storage_context: StorageContext) -> Optional[Path]:
    """The ``e2rag/`` folder named in a loaded ``graph_store.json``, if it names one."""
    slot = storage_context.graph_store
    if isinstance(slot, StoresSlot):
        return slot.home
    if not isinstance(slot, SimpleGraphStore):
        return None
    found = _pointer(slot)
    return Path(found["home"]) if "home" in found else None


def find_home(storage_context: StorageContext, persist_dir: Optional[str] = None) -> Optional[Path]:
    """Our folder: ``persist_dir/e2rag`` when given, else the one ``graph_store.json`` names.

    llama-index loads ``graph_store.json`` without saying from where, so the pointer holds an
    absolute path. A store that was moved is refused with the fix, and so is a copy whose
    original was saved again since (its pointer names another save than the original's own
    ``graph_store.json``): it would read, and write, the original's folder.
    """
    if persist_dir is not None:
        home = Path(persist_dir).resolve() / E2RAG_DIR
        if not home.is_dir():
            raise E2RAGError(f"{persist_dir} holds no e2rag store ({home} is missing)")
        return home
    home = pointer_home(storage_context)
    fix = "load it with load_index_from_storage(storage_context, persist_dir=<its folder now>)"
    if home is not None and not home.is_dir():
        raise E2RAGError(
            f"this store's e2rag folder was saved at {home}, which no longer exists (was the "
            f"store moved?); {fix}"
        )
    slot = storage_context.graph_store
    if home is not None and isinstance(slot, SimpleGraphStore):
        loaded, current = _pointer(slot).get("saved"), _saved_beside(home)
        if loaded is not None and current is not None and loaded != current:
            raise E2RAGError(
                f"this storage context's graph_store.json names {home}, which has been saved "
                f"again since (is this a copy of that store?); {fix}"
            )
    return home


def _saved_beside(home: Path) -> Optional[str]:
    """The save named by the ``graph_store.json`` next to ``home`` (None if unreadable)."""
    try:
        data = json.loads((home.parent / DEFAULT_GRAPH_STORE_FILE).read_text(encoding="utf-8"))
        triples = data["graph_dict"][POINTER]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return dict((rel, obj) for rel, obj in triples).get("saved")


def check_slot(storage_context: StorageContext) -> None:
    """Refuse a storage context whose graph-store slot holds someone else's graph."""
    slot = storage_context.graph_store
    if isinstance(slot, (StoresSlot, GraphStore)) or slot is None:
        return
    if isinstance(slot, SimpleGraphStore) and (
        not slot.get_rel_map() or pointer_home(storage_context) is not None
    ):
        return
    raise E2RAGError(
        "the storage context's graph_store already holds a knowledge graph; E2RAGIndex saves "
        "its stores through that slot, so give it a StorageContext of its own"
    )


# -- opening ------------------------------------------------------------------------------------
def open_graph(home: Optional[Path]) -> SQLiteGraphStore:
    """The SQLite graph of ``home`` (a new private one without a home)."""
    if home is None:
        return SQLiteGraphStore()
    path = home / GRAPH_FILE
    if not path.exists():
        raise StoreDamagedError(
            f"{path} is missing: the graph of the store in {home.parent} is lost; "
            f"{repair_hint(home.parent)} (rebuilds it from docstore.json's chunks)"
        )
    graph = SQLiteGraphStore.open_existing(path, repair_hint(home.parent))
    return graph


def open_vectors(
    storage_context: StorageContext,
    config: Mapping[str, Any],
    home: Optional[Path],
    vector_store: Any = None,
    vector_stores: Optional[Mapping[str, Any]] = None,
) -> tuple[VectorStorage, Optional[VectorStorage], str]:
    """The vector storage to search, the local copy for the maths (if needed) and its label.

    ``vector_store=`` / ``vector_stores=`` (per kind) win; else a non-default store the user put
    in the storage context (``StorageContext.from_defaults(vector_store=...)``); else the
    embedded default in ``home``.
    """
    external: Any = dict(vector_stores) if vector_stores else vector_store
    if external is None:
        candidate = storage_context.vector_stores.get("default")
        if candidate is not None and not isinstance(candidate, SimpleVectorStore):
            external = candidate
    built_with = config.get("vectors")
    if external is None:
        if built_with not in (None, EMBEDDED):
            raise VectorStoreError(
                f"this index keeps its vectors in {built_with}; pass that store again, e.g. "
                "StorageContext.from_defaults(persist_dir=..., vector_store=...)"
            )
        return _embedded(home, VECTORS_DIR), None, EMBEDDED
    if isinstance(external, dict):
        missing = [k.value for k in EMBEDDED_KINDS if k.value not in external]
        if missing:
            raise VectorStoreError(
                f"vector_stores has no store for node kind(s) {', '.join(missing)}; give every "
                "kind a store (one store may serve several kinds) or pass one vector_store"
            )

    # what an earlier persist wrote for stores that need it (FAISS rows -> graph ids); a new
    # index learns its dimension from the embedding before extraction (``check_dim``)
    adapter = LlamaIndexVectors(
        external,
        persist_dir=home / VECTORS_DIR if home is not None else None,
        dim=config.get("dim"),
    )
    label = adapter.label
    if built_with == EMBEDDED:
        raise VectorStoreError(
            f"this index keeps its vectors in its own folder, not in {label}; load it without "
            "a vector store (or re-index into the new store)"
        )
    adapter.check()
    copy = None if adapter.returns_embeddings else _embedded(home, VECTOR_COPY_DIR)
    return adapter, copy, label


def _embedded(home: Optional[Path], name: str) -> EmbeddedVectors:
    return EmbeddedVectors.open(home / name) if home is not None else EmbeddedVectors()


def open_lexical(home: Optional[Path]) -> Optional[LexicalIndex]:
    """The BM25 index a save before the read model wrote (``lexical/``), or None (it is read
    or rebuilt from the passages when needed): derived data is used only when every file
    matches the checksums saved with it."""
    folder = home / LEXICAL_DIR if home is not None else None
    if folder is None or not folder.is_dir():
        return None
    try:
        sums = json.loads((folder / LEXICAL_SUMS).read_text())
        if any(file_sum(folder / name) != sums[name] for name in sums) or not sums:
            return None
        return LexicalIndex.load(folder)
    except Exception:  # noqa: BLE001 - a damaged derived file is rebuilt, never trusted
        return None


def open_stores(
    storage_context: StorageContext,
    index_struct: Any,
    graph_store: Optional[GraphStore],
    vector_store: Any,
    vector_stores: Optional[Mapping[str, Any]],
    persist_dir: Optional[str],
) -> tuple[Stores, str]:
    """The stores of a new or loaded index (``index_struct``: its ``E2RAGIndexStruct``, None
    when new), installed in the storage context's graph slot; returns them and the vectors'
    label. A loaded store is checked first, and the struct and docstore brought up to the
    graph (a crash may have stopped a save between the graph's commit and ``persist``).

    Args (``E2RAGIndex``'s of the same names):
        graph_store: a ``GraphStore`` (e.g. ``PostgresGraphStore``); default: SQLite, in a
            private file until the index is persisted, then in the persist directory.
        vector_store: any llama-index vector store, one for the whole index (node kinds are
            metadata, filtered at query time); default: the embedded binary vectors, saved in
            the persist directory. ``StorageContext.from_defaults(vector_store=...)`` works too.
        vector_stores: ``{node kind: vector store}``, for one store per kind instead.
        persist_dir: where the index was persisted, when loading it from a folder that moved
            (``load_index_from_storage(storage_context, persist_dir=...)``); otherwise the
            folder is found from ``graph_store.json``.
    """
    check_slot(storage_context)
    make_atomic(storage_context)
    old_format = index_struct is not None and legacy.in_struct(index_struct)
    # a 0.1.0 store is its llama-index files alone (an e2rag/ folder or pointer beside them is
    # a conversion that did not commit: ``legacy.Conversion``)
    home = None if old_format else find_home(storage_context, persist_dir)
    slot = storage_context.graph_store
    if isinstance(slot, StoresSlot) and graph_store is None:
        return slot.stores, slot.label  # another index object over the same storage context
    if graph_store is None and isinstance(slot, GraphStore):
        graph_store = slot  # StorageContext.from_defaults(graph_store=PostgresGraphStore(...))
    conversion = None
    if old_format:
        graph, vectors, conversion = legacy.open_legacy(index_struct, storage_context, graph_store)
        stores, label = Stores(graph, vectors, storage_context.docstore), EMBEDDED
        index_struct.config["vectors"] = EMBEDDED
    else:
        stores, label = _open_current(
            storage_context, index_struct, graph_store, vector_store, vector_stores, home
        )
    storage_context.graph_store = StoresSlot(  # type: ignore[assignment]
        stores, home, label, conversion
    )
    if conversion is not None:  # committed before llama-index's own files are written
        before_persist(storage_context, storage_context.graph_store.convert)
    return stores, label


def _open_current(
    storage_context: StorageContext,
    index_struct: Any,
    graph_store: Optional[GraphStore],
    vector_store: Any,
    vector_stores: Optional[Mapping[str, Any]],
    home: Optional[Path],
) -> tuple[Stores, str]:
    """``open_stores`` for today's format: checked, opened and brought up to the graph under
    the read lock, so that no other process's commit lands in between."""
    built = index_struct is not None and bool(index_struct.config)
    if built and home is None and graph_store is None:
        raise StoreDamagedError(
            "this index's store has no e2rag folder: graph_store.json is missing or names "
            "none (a save interrupted before it finished?); if the folder holds an e2rag/ "
            "directory, run: e2rag repair --store <folder>; otherwise index the documents "
            "again"
        )
    locks = StoreLocks(home, getattr(graph_store, "writer_lock", None))
    with locks.reading():  # no commit of another process lands while we open and check
        if home is not None:
            store_check.check_files(home.parent)
        graph = graph_store if graph_store is not None else open_graph(home)
        if index_struct is not None:
            restore_struct(graph, index_struct)
        config = index_struct.config if index_struct is not None else {}
        try:
            vectors, copy, label = open_vectors(
                storage_context, config, home, vector_store, vector_stores
            )
        except VectorStoreError as exc:
            if home is None or label_of(config) != EMBEDDED:
                raise
            raise StoreDamagedError(f"{exc}; {repair_hint(home.parent)}") from exc
        stores = Stores(
            graph, vectors, storage_context.docstore, copy, open_lexical(home), locks
        )
        if home is None and label == EMBEDDED and graph.doc_orders():
            raise E2RAGError(
                "this index's graph has documents but its vectors were saved in a persist "
                "directory that cannot be found (a graph_store given to StorageContext "
                "hides graph_store.json); pass load_index_from_storage(storage_context, "
                "persist_dir=...)"
            )
        if home is not None:
            store_check.check_counts(stores, home.parent)
            bind(stores, home)
            legacy.forget_converted(storage_context.vector_stores, home.parent)
        if home is not None or (graph_store is not None and graph.doc_orders()):
            stores.reconcile_docstore()
        stores.sync()
    return stores, label


def label_of(config: Mapping[str, Any]) -> str:
    return config.get("vectors") or EMBEDDED


def restore_struct(graph: GraphStore, index_struct: Any) -> None:
    """Take the settings and LLM spending the graph committed last (``index_store.json`` is
    written only by ``persist``, so it may be older)."""
    stored = graph.get_meta(INDEX_META)
    if stored is None:
        return
    meta = json.loads(stored)
    index_struct.config = dict(meta.get("config") or {})
    index_struct.llm_stats = dict(meta.get("llm_stats") or {})


def index_meta(index_struct: Any) -> dict[str, str]:
    """The graph metadata a commit writes with its documents."""
    return {
        INDEX_META: json.dumps(
            {
                "index_id": index_struct.index_id,
                "config": index_struct.config,
                "llm_stats": index_struct.llm_stats,
            },
            sort_keys=True,
        )
    }


def bind(stores: Stores, home: Path) -> None:
    """Make the stores' commits durable in ``home`` (vectors flushed before each graph commit)
    and lock the folder for other processes."""
    if stores.locks.home != home:
        stores.locks.bind(home)
    stores.flush = lambda: flush_vectors(stores, home)


# -- saving -------------------------------------------------------------------------------------
def save(stores: Stores, home: Path, show_progress: bool = False) -> None:
    """Write every file-based store into ``home`` (graph, vectors, manifest)."""
    from tqdm.auto import tqdm

    home.mkdir(parents=True, exist_ok=True)
    graph = stores.graph
    bar = tqdm(total=2, desc="Saving e2rag stores", unit="step", disable=not show_progress)
    with bar:
        bar.set_postfix_str("graph")
        if isinstance(graph, SQLiteGraphStore):
            if graph.is_temporary or graph.path.resolve() != (home / GRAPH_FILE).resolve():
                graph.move_to(home / GRAPH_FILE)
            else:
                graph.persist(graph.path)
        bar.update()
        bar.set_postfix_str("vectors")
        flush_vectors(stores, home)
        bar.update()
    # the BM25 index is a read model now (``Stores.lexical``), derived at the first query
    # instead of over the whole store at every save; the folder of older saves goes
    shutil.rmtree(home / LEXICAL_DIR, ignore_errors=True)
    manifest = {
        "format": STORE_FORMAT,
        "version": STORE_VERSION,
        "graph": "sqlite" if isinstance(graph, SQLiteGraphStore) else type(graph).__name__,
        "vectors": EMBEDDED if isinstance(stores.vectors, EmbeddedVectors) else "external",
    }
    Checksums(home.parent).write(
        f"{E2RAG_DIR}/{MANIFEST_FILE}", json.dumps(manifest, indent=1).encode("utf-8")
    )


def flush_vectors(stores: Stores, home: Path) -> None:
    """Make the vectors in ``home`` match the graph (cheap: only what changed is written)."""
    stores.vectors.persist(home / VECTORS_DIR)  # a no-op for server-backed stores
    if stores.vector_copy is not None:
        stores.vector_copy.persist(home / VECTOR_COPY_DIR)

