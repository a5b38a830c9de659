"""llama-index's own files of a persisted index, written atomically and with checksums.

``StorageContext.persist`` writes ``docstore.json``, ``index_store.json`` and the vector-store
files by truncating each and writing it in place, so a process killed meanwhile leaves a cut
file that ``StorageContext.from_defaults`` cannot parse. The index gives the storage context's
simple stores a ``persist`` that writes aside and renames (``checksums.Checksums.write``); the
objects, and so every reference to them, stay the same. A remote file system (``fs=`` other than
local) is refused before the first file is written: the index saves to a local folder only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

from llama_index.core.storage.docstore.simple_docstore import SimpleDocumentStore
from llama_index.core.storage.index_store.simple_index_store import SimpleIndexStore
from llama_index.core.storage.kvstore.simple_kvstore import SimpleKVStore
from llama_index.core.storage.storage_context import StorageContext
from llama_index.core.vector_stores.simple import SimpleVectorStore

from llama_index_e2rag.disk.checksums import Checksums
from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.persist.ownership import claim


def check_local(fs: Any) -> None:
    """Refuse an fsspec file system other than the local one (before anything is written)."""
    if fs is not None and "file" not in (getattr(fs, "protocol", None) or ("file",)):
        raise E2RAGError("E2RAGIndex persists to a local directory only (no fsspec remote)")


def write_checked(persist_path: str, text: str) -> None:
    """Write one file of a persist directory atomically and register its checksum (a folder
    that is not ours is refused first: ``ownership.claim``)."""
    path = Path(persist_path)
    claim(path.parent)
    Checksums(path.parent).write(path.name, text.encode("utf-8"))


class AtomicKVStore(SimpleKVStore):
    """``SimpleKVStore`` whose ``persist`` never leaves a cut file (same data and layout, so an
    existing store's class is switched in place)."""

    #: called with the persist directory before the file is written (``legacy.Conversion``)
    before_persist: Optional[Callable[[Path], None]] = None

    def persist(self, persist_path: str, fs: Optional[Any] = None) -> None:
        check_local(fs)
        if self.before_persist is not None:
            self.before_persist(Path(persist_path).parent)
        write_checked(persist_path, json.dumps(self._collections_mappings))


class AtomicSimpleVectorStore(SimpleVectorStore):
    """The unused default vector stores of the storage context, saved the same way."""

    def persist(self, persist_path: str = "", fs: Optional[Any] = None) -> None:
        check_local(fs)
        write_checked(persist_path, json.dumps(self.data.to_dict()))


def before_persist(storage_context: StorageContext, call: Callable[[Path], None]) -> None:
    """Have the storage context's docstore and index store call ``call(persist_dir)`` before
    they write their files (made atomic first: ``make_atomic``)."""
    for store in (storage_context.docstore, storage_context.index_store):
        kvstore = getattr(store, "_kvstore", None)
        if isinstance(kvstore, AtomicKVStore):
            kvstore.before_persist = call


def make_atomic(storage_context: StorageContext) -> None:
    """Give the storage context's simple stores atomic, checksummed saves (others untouched)."""
    for store in (storage_context.docstore, storage_context.index_store):
        if isinstance(store, (SimpleDocumentStore, SimpleIndexStore)):
            kvstore = getattr(store, "_kvstore", None)
            if type(kvstore) is SimpleKVStore:
                kvstore.__class__ = AtomicKVStore
    for name, store in list(storage_context.vector_stores.items()):
        if type(store) is SimpleVectorStore:
            storage_context.vector_stores[name] = AtomicSimpleVectorStore(data=store.data)
    # a lost default__vector_store.json loads as no entry, which llama-index's index base
    # class then looks up: give it the empty store it would have held (we never use it)
    storage_context.vector_stores.setdefault("default", AtomicSimpleVectorStore())
