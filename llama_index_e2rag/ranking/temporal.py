"""Temporal anchoring: where in the story a question points, from its time words.

*"What did Peter do after he lost his shoes?"* asks about the story that **follows** the event
"he lost his shoes": the anchor. The question's time word gives the relation, the clause it
introduces is the anchor's description; ``ranking.anchor`` finds the anchor passage, how sure
that is, and the region of the story that follows (*after*, *then*), precedes (*before*,
*until*) or surrounds (*when*, *while*, *during*, *as*) it, measured in story terms. *first* and
*last / finally / at the end* carry no clause; they point at the beginning or end of the story
(``edge_prior``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Optional, Sequence

import numpy as np

from llama_index_e2rag.text import TITLE_ABBREVIATIONS

Relation = Literal["after", "before", "during", "first", "last"]

_CONNECTIVES: tuple[tuple[str, Relation], ...] = (
    (r"as soon as", "after"),
    (r"right after|soon after|shortly after|after|afterwards|once", "after"),
    (r"just before|right before|shortly before|before|until|till|prior to", "before"),
    (r"when|whenever|while|during|as", "during"),
)
_CONNECTIVE = re.compile(
    r"\b(" + "|".join(p for p, _ in _CONNECTIVES) + r")\b", re.IGNORECASE
)
_RELATION = {
    word: relation
    for pattern, relation in _CONNECTIVES
    for word in pattern.split("|")
}
_THEN = re.compile(r"\b(and then|then)\b", re.IGNORECASE)
_FIRST = re.compile(r"\b(first|at first|in the beginning|at the beginning)\b", re.IGNORECASE)
_LAST = re.compile(r"\b(last|finally|in the end|at the end|eventually)\b", re.IGNORECASE)
_PUNCTUATION = re.compile(r"[,;?!]|\.(?=\s|$)")
_WORD_BEFORE = re.compile(r"(\w+)$")
#: Question words: a "clause" that starts with one is the question itself, not an anchor.
_WH = frozenset("what who whom whose which where why how when".split())
#: Words that open a clause (its subject): "once he left" is a clause, "who once lived" is not.
_SUBJECT_START = frozenset(
    "he she they it i we you the his her their a an its this that these those".split()
)
#: Fewest words an anchor clause needs ("the troll incident" yes, "that" no).
MIN_CLAUSE_WORDS = 2


@dataclass(frozen=True)
class TemporalCue:
    """A question's time relation and the description of its anchor ("" for first/last)."""

    relation: Relation
    clause: str
    word: str


def temporal_cue(question: str) -> Optional[TemporalCue]:
    """The question's temporal cue, or ``None`` when it has none.

    The clause is what the connective introduces, up to the next comma or the end of the
    question ("after the troll incident, what …" → "the troll incident"); a question that opens
    with "When did …" is about the time of the event it names, so its clause is the rest of the
    question and the relation is *during*. "…, then …" anchors on what comes before "then".
    """
    text = question.strip()
    for match in _CONNECTIVE.finditer(text):
        word = match.group(1).lower()
        if word == "as" and not _is_clause_as(text, match):
            continue
        if word == "once" and not _opens_clause(text[match.end() :]):
            continue  # "who once lived there": an adverb, not "once he had left"
        clause = _clause_after(text[match.end() :])
        if word in ("until", "till") and _LAST.fullmatch(f"at {clause}".lower()):
            return TemporalCue("last", "", word)  # "until the end"
        if len(clause.split()) >= MIN_CLAUSE_WORDS:
            return TemporalCue(_RELATION[word], clause, word)
    then = _THEN.search(text)
    if then:
        clause = _clause_before(text[: then.start()])
        if len(clause.split()) >= MIN_CLAUSE_WORDS and clause.split()[0].lower() not in _WH:
            return TemporalCue("after", clause, then.group(1).lower())
    if _FIRST.search(text):
        return TemporalCue("first", "", "first")
    if _LAST.search(text):
        return TemporalCue("last", "", _LAST.search(text).group(1).lower())  # type: ignore[union-attr]
    return None


def _clause_ends(text: str) -> list[int]:
    """Where clauses end: commas, semicolons, question and exclamation marks, and full stops
    that do not close a title ("after Mr. McGregor saw him" keeps "Mr.")."""
    ends = []
    for match in _PUNCTUATION.finditer(text):
        if match.group() == ".":
            word = _WORD_BEFORE.search(text, 0, match.start())
            if word and word.group(1).lower() in TITLE_ABBREVIATIONS:
                continue
        ends.append(match.start())
    return ends


def _clause_after(rest: str) -> str:
    ends = _clause_ends(rest)
    return (rest[: ends[0]] if ends else rest).strip()


def _clause_before(head: str) -> str:
    bounds = [0, *[e + 1 for e in _clause_ends(head)]]
    pieces = [head[a:b].strip(" ,;?!.") for a, b in zip(bounds, [*bounds[1:], len(head)])]
    pieces = [p for p in pieces if p]
    return pieces[-1] if pieces else ""


def _opens_clause(after: str) -> bool:
    first = after.lstrip().split(" ", 1)[0] if after.strip() else ""
    return first.lower() in _SUBJECT_START or first[:1].isupper()


def _is_clause_as(text: str, match: re.Match[str]) -> bool:
    """"as" is temporal only when a clause follows ("as he ran"), not in "as big as his
    sisters", "such as", "the same as"."""
    before = text[: match.start()].rstrip().lower()
    after = text[match.end() :]
    if before.endswith(("such", "as", "same", "so", "known", "well")):
        return False
    if "as" in before.split()[-3:]:  # the second "as" of a comparison
        return False
    return _opens_clause(after)


def edge_prior(doc_of: Sequence[int] | np.ndarray, relation: Relation) -> np.ndarray:
    """*first*: 1 at the start of each document falling to 0 at its end; *last*: the reverse."""
    doc_of = np.asarray(doc_of)
    prior = np.zeros(len(doc_of), dtype=np.float32)
    for doc in np.unique(doc_of):
        rows = np.flatnonzero(doc_of == doc)
        ramp = np.linspace(1.0, 0.0, len(rows)) if len(rows) > 1 else np.ones(1)
        prior[rows] = ramp if relation == "first" else ramp[::-1]
    return prior
