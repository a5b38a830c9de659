"""The story page's data and HTML: story-axis order, lanes that never overlap, the query's
subgraph, timelines in story order, bounded size, escaping and self-containment.

The graphs are hand-built (two documents, a retrieved passage, its mentions and events), so the
rules are checked without extraction; ``visualize/test_render_browser.py`` loads real pages in
Chromium and runs the CLI on the real offline default.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_e2rag.errors import E2RAGError, EntityLookupError
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind, Position
from llama_index_e2rag.visualize import (
    Evidence,
    collect_page,
    evidence_from_results,
    story_page,
    write_page,
)
from llama_index_e2rag.visualize import data as view_data
from llama_index_e2rag.visualize.render import render_page
from llama_index_e2rag.visualize.layout import (
    bin_counts,
    spaced_labels,
    stack_rows,
    stack_spans,
    story_axis,
)

INJECTION = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">\'"&'


def _node(
    node_id: str,
    kind: NodeKind,
    pos: Position,
    text: str,
    name: str | None = None,
    chunk: str | None = None,
    **attrs: Any,
) -> GraphNode:
    doc = "first" if pos[0] == 0 else "second"
    return GraphNode(
        id=node_id,
        kind=kind,
        text=text,
        doc_id=doc,
        pos=pos,
        span=(pos[1], pos[1] + len(text)),
        chunk_id=chunk if chunk is not None else f"{doc}-c{pos[1] // 100}",
        name=name,
        attrs=attrs,
    )


def _edge(source: str, target: str, kind: EdgeKind, doc: str = "first") -> GraphEdge:
    return GraphEdge(source=source, target=target, kind=kind, doc_id=doc)


def _chunk(doc: str, order: int, start: int) -> GraphNode:
    return GraphNode(
        id=f"{doc}-c{start // 100}",
        kind=NodeKind.CHUNK,
        text="x" * 100,
        doc_id=doc,
        pos=(order, start, 0),
        span=(start, start + 100),
    )


def _story() -> NetworkXGraphStore:
    """Document "first" (200 characters): Anna meets Ben, Anna leaves; "second" (100): Anna
    returns. Nodes are given out of story order on purpose."""
    first = [
        _chunk("first", 0, 0),
        _chunk("first", 0, 100),
        _node("e-leave", NodeKind.EVENT, (0, 150, 1), "Anna leaves the village"),
        _node("m-anna2", NodeKind.MENTION, (0, 150, 0), "Anna", "Anna", entity_type="PERSON"),
        _node("m-anna1", NodeKind.MENTION, (0, 10, 0), "Anna", "Anna", entity_type="PERSON"),
        _node("m-ben", NodeKind.MENTION, (0, 20, 0), "Ben", "Ben", entity_type="PERSON"),
        _node("e-meet", NodeKind.EVENT, (0, 10, 1), "Anna meets Ben"),
        _node("m-road", NodeKind.MENTION, (0, 60, 0), "road", "road", entity_type="concept"),
    ]
    first_edges = [
        _edge("m-anna1", "e-meet", EdgeKind.PARTICIPATES),
        _edge("m-ben", "e-meet", EdgeKind.PARTICIPATES),
        _edge("m-anna1", "m-ben", EdgeKind.CO_MENTION),
        _edge("m-anna2", "e-leave", EdgeKind.PARTICIPATES),
        _edge("m-anna1", "m-anna2", EdgeKind.NEXT),
    ]
    second = [
        _chunk("second", 1, 0),
        _node(
            "m-anna3", NodeKind.MENTION, (1, 30, 0), "Anna Berg", "Anna Berg", entity_type="PERSON"
        ),
        _node("e-return", NodeKind.EVENT, (1, 30, 1), "Anna Berg returns"),
    ]
    graph = NetworkXGraphStore()
    graph.replace_doc(
        "second", 1, second, [_edge("m-anna3", "e-return", EdgeKind.PARTICIPATES, "second")]
    )
    graph.replace_doc("first", 0, first, first_edges)
    return graph


def _evidence(rank: int, chunk: str, pos: Position, span: tuple[int, int], **kw: Any) -> Evidence:
    doc = "first" if pos[0] == 0 else "second"
    return Evidence(
        rank=rank,
        node_id=f"p{rank}",
        doc_id=doc,
        pos=pos,
        text=f"passage {rank}",
        chunk_id=chunk,
        span=span,
        **kw,
    )


# -- layout -------------------------------------------------------------------------------------
def test_the_axis_follows_doc_order_then_offset_with_documents_side_by_side() -> None:
    axis = story_axis([(1, "second", 100), (0, "first", 300)])
    positions = [(0, 0, 0), (0, 150, 0), (0, 299, 0), (1, 0, 0), (1, 50, 0), (1, 100, 0)]
    xs = [axis.x(p) for p in positions]
    assert xs == sorted(xs) and xs[0] == 0.0 and xs[-1] == 1.0
    assert axis.x((1, 0, 0)) == pytest.approx(300 / 400)  # the second starts where the first ends
    assert axis.x((0, 10_000, 0)) == axis.x((1, 0, 0))  # an offset past its end is clamped


def test_stacked_rows_keep_every_mark_apart() -> None:
    xs = [0.5, 0.51, 0.1, 0.505, 0.9, 0.52, 0.11]
    rows = stack_rows(xs, 0.02)
    for row in set(rows):
        placed = sorted(x for x, r in zip(xs, rows) if r == row)
        assert all(b - a >= 0.02 for a, b in pairwise(placed))
    assert max(rows) == 2  # 0.5, 0.505, 0.51 need three rows; 0.52 fits beside 0.5 again


def test_stacked_spans_never_overlap_in_a_row() -> None:
    spans = [(0.1, 0.3), (0.2, 0.25), (0.31, 0.5), (0.26, 0.4), (0.0, 0.05)]
    rows = stack_spans(spans, 0.01)
    for row in set(rows):
        placed = sorted(span for span, r in zip(spans, rows) if r == row)
        assert all(b[0] - a[1] >= 0.01 for a, b in pairwise(placed))
    assert rows == [0, 1, 0, 1, 0]  # the first row with room, in start order


def test_bin_counts_count_every_position_once() -> None:
    xs = [0.0, 0.01, 0.5, 0.999, 1.0]
    counts = bin_counts(xs, 10)
    assert sum(counts) == len(xs) and counts[0] == 2 and counts[9] == 2


# -- data ---------------------------------------------------------------------------------------
def test_the_subgraph_is_the_passages_graph_nodes_and_their_edges() -> None:
    """A passage naming no graph node gets the mentions and events of its chunk inside its
    span; a passage naming them gets exactly those; chunks are not drawn as nodes."""
    grounded = _evidence(1, "first-c0", (0, 0, 0), (0, 50))  # Anna meets Ben, not the road
    named = _evidence(2, "second-c0", (1, 0, 0), (0, 100), graph_node_ids=("e-return", "second-c0"))
    page = collect_page(_story(), query="Who did Anna meet?", evidence=[named, grounded])
    ids = [m.node_id for m in page.marks]
    assert set(ids) == {"m-anna1", "m-ben", "e-meet", "e-return"}
    assert [m.x for m in page.marks] == sorted(m.x for m in page.marks)  # story order
    assert {m.node_id: m.ranks for m in page.marks}["e-return"] == (2,)
    links = {(link.source, link.target, link.kind) for link in page.links}
    assert links == {
        ("m-anna1", "e-meet", "participates"),
        ("m-ben", "e-meet", "participates"),
        ("m-anna1", "m-ben", "co_mention"),
    }
    assert {m.lane for m in page.marks if m.kind == "event"} == {"event"}
    assert not page.notes


def test_positions_read_as_the_cli_says_them() -> None:
    """Passages, subgraph marks and timeline entries say file, chapter and share of the story
    (``story_position``, as ``e2rag query``'s answer does), not "document 0, character N"."""
    graph = _story()
    for start, heading in ((0, "CHAPTER I."), (100, "CHAPTER II.")):
        chunk = _chunk("first", 0, start)
        text = heading + "\n" + "x" * (99 - len(heading))
        meta = {"node": {"metadata": {"file_name": "first.txt"}}}
        graph.upsert_nodes([chunk.model_copy(update={"text": text, "attrs": meta})])
    evidence = [_evidence(1, "first-c1", (0, 150, 0), (150, 200)),
                _evidence(2, "second-c0", (1, 30, 0), (30, 60), source="Second Story")]
    page = collect_page(graph, query="Where did Anna go?", evidence=evidence, entity="Anna")
    assert [e.position for e in page.evidence] == [
        "first.txt · Chapter II · 75% through the story",
        "Second Story · 30% through the story",  # the caller's name; no heading there
    ]
    marks = {m.node_id: m.position for m in page.marks + page.timeline.marks}
    assert marks["m-anna1"] == "first.txt · Chapter I · 5% through the story"
    assert marks["e-leave"] == "first.txt · Chapter II · 75% through the story"
    assert marks["m-anna3"] == "second · 30% through the story"  # no file name: the doc id
    html = render_page(page)
    assert "first.txt · Chapter II · 75% through the story" in html
    assert not re.search(r"document \d+, character \d+", html)


def _with_chapters(graph: NetworkXGraphStore, starts: dict[int, str]) -> NetworkXGraphStore:
    """Document "first" as first.txt with a chapter heading opening the chunk at each start."""
    for start in (0, 100):
        heading = starts.get(start)
        text = (heading + "\n" if heading else "") + "x" * (100 - len(heading or "") - 1)
        meta = {"node": {"metadata": {"file_name": "first.txt"}}}
        chunk = _chunk("first", 0, start).model_copy(update={"text": text, "attrs": meta})
        graph.upsert_nodes([chunk])
    return graph


def _timeline_groups(html: str) -> list[tuple[str | None, list[str]]]:
    """(the group's chapter heading, its entries' ids) for each group of the timeline list."""
    class Groups(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[tuple[str | None, list[str]]] = []
            self.heading: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found = dict(attrs)
            if tag == "div" and found.get("class") == "chapter-entries":
                self.found.append((found.get("data-chapter"), []))
            elif tag == "li" and self.found and "data-pos" in found:
                self.found[-1][1].append(str(found["data-id"]))
            elif tag == "h3":
                self.heading = []

        def handle_data(self, data: str) -> None:
            if self.heading is not None:
                self.heading.append(data)

        def handle_endtag(self, tag: str) -> None:
            if tag == "h3" and self.heading is not None:  # the heading shows the chapter
                assert "".join(self.heading) == self.found[-1][0]
                self.heading = None

    parser = Groups()
    parser.feed(html[html.index('<section id="timeline">'):])
    return parser.found


def test_the_timeline_lists_its_entries_chapter_by_chapter() -> None:
    """A heading per chapter and its entries under it, each with its share of the story; those
    before the first heading under none; with several documents each heading names its
    document (their chapters may repeat)."""
    graph = _with_chapters(_story(), {100: "CHAPTER II."})
    page = collect_page(graph, entity="Anna")
    assert [(m.chapter, m.share) for m in page.timeline.marks] == [
        ("first.txt", "5%"), ("first.txt \u00b7 Chapter II", "75%"), ("second", "30%")
    ]
    html = render_page(page)
    assert _timeline_groups(html) == [
        ("first.txt", ["m-anna1"]), ("first.txt \u00b7 Chapter II", ["m-anna2"]),
        ("second", ["m-anna3"]),
    ]
    graph.delete_doc("second")
    single = render_page(collect_page(graph, entity="Anna"))
    assert _timeline_groups(single) == [(None, ["m-anna1"]), ("Chapter II", ["m-anna2"])]
    assert re.search(r'<span class="where">75%</span> <span class="text">Anna', single)

    fused = _with_chapters(_fused_anna(_story()), {0: "CHAPTER I.", 100: "CHAPTER II."})
    fused.delete_doc("second")
    assert _timeline_groups(render_page(collect_page(fused, entity="Anna"))) == [
        ("Chapter I", ["m-anna1"]), ("Chapter II", ["m-anna2", "e-leave"])
    ]


def test_mentions_of_a_frequent_name_get_their_own_lane() -> None:
    evidence = [
        _evidence(1, "first-c0", (0, 0, 0), (0, 100)),
        _evidence(2, "first-c1", (0, 100, 0), (100, 200)),
    ]
    page = collect_page(_story(), query="Anna?", evidence=evidence)
    lanes = {m.node_id: m.lane for m in page.marks}
    assert lanes["m-anna1"] == lanes["m-anna2"] == "mention: Anna"
    assert lanes["m-ben"] == lanes["m-road"] == "mention: others"


def test_a_cut_subgraph_keeps_the_best_passages_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(view_data, "MAX_NODES", 2)
    evidence = [
        _evidence(2, "first-c0", (0, 0, 0), (0, 100)),
        _evidence(1, "second-c0", (1, 0, 0), (0, 100)),
    ]
    page = collect_page(_story(), query="q", evidence=evidence)
    assert {m.node_id for m in page.marks} == {"m-anna3", "e-return"}  # rank 1's nodes
    assert page.notes == ["subgraph: showing 2 of 6 graph nodes (best passages first)"]


def test_the_fallback_timeline_is_the_names_mentions_in_story_order() -> None:
    timeline = collect_page(_story(), entity="Anna").timeline
    assert timeline is not None and timeline.total == 3
    assert [m.node_id for m in timeline.marks] == ["m-anna1", "m-anna2", "m-anna3"]
    assert "event graph" in timeline.source  # says how to get the fused entity
    with pytest.raises(EntityLookupError, match="no mention named 'Ana'.*closest: anna"):
        collect_page(_story(), entity="Ana")


def _fused_anna(graph: NetworkXGraphStore) -> NetworkXGraphStore:
    """``graph`` with the event graph's fused entity for Anna of the first document."""
    entity = _node(
        "n-anna",
        NodeKind.ENTITY,
        (0, 10, 5),
        "Anna",
        "Anna",
        event_graph="entity",
        entity_type="person",
        aliases=[],
    )
    edges = [
        _edge("m-anna2", "n-anna", EdgeKind.INSTANCE_OF),
        _edge("m-anna1", "n-anna", EdgeKind.INSTANCE_OF),
        _edge("n-anna", "e-leave", EdgeKind.PARTICIPATES),
    ]
    graph.upsert_nodes([entity])
    graph.upsert_edges(edges)
    return graph


def test_with_the_event_graph_the_timeline_is_the_fused_entitys() -> None:
    timeline = collect_page(_fused_anna(_story()), entity="Anna").timeline
    assert timeline is not None
    assert [(m.kind, m.node_id) for m in timeline.marks] == [
        ("mention", "m-anna1"),
        ("mention", "m-anna2"),
        ("event", "e-leave"),
    ]
    assert timeline.source.startswith("event graph")


def test_overview_counts_every_mention_and_event_and_ranks_characters() -> None:
    overview = collect_page(_story()).overview
    assert sum(overview.mentions) == 5 and sum(overview.events) == 3
    # "Anna" and "Anna Berg" are one character, named by the fullest name the story uses
    assert [(lane.name, lane.total) for lane in overview.characters] == [
        ("Anna Berg", 3),
        ("Ben", 1),
    ]  # persons only ("road" is a concept), most mentioned first


def test_retriever_results_become_evidence_in_rank_order() -> None:
    nodes = [
        NodeWithScore(
            node=TextNode(
                id_="s1",
                text="Anna meets Ben.",
                metadata={
                    "pos": [0, 10, 0],
                    "doc_id": "first",
                    "chunk_id": "first-c0",
                    "span": [10, 25],
                    "file_name": "first.txt",
                    "graph_nodes": ["e-meet"],
                },
            ),
            score=0.9,
        ),
        NodeWithScore(
            node=TextNode(
                id_="s2",
                text="Later.",
                metadata={"doc_id": "second"},
                start_char_idx=5,
                end_char_idx=11,
            ),
            score=None,
        ),
    ]
    first, second = evidence_from_results(nodes)
    assert (first.rank, first.pos, first.span, first.source, first.graph_node_ids) == (
        1,
        (0, 10, 0),
        (10, 25),
        "first.txt",
        ("e-meet",),
    )
    assert first.position == "document 0, character 10"
    assert (second.rank, second.pos, second.position) == (2, None, "position unknown")
    assert second.span == (5, 11)  # a chunk result's own character range


# -- html ---------------------------------------------------------------------------------------
class _Tags(HTMLParser):
    """Every element and attribute the browser's parser would build."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)


def _injected_story() -> NetworkXGraphStore:
    graph = _story()
    graph.upsert_nodes(
        [
            _node(
                "m-evil",
                NodeKind.MENTION,
                (0, 40, 0),
                INJECTION,
                INJECTION,
                chunk="first-c0",
                entity_type="PERSON",
                description=INJECTION,
            ),
            _node("e-evil", NodeKind.EVENT, (0, 41, 1), INJECTION, chunk="first-c0"),
        ]
    )
    return graph


def test_book_text_cannot_inject_html() -> None:
    evidence = [
        Evidence(
            rank=1,
            node_id=INJECTION,
            doc_id=INJECTION,
            pos=(0, 0, 0),
            text=INJECTION,
            chunk_id="first-c0",
            span=(0, 100),
            source=INJECTION,
        )
    ]
    html = story_page(_injected_story(), query=INJECTION, evidence=evidence, entity=INJECTION)
    parser = _Tags()
    parser.feed(html)
    assert parser.tags.count("script") == 1 and "img" not in parser.tags
    assert not [name for name, _ in parser.attrs if name.startswith("on")]
    assert "<script>window" not in html and "<img" not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html


def test_the_page_is_self_contained() -> None:
    evidence = [_evidence(1, "first-c0", (0, 0, 0), (0, 100))]
    html = story_page(_story(), query="Who did Anna meet?", evidence=evidence, entity="Anna")
    for needle in (
        "http://",
        "https://",
        "//cdn",
        "src=",
        "href=",
        "url(",
        "@import",
        "@font-face",
    ):
        assert needle not in html
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert policy and "default-src 'none'" in policy.group(1)
    assert "'unsafe-inline'" not in policy.group(1).split("script-src")[1]  # only our script runs


def _alpha_name(k: int) -> str:
    """A distinct one-word name per ``k`` ("Namaa", "Namab", ...)."""
    return "Nam" + chr(97 + k // 26) + chr(97 + k % 26)


def test_a_novel_sized_graph_gives_a_bounded_page() -> None:
    graph = NetworkXGraphStore()
    nodes: list[GraphNode] = []
    edges: list[GraphEdge] = []
    for i in range(3000):
        start = i * 20
        nodes.append(
            _node(
                f"m{i}",
                NodeKind.MENTION,
                (0, start, 0),
                _alpha_name(i % 40),
                _alpha_name(i % 40),
                entity_type="PERSON",
                description="d" * 500,
            )
        )
        nodes.append(_node(f"e{i}", NodeKind.EVENT, (0, start, 1), "x" * 400))
        edges.append(_edge(f"m{i}", f"e{i}", EdgeKind.PARTICIPATES))
        if i:
            edges.append(_edge(f"m{i - 1}", f"m{i}", EdgeKind.NEXT))
    nodes += [_chunk("first", 0, s) for s in range(0, 60_000, 100)]
    graph.replace_doc("first", 0, nodes, edges)
    evidence = [
        Evidence(
            rank=r,
            node_id=f"p{r}",
            doc_id="first",
            pos=(0, r * 500, 0),
            text="t" * 5000,
            graph_node_ids=tuple(f"m{j}" for j in range(r * 25, r * 25 + 60)),
        )
        for r in range(1, 40)
    ]
    page = collect_page(graph, query="q", evidence=evidence, entity=_alpha_name(3))
    assert len(page.marks) == view_data.MAX_NODES and len(page.links) <= view_data.MAX_EDGES
    assert page.timeline is not None and len(page.timeline.marks) <= view_data.MAX_TIMELINE
    assert len(page.overview.characters) == view_data.MAX_CHARACTERS
    assert all(len(e.text) <= view_data.MAX_PASSAGE_CHARS for e in page.evidence)
    assert any(note.startswith("subgraph: showing 150 of ") for note in page.notes)
    html = story_page(graph, query="q", evidence=evidence, entity=_alpha_name(3))
    assert len(html.encode()) < 600_000


def test_write_page_writes_whole_or_says_why(tmp_path: Path) -> None:
    target = write_page(tmp_path / "story.html", "<!DOCTYPE html>")
    assert target.read_text(encoding="utf-8") == "<!DOCTYPE html>"
    assert os.stat(target).st_mode & 0o044  # readable by others: a page to share
    with pytest.raises(E2RAGError, match="folder .*missing.* does not exist"):
        write_page(tmp_path / "missing" / "story.html", "x")
    with pytest.raises(E2RAGError, match="is a folder"):
        write_page(tmp_path, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["story.html"]  # no temporary left


def test_labels_are_kept_left_to_right_only_where_they_fit() -> None:
    marks = [(0.5, "c"), (0.0, "a"), (0.01, "b"), (0.2, "d"), (0.205, "e")]
    assert spaced_labels(marks, 0.1) == [(0.0, "a"), (0.2, "d"), (0.5, "c")]
    assert spaced_labels(marks, 0.0) == sorted(marks)


def test_the_axis_marks_each_chapter_where_it_starts_and_the_page_labels_them() -> None:
    graph = NetworkXGraphStore()
    text = "Chapter I\nAnna came.\n" + "x" * 60 + "\nCHAPTER II\nBen left.\n"
    chunk = GraphNode(id="c0", kind=NodeKind.CHUNK, text=text, doc_id="d", pos=(0, 0, 0),
                      span=(0, len(text)))
    graph.replace_doc("d", 0, [chunk], [])
    axis = collect_page(graph).axis
    second = text.index("CHAPTER II")
    assert [label for _, label in axis.chapters] == ["Chapter I", "Chapter II"]
    assert axis.chapters[1][0] == pytest.approx(second / len(text))
    html = render_page(collect_page(graph))
    assert re.search(r'class="chapter-label">I</text>', html)
    assert re.search(r'class="chapter-label">II</text>', html)
