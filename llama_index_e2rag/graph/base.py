"""The ``GraphStore`` protocol every builder writes to and every retriever reads from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import (
    Any,
    Iterable,
    Iterator,
    Literal,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    runtime_checkable,
)

from llama_index_e2rag.errors import GraphStoreError
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind

#: Rows per page where a whole document's rows are written or read.
PAGE = 5000

Direction = Literal["out", "in", "both"]


def pages(items: Iterable[Any], size: int = PAGE) -> Iterator[list[Any]]:
    """``items`` in lists of at most ``size``, read lazily."""
    page: list[Any] = []
    for item in items:
        page.append(item)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page


@dataclass
class DocRows:
    """One document's whole graph, as ``commit_docs`` writes it.

    ``record`` is what the rest of the store must agree with (the document's hash, its vector
    count per node kind, a digest of its rows); it is committed with the rows, so a check after
    any crash compares the other files against the graph's own statement of what it holds.

    ``links`` are the document's edges to nodes of *other* documents (e.g. SentGraph's topic
    bridges). The document owns them (``doc_id``, its row digest), but they are written after
    every document of the batch, so a link may point at a document committed later in it.
    """

    doc_id: str
    order: int
    nodes: Sequence[GraphNode]
    edges: Sequence[GraphEdge]
    failures: Sequence[dict[str, str]] = ()
    record: dict[str, Any] = field(default_factory=dict)
    links: Sequence[GraphEdge] = ()


def batch_links(docs: Sequence[DocRows]) -> list[GraphEdge]:
    """Every link of a batch, refusing one whose key (``source, target, kind, role``) another
    link or edge of the batch has: writing it would silently take over that edge and break its
    owner's digest."""
    links = [link for doc in docs for link in doc.links]
    if not links:
        return links
    ends = {link.source for link in links}  # only an edge from a link's source can collide
    seen = {
        (e.source, e.target, e.kind.value, e.role or "")
        for doc in docs
        for e in doc.edges
        if e.source in ends
    }
    for link in links:
        key = (link.source, link.target, link.kind.value, link.role or "")
        if key in seen:
            raise GraphStoreError(
                f"link {link.kind.value} {link.source} -> {link.target} is given twice in one "
                "batch; a cross-document edge has one owner"
            )
        seen.add(key)
    return links


@runtime_checkable
class GraphStore(Protocol):
    """Small core of graph operations; batch methods may simply loop.

    Node lists returned by ``nodes`` are in story order (``pos``). Deleting a node deletes its
    edges, so no operation can leave a dangling edge behind. ``commit_docs`` and ``delete_doc``
    are the index's write path: a commit replaces several documents (nodes, edges, story order,
    extraction failures, record) and sets index metadata as one unit (``replace_doc`` is a
    commit of one document). ``version`` changes with every write, by anyone, so read
    caches know when to rebuild.

    Cross-document links belong to the document that made them: deleting or replacing a
    document removes every edge touching its nodes, the other documents' links to it included,
    and in the same transaction re-seals the row digest of each document that lost a link, so
    the store check never mistakes a removed link for damage.
    """

    @property
    def version(self) -> int: ...

    def replace_doc(
        self,
        doc_id: str,
        order: int,
        nodes: Sequence[GraphNode],
        edges: Sequence[GraphEdge],
        failures: Sequence[dict[str, str]] = (),
    ) -> None: ...

    def commit_docs(self, docs: Sequence[DocRows], meta: Mapping[str, str] = {}) -> None: ...

    def get_meta(self, key: str) -> Optional[str]: ...

    def doc_records(self) -> dict[str, dict[str, Any]]: ...

    def doc_orders(self) -> dict[str, int]: ...

    def failures(self) -> list[dict[str, str]]: ...

    def story_neighbors(self, node: GraphNode, before: int, after: int) -> list[GraphNode]: ...

    def upsert_nodes(self, nodes: Iterable[GraphNode]) -> None: ...

    def upsert_edges(self, edges: Iterable[GraphEdge]) -> None: ...

    def get_node(self, node_id: str) -> Optional[GraphNode]: ...

    def get_nodes(self, node_ids: Iterable[str]) -> list[GraphNode]: ...

    def has_node(self, node_id: str) -> bool: ...

    def nodes(
        self, kind: Optional[NodeKind] = None, doc_id: Optional[str] = None
    ) -> list[GraphNode]: ...

    def edges(
        self, kind: Optional[EdgeKind] = None, doc_id: Optional[str] = None
    ) -> list[GraphEdge]: ...

    def scan_nodes(
        self, kind: Optional[NodeKind] = None, doc_id: Optional[str] = None, page: int = ...
    ) -> Iterator[list[GraphNode]]: ...

    def scan_edges(
        self, kind: Optional[EdgeKind] = None, doc_id: Optional[str] = None, page: int = ...
    ) -> Iterator[list[GraphEdge]]: ...

    def scan_edges_listed(self, kind: EdgeKind, page: int = ...) -> Iterator[list[GraphEdge]]:
        """``edges(kind)`` in the order it lists them, a page at a time (a reader whose result
        depends on that order, the entity links of ``event_graph``, holds one page)."""
        ...

    def edges_of(
        self,
        node_id: str,
        kinds: Optional[Iterable[EdgeKind]] = None,
        direction: Direction = "both",
    ) -> list[GraphEdge]: ...

    def neighbors(
        self,
        node_id: str,
        kinds: Optional[Iterable[EdgeKind]] = None,
        direction: Direction = "both",
    ) -> list[GraphNode]: ...

    def subgraph_edges(
        self, node_ids: Iterable[str], kinds: Optional[Iterable[EdgeKind]] = None
    ) -> list[GraphEdge]: ...

    def delete_nodes(self, node_ids: Iterable[str]) -> None: ...

    def delete_doc(self, doc_id: str) -> set[str]: ...

    def doc_ids(self) -> list[str]: ...

    def counts(self) -> dict[str, dict[str, int]]: ...

    def to_dict(self) -> dict[str, Any]: ...
