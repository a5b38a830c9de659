"""``e2rag query``: answer a question from a store, or from a running ``e2rag serve``.

Both ways give the same data (``app.query``), printed here: the answer, then each piece of
evidence with its place in the story.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from llama_index_e2rag.app.query import QueryOptions, run_query
from llama_index_e2rag.cli.store import load_store
from llama_index_e2rag.modes import DEFAULT_MODE, HYDE_VARIANTS, RETRIEVER_MODES

#: Characters of a result's text printed after its position.
SNIPPET_CHARS = 200


def add_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    query = commands.add_parser("query", help="answer a question from a store")
    query.add_argument("question")
    source = query.add_mutually_exclusive_group(required=True)
    source.add_argument("--store", type=Path, help="the store folder to load and ask")
    source.add_argument(
        "--server",
        default=None,
        help="ask a running e2rag serve instead, e.g. http://127.0.0.1:8765 (no load per query)",
    )
    query.add_argument(
        "--mode",
        choices=RETRIEVER_MODES,
        default=None,
        help=f"retrieval mode (default {DEFAULT_MODE}; entity_event with --hyde); chrono, "
        "sentence_graph and event_graph need a store indexed with --chrono / --sentence-graph "
        "/ --event-graph",
    )
    query.add_argument(
        "--hyde", choices=HYDE_VARIANTS, default=None, help="entity_event only (implies it)"
    )
    query.add_argument(
        "--top-k", type=int, default=None, help="results retrieved (default: the mode's own)"
    )
    query.add_argument(
        "--budget-words", type=int, default=None, help="fill this many words of evidence instead"
    )
    query.add_argument(
        "--explain",
        action="store_true",
        help="print which signals brought each result (sentence_graph: its hop, the edge that "
        "reached it, the anchor refinement) and, for an after/before/during question, its "
        "anchor: the passage, the confidence, whether it was used and the region",
    )
    query.add_argument("--quiet", action="store_true", help="no progress bars")
    query.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The answer and its evidence on stdout."""
    options = QueryOptions(
        args.question, args.mode, args.hyde, args.top_k, args.budget_words
    ).checked()
    if args.server is not None:
        from llama_index_e2rag.cli.serve import ask_server  # deferred: httpx, only for --server

        result = ask_server(args.server, options)
    else:
        index = load_store(args.store, progress=not args.quiet)
        result = run_query(index, args.store, options)
    print_result(result, args.explain, sys.stdout)
    return 0


def print_result(result: dict[str, Any], explained: bool, out: TextIO) -> None:
    """The lines of ``e2rag query``: the answer, then each result with its position; with
    ``explained``, an anchored question's anchor once (which passage *after / before / during*
    X points from, how sure, the region) and what brought each result."""
    print(result["answer"], file=out)
    print("\nEvidence:", file=out)
    anchor = next((s["metadata"]["anchor"] for s in result["sources"]
                   if isinstance(s.get("metadata", {}).get("anchor"), dict)), None)
    if explained and anchor is not None:
        from llama_index_e2rag.ranking.anchor import describe  # deferred: numpy and spaCy, ~3 s

        print(describe(anchor), file=out)
    for source in result["sources"]:
        score = f"{source['score']:.3f}" if source["score"] is not None else "-"
        snippet = " ".join(source["text"].split())[:SNIPPET_CHARS]
        print(f"[{source['rank']}] [{source['where']}] score {score}: {snippet}", file=out)
        if source["relation_path"] is not None:
            print(f"    path: {source['relation_path']}", file=out)
        if explained:
            print(f"    {source['explain']}", file=out)
