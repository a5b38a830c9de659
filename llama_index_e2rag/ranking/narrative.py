"""The ``narrative`` mode's fusion: lexical + dense + graph signals + temporal anchors.

Framework-free (NumPy and the schema only) so the retriever and the weight-fitting script score
passages identically, and ``lightrag_ext`` can reuse it. A ``PassageTable`` (``passages``) is the
read model of one index state: passages in story order with their vectors, and the graph read per
passage (which characters are mentioned there, pronouns resolved by the parser included; which
events happen there, with their participants).
``signals`` turns one question into per-passage signal arrays; ``rank`` combines them with
``NarrativeWeights`` and applies continuation. Splitting the two lets the fitting script compute
signals once per question and search weights cheaply.

Signals (each an array over passages):

* ``lexical``, ``dense``: BM25 and cosine, standardised over the passages (z-scores), so their
  weights compare across indexes of any size;
* ``mention``: share of the question's characters (IDF-weighted) mentioned in the passage; a
  question name matches a mention through its most specific word ("McGregor" ~ "Mr. McGregor");
* ``event``: the passage has an event whose predicate lemma is one of the question's (IDF over
  events, so *be / have / do* weigh little), more when it shares a participant;
* ``co_event``: two of the question's characters take part in one event of the passage;
* ``anchor``: *after / before / when …* — see ``temporal`` (the cue) and ``anchor`` (which
  passage the clause names, how sure that is, and the region in story terms);
* ``edge``: *first / last / finally* questions lean toward the start or end of the story;
* ``answer_type``: a *who / where / when* question's passage writes a person / place / time the
  question does not name (``answer_kind``);
* ``section``: how well the passage's stretch of the story (``section_passages`` passages)
  matches the question — coarse-to-fine without an LLM (``sections``).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

from llama_index_e2rag.ranking.anchor import Anchor, find_anchor, wrong_side
from llama_index_e2rag.ranking.answer_kind import answer_type_signal
from llama_index_e2rag.ranking.names import match_names
from llama_index_e2rag.ranking.passages import NOT_CHARACTERS, PassageTable, build_table
from llama_index_e2rag.ranking.sections import section_signal
from llama_index_e2rag.ranking.stats import zscore
from llama_index_e2rag.ranking.temporal import TemporalCue, edge_prior
from llama_index_e2rag.schema import GraphNode, normalize_text

SIGNALS = (
    "lexical", "dense", "mention", "event", "co_event", "anchor", "edge", "answer_type", "section"
)
#: Verbs a question uses to ask, not to name an event.
LIGHT_VERBS = frozenset({"be", "have", "do", "happen", "occur"})
#: Where the fitted weights ship (see ``benchmarks/fit_narrative.py`` for how they were fitted).
WEIGHTS_PATH = Path(__file__).resolve().parent.parent / "data" / "narrative_weights.json"
_NO_ROWS = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class NarrativeWeights:
    """How signals combine (fitted on FairytaleQA train; see ``WEIGHTS_PATH``, whose values the
    defaults repeat, so ``NarrativeWeights()`` and ``NarrativeWeights.fitted()`` agree).

    ``continuation``: a hit within this many z-units of the best hit brings the passage that
    follows it (negative: never). ``anchor_reach``: the story distance (share of the document,
    or of the anchor characters' appearances) at which the anchor bonus has halved;
    ``anchor_self``: what the anchor itself gets; ``anchor_follow``: the least share of the
    bonus a passage on the cue's side keeps where a character of the anchor's moment reappears,
    however far away; ``anchor_side``: what a passage on the side
    the question does not look at loses (*after X*: the story before X);
    ``anchor_confidence``: the least calibrated confidence an anchor needs to be used at all;
    ``anchor_confidence_long``: the same in a document longer than ``long_chars``
    characters (a novel, where a wrong anchor costs chapters);
    ``anchor_calibration``: (bias, margin, peak) of that confidence's logistic curve
    (``ranking.anchor``). ``section_passages``: how many passages make one section of the
    ``section`` signal (chosen with ``section`` on the novel protocol), which only documents
    longer than ``long_chars`` are cut into.
    """

    lexical: float = 0.5
    dense: float = 0.7
    mention: float = 0.5
    event: float = 2.0
    co_event: float = 0.5
    anchor: float = 3.0
    edge: float = 0.25
    answer_type: float = 0.5
    section: float = 0.25
    continuation: float = 0.0
    anchor_reach: float = 0.005
    anchor_self: float = 0.5
    anchor_side: float = 0.5
    anchor_follow: float = 0.0
    anchor_confidence: float = 0.5
    anchor_confidence_long: float = 0.7
    long_chars: int = 30_000
    anchor_calibration: tuple[float, float, float] = (-1.0674, 0.6181, 0.1794)
    section_passages: int = 50

    @classmethod
    def fitted(cls) -> "NarrativeWeights":
        """The shipped fitted weights (the class defaults if the file is missing)."""
        if not WEIGHTS_PATH.exists():
            return cls()
        data = json.loads(WEIGHTS_PATH.read_text(encoding="utf-8"))
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.get("weights", {}).items() if k in known}
        if "anchor_calibration" in values:
            values["anchor_calibration"] = tuple(values["anchor_calibration"])
        return cls(**values)

    def without(self, *signals: str) -> "NarrativeWeights":
        """The same weights with some signals (or ``continuation``) switched off."""
        changes = {}
        for name in signals:
            if name == "continuation":
                changes[name] = -1.0
            elif name in SIGNALS:
                changes[name] = 0.0
            else:
                raise ValueError(f"unknown signal {name!r}; choose from {SIGNALS + ('continuation',)}")
        return NarrativeWeights(**{**asdict(self), **changes})


@dataclass(frozen=True)
class QueryGraph:
    """What the parser read in the question (or the anchor clause)."""

    names: tuple[str, ...] = ()
    #: (predicate lemma, participant names) per event
    events: tuple[tuple[str, frozenset[str]], ...] = ()

    @classmethod
    def from_nodes(cls, nodes: Iterable[GraphNode]) -> "QueryGraph":
        """Mention names and events of parsed query nodes; the question's own light verbs
        ("What did he *do*", "What *happened*") name no event and are left out."""
        names, events = [], []
        for node in nodes:
            if node.kind.value == "mention":
                names.append(normalize_text(node.name or node.text))
            elif (
                node.kind.value == "event"
                and node.attrs.get("lemma")
                and node.attrs["lemma"].lower() not in LIGHT_VERBS
            ):
                participants = frozenset(
                    normalize_text(p) for p in node.attrs.get("participants", ())
                )
                events.append((node.attrs["lemma"].lower(), participants))
        return cls(tuple(dict.fromkeys(n for n in names if n)), tuple(events))


@dataclass
class Signals:
    """Per-passage signal arrays of one question (and of its anchor clause, if any)."""

    lexical: np.ndarray
    dense: np.ndarray
    mention: np.ndarray
    event: np.ndarray
    co_event: np.ndarray
    cue: Optional[TemporalCue] = None
    #: 1 where the passage writes what the question's wh-word asks for (``answer_kind``)
    answer_type: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    #: the anchor clause's own lexical / dense / event arrays (its anchors depend on weights)
    clause: Optional[tuple[np.ndarray, np.ndarray, np.ndarray]] = None
    #: the question's best cosine with any passage: how much the story has to say about it at
    #: all, which the z-scored signals cannot tell (``ranking.scores`` calibrates with it)
    story_match: float = 0.0
    #: each passage's cosine with the question (``dense`` before standardising)
    cosine: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))


def signals(
    table: PassageTable,
    lexical: np.ndarray,
    query_vector: np.ndarray,
    graph: QueryGraph,
    cue: Optional[TemporalCue] = None,
    clause: Optional[tuple[np.ndarray, np.ndarray, QueryGraph]] = None,
    kind: Optional[str] = None,
) -> Signals:
    """Signal arrays for one question; ``clause`` is the anchor clause's (BM25, vector, graph);
    ``kind`` the answer kind its wh-word asks for (``answer_types.answer_type``'s value)."""
    cosine = cosines(table, query_vector)
    out = Signals(
        lexical=zscore(lexical),
        dense=zscore(cosine),
        mention=mention_signal(table, graph.names),
        event=event_signal(table, graph),
        co_event=co_event_signal(table, graph),
        cue=cue,
        answer_type=answer_type_signal(table.typed, len(table), kind, question_names(table, graph)),
        story_match=float(cosine.max()) if cosine.size else 0.0,
        cosine=cosine,
    )
    if clause is not None:
        out.clause = clause_signals(table, *clause)
    return out


def clause_signals(
    table: PassageTable, lexical: np.ndarray, vector: np.ndarray, graph: QueryGraph
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The anchor clause's own lexical, dense and event arrays (``Signals.clause``)."""
    return (
        zscore(lexical),
        zscore(cosines(table, vector)),
        event_signal(table, graph),
    )


def cosines(table: PassageTable, vector: np.ndarray) -> np.ndarray:
    """Each passage's cosine with ``vector`` (rows and vector are unit length).

    Summed by NumPy's own loop, not BLAS: OpenBLAS splits a matrix-vector product over every
    core and its threads then spin, so on a busy machine one product of a novel (2,842 passages)
    took 8 ms instead of 0.5 ms and starved the question's parse and embedding; and its last
    bits depended on how many threads ran it.
    """
    if not len(table):
        return np.zeros(0)
    return np.einsum("ij,j->i", table.vectors, _unit(vector))


def _unit(vector: np.ndarray) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def mention_signal(table: PassageTable, names: Sequence[str]) -> np.ndarray:
    """IDF-weighted share of the question's characters mentioned in each passage."""
    out = np.zeros(len(table), dtype=np.float32)
    total = 0.0
    for name in names:
        rows = _rows_of(table, name)
        if rows.size == 0:
            continue
        idf = math.log(1.0 + len(table) / rows.size)
        out[rows] += idf
        total += idf
    return out / total if total else out


def question_names(table: PassageTable, graph: QueryGraph) -> list[str]:
    """The question's names and every mention name they refer to (``match_names``)."""
    return [*graph.names, *(m for n in graph.names for m in match_names(table, n))]


def _rows_of(table: PassageTable, name: str) -> np.ndarray:
    matched = [table.names[n] for n in match_names(table, name)]
    return np.unique(np.concatenate(matched)) if matched else np.zeros(0, dtype=np.int64)


def event_signal(table: PassageTable, graph: QueryGraph) -> np.ndarray:
    """Best matching event per passage: lemma IDF (scaled to 1), +50 % with a shared participant."""
    out = np.zeros(len(table), dtype=np.float32)
    if not graph.events or not table.events:
        return out
    total_events = sum(len(v) for v in table.events.values())
    max_idf = math.log(1.0 + total_events)
    aliases = {n: set(match_names(table, n)) | {n} for n in graph.names}
    for lemma, participants in graph.events:
        found = table.events.get(lemma, ())
        if not found:
            continue
        weight = math.log(1.0 + total_events / len(found)) / max_idf
        wanted = set().union(*(aliases.get(p, {p}) for p in participants)) if participants else set()
        for row, who in found:
            value = weight * (1.0 if wanted and who & wanted else 2.0 / 3.0)
            out[row] = max(out[row], value)
    return out


def co_event_signal(table: PassageTable, graph: QueryGraph) -> np.ndarray:
    """1 where an event of the passage has two (or more) of the question's characters."""
    out = np.zeros(len(table), dtype=np.float32)
    if len(graph.names) < 2:
        return out
    rows, by_participant = table.event_participants
    count = np.zeros(rows.size, dtype=np.int64)
    for name in graph.names:
        hit = np.zeros(rows.size, dtype=bool)
        for alias in set(match_names(table, name)) | {name}:
            hit[by_participant.get(alias, _NO_ROWS)] = True
        count += hit
    out[rows[count >= 2]] = 1.0
    return out


def locate_anchor(
    table: PassageTable,
    cue: Optional[TemporalCue],
    clause: Optional[tuple[np.ndarray, np.ndarray, np.ndarray]],
    w: NarrativeWeights,
) -> Optional[Anchor]:
    """The anchor of a question's *after / before / during* clause (``ranking.anchor``): the
    passage the clause's own lexical, dense and event signals (``clause_signals``) score best,
    with its confidence and region; ``None`` without a clause or with the anchor switched off.
    Every mode finds its anchor here, so they agree on it."""
    if cue is None or clause is None or not w.anchor or not len(table):
        return None
    if cue.relation not in ("after", "before", "during"):
        return None
    c_lex, c_dense, c_event = clause
    score = w.lexical * c_lex + w.dense * c_dense + w.event * c_event
    row = int(np.argmax(score)) if score.size else 0
    long_story = table.doc_length(int(table.doc_of[row])) > w.long_chars
    # a wrong anchor costs a fairy tale a few sentences and a novel chapters: a long story asks
    # for a surer anchor (anchor_confidence_long, chosen on the novel protocol)
    threshold = w.anchor_confidence_long if long_story else w.anchor_confidence
    return find_anchor(
        table, score, cue.relation, w.anchor_calibration, threshold, w.anchor_reach,
        w.anchor_self, w.anchor_follow,
    )


@dataclass(frozen=True)
class Ranked:
    """A ranked passage row, its fused score, and what brought it."""

    row: int
    score: float
    contributions: dict[str, float]
    continued_from: Optional[int] = None


def fuse(
    table: PassageTable, sig: Signals, w: NarrativeWeights, anchor: Optional[Anchor] = None
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The fused score per passage and each signal's weighted contribution; ``anchor``: the
    question's anchor when the caller has located it already (``locate_anchor``), so it is
    located once per question."""
    parts: dict[str, np.ndarray] = {
        "lexical": w.lexical * sig.lexical,
        "dense": w.dense * sig.dense,
        "mention": w.mention * sig.mention,
        "event": w.event * sig.event,
        "co_event": w.co_event * sig.co_event,
    }
    if w.answer_type and sig.answer_type.size == len(table):
        parts["answer_type"] = w.answer_type * sig.answer_type
    if w.section and sig.cosine.size == len(table):
        blocks, norms = table.sections(w.section_passages, w.long_chars)
        parts["section"] = w.section * section_signal(
            blocks, norms, sig.cosine, sig.lexical, w.lexical, w.dense
        )
    cue = sig.cue
    if cue is not None and cue.relation in ("first", "last") and w.edge:
        parts["edge"] = w.edge * edge_prior(table.doc_of, cue.relation)
    if anchor is None:
        anchor = locate_anchor(table, sig.cue, sig.clause, w)
    if anchor is not None and anchor.used:
        parts["anchor"] = w.anchor * anchor.bonus - w.anchor_side * wrong_side(table, anchor)
    total = np.zeros(len(table), dtype=np.float32)
    for value in parts.values():
        total = total + value
    return total, parts


def rank(
    table: PassageTable, sig: Signals, w: NarrativeWeights, limit: int,
    anchor: Optional[Anchor] = None,
) -> list[Ranked]:
    """The best passages by fused score (``fuse``), each strong hit followed by its neighbour
    in story order (``order``)."""
    if not len(table):
        return []
    total, parts = fuse(table, sig, w, anchor)
    return order(table, total, parts, sig.cue, w, limit)


def order(
    table: PassageTable, total: np.ndarray, parts: dict[str, np.ndarray],
    cue: Optional[TemporalCue], w: NarrativeWeights, limit: int,
) -> list[Ranked]:
    """Passages by ``total``, each strong hit followed by its neighbour (continuation).

    A hit continues toward where the question looks: the passage before it for a *before*
    question, the passage after it otherwise. ``limit`` bounds how many rows come back
    (continuations included); the caller fills its budget from the front of this list.
    """
    if not len(table):
        return []
    depth = min(len(table), max(limit, 1))
    by_score = np.argsort(-total, kind="stable")[:depth]
    best = float(total[by_score[0]])
    step = -1 if cue is not None and cue.relation == "before" else 1
    out: list[Ranked] = []
    seen: set[int] = set()
    for row in (int(r) for r in by_score):
        if len(out) >= depth:
            break
        if row in seen:
            continue
        seen.add(row)
        out.append(Ranked(row, float(total[row]), _contrib(parts, row)))
        nxt = row + step
        if (
            w.continuation >= 0
            and float(total[row]) >= best - w.continuation
            and 0 <= nxt < len(table)
            and table.doc_of[nxt] == table.doc_of[row]
            and nxt not in seen
            and len(out) < depth
        ):
            seen.add(nxt)
            out.append(Ranked(nxt, float(total[nxt]), _contrib(parts, nxt), continued_from=row))
    return out


def _contrib(parts: dict[str, np.ndarray], row: int) -> dict[str, float]:
    return {name: round(float(v[row]), 4) for name, v in parts.items() if float(v[row]) != 0.0}


__all__ = [  # the passage table and the z-score live in passages.py and stats.py; importable here
    "LIGHT_VERBS", "NOT_CHARACTERS", "SIGNALS", "WEIGHTS_PATH", "NarrativeWeights", "PassageTable",
    "QueryGraph", "Ranked", "Signals", "build_table", "clause_signals", "co_event_signal",
    "cosines", "event_signal", "fuse", "locate_anchor", "mention_signal", "order",
    "question_names", "rank", "signals", "zscore",
]
