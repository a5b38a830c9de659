"""A matrix's HNSW graph saved beside the read model it serves, updated by a write.

FAISS's HNSW graph cannot delete a node, and building one costs ~80 s CPU at 144k rows, 846 s
at 1.4M: rebuilding it on every write would make indexing one document into a large story cost
minutes. So the saved graph names its nodes by row id and is brought to the current rows:

- a row whose id is not in the graph (or whose vector changed) is added as a new node;
- a node whose row is gone (or changed) stays in the graph, dead: searches walk through it but
  never return it (``NearestRows.nodes`` maps it to -1);
- past ``MAX_DEAD_SHARE`` dead nodes the graph is built again from the current rows alone.

A write thus costs about its own size (plus rewriting the file). A node's row is matched by its
id and a fingerprint of its vector (two fixed projections), so the same id with another vector
(a document re-embedded by another model) is a new node. The file is saved first, then a JSON
head naming its size and CRC-32, each replaced atomically; a head that does not match its file
(a crash between the two renames, a damaged or truncated file) means a rebuild, never a use.
"""

from __future__ import annotations

import base64
import importlib.util
import logging
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from llama_index_e2rag.background import check
from llama_index_e2rag.disk import array_files
from llama_index_e2rag.vectors import nearest
from llama_index_e2rag.vectors.nearest import NearestRows, one_thread

logger = logging.getLogger(__name__)

#: Bumped when the file's parameters or its head change: an older file is rebuilt.
FORMAT = 3
#: Share of dead nodes past which a graph is built again rather than updated (the over-walk
#: of dead nodes costs a search little below it; the embedded vectors compact at the same share).
MAX_DEAD_SHARE = 0.2
#: Rows added to a graph (and fingerprinted) per call: a block's float32 copy is 48 MB at 384-d.
ADD_ROWS = 32_768
#: A row's fingerprint: its products with these fixed directions, equal within ``_PRINT_TOL``.
_PRINT_DIRECTIONS, _PRINT_TOL = 2, 1e-4


def build_graph(matrix: np.ndarray) -> Any:
    """An HNSW graph of the rows (FAISS ids: row numbers), built on one thread, ``ADD_ROWS``
    rows at a time (``_blocks``).

    It keeps each row as 8-bit codes (a byte a dimension, the range trained per dimension):
    528 bytes a row with its links against 912 with fp16 codes, for the same recall@10 at
    143,600 rows (0.998 vs 0.997, ``latency-growth.md``). A 10M-word library's graphs hold
    millions of rows, and the rows a graph proposes are rescored exactly anyway."""
    import faiss  # deferred: only stores past ANN_MIN_ROWS rows need it

    graph = faiss.IndexHNSWSQ(int(matrix.shape[1]), faiss.ScalarQuantizer.QT_8bit,
                              nearest.CONNECTIVITY, faiss.METRIC_INNER_PRODUCT)
    graph.hnsw.efConstruction = nearest.EXPANSION_ADD
    with one_thread():
        graph.train(next(_blocks(matrix[: min(len(matrix), 10_000)])))
        for block in _blocks(matrix):
            check()  # a stopped build (Ctrl-C) ends between blocks
            graph.add(block)
    graph.hnsw.efSearch = nearest.EXPANSION_SEARCH
    return graph


def _blocks(matrix: np.ndarray) -> Iterator[np.ndarray]:
    """The rows as float32 copies of ``ADD_ROWS`` rows, the matrix's file pages let go after
    each (``array_files.drop_pages``): FAISS reads a row added in one call until that call
    ends, so one call over a mapped matrix held all of its pages (a block, not the 445 MB of
    the grounded matrix at 1M words). A graph built by blocks is not the one a single call
    builds (each call inserts its rows by level), but the same rows give the same graph."""
    for start in range(0, max(len(matrix), 1), ADD_ROWS):
        block = np.array(matrix[start : start + ADD_ROWS], dtype=np.float32, order="C")
        array_files.drop_pages(matrix)
        yield block


def fingerprints(matrix: np.ndarray) -> np.ndarray:
    """Each row's products with fixed pseudo-random directions (one pass over the matrix)."""
    directions = np.random.default_rng(0).standard_normal((matrix.shape[1], _PRINT_DIRECTIONS))
    directions = directions.astype(np.float32)
    parts = [np.asarray(block @ directions, dtype=np.float32) for block in _blocks(matrix)]
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


class _Saved:
    """A graph read back: its FAISS index, each node's row id (None: dead) and fingerprint."""

    def __init__(self, graph: Any, ids: list[Optional[str]], prints: np.ndarray) -> None:
        self.graph, self.ids, self.prints = graph, ids, prints


def _load(path: Path, dim: int) -> Optional[_Saved]:
    """The saved graph of ``path`` when its head names this format, ``dim`` and this file."""
    import faiss  # deferred: as above

    try:
        head = array_files.read_head(path)
        if (head.get("format"), head.get("dim")) != (FORMAT, dim):
            return None
        ids = head["ids"]
        prints = np.frombuffer(base64.b64decode(head["prints"]), "<f4").reshape(len(ids), -1)
        with array_files.checked(path, head["sum"]) as f:  # read: the very file summed
            graph = faiss.read_index(faiss.PyCallbackIOReader(f.read))
    except array_files.ChecksumMismatch:
        logger.warning("%s does not match its head; the search graph is rebuilt", path)
        return None
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as exc:
        logger.warning("%s is unreadable (%s); the search graph is rebuilt", path, exc)
        return None
    if graph.ntotal != len(ids) or graph.d != dim or prints.shape[1] != _PRINT_DIRECTIONS:
        return None
    graph.hnsw.efSearch = nearest.EXPANSION_SEARCH  # read_index gives the HNSW class itself
    return _Saved(graph, ids, prints)


def _save(path: Path, saved: _Saved) -> None:
    """The graph file, then its head (a crash between them leaves a head that names another
    file: rebuilt). A folder that cannot be written only costs the next process the build."""
    try:
        import faiss  # deferred: as above

        prints = base64.b64encode(saved.prints.astype("<f4").tobytes()).decode()
        array_files.save_with_head(
            path, lambda tmp: faiss.write_index(saved.graph, str(tmp)),
            lambda sum_: {"format": FORMAT, "dim": int(saved.graph.d), "sum": sum_,
                          "ids": saved.ids, "prints": prints})
    except OSError as exc:
        logger.info("the search graph was not saved in %s (%s)", path, exc)


def _fresh(matrix: np.ndarray, ids: Sequence[str], prints: np.ndarray) -> _Saved:
    return _Saved(build_graph(matrix), list(ids), prints)


def _updated(
    saved: _Saved, matrix: np.ndarray, ids: Sequence[str], prints: np.ndarray
) -> tuple[Optional[_Saved], np.ndarray]:
    """``saved`` brought to the current rows, with each node's row (-1: dead); None (and no
    rows) when it would hold more than ``MAX_DEAD_SHARE`` dead nodes. The graph is unchanged,
    and not copied, when the rows are those it holds."""
    if saved.ids == ids:  # the rows the graph was saved for, in the same order
        nodes = np.arange(len(ids))
    else:
        row_of = {node_id: row for row, node_id in enumerate(ids)}
        nodes = np.asarray([row_of.get(i, -1) for i in saved.ids], dtype=np.int64)
    live = nodes >= 0
    changed = np.abs(saved.prints[live] - prints[nodes[live]]).max(axis=1, initial=0.0)
    nodes[np.flatnonzero(live)[changed > _PRINT_TOL]] = -1
    covered = np.zeros(len(ids), bool)
    covered[nodes[nodes >= 0]] = True
    added = np.flatnonzero(~covered)
    total = len(nodes) + len(added)
    if np.count_nonzero(nodes < 0) > MAX_DEAD_SHARE * total:
        return None, nodes
    if len(added):
        with one_thread():
            for start in range(0, len(added), ADD_ROWS):
                check()  # as in build_graph
                saved.graph.add(np.ascontiguousarray(
                    matrix[added[start : start + ADD_ROWS]], dtype=np.float32))
                array_files.drop_pages(matrix)
        nodes = np.concatenate([nodes, added])
        saved.prints = np.concatenate([saved.prints, prints[added]])
    saved.ids = [ids[r] if r >= 0 else None for r in nodes.tolist()]
    return saved, nodes


def open_nearest(
    matrix: np.ndarray, ids: Sequence[str], path: Optional[Path]
) -> NearestRows:
    """``NearestRows`` of ``matrix`` (row ``r`` has id ``ids[r]``): exact below ``ANN_MIN_ROWS``
    rows; else through the graph saved at ``path``, updated to these rows (and saved again)
    when they changed, built when it is missing, damaged or too dead."""
    if matrix.shape[0] < nearest.ANN_MIN_ROWS or not matrix.shape[1]:
        return NearestRows(matrix)
    if importlib.util.find_spec("faiss") is None:  # a dependency; a platform without it
        logger.warning("faiss is not installed: %d rows are searched exactly", len(matrix))
        return NearestRows(matrix)
    prints = fingerprints(matrix)
    saved = _load(path, int(matrix.shape[1])) if path is not None and path.is_file() else None
    if saved is not None:
        before = saved.ids
        saved, nodes = _updated(saved, matrix, ids, prints)
        if saved is not None and saved.ids == before:
            return NearestRows(matrix, saved.graph, nodes)
    if saved is None:
        saved, nodes = _fresh(matrix, ids, prints), np.arange(len(matrix))
    if path is not None:
        _save(path, saved)
    return NearestRows(matrix, saved.graph, nodes)
