"""The embedded vector storage's segments: rows of one kind, their files and their spill.

A saved segment maps its immutable ``vectors-<hex>.npy`` (unit float32 rows) and reads its
``.json`` (ids and doc ids) and maybe a ``.dead.npy`` (deleted rows), each checked against the
size and CRC-32 the manifest keeps (``disk.array_files``). An unsaved segment grows in memory
up to ``TAIL_ROWS`` rows; a full one moves to a file of a private temporary folder (``Spill``,
not part of any state) and is mapped from there, so adding a million-word story (600k vectors,
0.9 GB) before its first save holds about a segment per kind in memory. A persist writes the
live rows of a group of segments as one new file, ``WRITE_ROWS`` rows at a time.
"""

from __future__ import annotations

import itertools
import json
import os
import uuid
import weakref
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np

from llama_index_e2rag.disk.array_files import checked, drop_pages, map_npy
from llama_index_e2rag.disk.scratch import make_scratch_dir, remove_scratch_dir

#: The segment files' name prefix (any other file of the folder is not the storage's).
PREFIX = "vectors-"
#: Rows of an unsaved segment: a longer add goes on in a new one, and the full one moves to a
#: temporary file (``Spill``), so an add holds about one segment per kind in memory, not the
#: story's every vector until the save (600k, 0.9 GB at a million words); a persist writes
#: consecutive unsaved segments as one file.
TAIL_ROWS = 16_384
#: Prefix of the private folder of spilled segments (a killed build's is swept by the next).
SPILL_PREFIX = "e2rag-vectors-"
#: Rows written to a segment file per write (never the whole kind as one array).
WRITE_ROWS = 4096
_SERIALS = itertools.count()


class Segment:
    """Rows of one kind. Rows below ``n`` never change, so readers use them unlocked; deleting
    swaps ``alive`` for an edited copy. Only an unsaved segment (``name`` None) grows."""

    __slots__ = ("vectors", "ids", "docs", "alive", "n", "name", "dead_file", "dirty", "serial",
                 "spill")

    def __init__(self, vectors: np.ndarray, ids: list[str], docs: list[str],
                 alive: Optional[np.ndarray] = None, name: Optional[str] = None,
                 dead_file: Optional[str] = None) -> None:
        self.vectors, self.ids, self.docs, self.n = vectors, ids, docs, len(ids)
        self.alive = np.ones(self.n, bool) if alive is None else alive
        self.name, self.dead_file, self.dirty = name, dead_file, False
        self.serial = next(_SERIALS)
        self.spill: Optional[Path] = None  # the temporary file of a full unsaved segment

    @classmethod
    def open(cls, folder: Path, entry: dict, dim: Optional[int]) -> "Segment":
        """The saved segment a manifest ``entry`` names, its files checked against the entry's
        checksums (absent in folders written before them) and mapped or read as checked;
        ValueError naming a file that is missing, damaged or of another shape."""
        crcs = entry.get("crc") or {}
        with checked(folder / f"{entry['name']}.npy", crcs.get("npy")) as f:
            vectors = map_npy(f)
        with checked(folder / f"{entry['name']}.json", crcs.get("json")) as f:
            meta = json.loads(f.read())
        alive = np.ones(len(meta["ids"]), bool)
        if entry["dead"]:
            with checked(folder / entry["dead"], crcs.get("dead")) as f:
                alive[np.load(f)] = False
        if vectors.shape != (len(alive), dim) or len(meta["doc_ids"]) != len(alive):
            raise ValueError(f"{folder / entry['name']}.npy does not have {len(alive)} rows")
        return cls(vectors, meta["ids"], meta["doc_ids"], alive, entry["name"], entry["dead"])

    def live(self) -> int:
        return int(np.count_nonzero(self.alive[: self.n]))

    def append(self, vectors: np.ndarray, ids: list[str], docs: list[str]) -> None:
        """Add rows we own; the buffer doubles when full and readers keep the old one."""
        need = self.n + len(ids)
        if self.n == 0:
            self.vectors, self.alive = vectors, np.ones(need, bool)
        else:
            if need > len(self.vectors):
                rows = max(need, min(2 * self.n, TAIL_ROWS))
                grown = np.empty((rows, vectors.shape[1]), np.float32)
                alive = np.ones(len(grown), bool)
                grown[: self.n], alive[: self.n] = self.vectors[: self.n], self.alive[: self.n]
                self.vectors, self.alive = grown, alive
            self.vectors[self.n : need], self.alive[self.n : need] = vectors, True
        self.ids.extend(ids)
        self.docs.extend(docs)
        self.n = need

    def kill(self, rows: list[int]) -> None:
        alive = self.alive.copy()
        alive[rows] = False
        self.alive, self.dirty = alive, True

    def saved(self) -> None:
        """Its rows are in the store's folder now: its temporary file, if any, is not needed."""
        if self.spill is not None:
            unlink(self.spill)
            self.spill = None

    def source(self) -> np.ndarray:
        """Its rows to copy from: a spilled one's through a new mapping of its private file
        (the pages read go when it is dropped), any other's as they are (a saved segment's file
        may already be deleted by another process's save: only its own mapping still reads)."""
        return map_npy(self.spill) if self.spill is not None else self.vectors


class Spill:
    """The private temporary folder full unsaved segments move to, made on first need and
    removed with this object (a killed process's is swept by the next one's)."""

    def __init__(self) -> None:
        self._folder: Optional[Path] = None

    def move(self, seg: Segment) -> None:
        """Move a full unsaved segment's rows to a file of the folder and map them (the same
        rows: readers holding the old array read the same numbers). Nothing of the store
        depends on the file: a persist writes the rows to the store's folder."""
        if self._folder is None:
            folder, lock = make_scratch_dir(SPILL_PREFIX)
            self._folder = Path(folder)
            weakref.finalize(self, remove_scratch_dir, folder, lock)
        seg.spill = self._folder / f"{uuid.uuid4().hex}.npy"
        with open(seg.spill, "wb") as f:
            np.save(f, seg.vectors[: seg.n])
        seg.vectors = map_npy(seg.spill)


def merged(group: Sequence[Segment]) -> Segment:
    """One unsaved segment with the ids of the live rows of ``group``, in order; its vectors
    are only written (``write_segment``), never gathered into one array."""
    rows = [np.flatnonzero(seg.alive[: seg.n]) for seg in group]
    return Segment(np.empty((0, group[0].vectors.shape[1]), np.float32),
                   [seg.ids[i] for seg, r in zip(group, rows) for i in r.tolist()],
                   [seg.docs[i] for seg, r in zip(group, rows) for i in r.tolist()])


def write_rows(path: Path, group: Sequence[Segment]) -> None:
    """The live rows of ``group``, in order, as one new ``.npy`` file (fsynced): the bytes
    ``np.save`` writes for their concatenation, ``WRITE_ROWS`` rows at a time. A saved
    segment's pages are let go as they are copied: its mapping is the readers', and a merge
    of a library's older segments otherwise held them all (a 230 MB segment: +243 MB of file
    pages in the process through the persist)."""
    rows = [np.flatnonzero(seg.alive[: seg.n]) for seg in group]
    dim = group[0].vectors.shape[1]
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
              "fortran_order": False, "shape": (sum(len(r) for r in rows), dim)}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        for seg, live in zip(group, rows):
            whole, source = len(live) == seg.n, seg.source()
            for start in range(0, len(live), WRITE_ROWS):
                part = (source[start : min(start + WRITE_ROWS, seg.n)] if whole
                        else source[live[start : start + WRITE_ROWS]])
                f.write(np.ascontiguousarray(part, np.float32).data)
                drop_pages(source)
            del source  # a mapping of our own: the pages read leave the process with it
        f.flush()
        os.fsync(f.fileno())


def synced(path: Path, content: Union[np.ndarray, bytes]) -> None:
    """Write a new file (an array as ``.npy``, or bytes) and fsync it."""
    with open(path, "wb") as f:
        if isinstance(content, np.ndarray):
            np.save(f, content)
        else:
            f.write(content)
        f.flush()
        os.fsync(f.fileno())


def write_segment(folder: Path, seg: Segment, group: Sequence[Segment]) -> str:
    """Write to new files the live rows of ``group`` and ``seg``'s ids (theirs: ``seg`` is
    ``group``'s one segment, all live, or ``merged(group)``); returns the files' common name."""
    name = f"{PREFIX}{uuid.uuid4().hex}"
    write_rows(folder / f"{name}.npy", group)
    synced(folder / f"{name}.json",
           json.dumps({"ids": seg.ids[: seg.n], "doc_ids": seg.docs[: seg.n]}).encode())
    return name


def unlink(path: Path) -> None:
    """Delete a file no state names any more; one still mapped (Windows) stays for later."""
    try:
        path.unlink()
    except OSError:
        pass
