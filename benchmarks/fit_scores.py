"""Fit the ``narrative`` mode's score calibration on FairytaleQA **train** (``ranking.scores``).

    python -m benchmarks.fit_scores [--stories N] [--seed S] [--rows R.npz]   # fit, print
    python -m benchmarks.fit_scores --split val --stories 23            # check the shipped ones

Builds the offline default index of each sampled story and retrieves, for every question, the top
10 passages of the narrative mode (shipped weights) and the top 10 chunks of the vector mode,
twice: from its own story (a result is relevant when it quotes one of the question's gold
sections, the benchmark's 8-word rule) and from the next sampled story (off-topic: nothing there
is relevant). Two logistic regressions of relevance, one on the passage's raw fused score and the
question's ``story_match``, one on the chunk's cosine, composed, give ``NARRATIVE_RAW``,
``NARRATIVE_MATCH`` and ``NARRATIVE_BIAS``: the chunk cosine at which a result is as likely
relevant as the fused score says. Both splits print a reliability table (share of relevant
results per score band, narrative score against chunk cosine) for the shipped constants;
``--rows`` keeps the rows to re-fit without rebuilding.
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
from llama_index_e2rag.passage_cache import narrative_state
from llama_index_e2rag.ranking import scores
from llama_index_e2rag.ranking.narrative import NarrativeWeights, rank

DEPTH = 10
BANDS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01)


def collect(stories: Sequence[Any], embed_model: Any) -> tuple[np.ndarray, np.ndarray]:
    """Rows of (raw score, story_match, relevant, on-topic) for every passage the narrative mode
    returns, and of (cosine, relevant, on-topic) for every chunk the vector mode returns."""
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
    passages: list[tuple[float, float, float, float]] = []
    chunks: list[tuple[float, float, float]] = []
    for i, story in enumerate(stories):
        for on_topic, (narrative, vector, texts) in (
            (1.0, built[i]), (0.0, built[(i + 1) % len(built)])
        ):
            for q in story.questions:
                state, sig = narrative.signals(q.question)
                for ranked in rank(state.table, sig, weights, DEPTH):
                    quoted = QuoteIndex(texts[state.table.ids[ranked.row]])
                    relevant = on_topic and any(quoted.quotes(g) for g in q.gold_sections)
                    passages.append((ranked.score, sig.story_match, float(relevant), on_topic))
                for hit in vector.retrieve(q.question):
                    quoted = QuoteIndex(hit.node.get_content())
                    relevant = on_topic and any(quoted.quotes(g) for g in q.gold_sections)
                    chunks.append((hit.node.metadata["signals"]["raw_score"], float(relevant),
                                   on_topic))
    return np.asarray(passages, dtype=np.float64), np.asarray(chunks, dtype=np.float64)


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


def cosine_equivalent(passages: np.ndarray, chunks: np.ndarray) -> tuple[float, float, float]:
    """``NARRATIVE_RAW, NARRATIVE_MATCH, NARRATIVE_BIAS``: the two logistic fits composed.

    ``P(relevant) = σ(a·raw + b·match + c)`` for a narrative passage and ``σ(d·cosine + e)`` for
    a chunk the vector mode returns; the chunk cosine with the same probability is
    ``(a·raw + b·match + c − e) / d``.
    """
    a, b, c = fit_logistic(passages[:, :2], passages[:, 2])
    d, e = fit_logistic(chunks[:, :1], chunks[:, 1])
    print(f"P(relevant | raw, match) = σ({a:.3f}·raw + {b:.3f}·match + {c:.3f}); "
          f"P(relevant | chunk cosine) = σ({d:.3f}·cosine + {e:.3f})")
    return a / d, b / d, (c - e) / d


def reliability(passages: np.ndarray, chunks: np.ndarray) -> list[str]:
    """Per score band: how many results and the share relevant, for the shipped narrative score
    and for the vector mode's chunk cosine (equal shares in a band: the scales compare)."""
    narrative = np.array([scores.narrative_score(r, m) for r, m in passages[:, :2]])
    columns = ((narrative, passages[:, 2]), (np.clip(chunks[:, 0], 0.0, 1.0), chunks[:, 1]))
    lines = ["band       narrative: passages relevant   vector: chunks relevant"]
    for low, high in zip(BANDS, BANDS[1:]):
        cells = []
        for values, relevant in columns:
            inside = (values >= low) & (values < high)
            share = f"{relevant[inside].mean():8.3f}" if inside.any() else "       -"
            cells.append(f"{int(inside.sum()):9d} {share}")
        lines.append(f"{low:.1f}-{min(high, 1.0):.1f}   " + "        ".join(cells))
    on, off = passages[:, 3] == 1.0, passages[:, 3] == 0.0
    lines.append(f"mean narrative score on-topic {narrative[on].mean():.3f}, "
                 f"off-topic {narrative[off].mean():.3f}")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="train", choices=("train", "val"))
    parser.add_argument("--stories", type=int, default=6)
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
    print(f"{len(passages)} passages ({passages[:, 2].mean():.3f} relevant), "
          f"{len(chunks)} chunks ({chunks[:, 1].mean():.3f} relevant)")
    if args.split == "train":
        raw, match, bias = cosine_equivalent(passages, chunks)
        print(f"fitted: NARRATIVE_RAW, NARRATIVE_MATCH, NARRATIVE_BIAS = "
              f"{raw:.4f}, {match:.4f}, {bias:.4f}")
    print("\n".join(reliability(passages, chunks)))


if __name__ == "__main__":
    main()
