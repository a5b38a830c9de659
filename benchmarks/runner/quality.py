"""Retrieval quality: every baseline and every index mode on the same questions and budget.

For each source (book, story, multi-hop question) the window baselines rank fixed windows and the
index is built once and queried in each mode; a mode's passages are its NodeWithScores' texts in
ranked order. Everything is scored by ``scoring`` with the dataset's word budget. A mode that fails
to build or to retrieve becomes an error row, never a crash.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from llama_index.core import Document
from llama_index.core.base.embeddings.base import BaseEmbedding
from tqdm import tqdm

from benchmarks import scoring
from benchmarks.baselines import WindowBaselines, make_windows
from benchmarks.loaders import MultiHopItem, Narrative

#: Builds an index over documents (the questions it will be asked are passed along so a factory
#: may answer them ahead, e.g. in a measuring child process); the runner only relies on
#: ``as_retriever(mode=..., budget_words=...)`` (each mode at its own defaults, filling the
#: dataset's budget) and ``.retrieve(question)``.
IndexFactory = Callable[[list[Document], list[str]], Any]

WHOLE_TEXT = "whole text"
HYBRID = "hybrid"


@dataclass
class DatasetSpec:
    """How one dataset is scored: its word budget and baseline window size."""

    name: str
    split: str
    budget: int
    window: int
    modes: Sequence[str]


@dataclass
class QuestionScore:
    """One system's scores on one question (``None``: metric undefined for it)."""

    qid: str
    system: str
    atr: float | None
    ec: float | None
    recall: float | None
    words: int
    time_question: bool
    attributes: list[str]


@dataclass
class SystemErrors:
    """Failures of one system: build errors and per-question retrieval errors."""

    build: str | None = None
    questions: int = 0
    first: str | None = None


class _Collector:
    """Accumulates per-question scores and errors of every system of one dataset."""

    def __init__(self, spec: DatasetSpec) -> None:
        self.spec = spec
        self.scores: list[QuestionScore] = []
        self.errors: dict[str, SystemErrors] = {}
        self.build_seconds: list[float] = []

    def error(self, system: str, message: str, *, build: bool) -> None:
        entry = self.errors.setdefault(system, SystemErrors())
        if build:
            entry.build = entry.build or message
        else:
            entry.questions += 1
            entry.first = entry.first or message

    def score(self, system: str, qid: str, question: str, answers: Sequence[str],
              gold: Sequence[str], attributes: Sequence[str], passages: Sequence[str],
              budget: int | None) -> None:
        context = "\n".join(passages) if budget is None else scoring.apply_budget(passages, budget)
        self.scores.append(QuestionScore(
            qid=qid, system=system,
            atr=scoring.answer_token_recall(context, answers),
            ec=scoring.exact_containment(context, answers),
            recall=scoring.unit_recall(context, gold) if gold else None,
            words=len(context.split()),
            time_question=scoring.is_time_question(question),
            attributes=list(attributes),
        ))


def _short_error(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" ({frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})" if frame else ""
    return f"{type(exc).__name__}: {exc}"[:300] + where


def _node_texts(nodes: Sequence[Any]) -> list[str]:
    """Passages of a retriever answer: each NodeWithScore's text, in ranked order."""
    return [n.node.get_content() for n in nodes]


def _run_modes(collector: _Collector, index_factory: IndexFactory | None,
               documents: list[Document], questions: Sequence[tuple[str, str, list[str],
                                                                    list[str], list[str]]],
               budget: int) -> None:
    """Build one index over ``documents`` and score every mode on ``questions``."""
    spec = collector.spec
    if not spec.modes:
        return
    if index_factory is None:
        for mode in spec.modes:
            collector.error(mode, "index not available", build=True)
        return
    try:
        started = time.perf_counter()
        index = index_factory(documents, [q[1] for q in questions])
        collector.build_seconds.append(time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - a failing build is a result, not a crash
        for mode in spec.modes:
            collector.error(mode, f"index build failed: {_short_error(exc)}", build=True)
        return
    for mode in spec.modes:
        try:
            retriever = index.as_retriever(mode=mode, budget_words=budget)
        except Exception as exc:  # noqa: BLE001
            collector.error(mode, f"as_retriever failed: {_short_error(exc)}", build=True)
            continue
        for qid, question, answers, gold, attributes in questions:
            try:
                passages = _node_texts(retriever.retrieve(question))
            except Exception as exc:  # noqa: BLE001
                collector.error(mode, _short_error(exc), build=False)
                continue
            collector.score(mode, qid, question, answers, gold, attributes, passages, budget)


def evaluate_narratives(spec: DatasetSpec, narratives: Sequence[Narrative],
                        embed_model: BaseEmbedding | None,
                        index_factory: IndexFactory | None) -> dict[str, Any]:
    """Score baselines and index modes on books/stories; one index per narrative."""
    collector = _Collector(spec)
    for narrative in tqdm(narratives, desc=f"{spec.name}", unit="text"):
        questions = [(q.qid, q.question, q.answers, q.gold_sections, q.attributes)
                     for q in narrative.questions]
        baselines = WindowBaselines(make_windows(narrative.text, spec.window), embed_model)
        ranked = _rank_baselines(collector, baselines, questions)
        for system, rows in ranked.items():
            for (qid, question, answers, gold, attributes), passages in zip(questions, rows):
                collector.score(system, qid, question, answers, gold, attributes, passages,
                                spec.budget)
        for qid, question, answers, gold, attributes in questions:
            collector.score(WHOLE_TEXT, qid, question, answers, gold, attributes,
                            [narrative.text], None)
        document = Document(text=narrative.text, id_=narrative.doc_id,
                            metadata={"title": narrative.title})
        _run_modes(collector, index_factory, [document], questions, spec.budget)
    return summarise(collector, sources=len(narratives))


def _rank_baselines(collector: _Collector, baselines: WindowBaselines,
                    questions: Sequence[tuple]) -> dict[str, list[list[str]]]:
    try:
        return baselines.rank_all([q[0] for q in questions], [q[1] for q in questions])
    except Exception as exc:  # noqa: BLE001
        for name in ("bm25", "dense", HYBRID, "random"):
            collector.error(name, _short_error(exc), build=True)
        return {}


def evaluate_multihop(spec: DatasetSpec, items: Sequence[MultiHopItem],
                      embed_model: BaseEmbedding | None,
                      index_factory: IndexFactory | None) -> dict[str, Any]:
    """Supporting-unit recall at a fixed budget; each paragraph is one document and one index
    per question holds its closed set of paragraphs."""
    collector = _Collector(spec)
    for item in tqdm(items, desc=spec.name, unit="question"):
        texts = [f"{title}\n{body}" for title, body in item.paragraphs]
        windows = [w for text in texts for w in make_windows(text, spec.window)]
        question = [(item.qid, item.question, item.answers, item.gold_units, [])]
        ranked = _rank_baselines(collector, WindowBaselines(windows, embed_model), question)
        for system, rows in ranked.items():
            collector.score(system, item.qid, item.question, item.answers, item.gold_units, [],
                            rows[0], spec.budget)
        collector.score(WHOLE_TEXT, item.qid, item.question, item.answers, item.gold_units, [],
                        texts, None)
        documents = [Document(text=text, id_=f"{item.qid}-p{i}", metadata={"title": title})
                     for i, (text, (title, _)) in enumerate(zip(texts, item.paragraphs))]
        _run_modes(collector, index_factory, documents, question, spec.budget)
    return {**summarise(collector, sources=len(items)), "multihop": True}


def _aggregate(rows: Sequence[QuestionScore]) -> dict[str, Any]:
    time_rows = [r for r in rows if r.time_question]
    return {
        "n": len(rows),
        "atr": scoring.mean(r.atr for r in rows),
        "ec": scoring.mean(r.ec for r in rows),
        "recall": scoring.mean(r.recall for r in rows),
        "n_time": len(time_rows),
        "atr_time": scoring.mean(r.atr for r in time_rows),
        "recall_time": scoring.mean(r.recall for r in time_rows),
        "words": scoring.mean(float(r.words) for r in rows),
    }


def summarise(collector: _Collector, sources: int) -> dict[str, Any]:
    """Per-system aggregates, per-attribute breakdown, ratios to the hybrid baseline, errors."""
    spec = collector.spec
    by_system: dict[str, list[QuestionScore]] = {}
    for row in collector.scores:
        by_system.setdefault(row.system, []).append(row)
    order = ["bm25", "dense", HYBRID, "random", WHOLE_TEXT, *spec.modes]
    systems: dict[str, Any] = {}
    for system in order:
        rows = by_system.get(system, [])
        entry = _aggregate(rows) if rows else {"n": 0}
        errors = collector.errors.get(system)
        if errors:
            entry["error"] = errors.build
            entry["failed_questions"] = errors.questions
            entry["first_question_error"] = errors.first
        attributes = sorted({a for r in rows for a in r.attributes})
        if attributes:
            entry["by_attribute"] = {
                a: _aggregate([r for r in rows if a in r.attributes]) for a in attributes
            }
        systems[system] = entry
    hybrid = systems.get(HYBRID, {})
    for entry in systems.values():
        for metric in ("atr", "recall", "atr_time"):
            base, value = hybrid.get(metric), entry.get(metric)
            if base and value is not None:
                entry[f"{metric}_vs_hybrid"] = value / base
    return {
        "dataset": spec.name, "split": spec.split, "budget_words": spec.budget,
        "window_words": spec.window, "sources": sources,
        "questions": len({r.qid for r in collector.scores}),
        "index_build_seconds_total": sum(collector.build_seconds),
        "systems": systems,
        "per_question": [
            {"qid": r.qid, "system": r.system, "atr": r.atr, "ec": r.ec, "recall": r.recall}
            for r in collector.scores
        ],
    }
