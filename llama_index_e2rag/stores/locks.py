"""Who may use a store at once: readers share it, a commit has it alone, one writer at a time.

A retrieval makes many reads (graph rows, vectors, chunks); a commit changes the graph and the
vectors. Within a process a readers–writer lock keeps them apart, so a retrieval sees the store
before or after a commit, never between. Across processes the same rule is an ``flock`` on
``<store>/e2rag/lock`` (shared for a retrieval, exclusive for a commit). A second file,
``writer.lock``, is held by a whole write (story orders reserved → extraction → commit), so two
processes adding documents to one store run one after the other instead of one silently
overwriting the other's work. An index without a folder yet needs only the in-process part.

``flock`` locks belong to an open file, so every reader of this process shares one shared lock
and a commit is exclusive in-process before it asks the other processes. Coroutines never block
their event loop: they poll the in-process lock and wait for ``flock`` in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import AsyncIterator, Callable, ContextManager, Iterator, Optional

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: in-process locking only
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

#: Lock files inside the ``e2rag/`` folder of a persisted store.
STATE_LOCK, WRITER_LOCK = "lock", "writer.lock"
_POLL_SECONDS = 0.005
#: The stores this thread or task is reading now: a nested retrieval (a query engine's, say)
#: re-enters instead of queueing behind a waiting commit that waits for its outer read.
_READING: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "e2rag_reading", default=frozenset()
)


class _LockFile:
    """One open lock file, locked shared by several holders or exclusively by one."""

    def __init__(self) -> None:
        self.path: Optional[Path] = None
        self._fd: Optional[int] = None
        self._shared = 0

    def bind(self, path: Optional[Path]) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.path = path

    def _open(self) -> Optional[int]:
        if self.path is None or fcntl is None:
            return None
        if self._fd is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                try:  # a read-only store: flock works on a read-only descriptor too
                    self._fd = os.open(self.path, os.O_RDONLY)
                except OSError:
                    logger.debug("no lock file %s: locking within this process only", self.path)
                    self.path = None  # nobody can write here, so nobody can commit meanwhile
                    return None
        return self._fd

    def lock(self, mode: int, blocking: bool = True) -> bool:
        fd = self._open()
        if fd is None:
            return True
        try:
            fcntl.flock(fd, mode | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True

    def unlock(self) -> None:
        if self._fd is not None and fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def share(self) -> None:
        """One more shared holder (the first takes the file lock)."""
        if self._shared == 0 and fcntl is not None:
            self.lock(fcntl.LOCK_SH)
        self._shared += 1

    def unshare(self) -> None:
        self._shared -= 1
        if self._shared == 0:
            self.unlock()


class StoreLocks:
    """The locks of one store for this process (``bind`` it to the store's folder)."""

    def __init__(
        self,
        home: Optional[Path] = None,
        writer_lock: Optional[Callable[[], ContextManager[None]]] = None,
    ) -> None:
        """``writer_lock``: the database's own lock for a whole write (PostgreSQL's advisory
        lock), taken as well, so writers on other machines take turns too."""
        self._cond = threading.Condition()
        self._db_writer_lock = writer_lock
        self._db_writer: Optional[ContextManager[None]] = None
        self._readers = 0
        self._committing = False
        self._waiting_commits = 0
        self._state = _LockFile()
        self._file_mutex = threading.Lock()  # orders this process's flock calls on ``_state``
        self._writer = _LockFile()
        self._writer_mutex = threading.Lock()
        self._writers = 0  # holders of the writer lock in this process (it is re-entrant here)
        self.bind(home)

    def bind(self, home: Optional[Path]) -> None:
        """Lock files in ``home`` (None: this process only). Called with no lock held."""
        self.home = home
        self._state.bind(home / STATE_LOCK if home is not None else None)
        self._writer.bind(home / WRITER_LOCK if home is not None else None)

    # -- readers ----------------------------------------------------------------------------------
    def _try_read(self) -> bool:
        with self._cond:
            if self._committing or self._waiting_commits:
                return False  # a waiting commit goes first, so readers cannot starve it
            self._readers += 1
            return True

    def _shared_file(self) -> None:
        try:
            with self._file_mutex:
                self._state.share()
        except BaseException:
            self._end_read()
            raise

    def _end_read(self) -> None:
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()

    def _unshare(self) -> None:
        with self._file_mutex:
            self._state.unshare()
        self._end_read()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the store still for one retrieval (blocks while a commit runs)."""
        held = _READING.get()
        if id(self) in held:
            yield
            return
        with self._cond:
            while self._committing or self._waiting_commits:
                self._cond.wait()
            self._readers += 1
        self._shared_file()
        token = _READING.set(held | {id(self)})
        try:
            yield
        finally:
            _READING.reset(token)
            self._unshare()

    @asynccontextmanager
    async def areading(self) -> AsyncIterator[None]:
        held = _READING.get()
        if id(self) in held:
            yield
            return
        while not self._try_read():
            await asyncio.sleep(_POLL_SECONDS)
        await asyncio.to_thread(self._shared_file)
        token = _READING.set(held | {id(self)})
        try:
            yield
        finally:
            _READING.reset(token)
            self._unshare()

    # -- commits ----------------------------------------------------------------------------------
    def _begin_commit(self, blocking: bool) -> bool:
        with self._cond:
            self._waiting_commits += 1
            try:
                while self._committing or self._readers:
                    if not blocking:
                        return False
                    self._cond.wait()
                self._committing = True
                return True
            finally:
                self._waiting_commits -= 1

    def _end_commit(self) -> None:
        with self._cond:
            self._committing = False
            self._cond.notify_all()

    def _exclusive_file(self) -> None:
        try:
            if fcntl is not None:
                self._state.lock(fcntl.LOCK_EX)
        except BaseException:
            self._end_commit()
            raise

    @contextmanager
    def committing(self) -> Iterator[None]:
        """Have the store alone (no reader, no other commit, in any process)."""
        self._begin_commit(blocking=True)
        self._exclusive_file()
        try:
            yield
        finally:
            self._state.unlock()
            self._end_commit()

    @asynccontextmanager
    async def acommitting(self) -> AsyncIterator[None]:
        with self._cond:
            self._waiting_commits += 1  # announce it now: new readers wait from here on
        try:
            while not self._begin_commit(blocking=False):
                await asyncio.sleep(_POLL_SECONDS)
        finally:
            with self._cond:
                self._waiting_commits -= 1
        await asyncio.to_thread(self._exclusive_file)
        try:
            yield
        finally:
            self._state.unlock()
            self._end_commit()

    # -- the writer ------------------------------------------------------------------------------
    def _enter_writer(self) -> None:
        with self._writer_mutex:
            if self._writers == 0 and fcntl is not None and self._writer.path is not None:
                if not self._writer.lock(fcntl.LOCK_EX, blocking=False):
                    logger.warning(
                        "another process is writing to the store in %s; waiting for it to "
                        "finish", self._writer.path.parent.parent
                    )
                    self._writer.lock(fcntl.LOCK_EX)
            if self._writers == 0 and self._db_writer_lock is not None:
                held = self._db_writer_lock()
                try:
                    held.__enter__()
                except BaseException:
                    self._writer.unlock()
                    raise
                self._db_writer = held
            self._writers += 1

    def _exit_writer(self) -> None:
        with self._writer_mutex:
            self._writers -= 1
            if self._writers == 0:
                held, self._db_writer = self._db_writer, None
                try:
                    if held is not None:
                        held.__exit__(None, None, None)
                finally:
                    self._writer.unlock()

    @contextmanager
    def writer(self) -> Iterator[None]:
        """Be the store's only writing process for a whole write (waits for another one)."""
        self._enter_writer()
        try:
            yield
        finally:
            self._exit_writer()

    @asynccontextmanager
    async def awriter(self) -> AsyncIterator[None]:
        await asyncio.to_thread(self._enter_writer)
        try:
            yield
        finally:
            self._exit_writer()
