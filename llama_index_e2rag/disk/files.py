"""Atomic file replacement, the one way this package writes a file another process may read."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def atomic_replace(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` to a temporary file beside ``path``, fsync it, then rename it over ``path``:
    readers and a process killed meanwhile see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_replace(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def swap_folder(fresh: Path, folder: Path) -> None:
    """Put the folder ``fresh`` at ``folder``'s place and delete the one it replaces.

    The replaced folder is first moved into a new folder this call creates, so only that is
    deleted: never a name someone else may own (a fixed ``.old`` name could be theirs)."""
    trash = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=folder.parent))
    old = trash / folder.name
    try:
        if folder.exists():
            os.replace(folder, old)
        try:
            os.replace(fresh, folder)
        except BaseException:
            if old.exists() and not folder.exists():
                os.replace(old, folder)  # as it was
            raise
    finally:
        shutil.rmtree(trash, ignore_errors=True)
