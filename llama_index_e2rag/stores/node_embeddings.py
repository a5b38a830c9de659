"""GroundedKG-RAG node embeddings: basic, average-neighbour and attention-neighbour (paper §3.3).

Pure numpy over whole matrices so that a novel's tens of thousands of nodes embed in one pass and
retrieval stays a matrix product; ``graph_cache`` computes them once per content state from the
vectors the stores hold. Following the paper's implementation notes, every intermediate
vector (node embedding, aggregated neighbours, combination) is L2-normalised, which keeps α and β
meaningful whatever the scale of the inputs.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Hashable, Literal, Optional, Sequence

import numpy as np

from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind, normalize_text
from llama_index_e2rag.stores.state_cache import StateCache
from llama_index_e2rag.stores.port import Stores

EmbeddingVariant = Literal["basic", "neighbor", "attention"]
EMBEDDING_VARIANTS: tuple[str, ...] = ("basic", "neighbor", "attention")


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
    sums = np.zeros_like(names)
    if len(indices):
        owners = np.repeat(np.arange(len(names)), counts)
        np.add.at(sums, owners, np.asarray(texts, dtype=np.float32)[indices])
    grounded = l2_normalize(sums)  # the mean's direction; it is normalised anyway
    mixed = np.where((counts > 0)[:, None], alpha * names + (1.0 - alpha) * grounded, names)
    return l2_normalize(mixed)


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

#: Edges whose ends count as a node's neighbours: the paper's entity–action role edges and
#: action–action order edges (plus described relations when an LLM extractor added them).
NEIGHBOR_EDGE_KINDS = (EdgeKind.PARTICIPATES, EdgeKind.NEXT, EdgeKind.RELATION)
#: Graph nodes the grounded retriever ranks (the paper's entity and action nodes).
CANDIDATE_KINDS = (NodeKind.MENTION, NodeKind.EVENT)


class NodeEmbeddingCache:
    """Everything retrieval needs from one graph state, as arrays.

    Built once from the stored vectors (names: mention and event nodes; grounded texts:
    sentence nodes, or the chunk for nodes grounded only in a chunk);
    variant matrices are derived lazily per (variant, α, β) and kept.
    """

    def __init__(
        self,
        state: Hashable,
        node_ids: list[str],
        names: np.ndarray,
        indptr: np.ndarray,
        indices: np.ndarray,
        text_ids: list[str],
        text_vectors: np.ndarray,
        sources: np.ndarray,
        targets: np.ndarray,
        units: np.ndarray,
        text_groups: np.ndarray,
        text_lengths: np.ndarray,
    ) -> None:
        self.state = state
        self.node_ids = node_ids
        self.text_ids = text_ids
        self.text_vectors = l2_normalize(text_vectors)
        #: Evidence unit of each node (``evidence_units``): copies share one.
        self.units = units
        #: Text group of each text row (``text_groups``): the row of the whole sentence its
        #: copies from overlapping chunks share.
        self.text_groups = text_groups
        #: Span length of each text row (a whole sentence beats its cut-off copy).
        self.text_lengths = text_lengths
        #: Distinct text groups each unit is grounded in, over all its copies.
        self.unit_groundings = _unit_groundings(units, indptr, indices, text_groups)
        self._names = names
        self._indptr = indptr
        self._indices = indices
        self._sources = sources
        self._targets = targets
        self._matrices: dict[tuple[str, float, float], np.ndarray] = {}
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

    def matrix(self, variant: str, alpha: float, beta: float) -> np.ndarray:
        """Unit-length node embeddings of the variant (rows follow ``node_ids``)."""
        key = (variant, float(alpha), 0.0 if variant == "basic" else float(beta))
        with self._lock:
            found = self._matrices.get(key)
            if found is None:
                base = self._matrices.get(("basic", float(alpha), 0.0))
                if base is None:
                    base = basic_embeddings(
                        self._names, self._indptr, self._indices, self.text_vectors, alpha
                    )
                    self._matrices[("basic", float(alpha), 0.0)] = base
                found = node_embeddings(variant, base, self._sources, self._targets, beta)
                self._matrices[key] = found
            return found


def graph_cache(stores: Stores) -> NodeEmbeddingCache:
    """The stores' node-embedding cache, rebuilt when their content changed since the last call."""
    return _CACHE.get(stores)


def build_cache(stores: Stores, state: Hashable) -> NodeEmbeddingCache:
    """Collect candidate nodes, their groundings, neighbours and stored vectors (never
    re-embedded: nodes without a stored vector get a zero row)."""
    graph = stores.graph
    candidates = [n for kind in CANDIDATE_KINDS for n in graph.nodes(kind=kind)]
    position = {n.id: i for i, n in enumerate(candidates)}
    grounded: list[list[str]] = [[] for _ in candidates]
    for edge in graph.edges(kind=EdgeKind.GROUNDED_IN):
        row = position.get(edge.source)
        if row is not None:
            grounded[row].append(edge.target)
    for row, node in enumerate(candidates):
        if not grounded[row] and node.chunk_id and graph.has_node(node.chunk_id):
            grounded[row].append(node.chunk_id)  # LLM-extracted nodes: grounded in their chunk
    text_nodes = {n.id: n for n in graph.get_nodes({t for ts in grounded for t in ts})}
    text_ids = sorted(text_nodes, key=lambda i: (text_nodes[i].pos, i))
    text_row = {t: i for i, t in enumerate(text_ids)}
    indices = [sorted({text_row[t] for t in ts if t in text_row}) for ts in grounded]
    indptr = np.zeros(len(candidates) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(r) for r in indices])
    flat = np.fromiter((r for rows in indices for r in rows), dtype=np.int64)

    sources: list[int] = []
    targets: list[int] = []
    for kind in NEIGHBOR_EDGE_KINDS:
        for edge in graph.edges(kind=kind):
            a, b = position.get(edge.source), position.get(edge.target)
            if a is not None and b is not None and a != b:
                sources += [a, b]
                targets += [b, a]
    pairs = sorted(set(zip(sources, targets)))

    texts = [text_nodes[t] for t in text_ids]
    vectors = stores.matrix(candidates + texts)
    names = vectors[: len(candidates)]
    return NodeEmbeddingCache(
        state=state,
        node_ids=[n.id for n in candidates],
        names=names,
        indptr=indptr,
        indices=flat,
        text_ids=text_ids,
        text_vectors=vectors[len(candidates) :],
        sources=np.array([p[0] for p in pairs], dtype=np.int64),
        targets=np.array([p[1] for p in pairs], dtype=np.int64),
        units=evidence_units(graph, candidates),
        text_groups=text_groups(texts),
        text_lengths=np.array([_span_length(n) for n in texts], dtype=np.int64),
    )


def evidence_units(graph: Any, nodes: Sequence[GraphNode]) -> np.ndarray:
    """One unit index per node: the copies of one entity or event share a unit.

    Mentions are per chunk, so a character named in seven chunks is seven mention nodes; they are
    one entity on its timeline (the ``next`` edges between mentions, which the index draws
    between mentions of the same name key). Chunks overlap, so an event told in the overlap is
    extracted twice, at the same span. Counting the copies as one keeps a node's specificity
    (how many sentences its entity is grounded in) and RetCount from depending on the chunking.
    """
    position = {n.id: i for i, n in enumerate(nodes)}
    parent = list(range(len(nodes)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for edge in graph.edges(kind=EdgeKind.NEXT):
        a, b = position.get(edge.source), position.get(edge.target)
        if (
            a is not None
            and b is not None
            and nodes[a].kind == NodeKind.MENTION
            and nodes[b].kind == NodeKind.MENTION
        ):
            join(a, b)
    first_by_span: dict[tuple[Any, ...], int] = {}
    for i, node in enumerate(nodes):
        if node.kind == NodeKind.EVENT and node.span:
            key = (node.doc_id, tuple(node.span), normalize_text(node.text))
            join(first_by_span.setdefault(key, i), i)
    roots = [find(i) for i in range(len(nodes))]
    numbering = {root: n for n, root in enumerate(dict.fromkeys(roots))}
    return np.array([numbering[r] for r in roots], dtype=np.int64)


def text_groups(texts: Sequence[GraphNode]) -> np.ndarray:
    """Per grounded text, the row of its group's whole sentence (the group's id).

    Both chunks of an overlap parse the shared sentences, so a sentence can be several nodes with
    the same span; a chunk that starts or ends inside a sentence yields a cut-off copy whose span
    lies inside the whole sentence's. Sentences of one chunk never nest, so containment among a
    document's texts of one kind is exactly the overlap copies. Texts without a span are groups
    of their own.
    """
    groups = np.arange(len(texts), dtype=np.int64)
    spanned = sorted(
        (i for i, n in enumerate(texts) if n.span),
        key=lambda i: (
            texts[i].doc_id, texts[i].kind.value, texts[i].span[0], -texts[i].span[1], texts[i].id
        ),
    )
    current: Optional[int] = None
    for i in spanned:
        node = texts[i]
        head = texts[current] if current is not None else None
        if (
            head is not None
            and (head.doc_id, head.kind) == (node.doc_id, node.kind)
            and head.span[0] <= node.span[0]
            and node.span[1] <= head.span[1]
        ):
            groups[i] = groups[current]
        else:
            current = i
    return groups


def _span_length(node: GraphNode) -> int:
    return node.span[1] - node.span[0] if node.span else len(node.text)


def _unit_groundings(
    units: np.ndarray, indptr: np.ndarray, indices: np.ndarray, groups: np.ndarray
) -> np.ndarray:
    """Number of distinct text groups each unit is grounded in."""
    owners = np.repeat(units, np.diff(indptr))
    pairs = np.unique(np.stack([owners, groups[indices]]), axis=1) if len(indices) else None
    counts = np.zeros(int(units.max()) + 1 if len(units) else 0, dtype=np.int64)
    if pairs is not None:
        np.add.at(counts, pairs[0], 1)
    return counts


_CACHE: StateCache[NodeEmbeddingCache] = StateCache(build_cache)
