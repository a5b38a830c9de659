"""How often the offline answer's first sentence holds the answer (FairytaleQA), and the fit of
the answer ranking's rank weight (``answer.reading.W_RANK``) on **train** only.

    python -m benchmarks.answer_line --split val                 # report
    python -m benchmarks.answer_line --split train --stories 25 --fit
    python -m benchmarks.answer_line --split val --save val.json   # later: --load val.json
    python -m benchmarks.answer_line --split val --skip 12 --save val2.json   # in parts

Builds the offline default index of each story, retrieves every question with the default
``narrative`` retriever twice (10 passages, the CLI's default; 200 words, the benchmark's budget
and the setting of the figures in docs/grounded.md), and reads the candidate sentences against the
question once per setting (``ExtractiveSynthesizer.readings``).
A sentence *holds the answer* when it has at least half of a reference answer's content words
(``answer_token_recall`` ≥ 0.5). Figures: the first sentence holds it, one of the first three
does, and the ceiling (some candidate does), for the shipped weights and for the same weights
without the rank term (``W_RANK = 0``); ``--fit`` searches the rank term's shape and weight on a
grid, for the best mean of the two settings' first-sentence figures. ``--save``
keeps the readings, so that weights can be compared again (``--load``) without rebuilding.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from llama_index.core import Document

from benchmarks.loaders import DEFAULT_DATA_ROOT, load_fairytaleqa
from benchmarks.scoring import answer_token_recall
from benchmarks.systems import make_embed_model
from llama_index_e2rag.answer.extractive import AnswerWeights, ExtractiveSynthesizer, Reading

GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)


@dataclass
class _Question:
    #: per candidate: does it hold the answer, and how it read against the question
    holds: list[bool]
    readings: list[Reading]


#: The settings read per question: the CLI's default and the benchmark's budget.
SETTINGS: dict[str, dict[str, int]] = {"top10": {"similarity_top_k": 10}, "budget200": {
    "budget_words": 200}}


def collect(
    stories: Sequence[Any], save: Callable[[dict[str, list[_Question]]], None] = lambda _: None
) -> dict[str, list[_Question]]:
    """Every question's candidates under each of ``SETTINGS``, read once; ``save`` is given
    what was read so far after each story (a long run interrupted keeps its stories)."""
    from llama_index_e2rag.index import E2RAGIndex

    embed = make_embed_model()
    out: dict[str, list[_Question]] = {name: [] for name in SETTINGS}
    for number, story in enumerate(stories, start=1):
        started = time.perf_counter()
        index = E2RAGIndex.from_documents(
            [Document(text=story.text, id_=story.doc_id)], embed_model=embed, llm=None
        )
        synth = ExtractiveSynthesizer.from_index(index)
        for name, setting in SETTINGS.items():
            retriever = index.as_retriever(**setting)
            for q in story.questions:
                pairs = synth.readings(q.question, retriever.retrieve(q.question))
                holds = [(answer_token_recall(e.text, q.answers) or 0.0) >= 0.5 for e, _ in pairs]
                out[name].append(_Question(holds, [r for _, r in pairs]))
        save(out)
        print(f"[{number}/{len(stories)}] {story.doc_id}: {len(story.questions)} questions, "
              f"{time.perf_counter() - started:.1f} s", flush=True)
    return out


#: Shapes of the rank term tried by ``--fit`` (``answer.reading.rank_prior`` ships the chosen one).
PRIORS: dict[str, Callable[[int], float]] = {
    "reciprocal": lambda rank: 1.0 / (1.0 + rank),
    "log": lambda rank: -math.log1p(rank),
    "linear": lambda rank: -rank / 10.0,
}


def figures(
    questions: Sequence[_Question],
    weights: AnswerWeights,
    prior: Optional[Callable[[int], float]] = None,
) -> dict[str, float]:
    """Shares of questions whose first / first three answer sentences hold the answer
    (``prior``: another shape of the rank term, weighted by ``weights.rank``)."""
    if prior is None:
        score = weights.score
    else:
        base = replace(weights, rank=0.0)
        score = lambda r: base.score(r) + weights.rank * prior(r.rank)  # noqa: E731
    first = top3 = ceiling = 0
    for q in questions:
        order = sorted(range(len(q.readings)), key=lambda i: (-score(q.readings[i]), i))
        first += bool(order) and q.holds[order[0]]
        top3 += any(q.holds[i] for i in order[:3])
        ceiling += any(q.holds)
    n = len(questions) or 1
    return {"first": first / n, "first3": top3 / n, "ceiling": ceiling / n}


def _save(args: argparse.Namespace, found: dict[str, list[_Question]]) -> None:
    if args.save is not None:
        args.save.write_text(json.dumps({"split": args.split, **{
            name: [{"holds": q.holds, "readings": [asdict(r) for r in q.readings]}
                   for q in questions]
            for name, questions in found.items()
        }}), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="val", choices=("train", "val"))
    parser.add_argument("--stories", type=int, default=None, help="sampled stories (all)")
    parser.add_argument("--skip", type=int, default=0, help="skip this many sampled stories")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fit", action="store_true", help="search W_RANK (train only)")
    parser.add_argument("--save", type=Path, help="write the readings to this JSON file")
    parser.add_argument("--load", type=Path, nargs="+",
                        help="read saved readings (of one split) instead of collecting")
    args = parser.parse_args(argv)
    if args.fit and args.split != "train":
        parser.error("--fit fits on train only")
    if args.load is not None:
        found: dict[str, list[_Question]] = {name: [] for name in SETTINGS}
        for path in args.load:
            saved = json.loads(path.read_text(encoding="utf-8"))
            if saved["split"] != args.split:
                parser.error(f"{path} holds {saved['split']} readings, not {args.split}")
            for name in SETTINGS:
                found[name] += [
                    _Question(q["holds"], [Reading(**r) for r in q["readings"]])
                    for q in saved[name]
                ]
    else:
        stories = load_fairytaleqa(DEFAULT_DATA_ROOT, split=args.split)
        random.Random(args.seed).shuffle(stories)
        end = None if args.stories is None else args.skip + args.stories
        found = collect(stories[args.skip : end], lambda so_far: _save(args, so_far))
    shipped = AnswerWeights()
    for name, questions in found.items():
        print(f"{name}: {len(questions)} questions")
        print(f"  without the rank term: {figures(questions, replace(shipped, rank=0.0))}")
        print(f"  shipped weights:       {figures(questions, shipped)}")
    if args.fit:
        for prior_name, prior in PRIORS.items():
            for value in GRID:
                both = [figures(q, replace(shipped, rank=value), prior) for q in found.values()]
                mean = sum(f["first"] for f in both) / len(both)
                print(f"{prior_name} W_RANK={value}: first {mean:.4f} "
                      + " ".join(f"{n}={f}" for n, f in zip(found, both)))


if __name__ == "__main__":
    main()
