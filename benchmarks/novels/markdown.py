"""docs/benchmarks.md's Part 2 section: the novel protocol (``protocol_section``), then the
markdown an ``evaluate`` or ``cv`` run writes (``render``, ``--markdown``): what ran on which
books, then the per-third tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from benchmarks.protocol import HYBRID, THIRDS, third_table

_RESULTS = Path(__file__).resolve().parents[1] / "results"
#: What ``python -m benchmarks.novels`` last wrote (``--markdown``), and the findings drawn from
#: it by hand; both are included under the Part 2 section when present.
NOVELS_REPORT = _RESULTS / "novels.md"
NOVELS_FINDINGS = _RESULTS / "novels-findings.md"


def protocol_section() -> list[str]:
    """The novel protocol (issue 28 §1): fixed groups, cross-validation, the cache, commands."""
    out = ["## Part 2 protocol: novels (LiteraryQA)", "",
           "Every figure on novels that is fitted, chosen or broken down uses the same fixed "
           "groups (`benchmarks/protocol.py`):", "",
           "- **Books**: the 44 LiteraryQA validation books, sorted by word count (whitespace "
           "words after the Project Gutenberg header and footer are stripped; ties by "
           "`doc_id`).",
           "- **Length thirds**: the 15 shortest are *short* (7,877–46,203 words), the next 15 "
           "*medium* (51,862–104,503), the last 14 *long* (121,963–353,479). Thirds are always "
           "those of the 44 books: a run over some books reports each in its own third.",
           "- **Folds**: the book of rank r (0-based, in that order) is in fold A when r is "
           "even, B when odd, so each fold holds half of every third.",
           "- **Cross-validated figure**: choose (or fit) on fold A, report on fold B, and "
           "choose on B, report on A; the two reports are pooled per question over the books "
           "covered. The shipped values are then chosen on all 44 books (+ FairytaleQA train).",
           "- **Scoring**: the benchmark's answer-token recall at 1,500 words, as a ratio to "
           "the BM25+dense hybrid (100-word windows) of the same run, pooled per question "
           "(mean ATR over the questions ÷ the hybrid's mean on the same questions); time "
           "questions as everywhere (when/while/during/after/before).", "",
           "`python -m benchmarks` reports LiteraryQA per third beside the overall figure (the "
           "tables above; `python -m benchmarks.novels thirds RESULTS.json` adds the breakdown "
           "to results saved before it existed, from their per-question rows).", "",
           "**Experiments without rebuilding** (`python -m benchmarks.novels`): `build` builds "
           "each book's offline-default index once (`benchmarks.systems.build_index`, as the "
           "benchmark builds it), shortest first, one child process per book, into "
           "`~/.cache/e2rag-bench/literaryqa/<settings key>/<doc_id>-<text sha256>/` "
           "(`--cache` or `$E2RAG_BENCH_CACHE` moves the root). The settings key hashes "
           "everything that changes a build: embedding, passage length, spaCy model and "
           "version, document builders and their settings, store format, and the library's "
           "source except its query-time parts (`ranking/`, `retrievers/`, the CLI, server, "
           "query engines): a ranking change reuses the cache, any other library change gets "
           "a new key and a new build; a build under other settings is never used (`status` "
           "and `evaluate` name what differs). A book's `bench.json` (build seconds, peak RSS) "
           "is written last, so a killed build leaves the earlier books cached and restarts "
           "the one it was building. `evaluate` loads each cached book and runs real "
           "retrievers (`--config '{\"mode\": \"narrative\", \"weights\": {...}, "
           "\"disable\": [...]}'`, repeatable or `@file`; `--ablations` adds each narrative "
           "signal off in turn, with and without the anchor) beside the window baselines of "
           "the same run; `cv` chooses among the same configurations per fold and reports on the "
           "other. "
           "Both print the per-third tables and save per-question rows (`--out`) and markdown "
           "(`--markdown`); `--resume RESULTS.json` takes the books those saved results already "
           "scored (same configurations, same builds) and scores only the others, so books "
           "built later join a run without scoring the rest again. Commands:", "",
           "```",
           "nice -n 10 python -m benchmarks.novels build            # resumable; --books N",
           "python -m benchmarks.novels status                      # thirds, folds, cache state",
           "python -m benchmarks.novels evaluate --ablations --markdown benchmarks/results/novels.md",
           "python -m benchmarks.novels cv --config @grid.json --ablations --objective atr+time",
           "python -m benchmarks full --render-only                 # include it here",
           "```", ""]
    for path in (NOVELS_REPORT, NOVELS_FINDINGS):
        if path.is_file():
            out += [path.read_text(encoding="utf-8").strip(), ""]
    return out


#: What the cells of every table mean.
CELLS = ("Cells: ATR ÷ hybrid / time-question ATR ÷ hybrid on the same questions (pooled per "
         "question, 1,500-word budget); the hybrid row gives its own ATR / time ATR.")


def _stamp(result: dict[str, Any]) -> str:
    m = result["machine"]
    covered = {t: r["books_run"] for t, r in result["ranges"].items()}
    thirds = ", ".join(f"{covered.get(t, 0)} of {result['ranges'][t]['books']} {t}"
                       for t in THIRDS if t in result["ranges"])
    questions = sum(b["questions"] for b in result["books"])
    total = sum(r["books"] for r in result["ranges"].values())
    partial = "partial: " if len(result["books"]) < total else ""
    return (f"*{m['date_utc']} · commit `{m['git_commit']}` · {m['nproc']} cores · cache "
            f"settings key `{result['settings_key']}` · `{result['command']}` · "
            f"**{partial}{len(result['books'])} of {total} books ({thirds}), "
            f"{questions} questions***")


def _per_book(result: dict[str, Any], system: str) -> list[str]:
    """Per book: the hybrid's ATR and ``system``'s ratio to it (where the mean comes from)."""
    rows: dict[tuple[str, str], list[float]] = {}
    for r in result["rows"]:
        if r["atr"] is not None:
            rows.setdefault((r["doc_id"], r["system"]), []).append(r["atr"])
    lines = [f"| book | words | questions | hybrid ATR | {system} ÷ hybrid |", "|---|---|---|---|---|"]
    for book in result["books"]:
        base = rows.get((book["doc_id"], HYBRID), [])
        mine = rows.get((book["doc_id"], system), [])
        if not base or not mine:
            continue
        hybrid, value = sum(base) / len(base), sum(mine) / len(mine)
        ratio = f"{value / hybrid:.2f}" if hybrid else "–"
        lines.append(f"| {book['doc_id']} | {book['words']:,} | {book['questions']} | "
                     f"{hybrid:.3f} | {ratio} |")
    return lines


def _spread(result: dict[str, Any]) -> list[str]:
    """Per third: how often each graph signal fires and how much of the book it then touches."""
    spread = result.get("signals")
    if not spread:
        return []
    lines = ["How selective the shipped mode's graph signals are (per question: the share of "
             "the book's passages a signal is non-zero on; *fires* = share of questions where "
             "it is non-zero anywhere, *touches* = mean share of passages when it fires):", "",
             "| third | questions | passages per book | mention fires / touches | event fires / "
             "touches | co_event fires / touches | time q. with an anchor clause | story_match |",
             "|---|---|---|---|---|---|---|---|"]
    for third in ("all", *THIRDS):
        rows = [s for s in spread if third in ("all", s["third"])]
        if not rows:
            continue
        books = {s["doc_id"]: s["passages"] for s in rows}
        cells = [third, str(len(rows)), f"{sum(books.values()) / len(books):,.0f}"]
        for name in ("mention", "event", "co_event"):
            fired = [s[name] for s in rows if s[name] > 0]
            touches = f"{sum(fired) / len(fired):.1%}" if fired else "–"
            cells.append(f"{len(fired) / len(rows):.0%} / {touches}")
        timed = [s for s in rows if s["time"]]
        cells.append(f"{sum(s['anchor_clause'] for s in timed)} of {len(timed)}")
        cells.append(f"{sum(s['story_match'] for s in rows) / len(rows):.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def _seconds(result: dict[str, Any]) -> str:
    """Mean seconds per book: load, baselines, and per configuration."""
    totals: dict[str, float] = {}
    for book in result["books"]:
        for key, value in book["seconds"].items():
            totals[key] = totals.get(key, 0.0) + value
    n = len(result["books"])
    return ("Seconds per book (mean, shared 2-core machine): "
            + ", ".join(f"{k} {v / n:.1f}" for k, v in totals.items()) + ".")


def render(result: dict[str, Any], systems: Sequence[str], title: str) -> str:
    lines = [f"### {title}", "", _stamp(result), "", CELLS, "",
             *third_table(result["by_third"], result["ranges"], systems), ""]
    cv = result.get("cv")
    if cv:
        lines += [f"Cross-validated (objective `{cv['objective']}`): "
                  + "; ".join(f"fold {fit} chose `{fold['chosen']}`, reported on fold "
                              f"{fold['reported_on']}" for fit, fold in cv["folds"].items()),
                  "", *third_table(cv["by_third"], result["ranges"],
                                   [HYBRID, "cross-validated"]), ""]
    if "narrative" in result["by_third"]:
        lines += ["Per book, the shipped `narrative` mode:", "", *_per_book(result, "narrative"),
                  ""]
    lines += _spread(result)
    lines += [_seconds(result), ""]
    return "\n".join(lines)
