"""``e2rag migrate``: convert a store written by llama-index-e2rag 0.1.0 to today's layout."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    migrate = commands.add_parser(
        "migrate", help="convert a store written by llama-index-e2rag 0.1.0 to today's layout"
    )
    migrate.add_argument("--store", required=True, type=Path)
    migrate.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Convert the store; one line with what it holds now."""
    from llama_index_e2rag.maintenance.migrate import migrate_store  # deferred: llama-index

    counts = migrate_store(args.store)
    print(
        f"converted {args.store}: "
        + ", ".join(f"{n} {kind}" for kind, n in counts["nodes"].items())
        + f"; {sum(counts['vectors'].values())} vectors"
    )
    return 0
