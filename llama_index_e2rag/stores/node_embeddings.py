"""GroundedKG-RAG node embeddings: basic, average-neighbour and attention-neighbour (paper §3.3).

Pure numpy over whole matrices so that a novel's tens of thousands of nodes embed in one pass and
retrieval stays a matrix product; ``graph_cache`` computes them once per content state from the
vectors the stores hold and the graph's layout (``grounded_layout``, persisted per content
state). Following the paper's implementation notes, every intermediate vector (node embedding,
aggregated neighbours, combination) is L2-normalised, which keeps α and β meaningful whatever the
scale of the inputs.
"""

from __future__ import annotations

import math
import threading
import weakref
from typing import Any, Callable, Hashable, Iterator, Literal, Optional, Sequence

import numpy as np

from llama_index_e2rag.stores import grounded_matrix, read_model_file
from llama_index_e2rag.stores.grounded_layout import GroundedLayout, layout
from llama_index_e2rag.stores.grounded_matrix import DEFAULT_ALPHA, PAGE_ROWS, stacked, widened
from llama_index_e2rag.stores.state_cache import StateCache
from llama_index_e2rag.stores.port import Stores
from llama_index_e2rag.vectors.nearest import ANN_MIN_ROWS, NearestRows
from llama_index_e2rag.vectors.nearest_graph import open_nearest

EmbeddingVariant = Literal["basic", "neighbor", "attention"]
EMBEDDING_VARIANTS: tuple[str, ...] = ("basic", "neighbor", "attention")
#: ``ids -> (len(ids), dim)`` stored unit rows, zeros for an id without a vector (no column when
#: none has one): ``Stores.matrix_of``.
Vectors = Callable[[Sequence[str]], np.ndarray]


def l2_normalize(matrix: np.ndarray) -> np.ndarray:
    """Row-wise unit vectors; all-zero rows stay zero instead of becoming NaN."""
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms > 0.0, norms, 1.0)


def basic_embeddings(
    names: np.ndarray,
    indptr: np.ndarray,
    indices: np.ndarray,
    texts: np.ndarray,
    alpha: float,
) -> np.ndarray:
    """``α·f(name) + (1−α)·mean f(grounded texts)`` per node.

    ``names`` is (n, d); node ``i`` is grounded in rows ``indices[indptr[i]:indptr[i+1]]`` of
    ``texts`` (CSR layout). A node grounded in nothing keeps its name vector and a node without a
    name vector (a zero row) keeps its grounded texts, so either alone stays retrievable.
    """
    _check_weight("alpha", alpha)
    names = l2_normalize(np.asarray(names, dtype=np.float32))
    counts = np.diff(indptr)
    grounded = l2_normalize(_row_sums(names.shape, indptr, indices, texts))  # the mean's direction
    mixed = np.where((counts > 0)[:, None], alpha * names + (1.0 - alpha) * grounded, names)
    return l2_normalize(mixed)


def _row_sums(
    shape: tuple[int, ...], indptr: np.ndarray, indices: np.ndarray, texts: np.ndarray
) -> np.ndarray:
    """Per node, the sum of its grounded texts' rows, added in CSR order: the first grounding of
    every node at once, then the second of those that have one, and so on. The same float32
    sums as one ``np.add.at`` over all groundings, bit for bit, in a tenth of the time (a node
    has one or two groundings, so there are few rounds; 100k words: 0.30 s -> 0.03 s)."""
    sums = np.zeros(shape, dtype=np.float32)
    counts = np.diff(indptr)
    if not len(indices):
        return sums
    texts = np.asarray(texts, dtype=np.float32)
    starts = indptr[:-1]
    rows = np.flatnonzero(counts > 0)
    sums[rows] = texts[indices[starts[rows]]]
    for k in range(1, int(counts.max())):
        rows = np.flatnonzero(counts > k)
        sums[rows] += texts[indices[starts[rows] + k]]
    return sums


def neighbor_embeddings(
    base: np.ndarray, sources: np.ndarray, targets: np.ndarray, beta: float
) -> np.ndarray:
    """``β·Embed(v) + (1−β)·mean Embed(neighbours)``; isolated nodes keep ``Embed(v)``.

    ``(sources[k], targets[k])`` lists each directed neighbour pair (give both directions for an
    undirected edge).
    """
    _check_weight("beta", beta)
    weights = np.ones(len(sources), dtype=np.float32)
    return _combine(base, sources, targets, weights, beta)


def attention_embeddings(
    base: np.ndarray, sources: np.ndarray, targets: np.ndarray, beta: float
) -> np.ndarray:
    """Neighbours weighted by ``softmax_j(Embed(v)·Embed(v_j))`` instead of a plain mean.

    The paper's remedy for outlier neighbours: a neighbour unlike the node contributes little.
    """
    _check_weight("beta", beta)
    if len(sources) == 0:
        return base.copy()
    logits = np.einsum("ij,ij->i", base[sources], base[targets])
    peak = np.full(len(base), -np.inf, dtype=np.float32)
    np.maximum.at(peak, sources, logits)
    weights = np.exp(logits - peak[sources]).astype(np.float32)
    return _combine(base, sources, targets, weights, beta)


def node_embeddings(
    variant: str,
    base: np.ndarray,
    sources: np.ndarray,
    targets: np.ndarray,
    beta: float,
) -> np.ndarray:
    """Dispatch on the variant name (``basic`` ignores the neighbour arrays)."""
    if variant == "basic":
        return base
    if variant == "neighbor":
        return neighbor_embeddings(base, sources, targets, beta)
    if variant == "attention":
        return attention_embeddings(base, sources, targets, beta)
    raise ValueError(f"embedding_variant must be one of {EMBEDDING_VARIANTS}, got {variant!r}")


def _combine(
    base: np.ndarray,
    sources: np.ndarray,
    targets: np.ndarray,
    weights: np.ndarray,
    beta: float,
) -> np.ndarray:
    """``β·base + (1−β)·normalised weighted neighbour sum``; rows without neighbours unchanged.

    Weights need not sum to one: the neighbour sum is normalised, which is the same direction as
    the weighted mean (and as the softmax-weighted sum for attention).
    """
    agg = np.zeros_like(base)
    np.add.at(agg, sources, weights[:, None] * base[targets])
    has_neighbors = np.zeros(len(base), dtype=bool)
    has_neighbors[sources] = True
    mixed = beta * base + (1.0 - beta) * l2_normalize(agg)
    return np.where(has_neighbors[:, None], l2_normalize(mixed), base)


def _check_weight(name: str, value: float) -> None:
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be between 0 and 1, got {value!r}")


# -- the per-index cache ------------------------------------------------------------------------


class NodeEmbeddingCache:
    """Everything retrieval needs from one graph state, as arrays.

    The graph's layout (``grounded_layout``: read from its file, or derived from the graph);
    the default matrix (``basic`` at ``DEFAULT_ALPHA``) memory-mapped from its file
    (``grounded_matrix``), with its search (an HNSW graph from ``ANN_MIN_ROWS`` rows on, else
    None: the retriever multiplies the matrix); other variants and α are derived lazily per
    (variant, α, β) from the stored vectors, a page of nodes at a time, and kept.
    """

    def __init__(
        self,
        state: Hashable,
        found: GroundedLayout,
        vectors: Vectors,
        persisted: Optional[np.ndarray] = None,
        search: Optional[NearestRows] = None,
    ) -> None:
        self.state = state
        self.node_ids = found.node_ids
        self.text_ids = found.text_ids
        #: Evidence unit of each node (``evidence_units``): copies share one.
        self.units = found.units
        #: Text group of each text row (``text_groups``): the row of the whole sentence its
        #: copies from overlapping chunks share.
        self.text_groups = found.text_groups
        #: Span length of each text row (a whole sentence beats its cut-off copy).
        self.text_lengths = found.text_lengths
        #: Distinct text groups each unit is grounded in, over all its copies.
        self.unit_groundings = _unit_groundings(
            found.units, found.indptr, found.indices, found.text_groups
        )
        #: The search of the default matrix when it is too large to multiply (else None).
        self.search = search
        self._found = found
        self._vectors = vectors
        self._indptr = found.indptr
        self._indices = found.indices
        self._sources = found.sources
        self._targets = found.targets
        self._matrices: dict[tuple[str, float, float], np.ndarray] = {}
        #: The key of the matrix read from its file (the one ``search`` serves), None when none
        #: was: a matrix derived here is never taken for it.
        self._from_file: Optional[tuple[str, float, float]] = None
        if persisted is not None:
            self._from_file = _key("basic", DEFAULT_ALPHA, 0.0)
            self._matrices[self._from_file] = persisted
        self._lock = threading.Lock()
        #: User metadata of source chunks by chunk id, filled by the retriever as it goes.
        self.chunk_metadata: dict[str, dict[str, Any]] = {}

    @property
    def size(self) -> int:
        return len(self.node_ids)

    def specificity(self, node: int) -> float:
        """``1 + ln(sentences the node's unit is grounded in)``, the divisor of its evidence.

        Counted over the unit (all copies of an entity or event) and over distinct sentences, so
        a main character is weak evidence for any one sentence however the text was chunked.
        """
        return 1.0 + math.log(max(int(self.unit_groundings[self.units[node]]), 1))

    def groundings(self, node: int) -> np.ndarray:
        """Rows of ``text_ids`` that graph node ``node`` is grounded in."""
        return self._indices[self._indptr[node] : self._indptr[node + 1]]

    def text_vectors(self, rows: Sequence[int], dim: int) -> np.ndarray:
        """Unit vectors of the grounded texts ``rows`` (``dim`` zeros for a text without one),
        read from the stores when a query needs them: a few rows, not every sentence."""
        return l2_normalize(widened(self._vectors([self.text_ids[r] for r in rows]), dim))

    def is_persisted(self, variant: str, alpha: float) -> bool:
        """Whether ``matrix(variant, alpha, ·)`` is the one read from its file (``search``'s)."""
        return self._from_file is not None and _key(variant, alpha, 0.0) == self._from_file

    def matrix(self, variant: str, alpha: float, beta: float) -> np.ndarray:
        """Unit-length node embeddings of the variant (rows follow ``node_ids``)."""
        key = _key(variant, alpha, beta)
        with self._lock:
            found = self._matrices.get(key)
            if found is None:
                base = self._matrices.get(_key("basic", alpha, 0.0))
                if base is None:
                    base = stacked(basic_pages(self._found, self._vectors, alpha), self.size)
                    self._matrices[_key("basic", alpha, 0.0)] = base
                found = node_embeddings(variant, base, self._sources, self._targets, beta)
                self._matrices[key] = found
            return found


def _key(variant: str, alpha: float, beta: float) -> tuple[str, float, float]:
    """A matrix's key: ``basic`` does not depend on β."""
    return (variant, float(alpha), 0.0 if variant == "basic" else float(beta))


def basic_pages(found: GroundedLayout, vectors: Vectors, alpha: float) -> Iterator[np.ndarray]:
    """``basic_embeddings`` of ``found``'s nodes at ``alpha``, ``PAGE_ROWS`` nodes at a time:
    each page reads only its nodes' name vectors and the vectors of the texts they are grounded
    in. Every step is row by row, so the pages stacked are the whole matrix's rows to the bit;
    a page none of whose ids has a vector has no column (``grounded_matrix.stacked``)."""
    for start in range(0, len(found.node_ids), PAGE_ROWS):
        stop = min(len(found.node_ids), start + PAGE_ROWS)
        first, last = int(found.indptr[start]), int(found.indptr[stop])
        used, local = np.unique(found.indices[first:last], return_inverse=True)
        names = vectors(found.node_ids[start:stop])
        texts = vectors([found.text_ids[r] for r in used.tolist()])
        dim = max(names.shape[1], texts.shape[1])
        names, texts = widened(names, dim), widened(texts, dim)
        indptr = found.indptr[start : stop + 1] - first
        yield basic_embeddings(names, indptr, local.reshape(-1), l2_normalize(texts), alpha)


def graph_cache(stores: Stores) -> NodeEmbeddingCache:
    """The stores' node-embedding cache, rebuilt when their content changed since the last call."""
    return _CACHE.get(stores)


def build_cache(stores: Stores, state: Hashable) -> NodeEmbeddingCache:
    """The layout of ``state`` with its default matrix (read from its file, or derived from the
    stored vectors and saved) and that matrix's search; stored vectors are never re-embedded:
    nodes without one get a zero row."""
    found = layout(stores, state)
    vectors = _weak_vectors(stores)
    persisted = grounded_matrix.persisted(
        stores, state, len(found.node_ids),
        lambda: _letting_go(basic_pages(found, vectors, grounded_matrix.DEFAULT_ALPHA), stores),
    )
    search = None
    if persisted is not None and len(persisted) >= ANN_MIN_ROWS and persisted.shape[1]:
        path = read_model_file.model_path(stores, grounded_matrix.SEARCH_FILE)
        search = open_nearest(persisted, found.node_ids, path)
    return NodeEmbeddingCache(state, found, vectors, persisted, search)


def _letting_go(pages: Iterator[np.ndarray], stores: Stores) -> Iterator[np.ndarray]:
    """The pages, the vector file pages each read let go after it (``Stores.release_pages``):
    a derivation reads the vectors of every node and grounded sentence, ~500 MB at 1M words,
    which a later page rarely reads again and the search graph's build never does."""
    for page in pages:
        yield page
        stores.release_pages()


def _weak_vectors(stores: Stores) -> Vectors:
    """``stores.matrix_of`` without keeping the stores alive (the cache is their value in a
    ``StateCache``, weakly keyed by them); a cache kept past its index cannot read vectors."""
    ref = weakref.ref(stores)

    def vectors(ids: Sequence[str]) -> np.ndarray:
        found = ref()
        if found is None:
            raise ReferenceError("the index of this grounded cache was dropped; ask it again")
        return found.matrix_of(ids)

    return vectors


def save_read_model(stores: Stores) -> None:
    """Derive and persist the layout, the default matrix and its search of the stores' current
    content now (``e2rag index``), so the next process's first query only reads them."""
    read_model_file.save_now(stores, _CACHE)


def _unit_groundings(
    units: np.ndarray, indptr: np.ndarray, indices: np.ndarray, groups: np.ndarray
) -> np.ndarray:
    """Number of distinct text groups each unit is grounded in: the distinct (unit, group)
    pairs as one integer each (a 1-d unique takes half the time of one over pairs of columns:
    ~0.5 s of the first query at 1M words)."""
    counts = np.zeros(int(units.max()) + 1 if len(units) else 0, dtype=np.int64)
    if not len(indices):
        return counts
    width = int(groups.max()) + 1
    pairs = np.unique(np.repeat(units, np.diff(indptr)) * width + groups[indices])
    np.add.at(counts, pairs // width, 1)
    return counts


_CACHE: StateCache[NodeEmbeddingCache] = StateCache(build_cache)
