"""The storage context of a persisted store, its files checked first, so a damaged one is named
with its fix instead of failing inside llama-index's JSON parsing (``maintenance.load`` wraps it
as ``load_index``).

``load_index_from_storage(StorageContext.from_defaults(persist_dir=...))`` works too, but
llama-index parses every JSON file of the folder before our code runs, so a cut
``docstore.json`` surfaces as ``JSONDecodeError: Expecting value`` with no file named, and a
damaged file the index never reads (``image__vector_store.json``) stops the load. This opener
checks the files the index reads first and leaves out the ones it does not (they are rewritten
empty by the next ``persist``); the CLI loads this way.
"""

from __future__ import annotations

from pathlib import Path

from llama_index.core import StorageContext
from llama_index.core.graph_stores.simple import SimpleGraphStore

from llama_index_e2rag.disk.checksums import E2RAG_DIR
from llama_index_e2rag.errors import StoreDamagedError
from llama_index_e2rag.persist import legacy
from llama_index_e2rag.persist.check import check_files
from llama_index_e2rag.persist.llama_files import AtomicSimpleVectorStore
from llama_index_e2rag.persist.ownership import Kind, inspect, no_store

#: The llama-index files the index reads (the pointer is not needed: the folder is known).
READ_FILES = ("docstore.json", "index_store.json")


def check_readable(persist_dir: Path) -> None:
    """Refuse, in one line naming the file and the fix, a read file that is missing, cut or
    damaged."""
    persist_dir = Path(persist_dir)
    if not (persist_dir / E2RAG_DIR).is_dir():
        raise StoreDamagedError(
            f"{persist_dir} has no {E2RAG_DIR}/ folder: it is not a complete e2rag store (a save "
            "interrupted before it finished?); index the documents again into it"
        )
    check_files(persist_dir, READ_FILES)


def open_storage(persist_dir: Path) -> StorageContext:
    """The storage context ``load_index_from_storage`` opens the store in ``persist_dir`` from:
    one of ours (else the reason, ``no_store``), its read files checked; a 0.1.0 store's from
    ``legacy``."""
    persist_dir = Path(persist_dir)
    if inspect(persist_dir).kind is not Kind.STORE:
        raise no_store(persist_dir, "persist an index there first")
    if legacy.is_legacy(persist_dir):  # (with an e2rag/ folder beside: a conversion not committed)
        return legacy.legacy_storage(persist_dir)
    check_readable(persist_dir)
    return StorageContext.from_defaults(
        persist_dir=str(persist_dir),
        vector_store=AtomicSimpleVectorStore(),
        image_store=AtomicSimpleVectorStore(),
        graph_store=SimpleGraphStore(),
    )
