"""Checked array files: a file whose ``[size, crc32]`` another file records, verified on the very
file that is then memory-mapped or read.

Three stores keep such files: the embedded vectors' ``.npy`` segments (their sums in the
folder's manifest), the grounded matrix's raw float32 rows and the HNSW graphs (each with its
sum in a JSON head beside it, ``<file>.json``). A file is opened once, summed through that
descriptor and mapped from it: checking a path and opening it again could map another file a
rename put there meanwhile. A file and its head are each replaced atomically, the file first,
so a crash between the two leaves a head naming another file, which a reader refuses.
"""

from __future__ import annotations

import json
import mmap
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Optional, Sequence

import numpy as np

from llama_index_e2rag.disk.checksums import file_sum, stream_sum
from llama_index_e2rag.disk.files import atomic_replace, atomic_write_text


class ChecksumMismatch(ValueError):
    """A file is not the one its sum was recorded for (changed, truncated or damaged)."""


def head_path(path: Path) -> Path:
    """The JSON head beside ``path``."""
    return path.with_name(path.name + ".json")


def read_head(path: Path) -> dict[str, Any]:
    """The JSON head of ``path``; ValueError when it is not an object (OSError when absent)."""
    head = json.loads(head_path(path).read_text(encoding="utf-8"))
    if not isinstance(head, dict):
        raise ValueError(f"{head_path(path)} is not a JSON object")
    return head


def save_with_head(
    path: Path, write: Callable[[Path], None], head: Callable[[list[int]], dict[str, Any]]
) -> None:
    """``write(tmp)`` the file and rename it over ``path``, then replace its head by
    ``head(sum)`` (``sum``: the new file's ``[size, crc32]``), each atomically."""
    atomic_replace(path, write)
    atomic_write_text(head_path(path), json.dumps(head(file_sum(path))))


@contextmanager
def checked(path: Path, expected: Optional[Sequence[int]]) -> Iterator[BinaryIO]:
    """``path`` open for reading at its start, once its ``[size, crc32]`` is ``expected`` (None:
    unchecked, a file saved before sums were kept). ValueError naming the file when it is
    missing, ``ChecksumMismatch`` when it is not the file the sum was recorded for."""
    try:
        f = open(path, "rb")
    except FileNotFoundError as exc:
        raise ValueError(f"{path} is missing") from exc
    with f:
        if expected is not None:
            if stream_sum(f) != list(expected):
                raise ChecksumMismatch(
                    f"{path} does not match its checksum (truncated or damaged)")
            f.seek(0)
        yield f


def map_rows(f: BinaryIO, dtype: str, shape: tuple[int, ...], offset: int = 0) -> np.ndarray:
    """The open file's array of ``shape`` from byte ``offset``, memory-mapped read-only (an
    empty one in memory: nothing to map)."""
    if not int(np.prod(shape)):
        return np.zeros(shape, dtype)
    return np.memmap(f, dtype=dtype, mode="r", shape=shape, offset=offset)


def drop_pages(array: np.ndarray) -> None:
    """Let the file pages a memory-mapped ``array`` has read leave this process's resident
    memory; they stay in the page cache and a later read maps them again. A pass over a whole
    mapped file (an HNSW build, fingerprints) would otherwise keep every page it touched counted
    in the process until the mapping is closed: 445 MB for the grounded matrix at 1M words.
    Nothing happens for an array in memory, or where the platform has no such advice."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    found: object = array
    while isinstance(found, np.ndarray):
        if isinstance(getattr(found, "_mmap", None), mmap.mmap):  # np.memmap's own mapping
            found = found._mmap  # type: ignore[attr-defined]
            break
        found = found.base
    if advice is not None and isinstance(found, mmap.mmap) and not found.closed:
        found.madvise(advice)


def map_npy(source: BinaryIO | Path) -> np.ndarray:
    """The array of an open ``.npy`` file (or of the file at a path), memory-mapped read-only:
    ``np.load(..., mmap_mode="r")``, which maps only by path, of the file already open."""
    if isinstance(source, Path):
        with open(source, "rb") as f:
            return map_npy(f)
    version = np.lib.format.read_magic(source)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(source)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(source)
    else:
        raise ValueError(f".npy format version {version} is not supported")
    if dtype.hasobject:
        raise ValueError("a .npy file of Python objects cannot be mapped")
    return np.memmap(source, dtype=dtype, mode="r", shape=shape, offset=source.tell(),
                     order="F" if fortran else "C")
