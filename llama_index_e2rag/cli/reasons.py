"""Which one line a failed ``e2rag`` command prints: exception classes mapped to messages.

A failure is classified by its type alone, the first class of ``REASONS`` it is an instance of,
never by the file or function it was raised in or by the words of its message: moving code to
another module cannot change what a user is told, and a file named ``damaged.txt`` is not
taken for a damaged store. Conditions are told apart where they are found, by raising the
``errors`` class that names them (``StoreLoadError``, ``DamagedFileError``, ``UsageError`` ...).
What a message names (the damaged file of a store, the extra that brings a module, the log of a
traceback) comes from ``cli.errors``.
"""

from __future__ import annotations

import errno
import json
import sqlite3
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from llama_index_e2rag.cli import errors as facts
from llama_index_e2rag.errors import (
    DamagedFileError,
    E2RAGError,
    StoreDamagedError,
    StoreLoadError,
)

#: A failure and the ``--store`` of the command -> its one-line reason, or None when it is not
#: foreseen (a bug: its traceback is kept in a log file, ``unexpected_reason``).
Reason = Callable[[Any, Optional[Path]], Optional[str]]

#: SQLite's primary result codes that mean the database is fine but cannot be used now.
_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def report(exc: BaseException, store: Optional[Path], argv: Sequence[str]) -> int:
    """Say why the command failed, in one line on stderr, and return the exit code."""
    if facts.interrupted(exc):
        facts.say("e2rag: interrupted")
        return 130
    if isinstance(exc, BrokenPipeError) and facts.stdout_closed():
        facts.silence_stdout()
        return 1
    reason = expected_reason(exc, store)
    if reason is None:
        reason = unexpected_reason(exc, store, argv)
    facts.say(f"e2rag: error: {reason}")
    return 1


def expected_reason(exc: BaseException, store: Optional[Path]) -> Optional[str]:
    """The one-line reason of a failure we foresee (bad input, damaged store, missing extra,
    permissions, full disk), or None."""
    sqlite_error = facts.find_in_chain(exc, sqlite3.Error)
    if sqlite_error is not None:  # busy, read-only, unreachable: not a damaged database
        reason = sqlite_state(sqlite_error, store)  # type: ignore[arg-type]
        if reason is not None:
            return reason
    for kind, reason_of in REASONS:
        if isinstance(exc, kind):
            return reason_of(exc, store)
    return None


def unexpected_reason(exc: BaseException, store: Optional[Path], argv: Sequence[str]) -> str:
    """The reason of a failure nobody foresaw (a bug), naming the log that keeps its
    traceback for the report."""
    log = facts.write_log(exc, argv)
    saved = (
        f"traceback in {log}"
        if log
        else "traceback not saved: no writable log folder; set XDG_STATE_HOME to one"
    )
    failed = exc.cause if isinstance(exc, StoreLoadError) else exc
    what = f"unexpected {type(failed).__name__}"
    message = facts.first_line(failed)
    if isinstance(exc, StoreLoadError):
        reason = (f"could not load the store {exc.store} ({what}: {message}); if it is damaged, "
                  f"run e2rag repair --store {exc.store}")
    else:
        reason = f"{what}: {message}" if message else what
    return f"{damaged_reason(store) or reason} ({saved})"


def damaged_reason(store: Optional[Path]) -> Optional[str]:
    """'damaged store file …; run e2rag repair' when a file of ``store`` is broken."""
    damaged = facts.damaged_files(store)
    if not damaged:
        return None
    path, problem = damaged[0]
    more = f" (and {len(damaged) - 1} more damaged file(s))" if len(damaged) > 1 else ""
    return f"damaged store file {path}: {problem}{more}; run e2rag repair --store {store}"


def graph_db(store: Optional[Path]) -> object:
    return store / "e2rag" / "graph.sqlite" if store is not None else "the graph database"


def sqlite_state(exc: sqlite3.Error, store: Optional[Path]) -> Optional[str]:
    """The reason when the graph database is busy, read-only, unreachable or on a full disk,
    by SQLite's result code (None for the other codes: the database may be damaged)."""
    db = graph_db(store)
    message = facts.first_line(exc)
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in _BUSY:
        return f"{db} is busy (another e2rag process is writing it); run again when it is done"
    if primary == sqlite3.SQLITE_READONLY:
        return (f"{db} is read-only ({message}); e2rag needs write access to the store folder, "
                "also to query it: check its permissions")
    if primary == sqlite3.SQLITE_CANTOPEN:
        return f"cannot open {db} ({message}); check that you may read and write it and its folder"
    if primary in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR):
        return f"cannot write {db} ({message}); free some disk space and run again"
    return None


# -- the table: one function per class ----------------------------------------------------------
def _store_load(exc: StoreLoadError, store: Optional[Path]) -> Optional[str]:
    """A store file llama-index could not parse (a ``ValueError``) is foreseen; any other cause
    of a failed load is a bug (``unexpected_reason`` names the store all the same)."""
    if not isinstance(exc.cause, ValueError):
        return None
    reason = facts.first_line(exc.cause) or type(exc.cause).__name__
    return damaged_reason(store) or (
        f"could not load the store {exc.store} ({reason}); if it is damaged, "
        f"run e2rag repair --store {exc.store}"
    )


def _damaged_file(exc: DamagedFileError, store: Optional[Path]) -> str:
    """The damaged file, and the store's fix its finder could not name."""
    reason = facts.first_line(exc) or type(exc).__name__
    return reason + (f" (or run e2rag repair --store {store})" if store is not None else "")


def _damaged_store(exc: StoreDamagedError, store: Optional[Path]) -> str:
    """Its message ends with the fix; when the line is cut short, the fix is said again."""
    line = facts.first_line(exc) or type(exc).__name__
    cut = line != facts.first_line(exc, limit=len(str(exc)) + 1)
    return line + (f" (or run e2rag repair --store {store})" if cut and store is not None else "")


def _ours(exc: E2RAGError, store: Optional[Path]) -> str:
    """Our errors say what went wrong and what to do: their first line as it is."""
    return facts.first_line(exc) or type(exc).__name__


def _damaged_database(exc: sqlite3.Error, store: Optional[Path]) -> str:
    repair = f"; run e2rag repair --store {store}" if store is not None else ""
    return f"damaged graph database {graph_db(store)} ({facts.first_line(exc)}){repair}"


def _os_reason(exc: OSError, store: Optional[Path]) -> str:
    """A file-system failure in words, with what to do about it."""
    if store is not None and store.is_file() and exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return f"--store {store} is a file; give a folder (e2rag creates it if it is missing)"
    if not exc.strerror:  # raised with a full message of its own
        return facts.first_line(exc) or type(exc).__name__
    where = f": {exc.filename}" if exc.filename is not None else ""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied{where}; check the permissions of it and of its folder"
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return f"no space left on the disk{where}; free some space and run again"
    if exc.errno == errno.EROFS:
        return f"read-only file system{where}; use a --store on a writable disk"
    if exc.errno == errno.ENOENT:
        return f"no such file or folder{where}"
    return f"{exc.strerror}{where}"


def _missing_module(exc: ImportError, store: Optional[Path]) -> str:
    extra = facts.missing_extra(exc)
    module = exc.name or "a module"
    if extra:
        return f"{module} is not installed: pip install \"llama-index-e2rag[{extra}]\""
    return f"{facts.first_line(exc)}; reinstall llama-index-e2rag or install {module}"


def _bad_value(exc: ValueError, store: Optional[Path]) -> Optional[str]:
    """Bad input in a library's words, or a store file it could not parse (named when a file
    of the store is damaged; a JSON or encoding error in a file we cannot name is a bug)."""
    damaged = damaged_reason(store)
    if damaged:
        return damaged
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        return None  # keep the traceback: it shows which file
    return facts.first_line(exc) or type(exc).__name__


#: Exception class -> its reason; the first class a failure is an instance of decides.
REASONS: tuple[tuple[type[BaseException], Reason], ...] = (
    (StoreLoadError, _store_load),
    (DamagedFileError, _damaged_file),
    (StoreDamagedError, _damaged_store),
    (E2RAGError, _ours),
    (sqlite3.Error, _damaged_database),
    (OSError, _os_reason),
    (ImportError, _missing_module),
    (ValueError, _bad_value),
)
