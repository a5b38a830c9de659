"""``e2rag demo``: index the bundled sample story offline and ask it (``app.demo``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    demo = commands.add_parser("demo", help="index the bundled sample story and ask it")
    demo.add_argument("--store", type=Path, default=None, help="keep the demo store here")
    demo.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from llama_index_e2rag.app.demo import run_demo  # deferred: llama-index, spaCy, MiniLM

    return run_demo(store_dir=str(args.store) if args.store else None)
