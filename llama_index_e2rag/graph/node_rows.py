"""Graph nodes by row, read from the graph when a row is first asked for.

A read model that ranks every entity or event of a story by arrays (vectors, a name index)
needs the nodes themselves only for the few rows a query returns. Reading all of them up front
costs a new process seconds at 100k words (one pydantic node per row); ``NodeRows`` keeps the
ids and documents of every row and reads a row's node, once, when it is used.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence, overload

from llama_index_e2rag.schema import GraphNode

#: Reads nodes by id (``GraphStore.get_nodes``): unknown ids are left out.
Fetch = Callable[[Sequence[str]], Iterable[GraphNode]]


class NodeRows(Sequence[GraphNode]):
    """A sequence of graph nodes of which only the ids and document ids are held up front."""

    def __init__(
        self,
        ids: Sequence[str],
        docs: Sequence[str],
        fetch: Fetch,
        known: Iterable[GraphNode] = (),
    ) -> None:
        if len(ids) != len(docs):
            raise ValueError("ids and docs differ in length")
        self.ids = list(ids)
        self.docs = list(docs)
        self._fetch = fetch
        by_id = {node.id: node for node in known}
        self._nodes = {row: by_id[i] for row, i in enumerate(self.ids) if i in by_id}

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, row: int) -> GraphNode: ...

    @overload
    def __getitem__(self, row: slice) -> list[GraphNode]: ...

    def __getitem__(self, row: int | slice) -> GraphNode | list[GraphNode]:
        if isinstance(row, slice):
            rows = range(len(self))[row]
            self.prefetch(rows)
            return [self._nodes[r] for r in rows]
        row = range(len(self))[row]  # negative rows, and IndexError past the end
        if row not in self._nodes:
            self.prefetch([row])
        return self._nodes[row]

    def prefetch(self, rows: Iterable[int]) -> None:
        """Read the nodes of ``rows`` not read yet, in one call."""
        missing = [r for r in dict.fromkeys(rows) if r not in self._nodes]
        if not missing:
            return
        found = {node.id: node for node in self._fetch([self.ids[r] for r in missing])}
        for r in missing:
            if self.ids[r] not in found:
                raise LookupError(f"node {self.ids[r]} is no longer in the graph")
            self._nodes[r] = found[self.ids[r]]

    def take(self, rows: Sequence[int]) -> "NodeRows":
        """The nodes of ``rows``, in that order (those already read are kept)."""
        known = [self._nodes[r] for r in rows if r in self._nodes]
        return NodeRows([self.ids[r] for r in rows], [self.docs[r] for r in rows], self._fetch,
                        known)


def ids_of(nodes: Sequence[GraphNode]) -> Sequence[str]:
    """The nodes' ids (not to be changed), without reading the nodes of a ``NodeRows``."""
    return nodes.ids if isinstance(nodes, NodeRows) else [n.id for n in nodes]


def docs_of(nodes: Sequence[GraphNode]) -> Sequence[str]:
    """The nodes' document ids (not to be changed), without reading a ``NodeRows``' nodes."""
    return nodes.docs if isinstance(nodes, NodeRows) else [n.doc_id for n in nodes]


def take(nodes: Sequence[GraphNode], rows: Sequence[int]) -> Sequence[GraphNode]:
    """The nodes of ``rows`` in that order, still unread where they were."""
    return nodes.take(rows) if isinstance(nodes, NodeRows) else [nodes[r] for r in rows]


def prefetch(nodes: Sequence[GraphNode], rows: Iterable[int]) -> None:
    """Read the nodes of ``rows`` in one call (nothing to do for a plain list)."""
    if isinstance(nodes, NodeRows):
        nodes.prefetch(rows)

