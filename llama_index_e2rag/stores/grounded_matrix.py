"""The ``grounded`` mode's default node matrix on disk, memory-mapped by the next process.

The matrix (``basic`` embeddings at the retriever's default α, one row per mention and event
node) is derived from the stored vectors of every node and of every sentence one is grounded
in: at 1M words ~290k rows, ~40 s of the first ``grounded`` query after a load. It depends only
on the content, so it is written per content state to ``e2rag/readmodels/grounded-basic.f32``
(raw little-endian float32 rows) with a JSON head ``grounded-basic.f32.json`` naming the content
key, α, the shape and the file's size and CRC-32 (the file is replaced first, then its head,
each atomically; a head that does not name the file, a stale key or a damaged file means: derive
it again). ``e2rag index`` writes it after indexing; otherwise the first query after a write.

It is derived a page of nodes at a time (their name vectors and the vectors of the texts they
are grounded in), so a build's memory does not grow with the document; the rows are those of
``basic_embeddings`` over the whole state, to the bit (every step is row by row). A store of
``ANN_MIN_ROWS`` nodes or more also keeps an HNSW graph of it beside it
(``grounded-basic.hnsw``, ``vectors.nearest_graph``), updated by a write.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Hashable, Iterable, Optional

import numpy as np

from llama_index_e2rag.disk import array_files
from llama_index_e2rag.stores import read_model_file

logger = logging.getLogger(__name__)

#: The matrix's rows, raw float32, and its JSON head beside it (``.json`` appended).
MATRIX_FILE = "grounded-basic.f32"
#: The HNSW graph of the matrix, for stores of ``ANN_MIN_ROWS`` nodes or more.
SEARCH_FILE = "grounded-basic.hnsw"
#: Bumped when the encoding or what the matrix holds changes: an older file is derived again.
FORMAT = 1
#: The α of the persisted matrix: the retriever's default (other α are derived per query).
DEFAULT_ALPHA = 0.5
#: Nodes derived at once: bounds the build's memory (a page's names, texts and intermediates).
PAGE_ROWS = 8192


def widened(rows: np.ndarray, dim: int) -> np.ndarray:
    """``rows`` with ``dim`` columns: a page of ids none of which has a vector has none."""
    return rows if rows.shape[1] == dim else np.zeros((len(rows), dim), np.float32)


def content_key(stores: read_model_file.Stores, state: Hashable) -> str:
    """The graph's content key (its version moves with every committed write, vectors
    included) and the matrix's α."""
    return f"{read_model_file.content_key(stores, state, FORMAT)}:{DEFAULT_ALPHA!r}"


def stacked(pages: Iterable[np.ndarray], rows: int) -> np.ndarray:
    """The pages as one matrix in memory (pages without any vector widened to the others')."""
    parts = list(pages)
    dim = max((p.shape[1] for p in parts), default=0)
    out = np.zeros((rows, dim), np.float32)
    start = 0
    for part in parts:
        out[start : start + len(part)] = widened(part, dim)
        start += len(part)
    return out


def load(path: Path, key: str, rows: int) -> Optional[np.ndarray]:
    """The saved matrix (memory-mapped, read-only) when its head names ``key``, ``rows`` rows and
    this very file; else None."""
    try:
        head = array_files.read_head(path)
        if (head.get("key"), head.get("rows")) != (key, rows):
            return None
        dim = int(head["dim"])
        if head["sum"][0] != rows * dim * 4:
            raise array_files.ChecksumMismatch(f"{path} is not {rows} rows of {dim} numbers")
        with array_files.checked(path, head["sum"]) as f:
            return array_files.map_rows(f, "<f4", (rows, dim))
    except array_files.ChecksumMismatch:
        logger.warning("%s does not match its head; the grounded matrix is derived again", path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.info("%s is unreadable (%s); the grounded matrix is derived again", path, exc)
    return None


def save(path: Path, key: str, rows: int, pages: Iterable[np.ndarray]) -> bool:
    """Write the matrix page by page into ``path`` (never whole in memory), then its head;
    False when the folder cannot be written (the caller derives it in memory instead)."""
    dims: list[int] = []

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as out:
            pending = 0  # rows of pages without any vector, before the first that has one
            for page in pages:
                if not page.shape[1] and not dims:
                    pending += len(page)
                    continue
                if not dims:
                    dims.append(page.shape[1])
                    out.write(np.zeros((pending, dims[0]), "<f4").tobytes())
                out.write(widened(page, dims[0]).astype("<f4", copy=False).tobytes())

    try:
        array_files.save_with_head(path, write, lambda sum_: {
            "key": key, "rows": rows, "dim": dims[0] if dims else 0, "sum": sum_})
    except OSError as exc:
        logger.info("the grounded matrix was not saved in %s (%s)", path, exc)
        return False
    return True


def persisted(
    stores: read_model_file.Stores, state: Hashable, rows: int,
    pages: Callable[[], Iterable[np.ndarray]],
) -> Optional[np.ndarray]:
    """The default matrix of ``state`` memory-mapped from its file: read when it was saved for
    this content, else written from ``pages()`` first; None for a store without a (writable)
    folder, or without rows."""
    path = read_model_file.model_path(stores, MATRIX_FILE)
    if path is None or not rows:
        return None
    key = content_key(stores, state)
    matrix = load(path, key, rows) if path.is_file() else None
    if matrix is None and save(path, key, rows, pages()):
        matrix = load(path, key, rows)
    return matrix
