"""SentGraph's online stage (paper 004, §3.2) over a read-only view of the sentence graph.

Framework-free (numpy and ``bm25s`` only): anchors, refinement, path expansion and the final
order are plain functions of a ``SentenceGraphView`` so they can be tested and reused without
llama-index. Three choices the paper leaves open are settled by the feasibility runs of the plan
(``docs/design/sentence_graph_plan.md`` §4):

- anchors fuse dense cosine with BM25 over "topic sentence" (reciprocal rank fusion): without
  BM25, MuSiQue's recall drops well below the hybrid baseline;
- a bridge step takes the bridged topic's sentence nearest the query (one per topic), and an
  ``rst`` neighbour is taken only when it is as close to the query as the best anchor candidate
  left unused: ungated neighbours cost recall at a small budget;
- paths are ranked path-major (anchor 1, its expansions, anchor 2, ...), so a budget keeps whole
  reasoning chains before it keeps more anchors.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal, Optional, Sequence

import numpy as np

from llama_index_e2rag.text import content_words
from llama_index_e2rag.stores.lexical import LexicalIndex
from llama_index_e2rag.ranking.top import top_rows

AnchorRetriever = Literal["hybrid", "dense", "bm25"]
BridgeDirection = Literal["out", "both"]
Action = Literal["answer", "expand"]
#: Reciprocal rank fusion constant (the benchmarks' hybrid baseline uses the same).
RRF_K = 60
#: The rule drops a candidate whose cosine is this far below the best one.
RULE_MARGIN = 0.25
#: The rule answers without expanding when the anchors hold this share of the query's words.
RULE_COVERAGE = 0.9
#: An expanded sentence scores its anchor's score times this, per hop.
HOP_DECAY = 0.9


@dataclass(frozen=True)
class Bridge:
    """A bridge from one topic to another, as the expansion reads it."""

    topic: str
    role: str
    description: str


@dataclass
class SentenceGraphView:
    """The sentence graph as arrays: row ``i`` is one SentGraph sentence.

    ``rst[i]`` lists ``(neighbour, type, class)`` in both directions; ``members[topic]`` lists a
    topic's sentences, cores first; ``vectors`` are unit rows (zeros for a sentence without one).
    """

    ids: list[str]
    texts: list[str]
    topic_of: list[str]
    role: list[str]
    vectors: np.ndarray
    lexical: LexicalIndex
    rst: list[list[tuple[int, str, str]]]
    bridges_out: dict[str, list[Bridge]]
    bridges_in: dict[str, list[Bridge]]
    members: dict[str, list[int]]
    topic_names: dict[str, str]

    def __len__(self) -> int:
        return len(self.ids)

    def cosines(self, q_vec: Sequence[float]) -> np.ndarray:
        """Cosine of the query with every sentence."""
        if not len(self.ids) or self.vectors.shape[1] == 0:
            return np.zeros(len(self.ids), dtype=np.float32)
        q = np.asarray(q_vec, dtype=np.float32)
        return self.vectors @ (q / (np.linalg.norm(q) or 1.0))


@dataclass(frozen=True)
class Candidate:
    """An anchor candidate (in fusion order): its row and query cosine (the reported score)."""

    idx: int
    cosine: float


@dataclass(frozen=True)
class Refinement:
    """Which candidates stay anchors (positions in the candidate list) and whether to expand."""

    keep: tuple[int, ...]
    action: Action


@dataclass
class Path:
    """Sentences from an anchor on, and the step that reached each one after the anchor."""

    nodes: list[int]
    steps: list[str] = field(default_factory=list)

    @property
    def last(self) -> int:
        return self.nodes[-1]


@dataclass(frozen=True)
class Ranked:
    """A sentence in the final order: its path (the anchor's alone for an anchor or a fill)."""

    idx: int
    score: float
    path: Path
    via: str

    @property
    def hop(self) -> int:
        return len(self.path.nodes) - 1


def anchor_candidates(
    view: SentenceGraphView,
    cosines: np.ndarray,
    query: str,
    k: int,
    retriever: AnchorRetriever = "hybrid",
) -> list[Candidate]:
    """The ``k`` best sentences by dense cosine, BM25 or their reciprocal rank fusion."""
    if not len(view):
        return []
    fused = np.zeros(len(view), dtype=np.float64)
    if retriever in ("hybrid", "dense"):
        fused += _rrf(cosines)
    if retriever in ("hybrid", "bm25"):
        fused += _rrf(view.lexical.scores(query), only_positive=True)
    order = top_rows(fused, k, cosines).tolist()
    return [Candidate(i, float(cosines[i])) for i in order if fused[i] > 0]


def _rrf(scores: np.ndarray, only_positive: bool = False) -> np.ndarray:
    """1 / (RRF_K + rank) per row, rank 1 the best; rows without a match get 0 (BM25)."""
    scores = np.asarray(scores, dtype=np.float64)
    out = np.zeros(len(scores), dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    if only_positive:
        order = order[: int(np.count_nonzero(scores > 0))]
    out[order] = 1.0 / (RRF_K + np.arange(1, len(order) + 1))
    return out


def refine_by_rule(
    view: SentenceGraphView, candidates: Sequence[Candidate], query: str, max_anchors: int
) -> Refinement:
    """The LLM-free stand-in for the paper's refinement prompt.

    Keeps the first ``max_anchors`` candidates within ``RULE_MARGIN`` of the best cosine (a
    clearly weaker candidate is the "loosely related" anchor the prompt drops) and answers at
    once when they already hold ``RULE_COVERAGE`` of the query's content words.
    """
    if not candidates:
        return Refinement((), "expand")
    best = max(c.cosine for c in candidates)
    keep = tuple(
        i for i, c in enumerate(candidates) if c.cosine >= best - RULE_MARGIN
    )[:max_anchors]
    wanted = content_words(query)
    held: set[str] = set()
    for i in keep:
        idx = candidates[i].idx
        held |= content_words(f"{view.topic_names.get(view.topic_of[idx], '')} {view.texts[idx]}")
    covered = not wanted or len(wanted & held) >= RULE_COVERAGE * len(wanted)
    return Refinement(keep, "answer" if covered else "expand")


def expand(
    view: SentenceGraphView,
    anchors: Sequence[int],
    cosines: np.ndarray,
    *,
    max_len: int = 3,
    beam: int = 1,
    max_expansions: int = 10,
    bridge_direction: BridgeDirection = "out",
    rst_gate: float = -np.inf,
) -> list[Path]:
    """Breadth-first paths from each anchor, in anchor order; every sentence is used once.

    A path grows by its ``beam`` best next sentences by query cosine: through a bridge of its
    last sentence's topic (that topic's sentence nearest the query; each bridge is crossed once
    per query, so a second anchor of the same topic does not pull the bridged topic's weaker
    sentences) or an ``rst`` edge whose neighbour reaches ``rst_gate``. It stops at ``max_len``
    sentences, when nothing qualifies, or when ``max_expansions`` sentences were added over all
    paths. A bridge never leads back to a topic already on the path (A -> B -> A would re-enter
    the anchor's own text as a "hop", past the ``rst`` gate). The result lists each anchor's
    one-sentence path followed by its extensions.
    """
    used = set(anchors)
    crossed: set[tuple[str, str]] = set()
    paths: list[Path] = []
    added = 0
    for anchor in anchors:
        queue = deque([Path([anchor])])
        while queue:
            path = queue.popleft()
            paths.append(path)
            if len(path.nodes) >= max_len or added >= max_expansions:
                continue
            on_path = {view.topic_of[i] for i in path.nodes}
            steps = _next_steps(
                view, path.last, cosines, bridge_direction, rst_gate, used, crossed, on_path
            )
            for idx, step, bridge in steps[:beam]:
                if added >= max_expansions:
                    break
                used.add(idx)
                if bridge is not None:
                    crossed.add(bridge)
                added += 1
                queue.append(Path([*path.nodes, idx], [*path.steps, step]))
    return paths


def _next_steps(
    view: SentenceGraphView,
    idx: int,
    cosines: np.ndarray,
    direction: BridgeDirection,
    rst_gate: float,
    used: set[int],
    crossed: set[tuple[str, str]],
    on_path: set[str],
) -> list[tuple[int, str, Optional[tuple[str, str]]]]:
    """Unused sentences one step from ``idx`` with their step label and bridge (``None`` for an
    ``rst`` step), best query cosine first; bridges into a topic of ``on_path`` are skipped."""
    found: dict[int, tuple[str, Optional[tuple[str, str]]]] = {}
    topic = view.topic_of[idx]
    bridges = list(view.bridges_out.get(topic, ()))
    if direction == "both":
        bridges += view.bridges_in.get(topic, [])
    for bridge in bridges:
        key = (topic, bridge.topic)
        fresh = [i for i in view.members.get(bridge.topic, ()) if i not in used]
        if fresh and key not in crossed and bridge.topic not in on_path:
            best = max(fresh, key=lambda i: cosines[i])  # ties: the first, i.e. a core
            found.setdefault(best, (f"bridge:{bridge.role}({bridge.description})", key))
    for neighbour, type_, _cls in view.rst[idx]:
        if neighbour not in used and cosines[neighbour] >= rst_gate:
            found.setdefault(neighbour, (f"rst:{type_}", None))
    ranked = sorted(found.items(), key=lambda item: (-cosines[item[0]], item[0]))
    return [(i, step, bridge) for i, (step, bridge) in ranked]


def unused_gate(candidates: Sequence[Candidate], anchors: Sequence[int]) -> float:
    """The cosine an ``rst`` neighbour must reach: that of the best candidate left unused (the
    weakest anchor's when every candidate is an anchor), so it never displaces better evidence."""
    taken = set(anchors)
    unused = [c.cosine for c in candidates if c.idx not in taken]
    if unused:
        return max(unused)
    return min((c.cosine for c in candidates), default=-np.inf)


def rank(paths: Sequence[Path], candidates: Sequence[Candidate], fill: bool) -> list[Ranked]:
    """Path-major order (each sentence once), then with ``fill`` the unused candidates in fusion
    order; an expansion scores its anchor's cosine times ``HOP_DECAY`` per hop."""
    cosine = {c.idx: c.cosine for c in candidates}
    out: list[Ranked] = []
    seen: set[int] = set()
    for path in paths:
        if path.last in seen:
            continue
        seen.add(path.last)
        hop = len(path.nodes) - 1
        score = cosine.get(path.nodes[0], 0.0) * HOP_DECAY**hop
        via = "anchor" if hop == 0 else path.steps[-1].split(":", 1)[0]
        out.append(Ranked(path.last, score, path, via))
    if fill:
        for c in candidates:
            if c.idx not in seen:
                seen.add(c.idx)
                out.append(Ranked(c.idx, c.cosine, Path([c.idx]), "fill"))
    return out


def relation_path(view: SentenceGraphView, ranked: Ranked) -> str:
    """A path as the LLM reads it, topics in brackets, e.g. "anchor [Silver Harp] ->
    bridge:shared_entity(mentions Lanternfield) -> [Lanternfield]" (the last one is this node's);
    a fill sentence is a "match", not an anchor."""
    path = ranked.path
    start = "match" if ranked.via == "fill" else "anchor"
    parts = [f"{start} [{view.topic_names.get(view.topic_of[path.nodes[0]], '')}]"]
    for idx, step in zip(path.nodes[1:], path.steps):
        parts.append(f"{step} -> [{view.topic_names.get(view.topic_of[idx], '')}]")
    return " -> ".join(parts)
