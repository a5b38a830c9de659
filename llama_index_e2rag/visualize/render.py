"""The story page as one self-contained HTML string: inline SVG, CSS and a few lines of JS.

Nothing is fetched (a Content-Security-Policy forbids any load and allows only this page's own
script, by hash), and every piece of book text goes through ``html.escape``: a story that
contains ``<script>`` shows it as text. Hover titles are SVG ``<title>`` elements, so they work
without the script; the script only highlights a passage's nodes and a node's edges.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape
from typing import Iterable, Optional, Sequence

from llama_index_e2rag.visualize.data import (
    MAX_TITLE_CHARS,
    Evidence,
    Link,
    Mark,
    Overview,
    StoryPage,
)
from llama_index_e2rag.visualize.layout import (
    StoryAxis,
    pos_key,
    spaced_labels,
    stack_rows,
    stack_spans,
)

WIDTH = 1000
LEFT = 150  # lane labels
RIGHT = 20
PLOT = WIDTH - LEFT - RIGHT
#: Pixels between two chapter labels on the axis.
CHAPTER_LABEL_GAP = 26
ROW = 16
MARK_GAP = 12 / PLOT  # marks closer than 12 px stack in rows
_EVIDENCE_LANE = "evidence passages"
_KIND_ORDER = {"event": 1, "graph event": 2}

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
margin:24px auto;max-width:1040px;color:#1d2433;background:#fff;padding:0 12px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px}
.sub{color:#56607a;margin:0 0 12px}.note{color:#8a4b00;background:#fff4e0;padding:4px 8px;
border-radius:4px;margin:4px 0}svg{width:100%;height:auto;display:block}
svg text{font:11px system-ui,"DejaVu Sans",sans-serif;fill:#1d2433}
svg .lane-label{font-weight:600}svg .axis-label{fill:#56607a}
svg .chapter{stroke:#ffffff;stroke-opacity:.7}svg .chapter-label{fill:#1f2a44;font-size:9px}
.doc{fill:#f2f4f8}.doc.odd{fill:#e6eaf2}.bar-m{fill:#3d6fd8}.bar-e{fill:#e07b24}
.cell{fill:#3d6fd8}.lane-bg{fill:#fafbfd;stroke:#e3e7ef}
.mark circle,.mark rect{stroke:#fff;stroke-width:1}.mark.mention circle{fill:#3d6fd8}
.mark.event rect,.mark.graph_event rect{fill:#e07b24}.mark.other circle{fill:#6b8e23}
.passage rect{fill:#9aa6bf;opacity:.7}.passage text{font-weight:600}
.edge{fill:none;stroke:#9aa6bf;stroke-width:1;opacity:.55}.edge.participates{stroke:#e07b24}
.edge.co_mention{stroke:#3d6fd8;stroke-dasharray:3 2}.edge.next{stroke:#56607a}
.hl circle,.hl rect{stroke:#111;stroke-width:2.5}.passage.hl rect{fill:#1d2433;opacity:1}
.edge.hl{opacity:1;stroke-width:2.5}li.hl{background:#eef3ff}
ol{padding-left:28px}ol.evidence li{margin:0 0 12px}ol.timeline li{margin:0 0 4px}
.where{color:#56607a;font-size:12px}.kind{display:inline-block;min-width:58px;font-size:12px;
color:#56607a}.legend span{margin-right:14px;font-size:12px}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:5px}
p.text{margin:2px 0 0}h3.chapter{font-size:14px;margin:14px 0 4px;color:#1f2a44;
border-bottom:1px solid #e3e7ef}ol.timeline .where{display:inline-block;min-width:38px}
"""

_SCRIPT = """
(function(){
function all(sel){return Array.prototype.slice.call(document.querySelectorAll(sel));}
function mark(on,els){els.forEach(function(el){el.classList.toggle('hl',on);});}
function rankEls(rank){return all('[data-ranks]').filter(function(el){
return el.getAttribute('data-ranks').split(' ').indexOf(rank)>=0;})
.concat(all('[data-rank="'+rank+'"]'));}
all('[data-rank]').forEach(function(el){var r=el.getAttribute('data-rank');
el.addEventListener('mouseenter',function(){mark(true,rankEls(r));});
el.addEventListener('mouseleave',function(){mark(false,rankEls(r));});});
all('g.mark[data-id]').forEach(function(el){var id=el.getAttribute('data-id');
var edges=all('path.edge').filter(function(p){return p.getAttribute('data-source')===id||
p.getAttribute('data-target')===id;});
el.addEventListener('mouseenter',function(){mark(true,edges.concat([el]));});
el.addEventListener('mouseleave',function(){mark(false,edges.concat([el]));});});
})();
"""


def _e(value: object) -> str:
    """Escaped for text and for double- or single-quoted attributes alike."""
    return escape(str(value), quote=True)


def _label(text: str, limit: int = 18) -> str:
    """A lane label that fits the left margin (the hover title has it whole)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _left_label(y: float, text: str, cls: str = "lane-label") -> str:
    """A row's name in the left margin, right-aligned against the plot."""
    return f'<text x="{LEFT - 8}" y="{y}" text-anchor="end" class="{cls}">{_e(text)}</text>'


def _px(x: float) -> float:
    return round(LEFT + x * PLOT, 1)


def _title(mark: Mark) -> str:
    return f"{mark.kind} \u00b7 {mark.position}\n{mark.text}"


def render_page(page: StoryPage) -> str:
    """The whole HTML document of ``page``."""
    sections = [_overview_section(page.axis, page.overview)]
    if page.query is not None:
        sections.append(_subgraph_section(page))
        sections.append(_evidence_section(page.evidence))
    if page.timeline is not None:
        sections.append(_timeline_section(page))
    docs = ", ".join(doc.doc_id for doc in page.axis.docs) or "empty store"
    heading = f"Story view: {docs}"
    asked = (
        f'<p class="sub">Query: <q id="query">{_e(page.query)}</q>'
        + (f" \u00b7 mode {_e(page.mode)}" if page.mode else "")
        + "</p>"
        if page.query is not None
        else '<p class="sub">The story axis: documents in order, left to right.</p>'
    )
    notes = "".join(f'<p class="note">{_e(note)}</p>' for note in page.notes)
    script_hash = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{script_hash}'"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_e(heading)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_e(heading)}</h1>{asked}{notes}"
        + "".join(sections)
        + f"<script>{_SCRIPT}</script></body></html>\n"
    )


def _axis_rows(axis: StoryAxis, top: float, height: float) -> list[str]:
    """Document bands with their ids, and share-of-story ticks below them."""
    parts = []
    starts = axis.starts()
    total = axis.total or 1
    for i, doc in enumerate(axis.docs):
        x0 = _px(starts[doc.order] / total)
        w = max(round(doc.length / total * PLOT, 1), 1)
        parts.append(
            f'<rect class="doc{" odd" if i % 2 else ""}" data-doc="{_e(doc.doc_id)}" x="{x0}" '
            f'y="{top}" width="{w}" height="{height}"><title>document {doc.order}: '
            f"{_e(doc.doc_id)} ({doc.length} characters)</title></rect>"
        )
        if w > 60 and height >= 30:  # thin axes above lanes: shading only, no label
            parts.append(
                f'<text x="{x0 + 4}" y="{top + 12}" class="axis-label">{_e(doc.doc_id)}</text>'
            )
    for x, _ in axis.chapters:  # every chapter a thin line, the labels that fit above
        parts.append(f'<line class="chapter" x1="{_px(x)}" x2="{_px(x)}" y1="{top}" '
                     f'y2="{top + height}"></line>')
    if height >= 30:
        for x, label in spaced_labels(axis.chapters, CHAPTER_LABEL_GAP / PLOT):
            parts.append(f'<text x="{_px(x) + 2}" y="{top + height - 3}" '
                         f'class="chapter-label">{_e(_short_chapter(label))}</text>')
    for tick in (0, 0.25, 0.5, 0.75, 1):
        anchor = "start" if tick == 0 else "end" if tick == 1 else "middle"
        parts.append(
            f'<text x="{_px(tick)}" y="{top + height + 14}" text-anchor="{anchor}" '
            f'class="axis-label">{tick * 100:.0f}%</text>'
        )
    return parts


def _short_chapter(label: str) -> str:
    """"Chapter XII" -> "XII", "Book 2" -> "B 2": room for more of them on the axis."""
    kind, _, number = label.partition(" ")
    return number if kind.lower() == "chapter" else f"{kind[:1]} {number}"


def _overview_section(axis: StoryAxis, overview: Overview) -> str:
    bins = len(overview.mentions)
    width = PLOT / bins if bins else PLOT
    chart = 54
    parts: list[str] = _axis_rows(axis, 0, chart * 2 + 10)
    biggest = max(list(overview.mentions) + list(overview.events) + [1])
    for row, (label, counts, cls) in enumerate(
        (("mentions", overview.mentions, "bar-m"), ("events", overview.events, "bar-e"))
    ):
        base = chart * (row + 1)
        parts.append(_left_label(base - 4, label))
        for i, count in enumerate(counts):
            if not count:
                continue
            h = round(count / biggest * (chart - 8), 1)
            x = round(LEFT + i * width, 1)
            parts.append(
                f'<rect class="{cls}" data-bin="{i}" data-count="{count}" x="{x}" y="{base - h}" '
                f'width="{max(width - 1, 1):.1f}" height="{h}"><title>{count} {label} in '
                f"{i * 100 / bins:.0f}\u2013{(i + 1) * 100 / bins:.0f}% of the story</title></rect>"
            )
    top = chart * 2 + 34
    if overview.characters:
        parts.append(_left_label(top - 6, "main characters", "axis-label"))
    for lane_no, lane in enumerate(overview.characters):
        y = top + lane_no * (ROW + 4)
        most = max(lane.counts) or 1
        parts.append(
            f'<g class="character" data-name="{_e(lane.name)}" data-total="{lane.total}">'
            f'<rect class="lane-bg" x="{LEFT}" y="{y}" width="{PLOT}" height="{ROW}"/>'
            + _left_label(y + 12, f"{_label(lane.name)} ({lane.total})")
        )
        for i, count in enumerate(lane.counts):
            if count:
                parts.append(
                    f'<rect class="cell" x="{LEFT + i * width:.1f}" y="{y + 1}" '
                    f'width="{max(width - 1, 1):.1f}" height="{ROW - 2}" '
                    f'opacity="{0.3 + 0.7 * count / most:.2f}"><title>{_e(lane.name)}: {count} '
                    f"mention(s) in {i * 100 / bins:.0f}\u2013{(i + 1) * 100 / bins:.0f}% of the "
                    "story</title></rect>"
                )
        parts.append("</g>")
    height = top + len(overview.characters) * (ROW + 4) + 6
    return (
        '<section id="overview"><h2>The story axis</h2>'
        f'<svg id="overview-svg" viewBox="0 0 {WIDTH} {height}" role="img" '
        'aria-label="mentions and events along the story">' + "".join(parts) + "</svg></section>"
    )


def _lane_order(lane: str) -> tuple[int, str]:
    if lane == "mention: others":
        return (9, lane)
    if lane.startswith("mention: "):
        return (5, lane)
    return (_KIND_ORDER.get(lane, 7), lane)


def _placed(
    marks: Sequence[Mark], top: float
) -> tuple[dict[str, tuple[float, float]], list[str], float]:
    """Lanes of marks from ``top`` down: each lane as many rows as its close marks need.
    Returns each mark's centre, the lanes' background and labels, and the bottom."""
    centres: dict[str, tuple[float, float]] = {}
    parts: list[str] = []
    y = top
    for lane in sorted({m.lane for m in marks}, key=_lane_order):
        members = [m for m in marks if m.lane == lane]
        rows = stack_rows([m.x for m in members], MARK_GAP)
        height = (max(rows) + 1) * ROW + 4
        parts.append(
            f'<rect class="lane-bg" x="{LEFT}" y="{y}" width="{PLOT}" height="{height}"/>'
            + _left_label(y + 12, _label(lane))
        )
        for mark, row in zip(members, rows):
            centres[mark.node_id] = (_px(mark.x), y + 2 + row * ROW + ROW / 2)
        y += height + 4
    return centres, parts, y


def _mark_svg(mark: Mark, centre: tuple[float, float]) -> str:
    x, y = centre
    kind = mark.kind if mark.kind in ("mention", "event", "graph_event") else "other"
    shape = (
        f'<rect x="{x - 5}" y="{y - 5}" width="10" height="10"/>'
        if kind in ("event", "graph_event")
        else f'<circle cx="{x}" cy="{y}" r="5"/>'
    )
    ranks = f' data-ranks="{" ".join(str(r) for r in mark.ranks)}"' if mark.ranks else ""
    return (
        f'<g class="mark {kind}" data-id="{_e(mark.node_id)}" data-kind="{_e(mark.kind)}" '
        f'data-pos="{pos_key(mark.pos)}" data-lane="{_e(mark.lane)}"{ranks}>{shape}'
        f"<title>{_e(_title(mark))}</title></g>"
    )


def _edge_svg(link: Link, centres: dict[str, tuple[float, float]]) -> Optional[str]:
    if link.source not in centres or link.target not in centres:
        return None
    (x1, y1), (x2, y2) = centres[link.source], centres[link.target]
    bend = min(abs(x2 - x1) / 4, 40) + 6  # arcs above the line, higher for far ends
    mx, my = (x1 + x2) / 2, min(y1, y2) - bend
    role = f" ({link.role})" if link.role else ""
    return (
        f'<path class="edge {_e(link.kind)}" data-kind="{_e(link.kind)}" '
        f'data-source="{_e(link.source)}" data-target="{_e(link.target)}" '
        f'd="M{x1} {y1} Q{mx:.1f} {my:.1f} {x2} {y2}"><title>{_e(link.kind + role)}</title></path>'
    )


def _passage_spans(
    evidence: Sequence[Evidence], axis: StoryAxis
) -> list[tuple[Evidence, float, float, int]]:
    """Each placed passage with its x, its bar's width in pixels (first to last character, at
    least 4) and its row: bars and their rank labels never overlap."""
    placed = []
    for item in evidence:
        if item.pos is None:
            continue
        x = axis.x(item.pos)
        end = axis.x((item.pos[0], item.span[1])) if item.span else x
        placed.append((item, x, max((end - x) * PLOT, 4.0)))
    label = 8 * 3 / PLOT  # room for a rank of up to three digits after the bar
    rows = stack_spans([(x, x + w / PLOT + label) for _, x, w in placed], 2 / PLOT)
    return [(item, x, w, row) for (item, x, w), row in zip(placed, rows)]


def _passage_bars(spans: list[tuple[Evidence, float, float, int]], y: float) -> list[str]:
    """Each passage as a bar along the story, its rank after it."""
    parts = []
    for item, x, w, row in spans:
        top = y + 2 + row * (ROW + 2)
        where = f"passage {item.rank} \u00b7 {item.position}"
        parts.append(
            f'<g class="passage" data-rank="{item.rank}" data-id="{_e(item.node_id)}" '
            f'data-pos="{pos_key(item.pos or ())}"><rect x="{_px(x)}" y="{top}" '
            f'width="{w:.1f}" height="{ROW - 2}"/>'
            f'<text x="{_px(x) + w + 2:.1f}" y="{top + 11}">{item.rank}</text>'
            f"<title>{_e(where)}\n{_e(item.text[:MAX_TITLE_CHARS])}</title></g>"
        )
    return parts


def _subgraph_section(page: StoryPage) -> str:
    spans = _passage_spans(page.evidence, page.axis)
    rows = max((row for *_, row in spans), default=0) + 1
    lane_h = rows * (ROW + 2) + 4
    parts = _axis_rows(page.axis, 0, 6)
    top = 30
    parts.append(
        f'<rect class="lane-bg" x="{LEFT}" y="{top}" width="{PLOT}" height="{lane_h}"/>'
        + _left_label(top + 12, _EVIDENCE_LANE)
    )
    parts += _passage_bars(spans, top)
    centres, lanes, bottom = _placed(page.marks, top + lane_h + 44)
    edges = [svg for svg in (_edge_svg(link, centres) for link in page.links) if svg]
    marks = [_mark_svg(m, centres[m.node_id]) for m in page.marks]
    body = "".join(parts + lanes + edges + marks)
    empty = "" if page.marks else '<p class="sub">No graph nodes behind these passages.</p>'
    return (
        '<section id="subgraph"><h2>Where the evidence sits</h2>'
        '<p class="sub legend"><span><i class="sw" style="background:#3d6fd8"></i>mention</span>'
        '<span><i class="sw" style="background:#e07b24;border-radius:0"></i>event</span>'
        "<span>arcs: participates (orange), co_mention (dashed blue), next (grey)</span>"
        "<span>hover a mark for its text and position</span></p>"
        f'<svg id="subgraph-svg" viewBox="0 0 {WIDTH} {bottom + 4:.0f}" role="img" '
        f'aria-label="the query\'s subgraph along the story">{body}</svg>{empty}</section>'
    )


def _evidence_section(evidence: Iterable[Evidence]) -> str:
    items = []
    for item in evidence:
        score = f" \u00b7 score {item.score:.3f}" if item.score is not None else ""
        pos = f' data-pos="{pos_key(item.pos)}"' if item.pos else ""
        items.append(
            f'<li data-rank="{item.rank}" data-doc="{_e(item.doc_id)}"{pos}>'
            f'<div class="where">{_e(item.position)}{_e(score)}</div>'
            f'<p class="text">{_e(item.text)}</p></li>'
        )
    listed = "".join(items) or "<li>No passage retrieved.</li>"
    return (
        '<section id="evidence"><h2>Evidence passages (retrieval rank)</h2>'
        f'<ol class="evidence">{listed}</ol></section>'
    )


def _timeline_section(page: StoryPage) -> str:
    timeline = page.timeline
    assert timeline is not None
    parts = _axis_rows(page.axis, 0, 6)
    centres, lanes, bottom = _placed(timeline.marks, 30)
    parts += lanes + [_mark_svg(m, centres[m.node_id]) for m in timeline.marks]
    return (
        f'<section id="timeline"><h2>Timeline of <span class="name">{_e(timeline.name)}</span>'
        f'</h2><p class="sub">{_e(timeline.source)}; {timeline.total} entries in story order.</p>'
        f'<svg id="timeline-svg" viewBox="0 0 {WIDTH} {bottom + 4:.0f}" role="img" '
        f'aria-label="timeline">{"".join(parts)}</svg>{_timeline_list(timeline.marks)}</section>'
    )


def _timeline_list(marks: Sequence[Mark]) -> str:
    """The entries chapter by chapter, as ``e2rag timeline`` lists them: a heading, then the
    chapter's entries (those before the first heading under none), numbered on across
    chapters."""
    groups: list[tuple[Optional[str], list[Mark]]] = []
    for mark in marks:  # story order: a chapter's entries are consecutive
        if not groups or groups[-1][0] != mark.chapter:
            groups.append((mark.chapter, []))
        groups[-1][1].append(mark)
    parts = []
    start = 1
    for chapter, members in groups:
        heading = f'<h3 class="chapter">{_e(chapter)}</h3>' if chapter else ""
        named = f' data-chapter="{_e(chapter)}"' if chapter else ""
        items = "".join(_timeline_item(m) for m in members)
        parts.append(
            f'<div class="chapter-entries"{named}>{heading}'
            f'<ol class="timeline" start="{start}">{items}</ol></div>'
        )
        start += len(members)
    return "".join(parts)


def _timeline_item(mark: Mark) -> str:
    """One entry: its kind, its share of the story, its text (an event's with who else takes
    part); the hover title has the whole position."""
    return (
        f'<li data-id="{_e(mark.node_id)}" data-kind="{_e(mark.kind)}" '
        f'data-pos="{pos_key(mark.pos)}" title="{_e(mark.position)}">'
        f'<span class="kind">{_e(mark.kind)}</span> '
        f'<span class="where">{_e(mark.share or mark.position)}</span> '
        f'<span class="text">{_e(mark.text)}</span></li>'
    )
