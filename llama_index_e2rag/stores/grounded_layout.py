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
from typing import Any, Hashable, Iterator, Optional, Sequence

import numpy as np

from llama_index_e2rag.schema import EdgeKind, GraphEdge, NodeKind, normalize_text
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
    """Collect candidate nodes, their groundings and neighbours from the graph.

    The graph is read a page at a time and only ids, rows and spans are kept: at 1M words the
    289k candidates and their edges as records took 1.7 GB (the peak of ``e2rag index``)."""
    node_ids: list[str] = []
    mentions: list[bool] = []
    chunk_of: dict[int, str] = {}  # rows that may fall back to their chunk
    first_telling: dict[tuple[Any, ...], int] = {}
    copies: list[tuple[int, int]] = []  # an event told twice at one span: (first row, row)
    for kind in CANDIDATE_KINDS:
        for page in graph.scan_nodes(kind=kind):
            for node in page:
                row = len(node_ids)
                node_ids.append(node.id)
                mentions.append(node.kind == NodeKind.MENTION)
                if node.chunk_id:
                    chunk_of[row] = node.chunk_id
                if node.kind == NodeKind.EVENT and node.span:
                    key = (node.doc_id, tuple(node.span), normalize_text(node.text))
                    copies.append((first_telling.setdefault(key, row), row))
    position = {node_id: i for i, node_id in enumerate(node_ids)}
    grounded: list[list[str]] = [[] for _ in node_ids]
    for edge in _edges(graph, EdgeKind.GROUNDED_IN):
        row = position.get(edge.source)
        if row is not None:
            grounded[row].append(edge.target)
    known: dict[str, bool] = {}
    for row, chunk_id in chunk_of.items():
        if not grounded[row]:  # LLM-extracted nodes: grounded in their chunk
            if chunk_id not in known:
                known[chunk_id] = graph.has_node(chunk_id)
            if known[chunk_id]:
                grounded[row].append(chunk_id)
    texts = _texts(graph, {t for ts in grounded for t in ts})
    text_row = {t.id: i for i, t in enumerate(texts)}
    indices = [sorted({text_row[t] for t in ts if t in text_row}) for ts in grounded]
    del grounded
    indptr = np.zeros(len(node_ids) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(r) for r in indices])
    flat = np.fromiter((r for rows in indices for r in rows), dtype=np.int64)
    sources, targets = _neighbour_pairs(graph, position)
    units = _units(graph, position, mentions, copies)
    return GroundedLayout(
        node_ids=node_ids,
        indptr=indptr,
        indices=flat,
        text_ids=[t.id for t in texts],
        sources=sources,
        targets=targets,
        units=units,
        text_groups=text_groups(texts),
        text_lengths=np.array([t.length for t in texts], dtype=np.int64),
    )


@dataclass(frozen=True)
class _Text:
    """What the layout keeps of a grounded text node."""

    id: str
    pos: tuple[int, ...]
    doc_id: str
    kind: NodeKind
    span: Optional[tuple[int, int]]
    length: int


#: Text nodes read at once by id.
_TEXT_PAGE = 4096


def _texts(graph: Any, ids: set[str]) -> list[_Text]:
    """The grounded texts that exist, in story order (position, then id)."""
    wanted = sorted(ids)
    found: list[_Text] = []
    for start in range(0, len(wanted), _TEXT_PAGE):
        for node in graph.get_nodes(wanted[start : start + _TEXT_PAGE]):
            span = (int(node.span[0]), int(node.span[1])) if node.span else None
            length = span[1] - span[0] if span else len(node.text)
            found.append(_Text(node.id, tuple(node.pos), node.doc_id, node.kind, span, length))
    return sorted(found, key=lambda t: (t.pos, t.id))


def _edges(graph: Any, kind: EdgeKind) -> Iterator[GraphEdge]:
    return (edge for page in graph.scan_edges(kind=kind) for edge in page)


def _neighbour_pairs(graph: Any, position: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Directed pairs of candidate rows joined by a neighbour edge (both directions), sorted
    and distinct: one integer per pair, gathered a page at a time (a set of tuples of the
    ~2M pairs of a million-word story took hundreds of MB)."""
    width = max(len(position), 1)
    keys: list[np.ndarray] = []
    for kind in NEIGHBOR_EDGE_KINDS:
        for page in graph.scan_edges(kind=kind):
            ends = [(position.get(e.source), position.get(e.target)) for e in page]
            pairs = np.array(
                [(a, b) for a, b in ends if a is not None and b is not None and a != b],
                dtype=np.int64,
            ).reshape(-1, 2)
            keys += [pairs[:, 0] * width + pairs[:, 1], pairs[:, 1] * width + pairs[:, 0]]
    found = np.unique(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
    return found // width, found % width


def _units(
    graph: Any, position: dict[str, int], mentions: Sequence[bool],
    copies: Sequence[tuple[int, int]],
) -> np.ndarray:
    """One unit index per candidate row: the copies of one entity or event share a unit.

    Mentions are per chunk, so a character named in seven chunks is seven mention nodes; they are
    one entity on its timeline (the ``next`` edges between mentions, which the index draws
    between mentions of the same name key). Chunks overlap, so an event told in the overlap is
    extracted twice, at the same span (``copies``). Counting the copies as one keeps a node's
    specificity (how many sentences its entity is grounded in) and RetCount from depending on
    the chunking. Units are numbered in row order of their first row.
    """
    parent = list(range(len(mentions)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for edge in _edges(graph, EdgeKind.NEXT):
        a, b = position.get(edge.source), position.get(edge.target)
        if a is not None and b is not None and mentions[a] and mentions[b]:
            join(a, b)
    for first, row in copies:
        join(first, row)
    roots = [find(i) for i in range(len(mentions))]
    numbering = {root: n for n, root in enumerate(dict.fromkeys(roots))}
    return np.array([numbering[r] for r in roots], dtype=np.int64)


def text_groups(texts: Sequence[Any]) -> np.ndarray:
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
