"""Which library should hold the embedded vector storage: FAISS, usearch, LanceDB or NumPy?

``python -m benchmarks.vector_storage --out /tmp/vs.md`` writes a Markdown report. Data is synthetic
but clustered (2,000 random centroids plus noise, unit-norm float32, d=384) so approximate indexes
are tested honestly, and split over the seven node kinds with the shares of a real index. Every
store is built and written in one child process and opened in a second, fresh one (open time and
RSS from ``/proc/self/status`` belong to that open alone). Recall@10 is against exact float32
search. "Append" and "delete" start from the opened state and end with the change persisted;
"written" is the bytes of files created or changed by that step. FAISS and usearch get int64 keys
for free here; a real store would add a string-id side table to them (NumPy and ours pay for it).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384
CENTROIDS = 2000
SHARES = {"mention": 0.30, "sentence": 0.25, "event": 0.20, "passage": 0.13,
          "chunk": 0.02, "fact": 0.05, "entity": 0.05}
KINDS = list(SHARES)
DOCS = 100  # one document = 1% of rows, contiguous as ingestion adds them
QUERIES = 200
APPEND = 3000
SEARCH_KINDS = ("mention", "passage")
CANDIDATES = ("faiss", "usearch-f32", "usearch-f16", "lancedb", "numpy", "embedded")
CRASH_SAFE = {  # by construction, as each candidate persists here
    "faiss": "per file only (tmp + rename)", "usearch-f32": "per file only (tmp + rename)",
    "usearch-f16": "per file only (tmp + rename)", "lancedb": "yes (versioned manifests)",
    "numpy": "yes (manifest switch)", "embedded": "yes (manifest switch; SIGKILL-tested)",
}
DEPENDENCIES = {  # what each candidate adds to the install (numpy, pydantic, tqdm are already core)
    "faiss": ["faiss-cpu"], "usearch-f32": ["usearch", "numkong"],
    "usearch-f16": ["usearch", "numkong"],
    "lancedb": ["lancedb", "pyarrow", "lance-namespace", "lance-namespace-urllib3-client",
                "deprecation", "overrides"],
    "numpy": [], "embedded": [],
}


# ----------------------------------------------------------------------------- shared helpers

def rss_mb() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) / 1024
    return out


def folder_files(folder: Path) -> dict[str, tuple[int, int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ino)
            for p in folder.rglob("*") if p.is_file()}


def written_bytes(before: dict, after: dict) -> int:
    return sum(meta[0] for name, meta in after.items() if before.get(name) != meta)


def disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def installed_mb(dist_names: list[str]) -> float:
    total = 0
    for name in dist_names:
        dist = md.distribution(name)
        for f in dist.files or []:
            try:
                total += os.path.getsize(dist.locate_file(f))
            except OSError:
                pass
    return total / 1e6


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_data(n: int, work: Path) -> None:
    """Vectors, kinds, documents, queries, exact top-10s and the append batch, saved in ``work``."""
    rng = np.random.default_rng(20240611)
    centroids = unit(rng.standard_normal((CENTROIDS, DIM), dtype=np.float32))

    def sample(count: int) -> np.ndarray:
        noise = rng.standard_normal((count, DIM), dtype=np.float32) * (0.75 / np.sqrt(DIM))
        return unit(centroids[rng.integers(CENTROIDS, size=count)] + noise)

    def kinds_for(count: int) -> np.ndarray:
        counts = [int(round(share * count)) for share in SHARES.values()]
        counts[0] += count - sum(counts)
        return rng.permutation(np.repeat(np.arange(len(KINDS), dtype=np.int8), counts))

    vectors, kinds = sample(n), kinds_for(n)
    queries = sample(QUERIES)
    np.save(work / "vectors.npy", vectors)
    np.save(work / "kinds.npy", kinds)
    np.save(work / "docs.npy", (np.arange(n) * DOCS // n).astype(np.int32))
    np.save(work / "queries.npy", queries)
    np.save(work / "append.npy", sample(APPEND))
    np.save(work / "append_kinds.npy", kinds_for(APPEND))
    np.save(work / "get100.npy", rng.choice(n, 100, replace=False))
    for kind in SEARCH_KINDS:
        rows = np.flatnonzero(kinds == KINDS.index(kind))
        scores = queries @ vectors[rows].T
        top = np.argsort(-scores, axis=1)[:, :10]
        np.save(work / f"truth_{kind}.npy", rows[top])


# ----------------------------------------------------------------------------- the candidates
# Each offers build (in memory), write(folder), open(folder) in a fresh process, search(kind, q,
# mode) -> global rows, get(rows, ids) -> matrix in row order or {id: vector}, kind(kind) -> matrix,
# append(vectors, kinds, rows) and delete(doc), both ending persisted, and count().

def sid(rows) -> list[str]:
    return [f"n{r}" for r in rows]


def save_synced(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as f:
        np.save(f, array)
        f.flush()
        os.fsync(f.fileno())


class KeyedIndexes:
    """FAISS and usearch: one index per kind, int64 keys = rows, row -> kind/doc side tables."""

    modules: tuple[str, ...] = ()
    suffix = ""

    def build(self, vectors, kinds, docs):
        self.kinds, self.docs, self.folder = kinds, docs, None
        self.index = {}
        for k, kind in enumerate(KINDS):
            rows = np.flatnonzero(kinds == k)
            self.index[kind] = self._new()
            self._add(kind, vectors[rows], rows)

    def _save(self, kind):
        tmp = self.folder / f"{kind}{self.suffix}.tmp"
        self._write_index(kind, tmp)
        os.replace(tmp, self.folder / f"{kind}{self.suffix}")

    def _save_tables(self):
        np.save(self.folder / "kinds.npy", self.kinds)
        np.save(self.folder / "docs.npy", self.docs)

    def write(self, folder):
        self.folder = folder
        self._save_tables()
        for kind in KINDS:
            self._save(kind)

    def open(self, folder):
        self.folder = folder
        self.kinds = np.load(folder / "kinds.npy", mmap_mode="r")
        self.docs = np.load(folder / "docs.npy", mmap_mode="r")
        self.index = {kind: self._read(folder / f"{kind}{self.suffix}", mapped=True)
                      for kind in KINDS}

    def get(self, rows, ids):
        out = np.empty((len(rows), DIM), np.float32)
        kinds = self.kinds[rows]
        for k in np.unique(kinds):
            mask = kinds == k
            out[mask] = self._get(KINDS[k], rows[mask])
        return out

    def append(self, vectors, kinds, rows):
        for k in np.unique(kinds):  # a mapped index cannot change: load it whole first
            kind, mask = KINDS[k], kinds == k
            self.index[kind] = self._read(self.folder / f"{kind}{self.suffix}", mapped=False)
            self._add(kind, vectors[mask], rows[mask])
            self._save(kind)
        self.kinds = np.concatenate([self.kinds, kinds])
        self.docs = np.concatenate([self.docs, np.full(len(rows), DOCS, np.int32)])
        self._save_tables()

    def delete(self, doc):
        rows = np.flatnonzero(self.docs == doc)
        for k in np.unique(self.kinds[rows]):
            kind = KINDS[k]
            self.index[kind] = self._read(self.folder / f"{kind}{self.suffix}", mapped=False)
            self._remove(kind, rows[self.kinds[rows] == k])
            self._save(kind)


class Faiss(KeyedIndexes):
    modules = ("faiss",)
    suffix = ".faiss"
    searches = ("exact",)

    def _new(self):
        import faiss
        return faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))

    def _add(self, kind, vectors, rows):
        self.index[kind].add_with_ids(vectors, rows.astype(np.int64))

    def _remove(self, kind, rows):
        import faiss
        self.index[kind].remove_ids(faiss.IDSelectorBatch(rows.astype(np.int64)))

    def _write_index(self, kind, path):
        import faiss
        faiss.write_index(self.index[kind], str(path))

    def _read(self, path, mapped):
        # IO_FLAG_MMAP still copies flat codes into anonymous memory; IO_FLAG_MMAP_IFC maps them
        # (but then add/remove abort the process: "This operation cannot be performed on a viewed
        # vector"), so writers reload without it.
        import faiss
        return faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC if mapped else 0)

    def search(self, kind, q, mode):
        return self.index[kind].search(q[None], 10)[1][0]

    def _get(self, kind, rows):
        return self.index[kind].reconstruct_batch(rows.astype(np.int64))

    def kind(self, kind):
        import faiss
        index = self.index[kind]
        return faiss.vector_to_array(index.id_map), index.index.reconstruct_n(0, index.ntotal)

    def count(self):
        return sum(index.ntotal for index in self.index.values())

    def probe(self):
        """Anonymous memory added by reading the largest kind with each mmap flag, each in a
        fresh process (in this one, freed heap would be reused and hide the copy)."""
        path = self.folder / f"mention{self.suffix}"
        out = {"file_mb": path.stat().st_size / 1e6}
        for flag in ("IO_FLAG_MMAP", "IO_FLAG_MMAP_IFC"):
            code = ("import faiss; from benchmarks.vector_storage import rss_mb\n"
                    "before = rss_mb()['RssAnon']\n"
                    f"index = faiss.read_index({str(path)!r}, faiss.{flag})\n"
                    "print(rss_mb()['RssAnon'] - before)")
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  cwd=Path(__file__).resolve().parents[1], check=True)
            out[f"{flag}_anon_mb"] = float(proc.stdout)
        return out


class Usearch(KeyedIndexes):
    modules = ("usearch.index",)
    suffix = ".usearch"
    searches = ("exact", "hnsw")

    def __init__(self, dtype):
        self.dtype = dtype

    def _new(self):
        from usearch.index import Index
        return Index(ndim=DIM, metric="ip", dtype=self.dtype)

    def _add(self, kind, vectors, rows):
        self.index[kind].add(rows, vectors, threads=os.cpu_count())

    def _remove(self, kind, rows):
        self.index[kind].remove(rows)

    def _write_index(self, kind, path):
        self.index[kind].save(str(path))

    def _read(self, path, mapped):
        from usearch.index import Index
        return Index.restore(str(path), view=mapped)

    def search(self, kind, q, mode):
        return self.index[kind].search(q, 10, exact=mode == "exact").keys

    def _get(self, kind, rows):
        return np.vstack(self.index[kind].get(rows, dtype=np.float32))

    def kind(self, kind):
        index = self.index[kind]
        return index.keys, index.vectors

    def count(self):
        return sum(len(index) for index in self.index.values())


class Lance:
    modules = ("lancedb", "pyarrow")
    searches = ("exact",)

    @staticmethod
    def _arrow(vectors, kinds, docs, rows):
        import pyarrow as pa
        return pa.table({
            "id": pa.array(sid(rows)), "kind": pa.array(np.array(KINDS)[kinds]),
            "doc_id": pa.array([f"d{d:03d}" for d in docs]),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM)})

    def build(self, vectors, kinds, docs):
        self.arrow = self._arrow(vectors, kinds, docs, np.arange(len(vectors)))

    def write(self, folder):
        import lancedb
        self.table = lancedb.connect(folder).create_table("vectors", self.arrow)

    def open(self, folder):
        import lancedb
        self.table = lancedb.connect(folder).open_table("vectors")

    def search(self, kind, q, mode):  # no vector index on the table: brute force, prefiltered
        hits = (self.table.search(q).distance_type("dot").where(f"kind = '{kind}'", prefilter=True)
                .select(["id"]).limit(10).to_arrow())
        return [int(i[1:]) for i in hits["id"].to_pylist()]

    def _matrix(self, where):
        got = self.table.search().where(where).select(["id", "vector"]).limit(None).to_arrow()
        vectors = got["vector"].combine_chunks().values.to_numpy().reshape(-1, DIM)
        return got["id"].to_pylist(), vectors

    def get(self, rows, ids):
        quoted = ",".join(f"'{i}'" for i in ids)
        found, vectors = self._matrix(f"id IN ({quoted})")
        return dict(zip(found, vectors))

    def kind(self, kind):
        return self._matrix(f"kind = '{kind}'")

    def append(self, vectors, kinds, rows):
        self.table.add(self._arrow(vectors, kinds, np.full(len(rows), DOCS), rows))

    def delete(self, doc):
        self.table.delete(f"doc_id = 'd{doc:03d}'")

    def count(self):
        return self.table.count_rows()


class NumpyFiles:
    """The baseline: per kind a ``.npy`` matrix (memory-mapped), ids in JSON, a manifest; append
    writes a new segment file per kind, delete writes a tombstone file of dead rows."""

    modules = ()
    searches = ("exact",)

    def build(self, vectors, kinds, docs):
        self.parts = {}
        for k, kind in enumerate(KINDS):
            rows = np.flatnonzero(kinds == k)
            self.parts[kind] = [(vectors[rows], sid(rows), docs[rows])]

    def _manifest(self):
        tmp = self.folder / "manifest.json.tmp"
        with open(tmp, "w") as f:
            json.dump({kind: len(parts) for kind, parts in self.parts.items()}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.folder / "manifest.json")

    def _write_part(self, kind, number, vectors, ids, docs):
        save_synced(self.folder / f"{kind}.{number}.npy", vectors)
        save_synced(self.folder / f"{kind}.{number}.docs.npy", docs)
        (self.folder / f"{kind}.{number}.json").write_text(json.dumps(ids))

    def write(self, folder):
        self.folder = folder
        for kind, [(vectors, ids, docs)] in self.parts.items():
            self._write_part(kind, 0, vectors, ids, docs)
        self._manifest()

    def open(self, folder):
        self.folder, self.dead = folder, 0
        manifest = json.loads((folder / "manifest.json").read_text())
        self.parts, self.where = {}, {}
        for kind, count in manifest.items():
            self.parts[kind] = []
            for number in range(count):
                ids = json.loads((folder / f"{kind}.{number}.json").read_text())
                self.parts[kind].append((np.load(folder / f"{kind}.{number}.npy", mmap_mode="r"),
                                         ids, np.load(folder / f"{kind}.{number}.docs.npy")))
                self.where.update((i, (kind, row)) for row, i in enumerate(ids))

    def search(self, kind, q, mode):
        vectors, ids, _ = self.parts[kind][0]
        scores = vectors @ q
        top = np.argpartition(-scores, 10)[:10]
        return [int(ids[i][1:]) for i in top[np.argsort(-scores[top])]]

    def get(self, rows, ids):
        where = [self.where[i] for i in ids]
        out = np.empty((len(ids), DIM), np.float32)
        by_kind: dict[str, tuple[list, list]] = {}
        for position, (kind, row) in enumerate(where):
            by_kind.setdefault(kind, ([], []))
            by_kind[kind][0].append(position)
            by_kind[kind][1].append(row)
        for kind, (positions, kind_rows) in by_kind.items():
            out[positions] = self.parts[kind][0][0][kind_rows]
        return out

    def kind(self, kind):
        vectors, ids, _ = self.parts[kind][0]
        return ids, vectors

    def append(self, vectors, kinds, rows):
        for k in np.unique(kinds):
            kind, mask = KINDS[k], kinds == k
            self.parts[kind].append((vectors[mask], sid(rows[mask]),
                                     np.full(int(mask.sum()), DOCS, np.int32)))
            self._write_part(kind, len(self.parts[kind]) - 1, *self.parts[kind][-1])
        self._manifest()

    def delete(self, doc):
        for kind, parts in self.parts.items():
            for number, (_, _, docs) in enumerate(parts):
                dead = np.flatnonzero(docs == doc).astype(np.int32)
                if len(dead):
                    save_synced(self.folder / f"{kind}.{number}.dead.npy", dead)
                    self.dead += len(dead)
        self._manifest()

    def count(self):
        return sum(len(ids) for parts in self.parts.values() for _, ids, _ in parts) - self.dead


class Embedded:
    """``llama_index_e2rag.vectors.embedded.EmbeddedVectors``, the implementation chosen."""

    modules = ("llama_index_e2rag.vectors.embedded",)
    searches = ("exact",)

    @staticmethod
    def _records(vectors, kinds, docs, rows):
        from llama_index_e2rag.vectors.base import VectorRecord
        return [VectorRecord(f"n{r}", KINDS[k], f"d{d:03d}", "", v)
                for r, k, d, v in zip(rows, kinds, docs, vectors)]

    def build(self, vectors, kinds, docs):
        from llama_index_e2rag.vectors.embedded import EmbeddedVectors
        self.store = EmbeddedVectors()
        self.store.add(self._records(vectors, kinds, docs, range(len(vectors))))

    def write(self, folder):
        self.folder = folder
        self.store.persist(folder)

    def open(self, folder):
        from llama_index_e2rag.vectors.embedded import EmbeddedVectors
        self.folder, self.store = folder, EmbeddedVectors.open(folder)

    def search(self, kind, q, mode):
        return [int(hit.id[1:]) for hit in self.store.search(kind, q, 10)]

    def get(self, rows, ids):
        return self.store.get_embeddings(ids)

    def kind(self, kind):
        return self.store.kind_matrix(kind)

    def append(self, vectors, kinds, rows):
        self.store.add(self._records(vectors, kinds, np.full(len(rows), DOCS), rows))
        self.store.persist(self.folder)

    def delete(self, doc):
        self.store.delete_doc(f"d{doc:03d}")
        self.store.persist(self.folder)

    def count(self):
        return self.store.count()


def make_store(name: str):
    return {"faiss": Faiss, "usearch-f32": lambda: Usearch("f32"),
            "usearch-f16": lambda: Usearch("f16"), "lancedb": Lance, "numpy": NumpyFiles,
            "embedded": Embedded}[name]()


# ----------------------------------------------------------------------------- the two phases

def timed(fn, repeat: int = 1) -> tuple[float, Any]:
    """Median seconds over ``repeat`` calls and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), result


def build_phase(name: str, work: Path, folder: Path) -> dict[str, Any]:
    vectors, kinds = np.load(work / "vectors.npy"), np.load(work / "kinds.npy")
    docs = np.load(work / "docs.npy")
    store = make_store(name)
    build_s, _ = timed(lambda: store.build(vectors, kinds, docs))
    write_s, _ = timed(lambda: store.write(folder))
    return {"build_s": build_s, "write_s": write_s, "disk_mb": disk_bytes(folder) / 1e6}


def as_matrix(result, ids) -> np.ndarray:
    return result if isinstance(result, np.ndarray) else np.stack([result[i] for i in ids])


def open_phase(name: str, work: Path, folder: Path) -> dict[str, Any]:
    import importlib
    out: dict[str, Any] = {}
    store = make_store(name)
    out["import_s"], _ = timed(lambda: [importlib.import_module(m) for m in store.modules])
    out["rss_before_open"] = rss_mb()
    out["open_s"], _ = timed(lambda: store.open(folder))
    out["rss_open"] = rss_mb()
    queries = np.load(work / "queries.npy")
    for kind in SEARCH_KINDS:
        truth = np.load(work / f"truth_{kind}.npy")
        for mode in store.searches:
            for q in queries[:5]:
                store.search(kind, q, mode)
            times, recall = [], []
            for q, expected in zip(queries, truth):
                start = time.perf_counter()
                got = store.search(kind, q, mode)
                times.append(time.perf_counter() - start)
                recall.append(len(set(map(int, got)) & set(expected.tolist())) / 10)
            out[f"search_{kind}_{mode}"] = {"p50_ms": 1e3 * float(np.percentile(times, 50)),
                                            "p95_ms": 1e3 * float(np.percentile(times, 95)),
                                            "recall": float(np.mean(recall))}
    out["rss_search"] = rss_mb()
    vectors = np.load(work / "vectors.npy", mmap_mode="r")
    kinds = np.load(work / "kinds.npy")
    rows = np.load(work / "get100.npy")
    out["get100_ms"], got = timed(lambda: store.get(rows, sid(rows)), repeat=5)
    out["get100_ms"] *= 1e3
    out["get_max_err"] = float(np.abs(as_matrix(got, sid(rows)) - vectors[rows]).max())
    rows = np.flatnonzero(kinds == KINDS.index("passage"))
    ids = sid(rows)
    out["get_passages_ms"], _ = timed(lambda: store.get(rows, ids), repeat=3)
    out["get_passages_ms"] *= 1e3
    out["kind_passages_ms"], _ = timed(lambda: float(np.sum(store.kind("passage")[1])), repeat=3)
    out["kind_passages_ms"] *= 1e3
    out["rss_get"] = rss_mb()
    n = len(vectors)
    new_rows = np.arange(n, n + APPEND)
    new_vectors, new_kinds = np.load(work / "append.npy"), np.load(work / "append_kinds.npy")
    before = folder_files(folder)
    out["append_s"], _ = timed(lambda: store.append(new_vectors, new_kinds, new_rows))
    after = folder_files(folder)
    out["append_written_mb"] = written_bytes(before, after) / 1e6
    out["delete_s"], _ = timed(lambda: store.delete(42))
    out["delete_written_mb"] = written_bytes(after, folder_files(folder)) / 1e6
    deleted = int(np.sum(np.load(work / "docs.npy") == 42))
    out["count_ok"] = store.count() == n + APPEND - deleted
    out["disk_after_mb"] = disk_bytes(folder) / 1e6
    if hasattr(store, "probe"):
        out["probe"] = store.probe()
    return out


def run_child(args: list[str], timeout: float) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.vector_storage", *args],
                          capture_output=True, text=True, timeout=timeout,
                          cwd=Path(__file__).resolve().parents[1])
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else
                f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- the report

def _cell(value: Any, fmt: str = "{:.3g}") -> str:
    return "–" if value is None else fmt.format(value)


def _search_cell(row: dict, key: str) -> tuple[str, str]:
    hit = row.get(key)
    if not hit:
        return "–", "–"
    return f"{hit['p50_ms']:.2f} / {hit['p95_ms']:.2f}", f"{hit['recall']:.3f}"


def table(results: dict[str, dict[str, Any]]) -> str:
    names = list(results)
    rows: list[tuple[str, list[str]]] = []

    def add(label: str, fn) -> None:
        cells = []
        for name in names:
            r = results[name]
            try:
                cells.append(fn(r))
            except (KeyError, TypeError):
                cells.append("–")
        rows.append((label, cells))

    add("added install (MB)", lambda r: f"{r['install_mb']:.0f}")
    add("build in memory (s)", lambda r: _cell(r["build_s"]))
    add("write to disk (s)", lambda r: _cell(r["write_s"]))
    add("size on disk (MB)", lambda r: f"{r['disk_mb']:.0f}")
    add("import, fresh process (s)", lambda r: f"{r['import_s']:.3f}")
    add("open (s)", lambda r: _cell(r["open_s"]))
    add("RSS after open: total / anon (MB)",
        lambda r: f"{r['rss_open']['VmRSS']:.0f} / {r['rss_open']['RssAnon']:.0f}")
    for kind in SEARCH_KINDS:
        for mode in ("exact", "hnsw"):
            add(f"search {kind} {mode} p50 / p95 (ms)",
                lambda r, k=f"search_{kind}_{mode}": _search_cell(r, k)[0])
            add(f"recall@10 {kind} {mode}",
                lambda r, k=f"search_{kind}_{mode}": _search_cell(r, k)[1])
    add("RSS after 2×205 searches: total / anon (MB)",
        lambda r: f"{r['rss_search']['VmRSS']:.0f} / {r['rss_search']['RssAnon']:.0f}")
    add("get 100 random ids (ms)", lambda r: _cell(r["get100_ms"]))
    add("get all passage ids (ms)", lambda r: _cell(r["get_passages_ms"]))
    add("whole passage kind, ids + matrix (ms)", lambda r: _cell(r["kind_passages_ms"]))
    add("max abs error of got vectors", lambda r: _cell(r["get_max_err"], "{:.1e}"))
    add("RSS after gets: total / anon (MB)",
        lambda r: f"{r['rss_get']['VmRSS']:.0f} / {r['rss_get']['RssAnon']:.0f}")
    add(f"append {APPEND:,} + persist: s / MB written",
        lambda r: f"{r['append_s']:.3g} / {r['append_written_mb']:.1f}")
    add("delete 1 doc (1%) + persist: s / MB written",
        lambda r: f"{r['delete_s']:.3g} / {r['delete_written_mb']:.2f}")
    add("size on disk after both (MB)", lambda r: f"{r['disk_after_mb']:.0f}")
    add("counts right after both", lambda r: "yes" if r["count_ok"] else "NO")
    add("a kill during persist leaves old or new state", lambda r: r["crash_safe"])
    lines = ["| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    errors = [f"- {name}: {r['error']}" for name, r in results.items() if "error" in r]
    return "\n".join(lines + ([""] + errors if errors else []))


def versions() -> str:
    found = []
    for dist in ("numpy", "faiss-cpu", "usearch", "lancedb", "pyarrow"):
        try:
            found.append(f"{dist} {md.version(dist)}")
        except md.PackageNotFoundError:
            found.append(f"{dist} (not installed)")
    return ", ".join(found)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/vs.md"))
    parser.add_argument("--sizes", default="25000,260000")
    parser.add_argument("--only", default=",".join(CANDIDATES))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--phase", choices=("build", "open"), help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        phase = build_phase if args.phase == "build" else open_phase
        print(json.dumps(phase(args.child, args.work, args.folder)))
        return
    sections = [f"# Vector storage candidates\n\nd={DIM}, {CENTROIDS} clusters, {QUERIES} queries, "
                f"{os.cpu_count()} cores; {versions()}.\n"]
    probes = []
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="vs-") as tmp:
            work = Path(tmp)
            make_data(n, work)
            results: dict[str, dict[str, Any]] = {}
            for name in args.only.split(","):
                folder = work / name
                folder.mkdir()
                common = ["--child", name, "--work", str(work), "--folder", str(folder)]
                started = time.perf_counter()
                result = run_child([*common, "--phase", "build"], timeout=600)
                if "error" not in result:
                    result.update(run_child([*common, "--phase", "open"], timeout=600))
                result["install_mb"] = installed_mb(DEPENDENCIES[name])
                result["crash_safe"] = CRASH_SAFE[name]
                results[name] = result
                if "probe" in result:
                    probes.append((n, result["probe"]))
                print(f"N={n:,} {name}: {time.perf_counter() - started:.1f}s "
                      f"{result.get('error', '')}", file=sys.stderr)
                shutil.rmtree(folder, ignore_errors=True)
        sections.append(f"## N = {n:,}\n\n{table(results)}\n")
    for n, probe in probes:
        sections.append(
            f"FAISS mmap probe at N={n:,}: reading `mention.faiss` ({probe['file_mb']:.0f} MB) "
            f"with IO_FLAG_MMAP grew anonymous memory by {probe['IO_FLAG_MMAP_anon_mb']:.0f} MB, "
            f"with IO_FLAG_MMAP_IFC by {probe['IO_FLAG_MMAP_IFC_anon_mb']:.0f} MB.\n")
    args.out.write_text("\n".join(sections))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
