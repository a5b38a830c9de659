"""Score retriever configurations on the cached books, beside the window baselines of the run.

Each cached book is loaded once (``llama_index_e2rag.load_index``); every configuration
is a real ``index.as_retriever(...)`` answering every question of the book, so whatever the
retrievers do at query time (anchoring, fusion) is what is measured, and no build runs. The
window baselines (BM25, dense, their hybrid, random; 100-word windows) are ranked in the same
run. Scoring is the benchmark's: the LiteraryQA budget of 1,500 words, answer-token recall.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Collection, Sequence

from benchmarks import scoring
from benchmarks.baselines import BASELINES, WindowBaselines, make_windows
from benchmarks.loaders import Narrative
from benchmarks.novels.cache import BookCache
from benchmarks.protocol import Row

#: The benchmark's LiteraryQA budget and baseline window (``benchmarks.__main__``).
BUDGET, WINDOW = 1500, 100


@dataclass(frozen=True)
class Config:
    """One retriever configuration: a mode, weight overrides and other ``as_retriever`` options."""

    name: str
    mode: str = "narrative"
    weights: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: dict[str, Any] | str) -> "Config":
        """From a JSON object (or its text): ``name``, ``mode``, ``weights``, other options."""
        from llama_index_e2rag.ranking.narrative import NarrativeWeights

        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, dict):
            raise ValueError(f"a configuration is a JSON object, got {data!r}")
        rest = {k: v for k, v in data.items() if k not in ("name", "mode", "weights")}
        if "probe" in rest:
            from benchmarks.novels.probe import Probe

            Probe.parse(rest["probe"])  # a bad probe fails before any book is loaded
        weights = dict(data.get("weights") or {})
        known = {f.name for f in fields(NarrativeWeights)}
        unknown = sorted(set(weights) - known)
        if unknown:
            raise ValueError(f"unknown NarrativeWeights fields {unknown}; known: {sorted(known)}")
        name = data.get("name") or json.dumps({k: v for k, v in data.items() if k != "name"},
                                              sort_keys=True, separators=(",", ":"))
        return cls(name=name, mode=data.get("mode", "narrative"), weights=weights, options=rest)

    def retriever(self, index: Any, budget: int) -> Any:
        """``index.as_retriever`` with these options, or a probe's ranking (``probe``)."""
        from llama_index_e2rag.ranking.narrative import NarrativeWeights

        options = dict(self.options)
        weights = replace(NarrativeWeights.fitted(), **self.weights)
        if "probe" in options:
            from benchmarks.novels.probe import Probe, ProbeRetriever

            return ProbeRetriever(index, Probe.parse(options.pop("probe")), budget, weights)
        if self.weights:
            options["weights"] = weights
        return index.as_retriever(mode=self.mode, budget_words=budget, **options)


#: The shipped default mode.
DEFAULT = Config("narrative")
#: Graph signals of the narrative mode (everything but lexical and dense).
GRAPH_SIGNALS = ("mention", "event", "co_event", "anchor", "edge", "answer_type")


def ablations() -> list[Config]:
    """The §4 diagnosis: the shipped mode, each signal (and continuation) off in turn with the
    anchor on and with it off, and every graph signal off."""
    from llama_index_e2rag.ranking.narrative import SIGNALS

    configs = [DEFAULT]
    for signal in (*SIGNALS, "continuation"):
        configs.append(Config(f"-{signal}", options={"disable": (signal,)}))
    for signal in (*SIGNALS, "continuation"):
        if signal != "anchor":
            configs.append(Config(f"-anchor -{signal}", options={"disable": ("anchor", signal)}))
    configs.append(Config("-graph (lexical+dense)", options={"disable": GRAPH_SIGNALS}))
    return configs


def _rows(book: Narrative, system: str, answers: Sequence[Sequence[str]]) -> list[Row]:
    """One row per question from the ranked passages of each (cut to the budget here)."""
    return [Row(q.qid, book.doc_id, system,
                scoring.answer_token_recall(scoring.apply_budget(passages, BUDGET), q.answers),
                scoring.is_time_question(q.question))
            for q, passages in zip(book.questions, answers)]


def evaluate_book(index: Any, book: Narrative, configs: Sequence[Config], embed: Any,
                  timings: dict[str, float]) -> list[Row]:
    """Window baselines and every configuration on one book's questions."""
    questions = [q.question for q in book.questions]
    started = time.perf_counter()
    ranked = WindowBaselines(make_windows(book.text, WINDOW), embed).rank_all(
        [q.qid for q in book.questions], questions)
    timings["baselines"] = time.perf_counter() - started
    rows = [r for system in BASELINES for r in _rows(book, system, ranked[system])]
    for config in configs:
        started = time.perf_counter()
        retriever = config.retriever(index, BUDGET)
        try:
            answers = [[n.node.get_content() for n in retriever.retrieve(q)] for q in questions]
        except Exception as exc:
            raise RuntimeError(f"configuration {config.name!r} failed on {book.doc_id}: "
                               f"{type(exc).__name__}: {exc}") from exc
        timings[config.name] = time.perf_counter() - started
        rows += _rows(book, config.name, answers)
    return rows


def evaluate(cache: BookCache, books: Sequence[Narrative], configs: Sequence[Config],
             log: Callable[[str], None] = print, spread: list[dict[str, Any]] | None = None,
             skip: Collection[str] = ()) -> tuple[list[Row], list[dict[str, Any]]]:
    """Rows of every cached book among ``books`` (others are skipped and logged), and per book
    its load and per-configuration seconds; ``spread`` (when given) gains each question's
    ``signal_spread``. Books named in ``skip`` (already scored by a run being resumed) are
    left out."""
    from benchmarks.systems import make_embed_model
    from llama_index_e2rag.maintenance.load import load_index

    if len({c.name for c in configs}) != len(configs):
        raise ValueError("configuration names must be unique")
    embed = make_embed_model()
    rows: list[Row] = []
    per_book: list[dict[str, Any]] = []
    for book in books:
        if book.doc_id in skip:
            continue
        folder = cache.cached(book)
        if folder is None:
            stale = cache.stale(book)
            why = f" (stale builds differ in {', '.join(stale[0].differs)})" if stale else ""
            log(f"{book.doc_id}: not cached under {cache.key}{why}: skipped")
            continue
        started = time.perf_counter()
        index = load_index(folder, embed_model=embed)
        timings = {"load": time.perf_counter() - started}
        rows += evaluate_book(index, book, configs, embed, timings)
        if spread is not None:
            spread += signal_spread(index, book)
        per_book.append({"doc_id": book.doc_id, "words": book.words,
                         "questions": len(book.questions), "seconds": timings})
        log(f"{book.doc_id} ({book.words:,} words, {len(book.questions)} q.): "
            + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    return rows, per_book


def signal_spread(index: Any, book: Narrative) -> list[dict[str, Any]]:
    """Per question, how selective each graph signal of the shipped narrative mode is: the share
    of the book's passages it touches (a signal touching most passages cannot pick one scene),
    whether the question has a temporal cue and an anchor clause, and its ``story_match``."""
    import numpy as np

    retriever = index.as_retriever(mode="narrative", budget_words=BUDGET)
    out = []
    for q in book.questions:
        state, sig = retriever.signals(q.question)
        out.append({"qid": q.qid, "doc_id": book.doc_id, "passages": len(state.table),
                    "time": scoring.is_time_question(q.question),
                    **{name: float(np.mean(getattr(sig, name) > 0)) if len(state.table) else 0.0
                       for name in ("mention", "event", "co_event")},
                    "cue": sig.cue is not None, "anchor_clause": sig.clause is not None,
                    "story_match": float(sig.story_match)})
    return out
