"""``python -m benchmarks litbank [--data-root DIR] [--works N] [--only ID ...]``: score the
project's offline entity/event layer and the baselines on LitBank; writes
``benchmarks/results/litbank.{json,md}`` and the LitBank section of ``docs/benchmarks.md``.

Each work (about 2,000 words) is parsed once with spaCy for the baselines and the heads, and
built once by each system; nothing is cached between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from benchmarks.litbank import report
from benchmarks.litbank.evaluate import Scores, evaluate_work
from benchmarks.litbank.loader import DEFAULT_LITBANK_ROOT, LitBankDataError, Work, load_litbank
from benchmarks.litbank.systems import SYSTEMS

_REPO = Path(__file__).resolve().parents[2]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks litbank",
        description="Score the offline entity/event layer and the baselines on LitBank: "
                    "mentions, event triggers, coreference, timeline chains.")
    parser.add_argument("--data-root", type=Path, default=DEFAULT_LITBANK_ROOT,
                        help="a folder laid out like shared/data/litbank (coref/, events/)")
    parser.add_argument("--works", type=int, default=None,
                        help="only the first N works in file order")
    parser.add_argument("--only", nargs="+", default=[], metavar="ID",
                        help="only these works (their id or the number it starts with)")
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS),
                        help="score only these systems")
    parser.add_argument("--results", type=Path, default=_REPO / "benchmarks" / "results",
                        help="where litbank.json and litbank.md go")
    parser.add_argument("--out", type=Path, default=_REPO / "docs" / "benchmarks.md",
                        help="the report whose LitBank section is rewritten")
    parser.add_argument("--render-only", action="store_true",
                        help="measure nothing: rewrite the section from the saved litbank.json")
    return parser


def compact(summary: dict[str, Any]) -> dict[str, Any]:
    """A work's row of one system: the headline figures only (the corpus JSON has them all)."""
    row: dict[str, Any] = {"seconds": round(summary["seconds"], 2)}
    if "mentions" in summary:
        for rule in ("exact", "head"):
            overall = summary["mentions"][rule]["overall"]
            row[f"mentions_{rule}"] = {k: overall[k] for k in ("tp", "pred", "gold", "f1")}
            row[f"coref_{rule}_avg_f1"] = summary["coref"][rule]["avg_f1"]
        row["per_head_f1"] = summary["mentions"]["head"]["by_type"]["PER"]["f1"]
    if "events" in summary:
        row["events"] = {k: summary["events"][k] for k in ("tp", "pred", "gold", "f1")}
    if "chains" in summary:
        row["chains"] = {k: summary["chains"][k] for k in ("chains", "named", "met")}
    return row


def run(works: Sequence[Work], systems: Sequence[str], command: str) -> dict[str, Any]:
    """Every chosen system on every work; the corpus figures and one row per work."""
    from benchmarks.report import machine_info
    from llama_index_e2rag.extract.spacy_model import load_spacy

    machine, started = machine_info(), time.perf_counter()
    nlp = load_spacy()
    totals = {name: Scores() for name in systems}
    rows, chains, parse_seconds = [], [], 0.0
    for number, work in enumerate(works, 1):
        t0 = time.perf_counter()
        doc = nlp(work.text)
        parse_seconds += time.perf_counter() - t0
        row: dict[str, Any] = {"work_id": work.work_id, "tokens": work.words,
                               "gold_mentions": len(work.mentions),
                               "gold_events": len(work.events), "systems": {}}
        for name in systems:
            t0 = time.perf_counter()
            scores = evaluate_work(work, doc, SYSTEMS[name](work.text, doc))
            scores.seconds = time.perf_counter() - t0
            totals[name].add(scores)
            row["systems"][name] = compact(scores.summary())
            chains += [{"system": name, **vars(c), "met": c.met} for c in scores.chains or []]
        rows.append(row)
        print(f"[{number}/{len(works)}] {work.work_id}: "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return {"benchmark": "litbank", "command": command, "machine": machine,
            "works": [w.work_id for w in works], "words": sum(w.words for w in works),
            "wall_seconds": time.perf_counter() - started, "parse_seconds": parse_seconds,
            "systems": {name: totals[name].summary() for name in systems},
            "per_work": rows, "chains": chains}


def _write(path: Path, text: str) -> None:
    """Atomically: a killed run leaves the previous file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    saved = args.results / "litbank.json"
    if args.render_only:
        try:
            results = json.loads(saved.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            parser.error(f"no saved results to render: {exc}")
    else:
        if args.works is not None and args.works < 1:
            parser.error("--works must be at least 1")
        try:
            works = load_litbank(args.data_root, args.only, args.works)
        except LitBankDataError as exc:
            parser.error(str(exc))
        os.environ.pop("OPENAI_API_KEY", None)  # the offline default is what is measured
        words = sys.argv[1:] if argv is None else list(argv)
        results = run(works, args.systems, " ".join(["python -m benchmarks litbank", *words]))
        _write(saved, json.dumps(results, indent=1, default=str) + "\n")
    section = report.render(results)
    _write(args.results / "litbank.md", section)
    document = args.out.read_text(encoding="utf-8") if args.out.is_file() else "# Benchmarks\n"
    _write(args.out, report.splice(document, section))
    if not args.render_only:
        print(f"results: {saved}")
    print(f"report:  {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
