"""The anchor of an *after / before / during X* question, measured in story terms.

``temporal`` reads the cue ("after the troll incident" → *after*, clause "the troll incident");
this module decides **which passage X is**, **how sure that is**, and **which part of the story
the question points at**, the same way for every mode (``narrative`` ranks passages by it,
``entity_event`` its chunks; ``anchor_metadata`` says it on every result).

**The anchor** is the passage the clause matches best (its own fused lexical, dense and event
signals, z-units). **Its confidence** is a calibrated probability that this is the passage the
question means, from two margins: ``margin``, how far the best match stands above the best
*rival*, the best-matching passage elsewhere in the story (more than ``NEAR`` passages away: a
restatement in the same moment is no rival); ``peak``, how far it stands above the story's
general level (its z-score: a clause that matches everything a little matches nothing). A
logistic curve fitted on FairytaleQA train (``benchmarks/fit_anchor.py``) turns them into the
probability that the anchor lies where the question's gold answer needs it. Below
``anchor_confidence`` the anchor is **not used**: no bonus, and nothing on the other side pays.

**The region** is measured in story terms, not in passages, and has two parts. *Near*: a
passage's distance from the anchor is the share of the document between them, and its bonus is
``1 / (1 + distance / anchor_reach)`` (a scene break the size of a chapter heading ends it:
beyond one, nothing is near). *The characters' later scenes*: on the cue's side, a passage where
one of the characters of the anchor's moment (named people, places, things within ``NEAR``
passages of it, not its dates or times; under any of their names, "Clara" for "Clara Vane", as
``names.match_names`` reads them) reappears keeps at least ``anchor_follow`` of the bonus,
however far and however many chapters away it comes. An *after X* question about a heroine asks
about her next scenes, which in a novel come chapters later; a share-of-the-story decay gave
them nothing there, so a 2,000-word gap lost to the earlier facet. A fairy tale, whose
characters are in every passage, gets a uniform lift of its cue side, which ``anchor_side``
already weighs; the fit (``benchmarks/fit_anchor.py``) chooses both. The anchor itself gets
``anchor_self``. A *used* *after* (*before*) anchor costs the story before (after) it
``anchor_side`` times ``side_cost(confidence)``, the surprise of the anchor being wrong: an
anchor just over the threshold costs the other side little, a sure one (a named incident told
once) enough to keep the earlier (later) facet below the one the question asks for, even when
the earlier facet repeats the question's words.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from llama_index_e2rag.ranking.names import match_names
from llama_index_e2rag.ranking.temporal import Relation

if TYPE_CHECKING:
    from llama_index_e2rag.ranking.passages import PassageTable

#: Passages either side of the best match that belong to the same moment (not rivals).
NEAR = 2
#: The confidence the side cost saturates at (``side_cost``): no anchor is certain.
MAX_CONFIDENCE = 0.99
#: Characters of the anchor passage quoted in ``metadata["anchor"]``.
QUOTE_CHARS = 160


@dataclass(frozen=True)
class Anchor:
    """Where an anchored question points: the anchor passage, how sure, and the region."""

    row: int
    relation: Relation
    confidence: float
    used: bool
    margin: float
    peak: float
    #: bonus (0-1) per passage row for being where the question points (zero when not used)
    bonus: np.ndarray
    #: rows on the cue's side whose bonus is at least half: the region's first and last row
    region: tuple[int, int]
    #: the characters of the anchor's moment, whose reappearances stay in the region
    characters: tuple[str, ...] = ()


def confidence(margin: float, peak: float, calibration: tuple[float, float, float]) -> float:
    """``sigmoid(bias + a * margin + b * peak)``: the fitted probability the anchor is right."""
    bias, a, b = calibration
    return 1.0 / (1.0 + math.exp(-(bias + a * margin + b * peak)))


def margins(table: "PassageTable", score: np.ndarray, row: int) -> tuple[float, float]:
    """(``margin`` over the best rival elsewhere in the story, ``peak`` above its level)."""
    rows = np.arange(len(score))
    near = (table.doc_of == table.doc_of[row]) & (np.abs(rows - row) <= NEAR)
    rivals = score[~near]
    best = float(score[row])
    peak = best - float(score.mean())
    margin = best - float(rivals.max()) if rivals.size else peak
    return margin, peak


def find_anchor(
    table: "PassageTable",
    score: np.ndarray,
    relation: Relation,
    calibration: tuple[float, float, float],
    threshold: float,
    reach: float,
    self_weight: float,
    follow: float = 0.0,
) -> Optional[Anchor]:
    """The anchor passage of a clause scored ``score`` per passage, its confidence and region."""
    if not len(table) or score.size != len(table):
        return None
    row = int(np.argmax(score))
    margin, peak = margins(table, score, row)
    sure = confidence(margin, peak, calibration)
    bonus, characters = region_bonus(table, row, relation, reach, self_weight, follow)
    used = sure >= threshold
    return Anchor(
        row=row,
        relation=relation,
        confidence=sure,
        used=used,
        margin=margin,
        peak=peak,
        bonus=bonus if used else np.zeros(len(table), dtype=np.float32),
        region=_region(bonus, row, relation),
        characters=characters,
    )


def region_bonus(
    table: "PassageTable", row: int, relation: Relation, reach: float, self_weight: float,
    follow: float = 0.0,
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per passage, 0-1 for being where ``relation`` points from the anchor ``row``: near it in
    the story, or (*after / before*) a later / earlier scene of its characters."""
    bonus = np.zeros(len(table), dtype=np.float32)
    rows = np.flatnonzero(table.doc_of == table.doc_of[row])
    length = max(table.doc_length(int(table.doc_of[row])), 1)
    distance = np.abs(table.offsets[rows] - table.offsets[row]) / length
    distance = np.where(table.chapters[rows] == table.chapters[row], distance, np.inf)
    value = 1.0 / (1.0 + distance / max(reach, 1e-9))
    moment = rows[np.abs(rows - row) <= NEAR]
    characters = tuple(
        n for n in table.names_at(int(moment[0]), int(moment[-1])) if n in table.named
    )
    if follow > 0 and relation in ("after", "before") and characters:
        seen = np.zeros(len(table), dtype=bool)
        aliases = {alias for n in characters for alias in match_names(table, n)}
        for name in aliases | set(characters):
            seen[table.names[name]] = True
        value = np.where(seen[rows], np.maximum(value, follow), value)
    local = rows - row
    side = local > 0 if relation == "after" else local < 0 if relation == "before" else local != 0
    bonus[rows] = np.where(side, value, 0.0).astype(np.float32)
    bonus[row] = 1.0 if relation == "during" else self_weight
    return bonus, characters


def _region(bonus: np.ndarray, row: int, relation: Relation) -> tuple[int, int]:
    """First and last row around the anchor whose bonus is at least half, the anchor and its
    next passage on the cue's side included (a short reach in a short story is still a region:
    what comes straight after X is where *after X* points first)."""
    inside = np.union1d(np.flatnonzero(bonus >= 0.5), [row])
    steps = {"after": (1,), "before": (-1,), "during": (-1, 1)}.get(relation, ())
    nearest = [row + s for s in steps if 0 <= row + s < len(bonus) and bonus[row + s] > 0]
    inside = np.union1d(inside, nearest)
    return int(inside.min()), int(inside.max())


def side_cost(confidence: float) -> float:
    """How much the other side pays, in units of ``anchor_side``: ``-ln(1 - confidence)``, the
    surprise of the anchor being wrong (0.69 at even odds, 2.3 at 0.9, at most ``-ln 0.01``).

    A flat cost was either too small for a sure anchor in a novel (an earlier facet, matching
    the question's words better, stayed above the later one chapters after a certain incident)
    or too large for an unsure one; a cost that grows with the confidence is both.
    """
    return -math.log(1.0 - min(max(confidence, 0.0), MAX_CONFIDENCE))


def wrong_side(table: "PassageTable", anchor: Anchor) -> np.ndarray:
    """``side_cost(confidence)`` for passages of the anchor's document on the side a *used*
    anchor's question does not look at (*after X*: the story before X; *before X*: after it);
    zeros otherwise."""
    out = np.zeros(len(table), dtype=np.float32)
    if not anchor.used or anchor.relation not in ("after", "before"):
        return out
    rows = np.arange(len(table))
    same = table.doc_of == table.doc_of[anchor.row]
    side = rows < anchor.row if anchor.relation == "after" else rows > anchor.row
    out[same & side] = side_cost(anchor.confidence)
    return out


def unit_anchor(
    table: "PassageTable", anchor: Anchor, units: list[tuple[int, int, int]]
) -> tuple[np.ndarray, np.ndarray]:
    """The anchor read for larger units (``entity_event``'s chunks), each ``(document order,
    start, end)``: a unit's bonus is its best passage's, and it is on the wrong side when it
    lies wholly on the side a used anchor's question does not look at. Returns (bonus, wrong).
    """
    bonus = np.zeros(len(units), dtype=np.float32)
    wrong = np.zeros(len(units), dtype=np.float32)
    doc = int(table.doc_of[anchor.row])
    at = int(table.offsets[anchor.row])
    following = [o for d, o in table.starts[anchor.row + 1 :] if d == doc][:1]
    anchor_end = following[0] if following else table.doc_length(doc)
    for i, (order, start, end) in enumerate(units):
        rows = np.flatnonzero((table.doc_of == order) & (table.offsets >= start)
                              & (table.offsets < end))
        if rows.size:
            bonus[i] = float(anchor.bonus[rows].max())
        if anchor.used and order == doc:
            if anchor.relation == "after" and end <= at:
                wrong[i] = 1.0
            elif anchor.relation == "before" and start >= anchor_end:
                wrong[i] = 1.0
    return bonus, wrong


def anchor_metadata(
    table: "PassageTable", anchor: Anchor, text: str, clause: str
) -> dict[str, Any]:
    """``metadata["anchor"]``: the anchor passage, its confidence, whether it was used, the
    region; ``text`` is the anchor passage's text."""
    start, end = anchor.region
    return {
        "clause": clause,
        "relation": anchor.relation,
        "passage_id": table.ids[anchor.row],
        "where": place(table, anchor.row),
        "text": _quote(text),
        "confidence": round(anchor.confidence, 3),
        "margin": round(anchor.margin, 3),
        "peak": round(anchor.peak, 3),
        "used": anchor.used,
        "region": {"start": place(table, start), "end": place(table, end)},
        "characters": list(anchor.characters),
    }


def place(table: "PassageTable", row: int) -> dict[str, Any]:
    """A passage's place in its story: chapter (None without headings), percent, offset."""
    doc = int(table.doc_of[row])
    offset = int(table.offsets[row])
    heads = table.headings.get(doc, ())
    i = bisect_right([o for o, _ in heads], offset)
    length = table.doc_length(doc)
    return {
        "chapter": heads[i - 1][1] if i else None,
        "percent": round(100.0 * offset / length, 1) if length else None,
        "char_offset": offset,
        "doc_order": doc,
    }


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= QUOTE_CHARS else flat[: QUOTE_CHARS - 1].rstrip() + "…"


def describe(record: dict[str, Any]) -> str:
    """One line for ``e2rag query --explain``: the anchor, its place, confidence and region."""
    def where(p: dict[str, Any]) -> str:
        parts = [p["chapter"]] if p.get("chapter") else []
        if p.get("percent") is not None:
            parts.append(f"{p['percent']:.0f}%")
        return " ".join(parts) if parts else f"character {p['char_offset']}"

    status = "used" if record["used"] else "not used (too unsure: no bonus, no cost)"
    region = record["region"]
    return (
        f"anchor ({record['relation']} \"{record['clause']}\"): {where(record['where'])} "
        f"\"{record['text']}\" · confidence {record['confidence']:.2f}, {status} · region "
        f"{where(region['start'])} to {where(region['end'])}"
    )
