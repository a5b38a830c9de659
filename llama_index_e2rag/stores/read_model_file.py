"""A derived read model on disk, one file per model, trusted only for the content it was built from.

Retrievers derive read models from the whole graph (the ``narrative`` mode's passage table,
``grounded``'s node matrices); at 100k words each costs seconds, which every new process would
pay again. What they derive depends only on the graph's content, so each is written once per
content state into the store's ``e2rag/readmodels/`` folder and read back in milliseconds.

A file is two lines: a JSON head (the content key and the SHA-256 of the body), then the body
(the model as one JSON value). It is trusted only when the key matches the graph's content state
now (``GraphStore.version`` and a digest of the documents' committed records, which change with
every write) and the body its checksum; anything else (missing, older, damaged, an unwritable
folder) means: build from the graph as before. Writes are atomic, so a reader never sees half.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ContextManager, Hashable, Optional, Protocol

from llama_index_e2rag.disk.files import atomic_write_text
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.stores.state_cache import StateCache


class Stores(Protocol):
    """What a read model is kept beside: the store's folder and graph, its content state and
    its read lock (``port.Stores``, which keeps its own BM25 index as a read model too, so it
    is typed here without importing the port)."""

    @property
    def home(self) -> Optional[Path]: ...

    @property
    def graph(self) -> GraphStore: ...

    @property
    def version(self) -> Hashable: ...

    def reading(self) -> ContextManager[None]: ...

    def release_pages(self) -> None: ...


logger = logging.getLogger(__name__)

#: The folder of persisted read models, inside the store's ``e2rag/`` folder.
READ_MODELS_DIR = "readmodels"


def content_key(stores: Stores, state: Hashable, model_format: int) -> str:
    """What a read model is built from: its format, the graph's version and its documents'
    records."""
    records = json.dumps(stores.graph.doc_records(), sort_keys=True, default=str)
    digest = hashlib.sha256(records.encode("utf-8")).hexdigest()
    return f"{model_format}:{state}:{digest}"


def model_path(stores: Stores, name: str) -> Optional[Path]:
    """Where ``stores`` keep the read model file ``name`` (None: not persisted in a folder)."""
    home = stores.home
    return home / READ_MODELS_DIR / name if home is not None else None


def read(stores: Stores, name: str, key: str) -> Optional[Any]:
    """The body of the read model ``name`` when it was built for content ``key``, else None."""
    path = model_path(stores, name)
    if path is None or not path.is_file():
        return None
    try:
        head, body = path.read_text(encoding="utf-8").split("\n", 1)
        meta = json.loads(head)
        if meta.get("key") != key:
            return None
        if hashlib.sha256(body.encode("utf-8")).hexdigest() != meta.get("sha256"):
            logger.warning("%s is damaged; the read model is rebuilt", path)
            return None
        return json.loads(body)
    except (OSError, ValueError) as exc:
        logger.warning("%s is unreadable (%s); the read model is rebuilt", path, exc)
        return None


def write(stores: Stores, name: str, key: str, data: Any) -> None:
    """Persist a read model for the next process (atomically); a folder that cannot be written
    only costs that process the build."""
    path = model_path(stores, name)
    if path is None:
        return
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = json.dumps({"key": key, "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest()})
    try:
        atomic_write_text(path, f"{head}\n{body}")
    except OSError as exc:
        logger.info("the read model was not saved in %s (%s)", path, exc)


@dataclass(frozen=True)
class ReadModel:
    """One read model's file: its name in ``e2rag/readmodels/`` and its format (bumped when the
    encoding or what the model holds changes, so an older file is built again)."""

    name: str
    model_format: int

    def content_key(self, stores: Stores, state: Hashable) -> str:
        """What the model is built from: its format, the graph's version, the documents."""
        return content_key(stores, state, self.model_format)

    def read(self, stores: Stores, key: str) -> Optional[Any]:
        """The saved body for content ``key``, else None (missing, older, damaged)."""
        return read(stores, self.name, key)

    def write(self, stores: Stores, key: str, data: Any) -> None:
        """Persist the model for the next process (atomically, or not at all)."""
        write(stores, self.name, key, data)


def save_now(stores: Stores, cache: StateCache[Any]) -> None:
    """Build (read or derive, and persist) ``cache``'s read model of the stores' current content
    now: ``e2rag index`` after its write, so the next process's first query only reads it.

    The model is not kept, nor the vector pages read for it (``Stores.release_pages``): the
    saving process goes on to the next model or exits, so a build's peak memory is one model's,
    not the sum of all; a later query in this process reads the saved file back."""
    with stores.reading():
        cache.get(stores)
    cache.drop(stores)
    stores.release_pages()
