"""Context assembly (E²RAG §4 step 6): passages in story order plus the linearised subgraph.

Framework-free on purpose (no llama-index index classes) so ``lightrag_ext`` can reuse it. By
default the LLM sees evidence in narrative order with positions shown, whatever order the retriever
ranked it in: the ranking decides *what* is shown, the story decides *how* it is read. A retriever
that presents by relevance (ChronoRAG's default) asks for ``order="retrieval"`` instead.

The metadata keys every retriever puts on returned nodes (``POS_KEY``, ``POSITION_KEY``,
``EVIDENCE_KEY`` …) are defined in ``context.keys``, the one registry of keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Optional, Sequence

from llama_index_e2rag.context.keys import EVIDENCE_KEY, POS_KEY
from llama_index_e2rag.schema import GraphEdge, GraphNode, NodeKind, Position, sort_by_position

_LABEL_PREFIX = {
    NodeKind.CHUNK: "C",
    NodeKind.SENTENCE: "S",
    NodeKind.MENTION: "M",
    NodeKind.EVENT: "E",
    NodeKind.ENTITY: "N",
    NodeKind.FACT: "F",
    NodeKind.TOPIC: "T",
    NodeKind.PASSAGE: "P",
    NodeKind.GRAPH_EVENT: "G",
}

#: ``story``: passages in narrative order; ``retrieval``: in the order the retriever ranked them.
ContextOrder = Literal["story", "retrieval"]


def format_position(pos: Sequence[int]) -> str:
    """A position as the LLM and the CLI show it."""
    return f"document {pos[0]}, character {pos[1]}"


@dataclass(frozen=True)
class Passage:
    """A retrieved source passage (a chunk) and where it sits in the story."""

    chunk_id: str
    doc_id: str
    pos: Position
    text: str
    score: Optional[float] = None


@dataclass(frozen=True)
class ContextBundle:
    """What the answering LLM gets: passages, subgraph nodes and the edges among them."""

    passages: tuple[Passage, ...] = ()
    nodes: tuple[GraphNode, ...] = ()
    edges: tuple[GraphEdge, ...] = ()
    order: ContextOrder = "story"

    def labels(self) -> dict[str, str]:
        """Short labels (P1, M1, E1, ...) for passages and nodes, numbered in story order."""
        labels = {p.chunk_id: f"P{i}" for i, p in enumerate(self.passages, start=1)}
        counters: dict[str, int] = {}
        for node in self.nodes:
            if node.id in labels:
                continue
            prefix = _LABEL_PREFIX.get(node.kind, "X")
            counters[prefix] = counters.get(prefix, 0) + 1
            labels[node.id] = f"{prefix}{counters[prefix]}"
        return labels

    def render(self) -> str:
        """Plain-text context: passages, then the subgraph's nodes and edges."""
        labels = self.labels()
        sections: list[str] = []
        if self.passages:
            blocks = [
                f"[{labels[p.chunk_id]}] document {p.doc_id!r}, position {_fmt_pos(p.pos)}"
                + ("" if p.score is None else f", relevance {p.score:.3f}")
                + f"\n{p.text.strip()}"
                for p in self.passages
            ]
            heading = "in story order" if self.order == "story" else "ranked by relevance"
            sections.append(
                f"Passages {heading} (position = document:character offset):\n\n"
                + "\n\n".join(blocks)
            )
        described = [n for n in self.nodes if not _is_passage(n, labels)]
        if described:
            sections.append(
                "Entities and events behind these passages (story order):\n"
                + "\n".join(_describe(n, labels) for n in described)
            )
        if self.edges:
            sections.append(
                "Relations among them:\n" + "\n".join(_describe_edge(e, labels) for e in self.edges)
            )
        return "\n\n".join(sections)


def assemble_context(
    passages: Iterable[Passage],
    graph_nodes: Iterable[GraphNode],
    graph_edges: Iterable[GraphEdge],
    order: ContextOrder = "story",
) -> ContextBundle:
    """Order passages by story position (or keep their given order with ``order="retrieval"``)
    and nodes by story position; keep only edges among the kept nodes.

    Duplicate passages (same chunk) and duplicate edges (same ends and kind/role) collapse to
    one, so retrievers can pass overlapping evidence without inflating the prompt; in retrieval
    order a duplicate keeps the place of its first occurrence.
    """
    if order not in ("story", "retrieval"):
        raise ValueError(f"order must be 'story' or 'retrieval', got {order!r}")
    unique_passages: dict[str, Passage] = {}
    for passage in passages:
        kept = unique_passages.get(passage.chunk_id)
        if kept is None or (passage.score or 0.0) > (kept.score or 0.0):
            unique_passages[passage.chunk_id] = passage
    ordered_passages = list(unique_passages.values())
    if order == "story":
        ordered_passages.sort(key=lambda p: (p.pos, p.chunk_id))
    nodes = sort_by_position({n.id: n for n in graph_nodes}.values())
    known = {n.id for n in nodes} | set(unique_passages)
    edges: dict[tuple[str, str, str], GraphEdge] = {}
    for edge in graph_edges:
        if edge.source in known and edge.target in known:
            edges.setdefault((edge.source, edge.target, edge.key), edge)
    position = {n.id: n.pos for n in nodes}
    position.update({p.chunk_id: p.pos for p in ordered_passages})
    ordered_edges = sorted(
        edges.values(),
        key=lambda e: (position[e.source], position[e.target], e.kind.value, e.role or ""),
    )
    return ContextBundle(tuple(ordered_passages), tuple(nodes), tuple(ordered_edges), order)


def render_evidence(
    chunk_id: str, graph_nodes: Iterable[GraphNode], graph_edges: Iterable[GraphEdge]
) -> str:
    """Compact evidence of one retrieved chunk, for its LLM-visible metadata.

    One line per node (nodes of ``chunk_id`` unmarked, others with their position), then one
    line per edge among them, so an engine that only shows chunk text plus metadata (llama-index's
    own ``RetrieverQueryEngine``) still gives the LLM the mentions, events and relations behind it.
    """
    bundle = assemble_context([], graph_nodes, graph_edges)
    labels = bundle.labels()
    lines = [_describe(n, labels, home=chunk_id) for n in bundle.nodes]
    lines += [_describe_edge(e, labels) for e in bundle.edges]
    return "\n".join(lines)


def _fmt_pos(pos: Sequence[int]) -> str:
    return f"{pos[0]}:{pos[1]}"


def _is_passage(node: GraphNode, labels: dict[str, str]) -> bool:
    return node.kind == NodeKind.CHUNK and labels.get(node.id, "").startswith("P")


def _describe(node: GraphNode, labels: dict[str, str], home: Optional[str] = None) -> str:
    where = labels.get(node.chunk_id or "")
    if home is not None and node.chunk_id == home:
        place = ""
    elif where and where.startswith("P"):
        place = f", in {where}"
    else:
        place = f", at {_fmt_pos(node.pos)}"
    extras = []
    date = node.attrs.get("date")
    if date:
        extras.append(f"date {date}")
    if node.attrs.get("negated"):
        extras.append("negated")
    extra = f", {', '.join(extras)}" if extras else ""
    return f"{labels[node.id]} [{node.kind.value}{place}{extra}] {node.text.strip()}"


def _describe_edge(edge: GraphEdge, labels: dict[str, str]) -> str:
    kind = f"{edge.kind.value} {edge.role}" if edge.role else edge.kind.value
    description = edge.attrs.get("description")
    tail = f": {description}" if description else ""
    return f"{labels[edge.source]} -[{kind}]-> {labels[edge.target]}{tail}"


def bundle_from_retrieved(
    graph: Any, retrieved: Iterable[Any], order: ContextOrder = "story"
) -> ContextBundle:
    """Rebuild the context of retrieved nodes (``NodeWithScore``-like) from the graph.

    A passage's position and document come from its ``pos`` / ``doc_id`` metadata when the
    retriever set them, else from its graph node; the subgraph is the evidence nodes every passage lists under
    ``EVIDENCE_KEY`` plus all edges among them and the passages. Rebuilding per call (instead of
    remembering the last query on the retriever) keeps concurrent queries independent. Passages
    are read as text only, so the ``evidence`` metadata is not repeated next to the subgraph.
    """
    passages: list[Passage] = []
    evidence: dict[str, None] = {}
    for item in retrieved:
        node = item.node
        metadata = node.metadata
        graph_node = graph.get_node(node.node_id)
        raw = metadata.get(POS_KEY)
        if raw:  # the retriever's own position (a ChronoRAG value starts at its first fact)
            pos = (int(raw[0]), int(raw[1]), int(raw[2]) if len(raw) > 2 else 0)
        else:
            pos = graph_node.pos if graph_node is not None else (0, 0, 0)
        doc_id = metadata.get("doc_id") or (graph_node.doc_id if graph_node else "")
        doc_id = doc_id or node.ref_doc_id or ""
        passages.append(Passage(node.node_id, doc_id, pos, node.get_content(), item.score))
        evidence.update(dict.fromkeys(metadata.get(EVIDENCE_KEY) or ()))
    nodes = graph.get_nodes(list(evidence))
    ids = [n.id for n in nodes] + [p.chunk_id for p in passages]
    return assemble_context(passages, nodes, graph.subgraph_edges(ids), order)
