"""``e2rag repair``: rebuild what a damaged store lost from what is intact, and say what."""

from __future__ import annotations

import argparse
from pathlib import Path

from llama_index_e2rag.errors import E2RAGError


def add_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    repair = commands.add_parser(
        "repair", help="rebuild what a damaged store lost from what is intact"
    )
    repair.add_argument("--store", required=True, type=Path)
    repair.add_argument("--quiet", action="store_true", help="no progress bars")
    repair.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """What was found and repaired, one line each; an error when the store is still damaged."""
    from llama_index_e2rag.maintenance.repair import repair_store  # deferred: llama-index, spaCy

    report = repair_store(args.store, show_progress=not args.quiet)
    if not report.before.problems and not report.actions:
        print(f"{args.store}: nothing to repair")
    for problem in report.before.problems:
        print(f"found: {problem}")
    for action in report.actions:
        print(f"repaired: {action}")
    after = report.after
    if after is not None and after.problems:
        for problem in after.problems:
            print(f"still damaged: {problem}")
        raise E2RAGError(f"{args.store} is still damaged after repair (see above)")
    print(f"{args.store}: the store is whole")
    return 0
