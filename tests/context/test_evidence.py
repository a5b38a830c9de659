"""Context assembly: story order, positions, the linearised subgraph, rebuilding from nodes."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_e2rag.context.keys import EVIDENCE_KEY
from llama_index_e2rag.context.evidence import (
    ContextBundle,
    Passage,
    assemble_context,
    bundle_from_retrieved,
)
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind


def _node(
    node_id: str, kind: NodeKind, pos: tuple[int, int, int], text: str, chunk: str
) -> GraphNode:
    return GraphNode(id=node_id, kind=kind, text=text, doc_id="d", pos=pos, chunk_id=chunk)


EARLY = _node("c1", NodeKind.CHUNK, (0, 0, 0), "Hermione quoted the rules.", "c1")
LATE = _node("c2", NodeKind.CHUNK, (0, 500, 0), "Hermione lied to the teachers.", "c2")
M_EARLY = _node("m1", NodeKind.MENTION, (0, 0, 0), "Hermione: keeps every rule", "c1")
E_EARLY = _node("e1", NodeKind.EVENT, (0, 9, 1), "Quoting: Hermione quotes the rules", "c1")
M_LATE = _node("m2", NodeKind.MENTION, (0, 500, 0), "Hermione: breaks rules for friends", "c2")
E_LATE = GraphNode(
    id="e2",
    kind=NodeKind.EVENT,
    text="Lie: Hermione lies to the teachers",
    doc_id="d",
    pos=(0, 510, 1),
    chunk_id="c2",
    attrs={"date": "Halloween"},
)
EDGES = [
    GraphEdge(source="m1", target="e1", kind=EdgeKind.PARTICIPATES, doc_id="d", role="A0"),
    GraphEdge(source="m2", target="e2", kind=EdgeKind.PARTICIPATES, doc_id="d"),
    GraphEdge(source="m1", target="m2", kind=EdgeKind.NEXT, doc_id="d"),
    GraphEdge(source="m2", target="outside", kind=EdgeKind.RELATION, doc_id="d"),
]


def _passage(node: GraphNode, score: float) -> Passage:
    return Passage(node.id, node.doc_id, node.pos, node.text, score)


def test_passages_and_nodes_come_in_story_order_whatever_the_ranking() -> None:
    bundle = assemble_context(
        [_passage(LATE, 0.9), _passage(EARLY, 0.4)], [E_LATE, M_LATE, E_EARLY, M_EARLY], EDGES
    )
    assert [p.chunk_id for p in bundle.passages] == ["c1", "c2"]
    assert [n.id for n in bundle.nodes] == ["m1", "e1", "m2", "e2"]
    text = bundle.render()
    assert text.index("Hermione quoted the rules.") < text.index("Hermione lied to the teachers.")
    assert "[P1] document 'd', position 0:0, relevance 0.400" in text
    assert "[P2] document 'd', position 0:500, relevance 0.900" in text


def test_only_edges_among_kept_nodes_survive_and_duplicates_collapse() -> None:
    bundle = assemble_context(
        [_passage(EARLY, 0.4), _passage(EARLY, 0.7)], [M_EARLY, E_EARLY, M_LATE], EDGES + EDGES
    )
    assert len(bundle.passages) == 1 and bundle.passages[0].score == 0.7
    assert {(e.source, e.target, e.kind) for e in bundle.edges} == {
        ("m1", "e1", EdgeKind.PARTICIPATES),
        ("m1", "m2", EdgeKind.NEXT),
    }


def test_render_linearises_the_subgraph_with_labels_roles_and_dates() -> None:
    bundle = assemble_context(
        [_passage(EARLY, 0.4), _passage(LATE, 0.9)], [M_EARLY, E_EARLY, M_LATE, E_LATE], EDGES
    )
    labels = bundle.labels()
    assert [labels[i] for i in ("c1", "c2", "m1", "e1", "m2", "e2")] == [
        "P1",
        "P2",
        "M1",
        "E1",
        "M2",
        "E2",
    ]
    text = bundle.render()
    assert "M1 [mention, in P1] Hermione: keeps every rule" in text
    assert "E2 [event, in P2, date Halloween] Lie: Hermione lies to the teachers" in text
    assert "M1 -[participates A0]-> E1" in text
    assert "M1 -[next]-> M2" in text
    assert "outside" not in text


def test_empty_bundle_renders_empty() -> None:
    assert ContextBundle().render() == ""
    assert assemble_context([], [], EDGES).edges == ()


def test_bundle_from_retrieved_rebuilds_the_subgraph_from_metadata() -> None:
    graph = NetworkXGraphStore()
    graph.upsert_nodes([EARLY, LATE, M_EARLY, E_EARLY, M_LATE, E_LATE])
    graph.upsert_edges(EDGES[:3])
    retrieved = [
        NodeWithScore(
            node=TextNode(id_="c2", text=LATE.text, metadata={EVIDENCE_KEY: ["m2", "e2"]}),
            score=0.9,
        ),
        NodeWithScore(
            node=TextNode(id_="c1", text=EARLY.text, metadata={EVIDENCE_KEY: ["m1"]}), score=0.2
        ),
        NodeWithScore(
            node=TextNode(id_="sentence-x", text="Not in the graph.", metadata={"pos": [0, 9, 0]}),
            score=0.1,
        ),
    ]
    bundle = bundle_from_retrieved(graph, retrieved)
    assert [p.chunk_id for p in bundle.passages] == ["c1", "sentence-x", "c2"]
    assert {n.id for n in bundle.nodes} == {"m1", "m2", "e2"}
    # e1 was not evidence, so its edge is left out; the timeline edge m1 -> m2 stays
    assert {(e.source, e.target) for e in bundle.edges} == {("m2", "e2"), ("m1", "m2")}


def test_retrieval_order_keeps_the_ranking_and_says_so() -> None:
    ranked = [_passage(LATE, 0.9), _passage(EARLY, 0.4), _passage(LATE, 0.5)]
    bundle = assemble_context(ranked, [M_EARLY, M_LATE], EDGES, order="retrieval")
    assert [p.chunk_id for p in bundle.passages] == ["c2", "c1"]
    assert bundle.passages[0].score == 0.9
    text = bundle.render()
    assert text.startswith("Passages ranked by relevance")
    assert text.index("Hermione lied to the teachers.") < text.index("Hermione quoted the rules.")
    assert [n.id for n in bundle.nodes] == ["m1", "m2"]  # descriptions stay in story order
    story = assemble_context(ranked, [M_EARLY, M_LATE], EDGES)
    assert [p.chunk_id for p in story.passages] == ["c1", "c2"]
    try:
        assemble_context(ranked, [], [], order="random")  # type: ignore[arg-type]
    except ValueError as exc:
        assert "order" in str(exc)
    else:
        raise AssertionError("an unknown order must be refused")


def test_render_evidence_describes_one_chunk_and_the_edges_touching_it() -> None:
    from llama_index_e2rag.context.evidence import render_evidence

    touching = [e for e in EDGES if "m2" in (e.source, e.target)]
    text = render_evidence("c2", [M_EARLY, M_LATE, E_LATE], touching)
    lines = text.splitlines()
    assert lines[:3] == [
        "M1 [mention, at 0:0] Hermione: keeps every rule",
        "M2 [mention] Hermione: breaks rules for friends",
        "E1 [event, date Halloween] Lie: Hermione lies to the teachers",
    ]
    assert lines[3:] == ["M1 -[next]-> M2", "M2 -[participates]-> E1"]  # "outside" unknown
