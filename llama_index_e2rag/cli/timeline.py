"""``e2rag timeline``: a character's mentions and events in story order."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from llama_index_e2rag.cli.store import load_store
from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.extract.event_graph.entities import fused_entities
from llama_index_e2rag.modes import layer_missing_cli


def add_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    timeline = commands.add_parser(
        "timeline", help="a character's mentions and events in story order"
    )
    timeline.add_argument("name", help="the entity's name (a part of it will do when unique)")
    timeline.add_argument("--store", required=True, type=Path)
    timeline.add_argument("--doc", default=None, help="only this document (its id)")
    timeline.add_argument("--limit", type=int, default=None, help="print at most this many")
    timeline.add_argument("--json", action="store_true", help="print JSON instead of lines")
    timeline.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The timeline as lines (or JSON); a store without the event graph names the run that
    adds it."""
    # deferred: the event graph and the timeline import llama-index
    from llama_index_e2rag.context.timeline import entity_timeline, format_timeline, timeline_dict

    if args.limit is not None and args.limit < 1:
        raise E2RAGError(f"--limit must be at least 1, got {args.limit}")
    index = load_store(args.store)
    if not fused_entities(index.graph_store):
        raise E2RAGError(layer_missing_cli("event_graph", args.store, "e2rag timeline"))
    found = entity_timeline(index.graph_store, args.name, doc_id=args.doc)
    if args.json:
        print(json.dumps(timeline_dict(found), ensure_ascii=False, indent=1))
    else:
        print(format_timeline(found, limit=args.limit))
    return 0
