"""Is a persisted store whole? The checks made when it is opened, the light check of ``e2rag
show`` and the full check of ``e2rag show --check`` and ``e2rag repair``.

Opening an index checks the checksummed JSON files (``checksums``), the vector files against
their manifest (inside ``EmbeddedVectors.open``), and each document's vector count per kind
against the record the graph committed with it. ``e2rag show``'s light check (``light_check``)
reads no row and no byte that grows with the store: every file has the size it was saved with
(a file cut short or missing is found; one changed in place at the same size is not), and the
vector counts the manifest recorded match the graph's records. The full check (``full_check``)
adds every file's checksum, SQLite's page check and each document's row digest and counts,
which read the whole store. Every problem is one line naming the file and the fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from llama_index_e2rag.disk.checksums import E2RAG_DIR, Checksums
from llama_index_e2rag.errors import StoreDamagedError

if TYPE_CHECKING:
    from llama_index_e2rag.graph.base import GraphStore
    from llama_index_e2rag.stores.port import Stores

#: llama-index files an E2RAGIndex reads; the others are written for llama-index's loader only.
USED_FILES = ("docstore.json", "index_store.json", "graph_store.json")


def hint(persist_dir: Path) -> str:
    return f"run: e2rag repair --store {persist_dir}"


def file_problem(
    persist_dir: Path, name: str, sums: Optional[Checksums] = None, full: bool = True
) -> Optional[str]:
    """Why JSON file ``name`` of the store cannot be used (missing, changed since it was
    saved, not JSON), or None; not ``full``: judged by its size, not read."""
    path = persist_dir / name
    problem = (sums or Checksums(persist_dir)).check(name, full)
    if problem is None and not path.is_file():
        problem = f"{path} is missing"
    if problem is None and full:
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problem = f"{path} is not readable JSON ({exc})"
    return problem


def check_files(persist_dir: Path, names: tuple[str, ...] = USED_FILES) -> None:
    """Refuse a store whose used JSON files are not what its last save wrote."""
    sums = Checksums(persist_dir)
    for name in names:
        problem = file_problem(persist_dir, name, sums)
        if problem is not None:
            raise StoreDamagedError(f"{problem}; {hint(persist_dir)}")


def short_vectors(
    records: dict[str, dict], have: dict[str, dict[str, int]]
) -> dict[str, int]:
    """Per kind, how many vectors the documents' records expect but ``have`` (per document and
    kind) lacks; more than expected is fine (left-overs of an interrupted write)."""
    missing: dict[str, int] = {}
    for doc_id, record in records.items():
        for kind, expected in (record.get("vectors") or {}).items():
            short = expected - have.get(doc_id, {}).get(kind, 0)
            if short > 0:
                missing[kind] = missing.get(kind, 0) + short
    return missing


def missing_vectors(stores: "Stores") -> dict[str, int]:
    """Per kind, how many vectors the graph's document records expect but storage lacks."""
    counts = getattr(stores.vectors, "doc_counts", None)
    if counts is None or stores.vector_copy is not None:
        return {}  # a server-side store: its count is not checked on open
    return short_vectors(stores.graph.doc_records(), counts())


def changed_documents(graph: "GraphStore") -> list[str]:
    """Documents whose rows no longer match the digest (and counts) committed with them."""
    changed = []
    for doc, record in graph.doc_records().items():
        if record.get("rows"):
            seal = graph.doc_seal(doc)
            if seal["rows"] != record["rows"] or record.get("counts", seal["counts"]) != seal[
                "counts"
            ]:
                changed.append(doc)
    return sorted(changed)


def check_counts(stores: "Stores", persist_dir: Path) -> None:
    """Refuse a store whose vectors are fewer than its graph committed."""
    missing = missing_vectors(stores)
    if missing:
        what = ", ".join(f"{n} {kind}" for kind, n in sorted(missing.items()))
        raise StoreDamagedError(
            f"{persist_dir / E2RAG_DIR / 'vectors'} lacks vectors its graph committed ({what}); "
            f"{hint(persist_dir)}"
        )


@dataclass
class StoreHealth:
    """What the full check found: ``problems`` make the store unusable until repaired;
    ``notes`` are harmless (left-overs of an interrupted write, derived files)."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: False when the graph database is missing or SQLite finds it damaged
    graph_usable: bool = True

    @property
    def ok(self) -> bool:
        return not self.problems


def full_check(persist_dir: Path) -> StoreHealth:
    """Every file of a store, every row of its graph, without llama-index or a model
    (``e2rag show --check``, ``repair``)."""
    return _health(persist_dir, full=True)


def light_check(persist_dir: Path) -> StoreHealth:
    """What ``e2rag show`` checks, without llama-index or a model: every JSON and vector file
    has the size it was saved with, each document's vector counts (as the vector manifest
    recorded them) against its record. Cheap at any size: no row of the graph or the vectors
    is read, no file checksummed."""
    return _health(persist_dir, full=False)


def _health(persist_dir: Path, full: bool) -> StoreHealth:
    # deferred: networkx and pydantic (the graph stores), numpy (the vectors), ~0.7 s
    from llama_index_e2rag.graph.sqlite_store import GRAPH_FILE, SQLiteGraphStore

    health = StoreHealth()
    persist_dir = Path(persist_dir)
    home = persist_dir / E2RAG_DIR
    sums = Checksums(persist_dir)
    if sums.path.exists() and not sums.read():
        health.notes.append(f"{sums.path} is unreadable: the JSON files are not checked")
    for name in sorted(set(USED_FILES) | set(sums.names())):
        problem = file_problem(persist_dir, name, sums, full)
        if problem is not None:
            (health.problems if name in USED_FILES else health.notes).append(problem)
    graph_path = home / GRAPH_FILE
    graph: Optional[SQLiteGraphStore] = None
    if not graph_path.is_file():
        health.problems.append(f"{graph_path} is missing")
        health.graph_usable = False
    else:
        problem = None
        try:
            graph = SQLiteGraphStore.open_existing(graph_path, hint(persist_dir))
            problem = graph.quick_check() if full else None
            if problem is not None:
                health.problems.append(f"{graph_path} is damaged ({problem})")
        except StoreDamagedError as exc:
            problem = str(exc)
            health.problems.append(problem)
        if problem is not None:
            health.graph_usable = False
            if graph is not None:
                graph.close()
            graph = None
    damaged, have = _vector_counts(home / "vectors", full, health)
    health.problems.extend(f"{home / 'vectors'}: {d}" for d in damaged)
    if graph is not None:
        try:
            _check_graph_against(graph, have, damaged, health, home, full)
        except StoreDamagedError as exc:
            health.problems.append(str(exc))
        finally:
            graph.close()
    return health


def _vector_counts(
    folder: Path, full: bool, health: StoreHealth
) -> tuple[list[str], dict[str, dict[str, int]]]:
    """The damaged vector files and the live vectors per document and kind: from the manifest
    (light), else from opening the folder (every file checksummed, every id read)."""
    # deferred: numpy (the vectors), as above
    from llama_index_e2rag.vectors.embedded import EmbeddedVectors
    from llama_index_e2rag.vectors.embedded_survey import survey

    if not full:
        glance = survey(folder)
        if glance.doc_counts is not None or glance.damaged:
            return glance.damaged, glance.doc_counts or {}
        health.notes.append(
            "vector counts read from every vector file (saved before the vector manifest "
            "recorded them; the next save records them)"
        )
    vectors = EmbeddedVectors.open(folder, salvage=True)
    return vectors.damaged, vectors.doc_counts()


def _check_graph_against(
    graph, have: dict[str, dict[str, int]], damaged: list[str], health: StoreHealth,
    home: Path, full: bool,
) -> None:
    """Vector counts of every document against its committed record; ``full``: row digests
    and counts too (they read the whole graph)."""
    records = graph.doc_records()
    orders = graph.doc_orders()
    changed = changed_documents(graph) if full else []
    if changed:
        health.problems.append(
            f"{home / 'graph.sqlite'}: the rows of {len(changed)} document(s) changed since "
            f"they were committed ({', '.join(changed[:3])})"
        )
    short = short_vectors(records, have)
    if short and not damaged:
        what = ", ".join(f"{n} {kind}" for kind, n in sorted(short.items()))
        health.problems.append(f"{home / 'vectors'} lacks vectors its graph committed ({what})")
    unrecorded = sorted(set(orders) - set(records))
    if unrecorded:
        health.notes.append(
            f"{len(unrecorded)} document(s) were saved before document records existed; their "
            "vector counts are not checked (e2rag repair records them)"
        )
    orphans = sorted(set(have) - set(orders))
    if orphans:
        health.notes.append(
            f"vectors of {len(orphans)} document(s) the graph does not hold (left by an "
            "interrupted write; harmless; e2rag repair removes them)"
        )
