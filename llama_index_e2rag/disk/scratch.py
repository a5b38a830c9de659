"""Private scratch folders in the system's temporary folder, and the sweep of those a killed
process left behind.

A build stages a long document in a scratch folder and deletes it when it ends, however it ends,
except when the process is killed outright (``SIGKILL``, power loss): then nothing runs to
delete it. So each folder holds an ``flock`` on a file of its own for as long as its owner
lives; the kernel drops the lock with the process. Making a new folder first removes every
folder of the same prefix whose lock nobody holds. A folder without the lock file (another
version's, or one still being made) is never touched. Without ``fcntl`` (Windows) nothing is
swept.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: The file a live folder's owner holds locked.
OWNER_LOCK = "owner.lock"


def make_scratch_dir(prefix: str) -> tuple[str, Optional[int]]:
    """A new private folder ``<tmp>/<prefix>…`` and the descriptor holding its lock (None
    without ``fcntl``); pass both to ``remove_scratch_dir`` when done. Stale folders of the
    same prefix are swept first."""
    sweep_stale(prefix)
    path = tempfile.mkdtemp(prefix=prefix)
    if fcntl is None:
        return path, None
    # lock under a private name, then rename: a sweeper never sees the lock file unlocked
    fd = os.open(os.path.join(path, f".{OWNER_LOCK}.new"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.replace(os.path.join(path, f".{OWNER_LOCK}.new"), os.path.join(path, OWNER_LOCK))
    return path, fd


def remove_scratch_dir(path: str, fd: Optional[int]) -> None:
    """Delete the folder, then let its lock go."""
    shutil.rmtree(path, ignore_errors=True)
    if fd is not None:
        os.close(fd)


def sweep_stale(prefix: str) -> list[str]:
    """Delete the folders ``<tmp>/<prefix>…`` whose owner died; returns their paths."""
    if fcntl is None:
        return []
    swept = []
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        try:
            fd = os.open(folder / OWNER_LOCK, os.O_RDWR)
        except OSError:  # no lock file: not made by this module, or not finished making
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its owner lives
            os.close(fd)
            continue
        try:  # holding its lock: no other sweeper deletes it meanwhile and no owner is left
            shutil.rmtree(folder, ignore_errors=True)
            swept.append(str(folder))
        finally:
            os.close(fd)
    return swept
