"""``python -m benchmarks.novels build|status|evaluate|cv|thirds``: the novel protocol's experiments.

    python -m benchmarks.novels build [--books N | --max-words W]   # cache indexes, shortest first
    python -m benchmarks.novels status                              # what is cached, build times
    python -m benchmarks.novels evaluate [--config JSON ...] [--ablations] [--out FILE]
    python -m benchmarks.novels cv [--config JSON ...] [--ablations] [--objective atr+time]
    python -m benchmarks.novels thirds benchmarks/results/full.json  # per-third rows, old results

Books are the LiteraryQA validation books in length order (``benchmarks.protocol``); ``build``
caches each one's offline-default index (``cache``), resumably; ``evaluate`` and ``cv`` use the
cached books only and say how many of each length third they cover. A configuration is a JSON
object: ``{"name": ..., "mode": "narrative", "weights": {...}, ...}`` — ``weights`` overrides
fields of the shipped ``NarrativeWeights``, every other key goes to ``index.as_retriever`` (e.g.
``"disable": ["anchor"]``), except ``"probe"``: a ranking idea measured without shipping it
(``probe``: ``units:3``, ``mmr:1``, ``pronouns``, ``chapters``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from benchmarks.loaders import DEFAULT_DATA_ROOT, Narrative, load_literaryqa
from benchmarks.novels import markdown
from benchmarks.novels.cache import DEFAULT_ROOT, BookCache
from benchmarks.novels.cv import CROSS_VALIDATED, OBJECTIVES, cross_validate
from benchmarks.novels.evaluate import DEFAULT, Config, ablations, evaluate
from benchmarks.protocol import (BookPlace, Row, by_third, length_thirds, place_books,
                                 third_ranges, third_table)


def _books(data_root: Path) -> tuple[list[Narrative], dict[str, BookPlace]]:
    """All validation books in the protocol's length order, and their places."""
    books = load_literaryqa(data_root)
    places = place_books((b.doc_id, b.words) for b in books)
    return sorted(books, key=lambda b: places[b.doc_id].rank), places


def _status(cache: BookCache, books: Sequence[Narrative],
            places: dict[str, BookPlace]) -> None:
    print(f"cache {cache.folder} (settings key {cache.key})")
    for book in books:
        place = places[book.doc_id]
        manifest = cache.manifest(book)
        if manifest:
            state = (f"built {manifest['build_seconds']:.0f} s, peak RSS "
                     f"{manifest['peak_rss_mb']:.0f} MiB, {manifest['built_utc']}")
        else:
            stale = cache.stale(book)
            state = ("stale only (differs in " + ", ".join(stale[0].differs) + ")"
                     if stale else "not built")
        print(f"{place.rank:2d} {place.third:6s} {place.fold} {book.doc_id:9s} "
              f"{book.words:8,d} words  {state}")


def _configs(texts: Sequence[str]) -> list[Config]:
    """Configurations from JSON texts or ``@file`` names, each an object or a list of them."""
    configs = []
    for text in texts:
        if text.startswith("@"):
            text = Path(text[1:]).read_text(encoding="utf-8")
        data = json.loads(text)
        configs += [Config.parse(item) for item in (data if isinstance(data, list) else [data])]
    return configs


def _run(args: argparse.Namespace, cache: BookCache, books: Sequence[Narrative],
         places: dict[str, BookPlace], configs: Sequence[Config]) -> dict[str, Any]:
    """Evaluate ``configs`` on the cached books; the result dict the commands print and save."""
    from dataclasses import asdict

    from benchmarks.report import machine_info

    chosen = books[: args.books] if args.books else books
    spread: list[dict[str, Any]] | None = [] if getattr(args, "signals", False) else None
    previous = _resumable(args.resume, cache, configs, spread) if args.resume else None
    done = {b["doc_id"] for b in previous["books"]} if previous else set()
    rows, per_book = evaluate(cache, chosen, configs, log=lambda line: print(line, flush=True),
                              spread=spread, skip=done)
    if previous:
        order = {b.doc_id: i for i, b in enumerate(books)}
        per_book = sorted([b for b in previous["books"] if b["doc_id"] in order] + per_book,
                          key=lambda b: order[b["doc_id"]])
        rows = [Row(**r) for r in previous["rows"] if r["doc_id"] in order] + rows
        print(f"resumed {len(done)} books from {args.resume}", flush=True)
    if not rows:
        raise SystemExit("no cached book to evaluate: run `python -m benchmarks.novels build`")
    covered = [b["doc_id"] for b in per_book]
    extra: dict[str, Any] = {} if spread is None else {
        "signals": [{**s, "third": places[s["doc_id"]].third} for s in spread]}
    if previous:
        extra["resumed"] = {"from": str(args.resume), "command": previous["command"],
                            "books": sorted(done)}
    return {**extra, "command": "python -m benchmarks.novels " + " ".join(args.argv),
            "machine": machine_info(), "cache": str(cache.folder), "settings_key": cache.key,
            "configs": [asdict(c) for c in configs], "books": per_book,
            "ranges": third_ranges(places, covered),
            "by_third": by_third(rows, places),
            "rows": [asdict(r) for r in rows]}


def _resumable(path: Path, cache: BookCache, configs: Sequence[Config],
               spread: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Saved results whose books need not be scored again: the same configurations on the
    same builds (the cache folder they were read from is this run's)."""
    from dataclasses import asdict

    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"--resume {path}: {exc}") from exc
    if previous.get("configs") != [asdict(c) for c in configs]:
        raise SystemExit(f"--resume {path}: its configurations differ from this run's")
    if Path(previous.get("cache", "")).resolve() != cache.folder.resolve():
        raise SystemExit(f"--resume {path}: scored on {previous.get('cache')}, "
                         f"not on this run's builds ({cache.folder})")
    if spread is not None:
        raise SystemExit("--resume cannot be combined with --signals")
    return previous


def _print_tables(result: dict[str, Any], systems: Sequence[str]) -> None:
    print(f"\n{len(result['books'])} cached books; cells: ATR ÷ hybrid / time-question ATR ÷ "
          "hybrid, pooled per question")
    print("\n".join(third_table(result["by_third"], result["ranges"], systems)))


def _save(args: argparse.Namespace, result: dict[str, Any], systems: Sequence[str],
          title: str) -> None:
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown.render(result, systems, title), encoding="utf-8")
        print(f"markdown: {args.markdown}")
    path = args.out
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
        print(f"results: {path}")


def _cross_validate(result: dict[str, Any], places: dict[str, BookPlace], grid: Sequence[str],
                    goal: str) -> None:
    """Each fold's choice among ``grid`` reported on the other fold; printed and kept."""
    cv = cross_validate([Row(**r) for r in result["rows"]], places, grid, goal)
    result["cv"] = cv
    for fit, fold in cv["folds"].items():
        print(f"\nfold {fit} ({fold['books_fit']} books) chose {fold['chosen']!r} "
              f"({goal} {fold['objective_on_fit']:.3f} on {fit}); on fold "
              f"{fold['reported_on']}: ATR ÷ hybrid {fold['report']['atr_vs_hybrid']:.3f}")
    print("\ncross-validated (each fold's choice reported on the other fold, pooled):")
    print("\n".join(third_table(cv["by_third"], result["ranges"], ["hybrid", CROSS_VALIDATED])))


def _add_thirds(path: Path, books: Sequence[Narrative]) -> None:
    """Saved results gain ``length_thirds`` from the same run's per-question scores."""
    results = json.loads(path.read_text(encoding="utf-8"))
    data = results.get("quality", {}).get("literaryqa")
    if not data or not data.get("per_question"):
        raise SystemExit(f"{path}: no LiteraryQA per-question rows")
    data["length_thirds"] = length_thirds(data["per_question"], books)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    tmp.replace(path)
    print(f"{path}: per-third breakdown added ({data['sources']} books)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.novels",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    parser.add_argument("--cache", type=Path, default=DEFAULT_ROOT,
                        help=f"cache root (default {DEFAULT_ROOT}; $E2RAG_BENCH_CACHE)")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="cache the books' indexes, shortest first")
    build.add_argument("--books", type=int, help="only the N shortest books")
    build.add_argument("--max-words", type=int, help="only books of at most W words")
    commands.add_parser("status", help="list the books, their third, fold and cache state")
    thirds = commands.add_parser(
        "thirds", help="add the per-third breakdown to saved `python -m benchmarks` results "
                       "from their per-question rows (then rerun it with --render-only)")
    thirds.add_argument("results", type=Path, nargs="+")
    for name, text in (("evaluate", "score configurations on the cached books"),
                       ("cv", "choose a configuration per fold, report it on the other")):
        command = commands.add_parser(name, help=text)
        command.add_argument("--books", type=int, help="only the N shortest books (if cached)")
        command.add_argument("--out", type=Path, help="save the figures and per-question rows")
        command.add_argument("--resume", type=Path, metavar="RESULTS",
                             help="take the books already scored in saved results (same "
                                  "configurations, same builds) and score only the others")
        command.add_argument("--markdown", type=Path,
                             help="write the tables as markdown (docs/benchmarks.md includes "
                                  "benchmarks/results/novels.md)")
        command.add_argument("--config", action="append", default=[],
                             help="a configuration (JSON object or list, or @FILE); repeatable; "
                                  "evaluate's default: the shipped narrative mode")
        command.add_argument("--ablations", action="store_true",
                             help="add the shipped mode with each signal off in turn, with and "
                                  "without the anchor")
        command.add_argument("--signals", action="store_true",
                             help="also measure how selective each graph signal is (share of "
                                  "passages it touches), per third")
        if name == "cv":
            command.add_argument("--objective", choices=OBJECTIVES, default="atr")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if not (args.data_root / "literaryqa").is_dir():
        parser.error(f"no LiteraryQA data under {args.data_root}")
    books, places = _books(args.data_root)
    cache = BookCache(args.cache)
    if args.command == "thirds":
        for path in args.results:
            _add_thirds(path, books)
        return 0
    if args.command == "status":
        _status(cache, books, places)
    elif args.command == "build":
        chosen = books[: args.books] if args.books else books
        if args.max_words:
            chosen = [b for b in chosen if b.words <= args.max_words]
        print(f"cache {cache.folder} (settings key {cache.key})", flush=True)
        try:
            cache.build(chosen, args.data_root, log=lambda line: print(line, flush=True))
        except RuntimeError as exc:  # a child's failure, named with its last lines
            parser.exit(1, f"python -m benchmarks.novels: error: {exc}\n")
    else:
        if args.books is not None and args.books < 1:
            parser.error("--books must be at least 1")
        try:
            configs = _configs(args.config)
        except (OSError, ValueError) as exc:
            parser.error(f"bad --config: {exc}")
        if args.command == "evaluate" and not configs:
            configs = [DEFAULT]
        if args.ablations:
            configs += [c for c in ablations() if c.name not in {k.name for k in configs}]
        if not configs:
            parser.error("cv needs configurations to choose from: --config and/or --ablations")
        result = _run(args, cache, books, places, configs)
        systems = ["hybrid", "bm25", "dense", "random", *(c.name for c in configs)]
        _print_tables(result, systems)
        if args.command == "cv":
            _cross_validate(result, places, [c.name for c in configs], args.objective)
        _save(args, result, systems, "Where `narrative` stands against the hybrid, per "
                                     "configuration and per length third")
    return 0


if __name__ == "__main__":
    sys.exit(main())
