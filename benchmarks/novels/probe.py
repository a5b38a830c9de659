"""Probes: ranking ideas measured on the novel protocol without shipping them in the library.

A configuration with ``"probe": "KIND[:VALUE]"`` ranks with the shipped ``narrative`` mode's
signals but changes one thing, so ``evaluate`` and ``cv`` score it beside the shipped mode, per
third and cross-validated (issue 28 §3 and §5: what else earns its keep on novels):

* ``units:K`` — retrieve whole units of K consecutive passages instead of passages: a unit
  scores its own ``section`` match (BM25 + centroid cosine) plus its best passage's fused score,
  and the budget is filled with whole units (30-word passages: ``units:3`` is a 90-word unit);
* ``mmr:L`` — diversity across the story: greedy maximal marginal relevance over the passage
  vectors, each pick's fused score less L × its highest cosine with a passage already taken;
* ``pronouns`` — the parser's resolved pronouns as names in each passage's BM25 text: a
  passage where "she" was resolved to a named character also holds that name;
* ``chapters`` — the ``section`` signal over the book's own chapters (headings) instead of
  blocks of ``section_passages`` passages.

What a probe returns is ranked passage text for the evaluator's budget, not retriever nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_e2rag.stores.lexical import LexicalIndex
from llama_index_e2rag.retrievers.passage_cache import narrative_state
from llama_index_e2rag.ranking.narrative import (NarrativeWeights, Signals, fuse, locate_anchor,
                                                 order)
from llama_index_e2rag.ranking.passages import PassageTable
from llama_index_e2rag.ranking.stats import zscore
from llama_index_e2rag.ranking.sections import centroid_norms, section_signal
from llama_index_e2rag.schema import normalize_text

KINDS = ("units", "mmr", "pronouns", "chapters")
#: ranked passages handed to the evaluator's budget (more than a 1,500-word budget needs)
DEPTH = 400


@dataclass(frozen=True)
class Probe:
    """One probe of a configuration's ``"probe"`` option: ``KIND`` or ``KIND:VALUE``."""

    kind: str
    value: float = 0.0

    @classmethod
    def parse(cls, text: str) -> "Probe":
        kind, _, value = text.partition(":")
        if kind not in KINDS:
            raise ValueError(f"unknown probe {kind!r}; choose from {KINDS}")
        if kind in ("units", "mmr") and not value:
            raise ValueError(f"probe {kind!r} needs a value ({kind}:N)")
        return cls(kind, float(value) if value else 0.0)


class ProbeRetriever:
    """The shipped narrative retriever's signals, ranked the probe's way."""

    def __init__(self, index: Any, probe: Probe, budget: int, weights: NarrativeWeights) -> None:
        self._inner = index.as_retriever(mode="narrative", budget_words=budget, weights=weights)
        self._probe, self._budget, self._w = probe, budget, weights
        state = narrative_state(index.stores)
        self._table: PassageTable = state.table
        self._texts = [node.text for node in state.passages]
        self._words = np.array([len(t.split()) for t in self._texts])
        self._pronoun_lexical: Optional[LexicalIndex] = None
        _, self._chapters = np.unique(self._table.chapters, return_inverse=True)
        self._chapter_norms = centroid_norms(self._table.vectors, self._chapters)

    def retrieve(self, question: str) -> list[NodeWithScore]:
        _, sig = self._inner.signals(question)
        table, w = self._table, self._w
        if self._probe.kind == "pronouns":
            sig = self._with_pronouns(sig, question)
        anchor = locate_anchor(table, sig.cue, sig.clause, w)
        total, parts = fuse(table, sig, w, anchor)
        if self._probe.kind == "chapters":  # chapters take the place of the blocks
            total = total - parts.pop("section", 0.0) + w.section * self._chapter_signal(sig)
        if self._probe.kind == "units":
            rows = self._units(sig, total, int(self._probe.value))
        elif self._probe.kind == "mmr":
            rows = self._mmr(total, self._probe.value)
        else:
            rows = [r.row for r in order(table, total, parts, sig.cue, w, DEPTH)]
        return [NodeWithScore(node=TextNode(text=self._texts[r]), score=float(total[r]))
                for r in rows]

    def _units(self, sig: Signals, total: np.ndarray, size: int) -> list[int]:
        """Rows of whole units, best unit first, until the budget is full."""
        ids, norms = self._table.sections(size, -1)
        match = section_signal(ids, norms, sig.cosine, sig.lexical, self._w.lexical, self._w.dense)
        count = norms.size
        best = np.full(count, -np.inf, dtype=np.float32)
        np.maximum.at(best, ids, total)
        unit_match = np.zeros(count, dtype=np.float32)
        unit_match[ids] = match
        score = zscore(unit_match) + zscore(best)
        rows: list[int] = []
        for unit in np.argsort(-score, kind="stable"):
            rows += [int(r) for r in np.flatnonzero(ids == unit)]
            if int(self._words[rows].sum()) >= self._budget:
                break
        return rows

    def _mmr(self, total: np.ndarray, penalty: float) -> list[int]:
        """Greedy maximal marginal relevance over the best 600 passages, until the budget."""
        candidates = np.argsort(-total, kind="stable")[:600]
        vectors = self._table.vectors[candidates]
        closest = np.zeros(candidates.size, dtype=np.float32)
        alive = np.ones(candidates.size, dtype=bool)
        order: list[int] = []
        words = 0
        while words < self._budget and alive.any():
            pick = int(np.argmax(np.where(alive, total[candidates] - penalty * closest, -np.inf)))
            alive[pick] = False
            order.append(int(candidates[pick]))
            words += int(self._words[candidates[pick]])
            closest = np.maximum(closest, vectors @ vectors[pick])
        return order

    def _chapter_signal(self, sig: Signals) -> np.ndarray:
        """``section_signal`` with the chapters (rows between two headings) as sections."""
        return section_signal(self._chapters, self._chapter_norms, sig.cosine, sig.lexical,
                              self._w.lexical, self._w.dense)

    def _with_pronouns(self, sig: Signals, question: str) -> Signals:
        """``sig`` with its lexical signal from the pronoun-augmented BM25 index."""
        if self._pronoun_lexical is None:
            extra: list[list[str]] = [[] for _ in self._texts]
            for name, rows in self._table.names.items():
                if name in self._table.named:
                    for row in rows:
                        if f" {name} " not in f" {normalize_text(self._texts[row])} ":
                            extra[row].append(name)
            texts = [" ".join([t, *e]) for t, e in zip(self._texts, extra)]
            self._pronoun_lexical = LexicalIndex.build(self._table.ids, texts)
        return replace(sig, lexical=zscore(self._pronoun_lexical.scores(question)))
