"""``python -m benchmarks quick|full``: every figure of docs/benchmarks.md from one command.

``python -m benchmarks litbank``: the entity/event layer on LitBank (``benchmarks/litbank``; its
own options, ``--help``); its section of the report is kept when ``quick``/``full`` rewrite it.

``quick``: the two shortest LiteraryQA books, the first two FairytaleQA val stories, the first two
questions of each multi-hop sample, scaling at 5k/20k words (and 20k in 4 documents), LLM cost on
the shortest book,
import cost over 5 fresh interpreters per statement (about 10 s).
``full``: every book, story and multi-hop question, scaling at 10k/100k/1M words in one document
and 10M words in 100 (the books read round again: distinct windows), LLM cost on the
three shortest books, import cost over 11 interpreters. On the 2-core reference machine the quality part handles about 340 words
of book per second (build, persist, baselines, questions) and scaling took 48 min, so ``full``
over all 44 books (4.1M words) takes about 4.5 hours; ``--books N`` keeps the N shortest books.
``--only PART`` reruns some parts and keeps the others of the profile's results file, each part
stamped with its own date, commit and command; ``--render-only`` rewrites the report from the
saved results without measuring; ``--only quality --datasets NAME...`` reruns some quality
datasets and keeps the others (each dataset table names the run it came from). Each book's index is built once, in a clean child process that
yields both its speed/memory figures and its retrievals. Subsets are chosen by size or file order, never by question content.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks import import_cost, llm_cost, protocol, report, scaling, speed
from benchmarks.speed import MeasuredIndex
from benchmarks.loaders import DEFAULT_DATA_ROOT, load_fairytaleqa, load_literaryqa, load_multihop
from benchmarks.runner.quality import DatasetSpec, evaluate_multihop, evaluate_narratives
from benchmarks.systems import EMBED_MODEL_NAME, MODES, build_index, make_embed_model

_REPO = Path(__file__).resolve().parents[1]
LITERARYQA_BUDGET, LITERARYQA_WINDOW = 1500, 100
FAIRYTALEQA_BUDGET, FAIRYTALEQA_WINDOW = 200, 50
MULTIHOP_BUDGET, MULTIHOP_WINDOW = 100, 50
PARTS = ("quality", "scaling", "llm_cost", "import_cost")
#: Quality datasets in report order (``--datasets`` picks some of them).
DATASETS = ("literaryqa", "fairytaleqa", "hotpotqa", "2wiki", "musique")


@dataclass(frozen=True)
class Profile:
    """How much of the data a run covers."""

    books: int | None  # shortest N LiteraryQA books (None: all)
    stories: int | None  # first N FairytaleQA val stories in file order (None: all)
    multihop: int | None  # first N questions of each multi-hop sample (None: all)
    scaling_sizes: Sequence[scaling.Size]
    cost_books: int  # shortest N books for the LLM-cost count
    scaling_timeout: float
    import_runs: int  # fresh interpreters per import statement


PROFILES = {
    "quick": Profile(books=2, stories=2, multihop=2, scaling_sizes=(5_000, 20_000, (20_000, 4)),
                     cost_books=1, scaling_timeout=1800, import_runs=5),
    "full": Profile(books=None, stories=None, multihop=None,
                    scaling_sizes=(10_000, 100_000, 1_000_000, (10_000_000, 100)), cost_books=3,
                    scaling_timeout=12 * 3600, import_runs=11),
}


def _in_process_factory(embed: Any) -> Callable[[list[Any], list[str]], Any]:
    return lambda documents, questions: build_index(documents, embed)


def _measuring_factory(rows: list[dict[str, Any]],
                       budget: int) -> Callable[[list[Any], list[str]], Any]:
    """Builds each book in a child process and keeps its speed row."""

    def factory(documents: list[Any], questions: list[str]) -> MeasuredIndex:
        name = documents[0].metadata.get("title", documents[0].id_)
        try:
            index = MeasuredIndex([d.text for d in documents], [d.id_ for d in documents],
                                  MODES, questions, budget)
        except RuntimeError as exc:
            rows.append({"name": name, "error": str(exc)})
            raise
        rows.append({"name": f"{name} ({documents[0].id_})", **index.measurements})
        return index

    return factory


def run_quality(profile: Profile, data_root: Path,
                datasets: Sequence[str] = DATASETS) -> dict[str, Any]:
    """Baselines and every index mode on the profile's slice of each dataset (``quality``).

    Books are built in measuring child processes; their rows are the ``speed`` section (only
    when ``datasets`` includes LiteraryQA).
    """
    embed = make_embed_model()
    factory = _in_process_factory(embed)
    out: dict[str, Any] = {}
    speed_rows: list[dict[str, Any]] = []
    if "literaryqa" in datasets:
        all_books = sorted(load_literaryqa(data_root), key=lambda n: n.words)
        books = all_books[: profile.books]
        split = "validation"
        if len(books) < len(all_books):
            split += f", the {len(books)} shortest of {len(all_books)} books"
        out["literaryqa"] = evaluate_narratives(
            DatasetSpec("literaryqa", split, LITERARYQA_BUDGET, LITERARYQA_WINDOW, MODES),
            books, embed, _measuring_factory(speed_rows, LITERARYQA_BUDGET))
        out["literaryqa"]["length_thirds"] = protocol.length_thirds(
            out["literaryqa"]["per_question"], all_books)
    if "fairytaleqa" in datasets:
        stories = load_fairytaleqa(data_root, "val")[: profile.stories]
        out["fairytaleqa"] = evaluate_narratives(
            DatasetSpec("fairytaleqa", "val", FAIRYTALEQA_BUDGET, FAIRYTALEQA_WINDOW, MODES),
            stories, embed, factory)
    for name, items in load_multihop(data_root).items():
        if name in datasets:
            out[name] = evaluate_multihop(
                DatasetSpec(name, "dev sample", MULTIHOP_BUDGET, MULTIHOP_WINDOW, MODES),
                items[: profile.multihop], embed, factory)
    result: dict[str, Any] = {"quality": out}
    if "literaryqa" in datasets:
        result["speed"] = {"rows": speed_rows}
    return result


def run_scaling(profile: Profile, data_root: Path) -> dict[str, Any]:
    """Build/memory/latency growth over concatenated books (``scaling``)."""
    books = sorted(load_literaryqa(data_root), key=lambda n: n.doc_id)
    queries = [q.question for b in books[:3] for q in b.questions][: speed.LATENCY_QUERIES + 1]
    return {"scaling": scaling.run_scaling(books, profile.scaling_sizes, MODES, queries,
                                           timeout=profile.scaling_timeout)}


def run_llm_cost(profile: Profile, data_root: Path) -> dict[str, Any]:
    """Extraction calls and prompt tokens, E²RAG vs LightRAG (``llm_cost``)."""
    books = sorted(load_literaryqa(data_root), key=lambda n: n.words)[: profile.cost_books]
    return {"llm_cost": llm_cost.run_llm_cost([(b.doc_id, b.text) for b in books])}


def run_import_cost(profile: Profile, data_root: Path) -> dict[str, Any]:
    """What ``import lightrag_ext`` adds to ``import lightrag`` (``import_cost``; no data)."""
    return {"import_cost": import_cost.run_import_cost(profile.import_runs)}


RUNNERS = {"quality": run_quality, "scaling": run_scaling, "llm_cost": run_llm_cost,
           "import_cost": run_import_cost}
#: Result keys each part writes (``quality`` also yields the speed rows of its books).
PART_KEYS = {"quality": ("quality", "speed"), "scaling": ("scaling",), "llm_cost": ("llm_cost",),
             "import_cost": ("import_cost",)}


def quality_run_key(datasets: Sequence[str]) -> str:
    """The ``runs`` entry of a quality run over ``datasets`` ("quality" when it covers all)."""
    if set(datasets) >= set(DATASETS):
        return "quality"
    return f"quality ({', '.join(d for d in DATASETS if d in datasets)})"


def merge_results(previous: dict[str, Any] | None, new: dict[str, Any],
                  parts: Sequence[str]) -> dict[str, Any]:
    """``new`` plus the parts of ``previous`` (same profile) that this run did not redo.

    Lets a long profile be run in pieces (``--only``, ``--datasets``) without losing what
    earlier pieces measured; every part keeps its own ``runs`` entry (date, commit, command,
    wall time), and each quality dataset names its run (``"run"``). A quality run over some
    datasets keeps the other datasets, and the speed rows when it did not rebuild the books.
    """
    if not previous or previous.get("profile") != new["profile"]:
        return new
    merged = {**new, "runs": dict(previous.get("runs", {}))}
    for part in PART_KEYS:
        if part in parts:
            continue
        for key in PART_KEYS[part]:
            if key in previous:
                merged[key] = previous[key]
    if "quality" in parts and "quality" in previous:
        redone = new.get("quality", {})
        quality = {name: redone.get(name, data) for name, data in previous["quality"].items()}
        quality.update(redone)
        merged["quality"] = quality
        if "speed" not in new and "speed" in previous:
            merged["speed"] = previous["speed"]
    merged["runs"].update(new.get("runs", {}))
    used = {data.get("run", "quality") for data in merged.get("quality", {}).values()}
    if merged.get("speed"):
        used.add("quality")
    for key in [k for k in merged["runs"] if k.startswith("quality") and k not in used]:
        del merged["runs"][key]
    return merged


def _read_results(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SystemExit(f"cannot read earlier results {path}: {exc}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["litbank"]:  # its own options (``benchmarks/litbank``)
        from benchmarks.litbank.__main__ import main as litbank

        return litbank(words[1:])
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=__doc__.split("\n")[0],
                                     epilog="python -m benchmarks litbank --help: the LitBank "
                                            "benchmark of the entity/event layer")
    parser.add_argument("profile", choices=sorted(PROFILES))
    parser.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT,
                        help="the shared data folder (default: ../shared/data)")
    parser.add_argument("--out", type=Path, default=_REPO / "docs" / "benchmarks.md")
    parser.add_argument("--results", type=Path, default=_REPO / "benchmarks" / "results")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS),
                        help="run only these parts; the profile's other results are kept")
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS),
                        help="with the quality part: rerun only these datasets; the profile's "
                             "other quality datasets are kept")
    parser.add_argument("--books", type=int, default=None,
                        help="use the N shortest LiteraryQA books (default: the profile's)")
    parser.add_argument("--multihop", type=int, default=None,
                        help="use the first N questions of each multi-hop sample (file order; "
                             "default: the profile's)")
    parser.add_argument("--render-only", action="store_true",
                        help="measure nothing: rewrite the report from the saved results")
    args = parser.parse_args(argv)
    result_path = args.results / f"{args.profile}.json"
    if args.render_only:
        saved = _read_results(result_path)
        if saved is None:
            parser.error(f"no saved results at {result_path}")
        _write_report(saved, args.out)
        return 0
    if not args.data_root.is_dir():
        parser.error(f"data root not found: {args.data_root}")
    if args.books is not None and args.books < 1:
        parser.error("--books must be at least 1")
    if args.multihop is not None and args.multihop < 1:
        parser.error("--multihop must be at least 1")
    os.environ.pop("OPENAI_API_KEY", None)  # the offline default is what is measured
    profile = PROFILES[args.profile]
    if args.books is not None:
        profile = replace(profile, books=args.books)
    if args.multihop is not None:
        profile = replace(profile, multihop=args.multihop)
    previous = _read_results(result_path)
    command = "python -m benchmarks " + " ".join(sys.argv[1:] if argv is None else argv)
    results: dict[str, Any] = {"profile": args.profile, "machine": report.machine_info(),
                               "embed_model": EMBED_MODEL_NAME, "modes": list(MODES),
                               "multihop_budget": MULTIHOP_BUDGET,
                               "data_root": str(args.data_root), "runs": {}}
    for part in PARTS:
        if part in args.only:
            machine, started = report.machine_info(), time.perf_counter()
            key = part
            if part == "quality":
                key = quality_run_key(args.datasets)
                results.update(run_quality(profile, args.data_root, args.datasets))
                for data in results["quality"].values():
                    data["run"] = key
            else:
                results.update(RUNNERS[part](profile, args.data_root))
            results["runs"][key] = {"machine": machine, "command": command,
                                    "wall_seconds": time.perf_counter() - started}
    results = merge_results(previous, results, args.only)
    args.results.mkdir(parents=True, exist_ok=True)
    tmp = result_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    tmp.replace(result_path)
    print(f"results: {result_path}")
    _write_report(results, args.out)
    return 0


def _write_report(results: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report.render(results, out.parent / "img", out), encoding="utf-8")
    print(f"report:  {out}")


if __name__ == "__main__":
    sys.exit(main())
