"""The standard scores: mention P/R/F1 (exact span, head word; per type and per PROP/NOM/PRON),
event-trigger P/R/F1 over tokens, and coreference MUC, B³ and CEAF-e with their average.

Coreference uses the maintained ``scorch`` package's per-document metrics (Pradhan et al. 2014's
formulas, Luo 2005's φ4 for CEAF-e) on the key and response clusters as they are: twinless
mentions are neither added to the key nor removed from the response, as the reference scorer
does. Documents are pooled as the reference scorer pools them: numerators and denominators are
summed over documents before dividing (scorch's own directory mode averages per-document
figures instead).

Every count is kept (``Counts``, ``Ratio``) so per-work rows add up to the corpus figures.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from statistics import StatisticsError
from typing import Callable, Hashable, Iterable, Sequence

from benchmarks.litbank.loader import CATEGORIES, TYPES

Cluster = set[Hashable]


@dataclass
class Counts:
    """True positives, predictions and gold items of one P/R/F1."""

    tp: int = 0
    pred: int = 0
    gold: int = 0

    def add(self, other: "Counts") -> None:
        self.tp += other.tp
        self.pred += other.pred
        self.gold += other.gold

    def prf(self) -> dict[str, float]:
        p = self.tp / self.pred if self.pred else 0.0
        r = self.tp / self.gold if self.gold else 0.0
        return {"p": p, "r": r, "f1": _f1(p, r), "tp": self.tp, "pred": self.pred,
                "gold": self.gold}


@dataclass
class Ratio:
    """Recall and precision of one coreference metric as summed numerators / denominators."""

    r_num: float = 0.0
    r_den: float = 0.0
    p_num: float = 0.0
    p_den: float = 0.0

    def add(self, other: "Ratio") -> None:
        self.r_num += other.r_num
        self.r_den += other.r_den
        self.p_num += other.p_num
        self.p_den += other.p_den

    def prf(self) -> dict[str, float]:
        r = self.r_num / self.r_den if self.r_den else 0.0
        p = self.p_num / self.p_den if self.p_den else 0.0
        return {"p": p, "r": r, "f1": _f1(p, r)}


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


# -- mentions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """A mention as scoring sees it: its span, head token, LitBank type (None: a mention of no
    LitBank type) and category (PROP/NOM/PRON)."""

    start: int
    end: int
    head: int
    type: str | None
    category: str


def match(gold: Sequence[Item], pred: Sequence[Item],
          key: Callable[[Item], Hashable]) -> list[tuple[int, int]]:
    """One-to-one (gold index, predicted index) pairs with equal keys, in text order."""
    waiting: dict[Hashable, list[int]] = defaultdict(list)
    for i, item in enumerate(gold):
        waiting[key(item)].append(i)
    pairs = []
    for j, item in enumerate(pred):
        queue = waiting.get(key(item))
        if queue:
            pairs.append((queue.pop(0), j))
    return pairs


def exact_key(item: Item) -> Hashable:
    return (item.start, item.end, item.type)


def head_key(item: Item) -> Hashable:
    return (item.head, item.type)


def head_only_key(item: Item) -> Hashable:
    """The head whatever the type (coreference and timelines ignore types)."""
    return item.head


@dataclass
class MentionCounts:
    """Counts of one matching rule: all typed mentions, per type, per category, and untyped."""

    overall: Counts = field(default_factory=Counts)
    by_type: dict[str, Counts] = field(default_factory=lambda: {t: Counts() for t in TYPES})
    by_category: dict[str, Counts] = field(
        default_factory=lambda: {c: Counts() for c in CATEGORIES})
    untyped: Counts = field(default_factory=Counts)

    def add(self, other: "MentionCounts") -> None:
        self.overall.add(other.overall)
        self.untyped.add(other.untyped)
        for name, counts in other.by_type.items():
            self.by_type[name].add(counts)
        for name, counts in other.by_category.items():
            self.by_category[name].add(counts)

    def prf(self) -> dict[str, object]:
        return {"overall": self.overall.prf(), "untyped": self.untyped.prf(),
                "by_type": {k: v.prf() for k, v in self.by_type.items()},
                "by_category": {k: v.prf() for k, v in self.by_category.items()}}


def score_mentions(gold: Sequence[Item], pred: Sequence[Item],
                   key: Callable[[Item], Hashable]) -> MentionCounts:
    """Type-aware P/R/F1: a prediction counts for a type only when its type is that type.

    A matched prediction counts in its gold mention's category, an unmatched one in its own;
    ``untyped`` matches spans (or heads) whatever the types and counts every prediction,
    including those of no LitBank type.
    """
    out = MentionCounts()
    typed = [p for p in pred if p.type is not None]
    pairs = match(gold, typed, key)
    matched_pred = {j for _, j in pairs}
    out.overall = Counts(len(pairs), len(typed), len(gold))
    for g in gold:
        out.by_type[g.type].gold += 1
        out.by_category[g.category].gold += 1
    for p in typed:
        out.by_type[p.type].pred += 1
    for i, j in pairs:
        out.by_type[gold[i].type].tp += 1
        out.by_category[gold[i].category].tp += 1
        out.by_category[gold[i].category].pred += 1
    for j, p in enumerate(typed):
        if j not in matched_pred:
            out.by_category[p.category].pred += 1

    def untyped_key(item: Item) -> Hashable:
        return key(Item(item.start, item.end, item.head, None, item.category))

    out.untyped = Counts(len(match(gold, pred, untyped_key)), len(pred), len(gold))
    return out


def score_events(gold: Iterable[int], pred: Iterable[int]) -> Counts:
    """Token-level trigger P/R/F1: each token is an event or not."""
    gold_set, pred_set = set(gold), set(pred)
    return Counts(len(gold_set & pred_set), len(pred_set), len(gold_set))


# -- coreference ----------------------------------------------------------------------------

COREF_METRICS = ("muc", "b3", "ceafe")


def _metric(name: str) -> Callable[[Sequence[Cluster], Sequence[Cluster]],
                                   tuple[float, float, float]]:
    from scorch import scores  # deferred: scipy and numpy only when coreference is scored

    return {"muc": scores.muc, "b3": scores.b_cubed, "ceafe": scores.ceaf_e}[name]


def _denominators(name: str, clusters: Sequence[Cluster]) -> int:
    """What the reference scorer divides by on one side: links, mentions or entities."""
    if name == "muc":
        return sum(len(c) - 1 for c in clusters)
    if name == "b3":
        return sum(len(c) for c in clusters)
    return len(clusters)


def coref_document(key: Sequence[Cluster], response: Sequence[Cluster]) -> dict[str, Ratio]:
    """MUC, B³ and CEAF-e of one document as numerators and denominators (scorch's R and P
    times the reference scorer's denominators)."""
    key = [set(c) for c in key if c]
    response = [set(c) for c in response if c]
    out = {}
    for name in COREF_METRICS:
        r_den, p_den = _denominators(name, key), _denominators(name, response)
        recall = precision = 0.0
        if key and response:
            try:
                with warnings.catch_warnings():  # numpy's 1 / -0.0 inside harmonic_mean
                    warnings.simplefilter("ignore", RuntimeWarning)
                    recall, precision, _ = _metric(name)(key, response)
            except StatisticsError:
                # scorch's CEAF-e of disjoint clusterings: its alignment total is -0.0, which
                # Python's harmonic_mean (its F1) refuses; recall and precision are zero
                pass
        out[name] = Ratio(recall * r_den, r_den, precision * p_den, p_den)
    return out


def coref_prf(ratios: dict[str, Ratio]) -> dict[str, object]:
    """P/R/F1 per metric and the CoNLL average of the three F1s."""
    scores = {name: ratios[name].prf() for name in COREF_METRICS}
    return {**scores, "avg_f1": sum(s["f1"] for s in scores.values()) / len(COREF_METRICS)}


def clusters(ids: Iterable[tuple[Hashable, Hashable]]) -> list[Cluster]:
    """Clusters of (mention, chain) pairs; a mention listed twice keeps its first chain."""
    seen: set[Hashable] = set()
    groups: dict[Hashable, Cluster] = defaultdict(set)
    for mention, chain in ids:
        if mention not in seen:
            seen.add(mention)
            groups[chain].add(mention)
    return list(groups.values())
