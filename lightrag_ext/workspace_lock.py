"""One writer per workspace: an OS lock that E2LightRAG holds while its storages are open.

LightRAG's file storages (JSON KV and doc status, NetworkX, NanoVectorDB, Faiss) keep the whole
namespace in memory and rewrite the file on every flush, and LightRAG's own locks
(``kg.shared_storage``: ``pipeline_status``, keyed storage locks, update flags) only coordinate
one process, or the workers one ``lightrag-gunicorn`` master forked. A second process on the
same workspace (``e2rag-lightrag-backfill`` beside a running ``e2rag-lightrag-server``) therefore
writes files the first one overwrites with its stale copy on its next flush. Database storages
(PostgreSQL, Neo4j, Mongo, ...) write rows, not snapshots, so processes on one database do not
undo each other; no lock is taken when every storage is one of them.

The lock is ``fcntl.flock`` on ``<working_dir>/<workspace>_e2rag/e2rag.lock`` (the layer's own
folder; ``e2rag/e2rag.lock`` for the default workspace): the kernel drops it when its holder
exits, however it exits, so a killed server never leaves a stale lock. Instances of one process
share the hold (LightRAG shares a workspace's data between them anyway); workers forked by
``lightrag-gunicorn`` inherit the master's.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from llama_index_e2rag.errors import E2RAGError

LOCK_NAME = "e2rag.lock"
#: First line of a lock file our code wrote; anything else found at the path is never rewritten.
LOCK_MARKER = "e2rag workspace lock (lightrag_ext)"
#: LightRAG's storage classes that keep a namespace in a file of the working directory.
FILE_STORAGES = frozenset(
    {
        "JsonKVStorage",
        "JsonDocStatusStorage",
        "NetworkXStorage",
        "NanoVectorDBStorage",
        "FaissVectorDBStorage",
    }
)

_registry_lock = threading.Lock()
#: lock file (resolved) -> [file descriptor, holds in this process]
_held: dict[str, list[int]] = {}


class WorkspaceBusyError(E2RAGError):
    """Another process holds the workspace (its file storages would overwrite each other)."""


def is_file_storage(storage: Any) -> bool:
    """Whether a storage instance (of LightRAG's classes or a subclass) keeps its data in files."""
    return any(base.__name__ in FILE_STORAGES for base in type(storage).__mro__)


def needs_lock(storages: Iterable[Any]) -> bool:
    return any(is_file_storage(storage) for storage in storages)


def lock_path(working_dir: str, layer_workspace: str) -> Path:
    return Path(working_dir) / layer_workspace / LOCK_NAME


def _holder_line(path: Path) -> str:
    """Who holds the lock, as its holder wrote it (empty if the file is not ours)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return lines[1] if len(lines) > 1 and lines[0] == LOCK_MARKER else ""


def _write_holder(fd: int, path: Path) -> None:
    """Name this process in the lock file, only if the file is empty or ours."""
    head = os.pread(fd, len(LOCK_MARKER), 0).decode("utf-8", errors="replace")
    if os.fstat(fd).st_size and head != LOCK_MARKER:
        return  # someone else's file at our path: lock it, never rewrite it
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "python"
    text = f"{LOCK_MARKER}\npid {os.getpid()}: {command}\n".encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, text, 0)


def acquire(path: Path) -> None:
    """Hold the workspace lock at ``path`` for this process; raise ``WorkspaceBusyError`` if
    another process holds it. Re-entrant within the process (one hold per call)."""
    key = os.path.realpath(path)
    with _registry_lock:
        if key in _held:
            _held[key][1] += 1
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            holder = _holder_line(path)
            raise WorkspaceBusyError(
                f"{path.parent} is in use by another process"
                + (f" ({holder})" if holder else "")
                + "; two processes on one workspace's file storages would overwrite each "
                "other's data: wait for it to end or stop it, then run this again"
            ) from None
        _write_holder(fd, path)
        _held[key] = [fd, 1]


def release(path: Path) -> None:
    """Give back one hold; the last one closes the file, which releases the lock.

    Only ``close``: ``LOCK_UN`` would also release the hold of a forked gunicorn worker's
    parent, which shares the open file.
    """
    key = os.path.realpath(path)
    with _registry_lock:
        entry = _held.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _held[key]
            os.close(entry[0])


@contextmanager
def held_for_server_args(args: Any) -> Iterator[None]:
    """Hold the workspace of LightRAG's server configuration (``lightrag.api.config``'s
    ``global_args``) when it names a file storage, before LightRAG builds anything: a refusal
    is then the only thing the command prints and nothing is written. The instance the server
    builds later shares this hold."""
    # deferred: LightRAG and its storages (~2.5 s); the lock itself needs only fcntl
    from lightrag_ext.storage import check_not_lightrag_workspace, layer_workspace

    names = (args.kv_storage, args.graph_storage, args.vector_storage, args.doc_status_storage)
    if not FILE_STORAGES.intersection(names):
        yield
        return
    path = lock_path(args.working_dir, layer_workspace(args.workspace))
    check_not_lightrag_workspace(path.parent)
    acquire(path)
    try:
        yield
    finally:
        release(path)
