"""Fit the ``answer_type`` weight of the ``narrative`` mode on FairytaleQA **train** (never val).

    python -m benchmarks.fit_answer_type [--stories N] [--seed S] [--cache DIR] [--write]

The same sample and per-story signal cache as ``benchmarks.fit_anchor`` (train stories with an
anchored question, seed 0), whose questions are of every kind. Each candidate weight is scored
by ``fit_narrative.objective`` (mean of the answer-token, gold-section and time-question ratios
to the BM25+dense hybrid) with every other weight the shipped one. A cache written before the
signal existed lacks it: point ``--cache`` at a new folder. ``--write`` stores the best weight
in ``llama_index_e2rag/data/narrative_weights.json`` (``weights`` and an ``answer_type_fit``
record of every candidate's figures).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from datetime import date
from typing import Sequence

from benchmarks.fit_anchor import anchored_sample, arguments, collect
from benchmarks.fit_narrative import evaluate, objective
from llama_index_e2rag.ranking.narrative import WEIGHTS_PATH, NarrativeWeights

GRID = (0.0, 0.1, 0.25, 0.5, 1.0)


def main(argv: Sequence[str] | None = None) -> None:
    args = arguments(__doc__, argv)
    collected, baseline = collect(anchored_sample(args.stories, args.seed), args.cache)
    shipped = NarrativeWeights.fitted()
    results = {}
    for value in GRID:
        figures = evaluate(collected, replace(shipped, answer_type=value))
        results[value] = (objective(figures, baseline), figures)
        print(f"answer_type={value}: objective {results[value][0]:.4f} {figures}", flush=True)
    best = max(GRID, key=lambda v: (round(results[v][0], 9), -v))  # ties: the smaller weight
    print(f"best answer_type={best}; hybrid {baseline}", flush=True)
    if args.write:
        record = json.loads(WEIGHTS_PATH.read_text(encoding="utf-8"))
        record["weights"]["answer_type"] = best
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip()
        record["answer_type_fit"] = {
            "fitted_on": f"FairytaleQA train, {len(collected)} stories with an anchored question "
                         f"(seed {args.seed}), {sum(len(s.questions) for s in collected)} questions",
            "objective_per_weight": {str(v): round(results[v][0], 4) for v in GRID},
            "train_figures": results[best][1],
            "train_hybrid": baseline,
            "command": f"python -m benchmarks.fit_answer_type --stories {args.stories} "
                       f"--seed {args.seed} --write",
            "date": date.today().isoformat(),
            "commit": commit,
        }
        WEIGHTS_PATH.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"written to {WEIGHTS_PATH}")


if __name__ == "__main__":
    main()
