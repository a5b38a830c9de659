"""Fit the ``narrative`` mode's score calibration on FairytaleQA **train** (``ranking.scores``).

    python -m benchmarks.fit_scores [--stories N] [--seed S] [--rows R.npz]   # fit, print
    python -m benchmarks.fit_scores --split val --stories 23            # check the shipped ones

Builds the offline default index of each sampled story and retrieves, for every question, the top
10 passages of the narrative mode (shipped weights) and the top 10 chunks of the vector mode,
twice: from its own story (a result is relevant when it quotes one of the question's gold
sections, the benchmark's 8-word rule) and from the next sampled story (off-topic: nothing there
is relevant). Two logistic regressions of relevance, one on the narrative result's hit's raw
score (a continuation's parent's), the question's ``story_match`` and log of the result's rank,
one on the chunk's cosine, composed, give ``NARRATIVE_RAW``, ``NARRATIVE_MATCH``,
``NARRATIVE_RANK`` and ``NARRATIVE_BIAS``: the chunk cosine at which a result is as likely
relevant as the narrative features say. Both splits print a reliability table (share of
relevant results per score band, narrative score against chunk cosine) for the shipped
constants, and the share relevant per rank; ``--rows`` keeps the rows to re-fit without
rebuilding.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from llama_index.core import Document

from benchmarks.loaders import DEFAULT_DATA_ROOT, load_fairytaleqa
from benchmarks.scoring import QuoteIndex
from benchmarks.systems import make_embed_model
from llama_index_e2rag.retrievers.passage_cache import narrative_state
from llama_index_e2rag.ranking import scores
from llama_index_e2rag.ranking.narrative import NarrativeWeights, rank

DEPTH = 10
BANDS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01)


#: Columns of a narrative row: the raw score of the result's hit (a continuation's parent's),
#: ``story_match``, the result's 1-based place in the ranking, relevant, on-topic, continuation.
UNIT, MATCH, RANK, RELEVANT, ON_TOPIC, CONTINUATION = range(6)


def collect(stories: Sequence[Any], embed_model: Any) -> tuple[np.ndarray, np.ndarray]:
    """Rows of (hit's raw score, story_match, rank, relevant, on-topic, continuation) for every
    passage the narrative mode returns, and of (cosine, relevant, on-topic) for every chunk the
    vector mode returns."""
    from llama_index_e2rag.index import E2RAGIndex

    weights = NarrativeWeights.fitted()
    built = []
    for number, story in enumerate(stories, start=1):
        started = time.perf_counter()
        index = E2RAGIndex.from_documents(
            [Document(text=story.text, id_=story.doc_id)], embed_model=embed_model, llm=None
        )
        ids = narrative_state(index.stores).table.ids
        texts = {n.id: n.text for n in index.graph_store.get_nodes(ids)}
        built.append((index.as_retriever(mode="narrative"),
                      index.as_retriever(mode="vector", similarity_top_k=DEPTH), texts))
        print(f"[{number}/{len(stories)}] {story.doc_id}: {time.perf_counter() - started:.1f} s",
              flush=True)
    passages: list[tuple[float, ...]] = []
    chunks: list[tuple[float, float, float]] = []
    for i, story in enumerate(stories):
        for on_topic, (narrative, vector, texts) in (
            (1.0, built[i]), (0.0, built[(i + 1) % len(built)])
        ):
            for q in story.questions:
                state, sig = narrative.signals(q.question)
                ranked = rank(state.table, sig, weights, DEPTH)
                raw = {r.row: r.score for r in ranked}
                for place, row in enumerate(ranked, start=1):
                    quoted = QuoteIndex(texts[state.table.ids[row.row]])
                    relevant = on_topic and any(quoted.quotes(g) for g in q.gold_sections)
                    hit = row.row if row.continued_from is None else row.continued_from
                    passages.append((raw[hit], sig.story_match, float(place), float(relevant),
                                     on_topic, float(row.continued_from is not None)))
                for hit in vector.retrieve(q.question):
                    quoted = QuoteIndex(hit.node.get_content())
                    relevant = on_topic and any(quoted.quotes(g) for g in q.gold_sections)
                    chunks.append((hit.node.metadata["signals"]["raw_score"], float(relevant),
                                   on_topic))
    return np.asarray(passages, dtype=np.float64), np.asarray(chunks, dtype=np.float64)


def features(passages: np.ndarray) -> np.ndarray:
    """What ``scores.narrative_score`` reads: the hit's raw score, story_match, log(rank)."""
    return np.column_stack(
        [passages[:, UNIT], passages[:, MATCH], np.log(passages[:, RANK])]
    )


def fit_logistic(x: np.ndarray, y: np.ndarray, steps: int = 50) -> np.ndarray:
    """Maximum-likelihood logistic weights (Newton's method, a little ridge for stability)."""
    design = np.column_stack([x, np.ones(len(x))])
    w = np.zeros(design.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-design @ w))
        grad = design.T @ (p - y) + 1e-3 * w
        hess = (design * (p * (1 - p))[:, None]).T @ design + 1e-3 * np.eye(len(w))
        w -= np.linalg.solve(hess, grad)
    return w


def cosine_equivalent(passages: np.ndarray, chunks: np.ndarray) -> tuple[float, ...]:
    """``NARRATIVE_RAW, NARRATIVE_MATCH, NARRATIVE_RANK, NARRATIVE_BIAS``: two fits composed.

    ``P(relevant) = σ(a·raw + b·match + r·log(rank) + c)`` for a narrative result (``raw`` its
    hit's) and ``σ(d·cosine + e)`` for a chunk the vector mode returns; the chunk cosine with
    the same probability is ``(a·raw + b·match + r·log(rank) + c − e) / d``. Scores never rise
    down the list only if ``a > 0`` and ``r ≤ 0``: checked.
    """
    a, b, r, c = fit_logistic(features(passages), passages[:, RELEVANT])
    d, e = fit_logistic(chunks[:, :1], chunks[:, 1])
    print(f"P(relevant | raw, match, rank) = σ({a:.3f}·raw + {b:.3f}·match + {r:.3f}·log(rank) "
          f"+ {c:.3f}); P(relevant | chunk cosine) = σ({d:.3f}·cosine + {e:.3f})")
    if not (a > 0 and r <= 0 and d > 0):
        raise SystemExit("the fit would let scores rise down the list: not shippable")
    return a / d, b / d, r / d, (c - e) / d


def reliability(passages: np.ndarray, chunks: np.ndarray) -> list[str]:
    """Per score band: how many results and the share relevant, for the shipped narrative score
    and for the vector mode's chunk cosine (equal shares in a band: the scales compare); then
    the share relevant per rank on topic (why a continuation is scored as its hit)."""
    narrative = np.array([
        scores.narrative_score(unit, match, int(place))
        for unit, match, place in passages[:, [UNIT, MATCH, RANK]]
    ])
    relevant = passages[:, RELEVANT]
    columns = ((narrative, relevant), (np.clip(chunks[:, 0], 0.0, 1.0), chunks[:, 1]))
    lines = ["band       narrative: passages relevant   vector: chunks relevant"]
    for low, high in zip(BANDS, BANDS[1:]):
        cells = []
        for values, hits in columns:
            inside = (values >= low) & (values < high)
            share = f"{hits[inside].mean():8.3f}" if inside.any() else "       -"
            cells.append(f"{int(inside.sum()):9d} {share}")
        lines.append(f"{low:.1f}-{min(high, 1.0):.1f}   " + "        ".join(cells))
    on, off = passages[:, ON_TOPIC] == 1.0, passages[:, ON_TOPIC] == 0.0
    lines.append(f"mean narrative score on-topic {narrative[on].mean():.3f}, "
                 f"off-topic {narrative[off].mean():.3f}")
    cells = []
    for place in range(1, DEPTH + 1):
        at = on & (passages[:, RANK] == place)
        if at.any():
            mark = "*" if passages[at, CONTINUATION].mean() > 0.5 else ""
            cells.append(f"{place}{mark} {relevant[at].mean():.2f}/{narrative[at].mean():.2f}")
    lines.append("on topic, rank: relevant/mean score (* mostly continuations): " + ", ".join(cells))
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="train", choices=("train", "val"))
    parser.add_argument("--stories", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=Path, help="save (or, if it exists, reuse) the rows here")
    args = parser.parse_args(argv)
    if args.rows is not None and args.rows.exists():
        saved = np.load(args.rows)
        passages, chunks = saved["passages"], saved["chunks"]
    else:
        stories = load_fairytaleqa(DEFAULT_DATA_ROOT, split=args.split)
        random.Random(args.seed).shuffle(stories)
        passages, chunks = collect(stories[: args.stories], make_embed_model())
        if args.rows is not None:
            np.savez(args.rows, passages=passages, chunks=chunks)
    print(f"{len(passages)} passages ({passages[:, RELEVANT].mean():.3f} relevant), "
          f"{len(chunks)} chunks ({chunks[:, 1].mean():.3f} relevant)")
    if args.split == "train":
        fitted = cosine_equivalent(passages, chunks)
        print("fitted: NARRATIVE_RAW, NARRATIVE_MATCH, NARRATIVE_RANK, NARRATIVE_BIAS = "
              + ", ".join(f"{value:.4f}" for value in fitted))
    print("\n".join(reliability(passages, chunks)))


if __name__ == "__main__":
    main()
