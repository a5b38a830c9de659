"""The embedded vector storage: NumPy matrices in memory-mapped ``.npy`` segment files.

Plain NumPy (``benchmarks/vector_storage.py`` measured FAISS, usearch and LanceDB too): exact search
is one BLAS mat-vec per segment, as fast as FAISS's flat index; a kind is a zero-copy view of its
file; append and delete write only the change, where FAISS and usearch rewrite whole index files
and LanceDB adds ~370 MB of dependencies and 30-300 ms per filtered search (25k-260k rows).

A folder holds ``vectors.json`` (the manifest) and immutable ``vectors-<hex>.*`` files: per segment
(rows of one kind) ``.npy`` unit float32 rows, ``.json`` ids and doc ids, maybe ``.dead.npy``
deleted rows. ``persist`` writes and fsyncs new files, then atomically replaces the manifest: a
killed process leaves the old or the new state. Unreferenced files are deleted afterwards. The
manifest keeps each file's size and CRC-32 (zlib, ~7 GB/s here), checked when the folder is
opened, so a truncated, damaged or missing file is named instead of searched.

Unsaved rows are held ``TAIL_ROWS`` per segment, full segments in a private temporary folder
(``vectors.segments``: a segment, its files and its spill), so adding a million-word story
before its first save holds about a segment per kind in memory; a save writes them page by page.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

from llama_index_e2rag.disk.array_files import map_npy
from llama_index_e2rag.disk.checksums import file_sum
from llama_index_e2rag.errors import DamagedVectorsError, VectorStoreError
from llama_index_e2rag.vectors import segments as segment_files
from llama_index_e2rag.vectors.base import VectorHit, VectorRecord
from llama_index_e2rag.vectors.segments import (
    PREFIX, Segment, Spill, merged, synced, unlink, write_segment,
)

FORMAT, VERSION = "e2rag-vectors", 1
MANIFEST = "vectors.json"
#: A kind is compacted into one segment past this share of deleted rows or this many segments.
MAX_DEAD_SHARE, MAX_SEGMENTS = 0.2, 16
#: float32 scores pick candidates within this margin of the k-th best; float64 then ranks them.
_SLACK = 1e-5
_ROW_BITS = 32  # an id's location is one int, segment serial << 32 | row: no GC-tracked tuples


def _sync_dir(folder: Path) -> None:
    if os.name == "posix":  # other systems cannot open a directory to fsync it
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class EmbeddedVectors:
    """``VectorStorage`` held in memory and in memory-mapped files; exact cosine search per kind.

    One lock orders writers; readers hold it only to snapshot segment arrays and compute unlocked,
    so they see the state before or after an ``add``, never a mix.
    """

    def __init__(self) -> None:
        self.dim: Optional[int] = None
        self._kinds: dict[str, list[Segment]] = {}
        self._where: Optional[dict[str, int]] = None  # id -> location; built on first need
        self._segments: dict[int, Segment] = {}  # serial -> segment, for locations
        self._folder: Optional[Path] = None
        self._state: Optional[str] = None  # the manifest this storage last read or wrote
        self._lock = threading.Lock()
        #: files left out by ``open(..., salvage=True)``, with why
        self.damaged: list[str] = []
        #: segment name -> checksums of its files, so a persist hashes only new files
        self._known_crcs: dict[str, dict] = {}
        self._spill = Spill()  # full unsaved segments' private files

    @classmethod
    def open(cls, folder: Path, salvage: bool = False) -> "EmbeddedVectors":
        """Map a persisted folder; a folder without a manifest gives an empty, unbound storage.

        Every file is checked against the manifest's size and checksum; a damaged one raises
        ``VectorStoreError`` naming it, or with ``salvage`` is left out and listed in
        ``damaged`` (what ``e2rag repair`` re-embeds).
        """
        store, folder = cls(), Path(folder)
        if not (folder / MANIFEST).is_file():
            if salvage or not folder.exists() or not any(folder.glob(f"{PREFIX}*")):
                return store
            raise VectorStoreError(f"{folder / MANIFEST} is missing")
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
            if manifest.get("format") != FORMAT:
                raise ValueError(f"{folder / MANIFEST} is not an {FORMAT} manifest")
            if manifest["version"] > VERSION:
                raise VectorStoreError(f"{folder / MANIFEST} has format version "
                                       f"{manifest['version']}, newer than {VERSION}: upgrade "
                                       "llama-index-e2rag to read it")
            store.dim, store._state = manifest["dim"], manifest["state"]
            entries = list(manifest["segments"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if salvage:
                store.damaged.append(f"{folder / MANIFEST}: {exc}")
                return store
            raise DamagedVectorsError(f"{folder / MANIFEST} is damaged ({exc})") from exc
        for entry in entries:
            try:
                store._open_segment(folder, entry)
            except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
                if not salvage:
                    raise DamagedVectorsError(f"vector file damaged: {exc}") from exc
                store.damaged.append(f"{entry.get('name')}: {exc}")
        store._folder = folder
        return store

    def _open_segment(self, folder: Path, entry: dict) -> None:
        self._kinds.setdefault(entry["kind"], []).append(Segment.open(folder, entry, self.dim))
        crcs = entry.get("crc") or {}  # absent in folders written before checksums
        if crcs:
            self._known_crcs[entry["name"]] = dict(crcs, dead_file=entry["dead"],
                                                   docs=entry.get("docs"))

    def refresh(self) -> bool:
        """Re-read the folder if another process changed it since this storage last read or
        wrote it (only ever called with no unsaved change); True if it did."""
        if self._folder is None:
            return False
        try:
            state = json.loads((self._folder / MANIFEST).read_text()).get("state")
        except (OSError, ValueError, AttributeError):
            return False
        if state == self._state:
            return False
        fresh = EmbeddedVectors.open(self._folder)
        with self._lock:
            self.dim, self._kinds, self._state = fresh.dim, fresh._kinds, fresh._state
            self._where, self._segments, self._known_crcs = None, {}, fresh._known_crcs
        return True

    def doc_counts(self) -> dict[str, dict[str, int]]:
        """Live vectors per document and kind (what the graph's document records expect)."""
        counts: dict[str, dict[str, int]] = {}
        with self._lock:
            for kind, segments in self._kinds.items():
                for seg in segments:
                    for doc, alive in zip(seg.docs, seg.alive[: seg.n].tolist()):
                        if alive:
                            per_doc = counts.setdefault(doc, {})
                            per_doc[kind] = per_doc.get(kind, 0) + 1
        return counts

    def ids(self) -> set[str]:
        """Every live id (for finding vectors no graph node names)."""
        with self._lock:
            return set(self._index())

    # ------------------------------------------------------------------ writing

    def _locate(self, seg: Segment, rows: np.ndarray) -> None:
        """Record where the ids of ``rows`` (live rows of ``seg``) are."""
        self._segments[seg.serial] = seg
        self._where.update(zip([seg.ids[r] for r in rows.tolist()],
                               (rows + (seg.serial << _ROW_BITS)).tolist()))

    def _index(self) -> dict[str, int]:
        if self._where is None:
            self._where, self._segments = {}, {}
            for seg in (seg for segments in self._kinds.values() for seg in segments):
                self._locate(seg, np.flatnonzero(seg.alive[: seg.n]))
        return self._where

    def _remove(self, ids: Iterable[str]) -> None:
        """Forget the known ``ids``; each touched segment copies its ``alive`` once."""
        where, by_segment = self._index(), {}
        for id_ in [i for i in ids if i in where]:
            location = where.pop(id_)
            by_segment.setdefault(self._segments[location >> _ROW_BITS], []).append(
                location & ((1 << _ROW_BITS) - 1))
        for seg, rows in by_segment.items():
            seg.kill(rows)
        if not where:  # nothing left: forget the segments and the dimension too
            self._kinds, self._segments, self.dim = {}, {}, None

    def add(self, records: Sequence[VectorRecord]) -> None:
        latest = list({r.id: r for r in records}.values())  # a repeated id: the last one wins
        if not latest:
            return
        try:
            matrix = np.stack([np.asarray(r.vector, np.float32) for r in latest])
        except ValueError as exc:
            raise VectorStoreError(f"vectors of one add differ in dimension ({exc})") from exc
        if matrix.ndim != 2 or not np.isfinite(matrix).all():
            raise VectorStoreError("each vector must be one row of finite numbers")
        norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))[:, None]
        matrix /= np.where(norms > 0, norms, 1)
        with self._lock:
            if self.dim is not None and matrix.shape[1] != self.dim:
                raise VectorStoreError(
                    f"vector dimension {matrix.shape[1]} does not match this storage's {self.dim}:"
                    " use the embedding model the index was built with, or a new index")
            self._remove(r.id for r in latest)
            by_kind: dict[str, list[int]] = {}
            for i, r in enumerate(latest):
                by_kind.setdefault(r.kind, []).append(i)
            for kind, rows in by_kind.items():
                segments = self._kinds.setdefault(kind, [])
                while rows:
                    if not segments or segments[-1].name is not None or (
                            segments[-1].n >= segment_files.TAIL_ROWS):
                        segments.append(
                            Segment(np.empty((0, matrix.shape[1]), np.float32), [], []))
                    tail, start = segments[-1], segments[-1].n
                    room = segment_files.TAIL_ROWS - start
                    now, rows = rows[:room], rows[room:]
                    tail.append(matrix[now], [latest[i].id for i in now],
                                [latest[i].doc_id for i in now])
                    self._locate(tail, np.arange(start, tail.n))
                    if tail.n == segment_files.TAIL_ROWS:
                        self._spill.move(tail)
            self.dim = matrix.shape[1]

    async def aadd(self, records: Sequence[VectorRecord]) -> None:
        self.add(records)

    def delete_ids(self, ids: Sequence[str]) -> None:
        with self._lock:
            self._remove(ids)

    async def adelete_ids(self, ids: Sequence[str]) -> None:
        self.delete_ids(ids)

    def delete_doc(self, doc_id: str) -> None:
        """Scans the doc ids (a few ms per 100k rows) rather than keep an index of them."""
        with self._lock:
            self._remove([i for segments in self._kinds.values() for seg in segments
                          for i, doc, alive in zip(seg.ids, seg.docs, seg.alive[: seg.n].tolist())
                          if doc == doc_id and alive])

    async def adelete_doc(self, doc_id: str) -> None:
        self.delete_doc(doc_id)

    # ------------------------------------------------------------------ reading

    def _views(self, kind: str) -> tuple[list[tuple[np.ndarray, np.ndarray, list[str]]], int]:
        with self._lock:
            return ([(s.vectors[: s.n], s.alive[: s.n], s.ids) for s in self._kinds.get(kind, ())],
                    self.dim or 0)

    def search(self, kind: str, query: np.ndarray, top_k: int) -> list[VectorHit]:
        """Exact cosine top ``top_k`` of one kind, best first, ties by id; the same scores
        whatever the segment layout (candidates are rescored row by row in float64)."""
        views, dim = self._views(kind)
        if not views or top_k <= 0:
            return []
        q = np.asarray(query, np.float64).reshape(-1)
        if q.shape[0] != dim or not np.isfinite(q).all():
            raise VectorStoreError(f"a query of {q.shape[0]} numbers (finite: "
                                   f"{bool(np.isfinite(q).all())}) does not fit this storage's "
                                   f"dimension {dim}: embed it with the index's model")
        q /= np.linalg.norm(q) or 1.0
        found: list[tuple[float, str]] = []
        for vectors, alive, ids in views:
            scores = vectors @ q.astype(np.float32)
            scores[~alive] = -np.inf
            k = min(top_k, len(scores))
            kth = np.partition(scores, len(scores) - k)[-k]
            rows = np.flatnonzero((scores >= kth - _SLACK) & alive)
            exact = (vectors[rows].astype(np.float64) * q).sum(axis=1)
            found.extend(zip(exact.tolist(), [ids[r] for r in rows.tolist()]))
        found.sort(key=lambda hit: (-hit[0], hit[1]))
        return [VectorHit(id_, score) for score, id_ in found[:top_k]]

    async def asearch(self, kind: str, query: np.ndarray, top_k: int) -> list[VectorHit]:
        return self.search(kind, query, top_k)

    def get_embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Unit float32 vectors of the known ``ids`` (rows of one new matrix)."""
        found = list(dict.fromkeys(ids))
        out, known = self._rows(found)
        return {id_: row for id_, row, kept in zip(found, out, known) if kept}

    def matrix_of(self, ids: Sequence[str]) -> np.ndarray:
        """Unit float32 rows aligned with ``ids``, zeros for an id without a vector (no column
        when none has one): ``Stores.matrix_of`` without a dictionary of every id's row (a
        novel's 40k grounded nodes: 0.9 s -> 0.1 s on the first grounded query)."""
        out, known = self._rows(ids)
        return out if known.any() else np.zeros((len(ids), 0), np.float32)

    def _rows(self, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Rows aligned with ``ids`` (zeros where unknown) and which ids are known."""
        with self._lock:
            where, dim = self._index(), self.dim or 0
            locations = np.fromiter((where.get(i, -1) for i in ids), np.int64, len(ids))
            known = locations >= 0
            serials = np.where(known, locations >> _ROW_BITS, -1)
            arrays = {s: self._segments[s].vectors for s in np.unique(serials[known]).tolist()}
        out = np.zeros((len(ids), dim), np.float32)
        for serial, vectors in arrays.items():
            mask = serials == serial
            out[mask] = vectors[locations[mask] & ((1 << _ROW_BITS) - 1)]
        return out, known

    def kind_matrix(self, kind: str) -> tuple[list[str], np.ndarray]:
        """All ids of one kind and their read-only (n, dim) matrix; no copy when a single segment
        without deletions holds them (the usual case after a persist)."""
        views, dim = self._views(kind)
        ids: list[str] = []
        parts = [np.empty((0, dim), np.float32)]
        for vectors, alive, seg_ids in views:
            rows = np.flatnonzero(alive)
            whole = len(rows) == len(vectors)
            ids.extend(seg_ids[: len(vectors)] if whole else [seg_ids[r] for r in rows.tolist()])
            parts.append(vectors if whole else vectors[rows])
        matrix = (parts[1] if len(parts) == 2 else np.concatenate(parts)).view()
        matrix.flags.writeable = False
        return ids, matrix

    def release(self) -> None:
        """Map the saved segments' files again, so the pages reads brought in leave this
        process's resident memory (they stay in the page cache; a reader holding a view keeps
        its old mapping). A derivation reading every vector of a kind is then not counted in
        the process's memory after it, nor are several kinds read one after the other."""
        with self._lock:
            if self._folder is None:
                return
            for seg in (seg for segments in self._kinds.values() for seg in segments):
                if seg.name is not None:
                    seg.vectors = map_npy(self._folder / f"{seg.name}.npy")

    def count(self, kind: Optional[str] = None) -> int:
        with self._lock:
            kinds = self._kinds.values() if kind is None else [self._kinds.get(kind, [])]
            return sum(seg.live() for segments in kinds for seg in segments)

    def check_dim(self, dim: int) -> None:
        """Refuse an embedding of another dimension than the stored vectors', before any work."""
        if self.dim is not None and self.dim != dim:
            raise VectorStoreError(
                f"this index holds {self.dim}-d vectors but the embedding model gives {dim}-d; "
                "use the embedding model the index was built with"
            )

    def check(self) -> None:
        """Nothing outside this process can be missing, so there is nothing to check."""

    # ------------------------------------------------------------------ persisting

    def _plan(self, incremental: bool) -> dict[str, list[list[Segment]]]:
        """Per kind, groups of live segments; a group of several is merged into one. A full copy,
        or a kind past MAX_SEGMENTS or MAX_DEAD_SHARE, is one group; otherwise an unsaved tail
        merges with predecessors no bigger than itself, so sizes stay geometric: a row is
        rewritten O(log n) times and a small change costs about its own size."""
        plan = {}
        for kind, segments in self._kinds.items():
            groups: list[list[Segment]] = []
            for seg in (seg for seg in segments if seg.live()):
                if groups and seg.name is None and groups[-1][-1].name is None:
                    groups[-1].append(seg)  # unsaved segments: one file, as if one segment
                else:
                    groups.append([seg])
            dead = sum(seg.n - seg.live() for group in groups for seg in group)
            if not groups:
                continue
            if (not incremental or len(groups) > MAX_SEGMENTS
                    or dead > MAX_DEAD_SHARE * sum(seg.n for group in groups for seg in group)):
                groups = [[seg for group in groups for seg in group]]
            elif groups[-1][0].name is None:
                while len(groups) > 1 and (sum(s.live() for s in groups[-2])
                                           <= sum(s.live() for s in groups[-1])):
                    groups[-2:] = [groups[-2] + groups[-1]]
            plan[kind] = groups
        return plan

    def _facts(self, folder: Path, entry: dict, seg: Segment) -> tuple[dict, dict[str, int]]:
        """Checksums of a manifest entry's files and its live rows per document (kept from the
        last manifest when unchanged): what opening checks, and what ``e2rag show`` counts
        without reading the id files (``embedded_survey``)."""
        known = self._known_crcs.get(entry["name"], {})
        same_dead = known.get("dead_file") == entry["dead"]
        crcs = {ext: known.get(ext) or file_sum(folder / f"{entry['name']}.{ext}")
                for ext in ("npy", "json")}
        if entry["dead"]:
            crcs["dead"] = (known.get("dead") if same_dead else None) or file_sum(
                folder / entry["dead"])
        docs = known.get("docs") if same_dead else None
        if docs is None:
            docs = dict(Counter(itertools.compress(seg.docs[: seg.n], seg.alive[: seg.n].tolist())))
        self._known_crcs[entry["name"]] = dict(crcs, dead_file=entry["dead"], docs=docs)
        return {k: v for k, v in crcs.items() if v is not None}, docs

    def persist(self, folder: Path) -> None:
        """Write the state under ``folder``: only the change if this storage was opened from or
        last persisted to it (and its manifest is still the one we know), else a full copy."""
        folder = Path(folder)
        with self._lock:
            try:
                on_disk = json.loads((folder / MANIFEST).read_text()).get("state")
            except (OSError, ValueError, AttributeError):
                on_disk = None
            incremental = (self._folder is not None and on_disk == self._state
                           and folder.resolve() == self._folder.resolve())
            folder.mkdir(parents=True, exist_ok=True)
            kinds: dict[str, list[Segment]] = {}
            written: dict[Segment, str] = {}
            dead_files: dict[Segment, str] = {}
            for kind, groups in self._plan(incremental).items():
                for group in groups:
                    seg, fresh = group[0], group[0].name is None or not incremental
                    if len(group) > 1 or (fresh and seg.live() < seg.n):
                        seg = merged(group)
                    if seg.name is None or not incremental:
                        written[seg] = write_segment(folder, seg, group)
                        if seg is not group[0]:  # no reader has it: its rows are the file's
                            seg.vectors = map_npy(folder / f"{written[seg]}.npy")
                    elif seg.dirty:
                        dead_files[seg] = f"{seg.name}.{uuid.uuid4().hex[:8]}.dead.npy"
                        synced(folder / dead_files[seg],
                                np.flatnonzero(~seg.alive[: seg.n]).astype(np.int32))
                    kinds.setdefault(kind, []).append(seg)
            state = uuid.uuid4().hex
            entries = []
            for kind, segments in kinds.items():
                for seg in segments:
                    entries.append({"name": written.get(seg, seg.name), "kind": kind,
                                    "rows": seg.n, "dead": None if seg in written
                                    else dead_files.get(seg, seg.dead_file)})
                    entries[-1]["crc"], entries[-1]["docs"] = self._facts(folder, entries[-1], seg)
            manifest = {"format": FORMAT, "version": VERSION, "dim": self.dim, "state": state,
                        "segments": entries}
            _sync_dir(folder)
            synced(folder / f"{MANIFEST}.tmp", json.dumps(manifest).encode())
            os.replace(folder / f"{MANIFEST}.tmp", folder / MANIFEST)
            _sync_dir(folder)
            # committed: point segments at the new files, forget merged-away ones, collect garbage
            for seg, name in written.items():
                seg.vectors = map_npy(folder / f"{name}.npy")
                seg.name, seg.dead_file, seg.dirty = name, None, False
            for seg in (seg for segments in self._kinds.values() for seg in segments):
                seg.saved()  # saved now (or all deleted): a spilled one's file is not needed
            for seg, dead_file in dead_files.items():
                seg.dead_file, seg.dirty = dead_file, False
            if any(kinds.get(kind) != segments for kind, segments in self._kinds.items()):
                self._where, self._segments = None, {}  # no location keeps a merged-away one
            self._kinds, self._folder, self._state = kinds, folder, state
            self._known_crcs = {e["name"]: self._known_crcs[e["name"]] for e in entries}
            keep = {f"{e['name']}{ext}" for e in entries for ext in (".npy", ".json")}
            keep |= {e["dead"] for e in entries if e["dead"]}
            for path in folder.iterdir():
                if path.name.startswith(PREFIX) and path.name not in keep:
                    unlink(path)  # on failure (still mapped on Windows) the next one retries

