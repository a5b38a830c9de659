"""Checksums of a store's JSON files, so a file damaged or cut short after it was saved is
named at load instead of read.

``checksums.json`` in the ``e2rag/`` folder maps a file name (relative to the persist directory)
to the ``[size, crc32]`` pairs a load accepts. A save accepts the new content before it renames
the file into place and forgets the old content after, so a process killed at any point leaves
a file the registry accepts. Vector segments keep their checksums in their own manifest and the
SQLite graph is checked by SQLite; this covers the rest (llama-index's files and ours).
"""

from __future__ import annotations

import json
import os
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator, Optional

from llama_index_e2rag.disk.files import atomic_replace, atomic_write_text

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process lock on the registry
    fcntl = None  # type: ignore[assignment]

#: The registry, inside the ``e2rag/`` folder.
CHECKSUMS_FILE = "checksums.json"
E2RAG_DIR = "e2rag"


def content_sum(data: bytes) -> list[int]:
    return [len(data), zlib.crc32(data)]


def file_sum(path: Path) -> list[int]:
    with open(path, "rb") as f:
        return stream_sum(f)


def stream_sum(f: BinaryIO) -> list[int]:
    """``[size, crc32]`` of the rest of an open file (a reader that checks then maps the very
    file it opened, not whatever a rename put at its path meanwhile)."""
    crc, size = 0, 0
    while block := f.read(1 << 23):
        crc, size = zlib.crc32(block, crc), size + len(block)
    return [size, crc]


class Checksums:
    """The registry of one persist directory."""

    def __init__(self, persist_dir: Path) -> None:
        self.persist_dir = Path(persist_dir)
        self.path = self.persist_dir / E2RAG_DIR / CHECKSUMS_FILE

    def read(self) -> dict[str, list[list[int]]]:
        """The registry; empty when absent (stores saved before it existed) or unreadable."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data.get("files", {}) if isinstance(data, dict) else {}

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Registry updates by several processes one at a time (read, change, write)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _set(self, name: str, sums: list[list[int]]) -> None:
        files = self.read()
        files[name] = sums
        atomic_write_text(self.path, json.dumps({"files": files}, sort_keys=True))

    def write(self, name: str, data: bytes) -> None:
        """Replace file ``name`` by ``data`` atomically, the registry accepting it throughout."""
        new = content_sum(data)
        target = self.persist_dir / name
        with self._locked():
            old = self.read().get(name)
            if old is None:  # a file saved before it had an entry (0.1.0's): still accepted
                old = [file_sum(target)] if target.is_file() else []
            self._set(name, [s for s in old if s != new] + [new])
            atomic_replace(target, lambda tmp: tmp.write_bytes(data))
            self._set(name, [new])

    def check(self, name: str, full: bool = True) -> Optional[str]:
        """Why file ``name`` is not acceptable (None when it is, or when it is not registered);
        not ``full``: judged by its size alone (a file cut short, not one changed in place)."""
        accepted = self.read().get(name)
        if accepted is None:
            return None
        path = self.persist_dir / name
        if not path.is_file():
            return f"{path} is missing"
        if not full:
            if path.stat().st_size not in [size for size, _ in accepted]:
                return f"{path} does not have the size it was saved with (cut or changed)"
        elif file_sum(path) not in accepted:
            return f"{path} does not match its checksum (changed or damaged since it was saved)"
        return None

    def names(self) -> list[str]:
        return sorted(self.read())

    def forget(self, name: str) -> None:
        with self._locked():
            files = self.read()
            if files.pop(name, None) is not None:
                atomic_write_text(self.path, json.dumps({"files": files}, sort_keys=True))
