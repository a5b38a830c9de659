"""One work scored for one system: gold and predicted mentions as scoring items (heads from one
spaCy parse of the text), mentions, events, coreference and timeline chains; and the corpus
totals of many works.

Heads: a mention's head is the syntactic head (spaCy's span root) of its span in the parse of
the whole text, named by the LitBank token containing it; gold and predicted spans are read in
the same parse, so a gold "Mr. Bennet" and a predicted "Bennet" share the head "Bennet". A span
that does not align to the parse's tokens falls back to its last token. A prediction's category
is its head's part of speech: PRON, PROPN (PROP), anything else NOM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Sequence

from benchmarks.litbank.chains import ChainResult, chain_coverage
from benchmarks.litbank.loader import GoldMention, Work
from benchmarks.litbank.scoring import (
    COREF_METRICS,
    Counts,
    Item,
    MentionCounts,
    Ratio,
    clusters,
    coref_document,
    coref_prf,
    exact_key,
    head_key,
    head_only_key,
    match,
    score_events,
    score_mentions,
)
from benchmarks.litbank.systems import PredictedMention, Prediction

_CATEGORY_OF_POS = {"PRON": "PRON", "PROPN": "PROP"}


class Heads:
    """Heads and categories of character spans of one work, read from one parse."""

    def __init__(self, work: Work, doc: Any) -> None:
        self.work, self.doc = work, doc

    def item(self, start: int, end: int, kind: str | None, category: str | None = None) -> Item:
        span = self.doc.char_span(start, end, alignment_mode="expand")
        root = span.root if span is not None and len(span) else None
        if root is None:  # outside the parse's tokens: the last token of the span
            head = self.work.token_at(max(start, end - 1))
            return Item(start, end, -1 if head is None else head, kind, category or "NOM")
        head = self.work.token_at(root.idx)
        return Item(start, end, -1 - root.i if head is None else head, kind,
                    category or _CATEGORY_OF_POS.get(root.pos_, "NOM"))

    def gold(self, mention: GoldMention) -> Item:
        return self.item(mention.start, mention.end, mention.type, mention.category)

    def predicted(self, mention: PredictedMention) -> Item:
        return self.item(mention.start, mention.end, mention.type)


@dataclass
class Scores:
    """The counts of one system over one or more works (what adds up across works)."""

    mentions: dict[str, MentionCounts] = field(default_factory=dict)  # "exact" / "head"
    events: Counts | None = None
    coref: dict[str, dict[str, Ratio]] = field(default_factory=dict)  # rule -> metric -> ratio
    chains: list[ChainResult] | None = None
    seconds: float = 0.0

    def add(self, other: "Scores") -> None:
        for rule, counts in other.mentions.items():
            self.mentions.setdefault(rule, MentionCounts()).add(counts)
        if other.events is not None:
            self.events = self.events or Counts()
            self.events.add(other.events)
        for rule, ratios in other.coref.items():
            mine = self.coref.setdefault(rule, {name: Ratio() for name in COREF_METRICS})
            for name, ratio in ratios.items():
                mine[name].add(ratio)
        if other.chains is not None:
            self.chains = (self.chains or []) + other.chains
        self.seconds += other.seconds

    def summary(self) -> dict[str, Any]:
        """P/R/F1 of everything counted (the JSON of a system or a work)."""
        out: dict[str, Any] = {"seconds": self.seconds}
        if self.mentions:
            out["mentions"] = {rule: counts.prf() for rule, counts in self.mentions.items()}
            out["coref"] = {rule: coref_prf(ratios) for rule, ratios in self.coref.items()}
        if self.events is not None:
            out["events"] = self.events.prf()
        if self.chains is not None:
            out["chains"] = chain_summary(self.chains)
        return out


def evaluate_work(work: Work, doc: Any, prediction: Prediction) -> Scores:
    """Everything ``prediction`` can be scored on in ``work``."""
    heads = Heads(work, doc)
    scores = Scores()
    if prediction.mentions is not None:
        gold = [heads.gold(m) for m in work.mentions]
        predicted = [heads.predicted(m) for m in prediction.mentions]
        scores.mentions = {"exact": score_mentions(gold, predicted, exact_key),
                           "head": score_mentions(gold, predicted, head_key)}
        scores.coref = _coref(work, gold, prediction.mentions, predicted)
    if prediction.events is not None:
        triggers = (work.token_at(start) for start, _ in prediction.events)
        scores.events = score_events(work.events, (t for t in triggers if t is not None))
    if prediction.resolve is not None:
        scores.chains = chain_coverage(work, heads, prediction.resolve)
    return scores


def _coref(work: Work, gold: Sequence[Item], mentions: Sequence[PredictedMention],
           predicted: Sequence[Item]) -> dict[str, dict[str, Ratio]]:
    """Exact spans, and heads: a typed prediction whose head matches a gold mention's (any
    type, one to one) stands for that gold mention."""
    key = clusters(((m.start, m.end), m.chain) for m in work.mentions)
    typed = [(m, item) for m, item in zip(mentions, predicted) if m.type is not None]
    exact = clusters(((m.start, m.end), _chain(m)) for m, _ in typed)
    twin = {j: i for i, j in match(gold, [item for _, item in typed], head_only_key)}
    by_head = clusters((_identity(work, twin.get(j), m), _chain(m))
                       for j, (m, _) in enumerate(typed))
    return {"exact": coref_document(key, exact), "head": coref_document(key, by_head)}


def _chain(mention: PredictedMention) -> Hashable:
    return mention.chain if mention.chain is not None else ("alone", mention.start, mention.end)


def _identity(work: Work, gold_index: int | None, mention: PredictedMention) -> Hashable:
    if gold_index is None:
        return ("twinless", mention.start, mention.end)
    twin = work.mentions[gold_index]
    return (twin.start, twin.end)


def chain_summary(results: Sequence[ChainResult]) -> dict[str, Any]:
    """How many gold PER chains the timeline follows (coverage and precision >= 0.8)."""
    named = [r for r in results if r.status != "no name"]
    met = sum(r.met for r in named)
    resolved = [r for r in named if r.status == "resolved"]
    return {
        "chains": len(results),
        "named": len(named),
        "no_name": len(results) - len(named),
        "unresolved": sum(r.status == "unresolved" for r in named),
        "met": met,
        "share_met": met / len(named) if named else 0.0,
        "mean_coverage": sum(r.coverage for r in resolved) / len(resolved) if resolved else 0.0,
        "mean_precision": (sum(r.precision for r in resolved) / len(resolved)
                           if resolved else 0.0),
    }
