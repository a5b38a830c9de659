"""The ``grounded`` mode's graph layout: which nodes it ranks, what each is grounded in, who
neighbours whom — derived from the whole graph once per content state, and persisted.

Deriving it reads every mention, event and sentence node and every grounding and neighbour edge
(at 100k words: 36k nodes and 100k edges, ~6 s, nearly all of the first ``grounded`` retrieval
after a load). It depends only on the graph's content, so it is written per content state to
``e2rag/readmodels/grounded.jsonl`` (``read_model_file``: content key, checksum, atomic write)
by the first retrieval after a write and read back by the next process in tens of
milliseconds. Vectors are not copied into it: ``node_embeddings.build_cache`` reads them from
the vector store by id.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Hashable, Optional, Sequence

import numpy as np

from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind, normalize_text
from llama_index_e2rag.stores import read_model_file
from llama_index_e2rag.stores.port import Stores

#: Two JSON lines: the content key and the SHA-256 of the second line, then the layout.
GROUNDED_FILE = "grounded.jsonl"
#: Bumped when the encoding or what the layout holds changes: an older file is rebuilt.
FORMAT = 1
MODEL = read_model_file.ReadModel(GROUNDED_FILE, FORMAT)

#: Edges whose ends count as a node's neighbours: the paper's entity–action role edges and
#: action–action order edges (plus described relations when an LLM extractor added them).
NEIGHBOR_EDGE_KINDS = (EdgeKind.PARTICIPATES, EdgeKind.NEXT, EdgeKind.RELATION)
#: Graph nodes the grounded retriever ranks (the paper's entity and action nodes).
CANDIDATE_KINDS = (NodeKind.MENTION, NodeKind.EVENT)


@dataclass(frozen=True)
class GroundedLayout:
    """Everything of one graph state the grounded retriever needs except vectors, as arrays."""

    #: Candidate (mention and event) node ids, the rows of the node matrices.
    node_ids: list[str]
    #: Node ``i`` is grounded in text rows ``indices[indptr[i]:indptr[i+1]]`` (CSR).
    indptr: np.ndarray
    indices: np.ndarray
    #: Grounded texts (sentences, or the chunk of a node grounded in no sentence), story order.
    text_ids: list[str]
    #: Directed neighbour pairs between candidate rows (both directions of an edge).
    sources: np.ndarray
    targets: np.ndarray
    #: Evidence unit of each node (``evidence_units``).
    units: np.ndarray
    #: Text group of each text row (``text_groups``).
    text_groups: np.ndarray
    #: Span length of each text row.
    text_lengths: np.ndarray


def layout(stores: Stores, state: Hashable) -> GroundedLayout:
    """The layout of ``state``: read from its file when that was saved for this content, else
    derived from the graph and saved for the next process."""
    key = MODEL.content_key(stores, state)
    stored = MODEL.read(stores, key)
    if isinstance(stored, dict):
        try:
            return decode(stored)
        except (KeyError, TypeError, ValueError):
            pass  # a body of another shape under a matching key: derive it again
    derived = derive(stores.graph)
    MODEL.write(stores, key, encode(derived))
    return derived


def encode(found: GroundedLayout) -> dict[str, Any]:
    """The layout as JSON values."""
    return {
        name: value.tolist() if isinstance(value, np.ndarray) else value
        for name, value in asdict(found).items()
    }


def decode(data: dict[str, Any]) -> GroundedLayout:
    """``encode``'s inverse."""

    def ints(name: str) -> np.ndarray:
        return np.array(data[name], dtype=np.int64)

    return GroundedLayout(
        node_ids=[str(i) for i in data["node_ids"]],
        indptr=ints("indptr"),
        indices=ints("indices"),
        text_ids=[str(i) for i in data["text_ids"]],
        sources=ints("sources"),
        targets=ints("targets"),
        units=ints("units"),
        text_groups=ints("text_groups"),
        text_lengths=ints("text_lengths"),
    )


def derive(graph: Any) -> GroundedLayout:
    """Collect candidate nodes, their groundings and neighbours from the graph."""
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
    return GroundedLayout(
        node_ids=[n.id for n in candidates],
        indptr=indptr,
        indices=flat,
        text_ids=text_ids,
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
