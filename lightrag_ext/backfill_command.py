"""``e2rag-lightrag-backfill``: give a LightRAG Server deployment's documents their event layer.

Switching a deployment from ``lightrag-server`` to ``e2rag-lightrag-server`` leaves the documents
it already holds without a layer. This command builds it with the deployment's own configuration:
it takes the same flags and ``.env`` as ``lightrag-server`` (plus its own ``--rebuild`` and
``--doc-id``), builds the instance through LightRAG's own ``create_app`` (so storages, workspace,
models and role LLMs are the server's), runs the app's startup and shutdown around
``E2LightRAG.abuild_event_layer`` and prints the report as JSON. Progress goes to stderr (tqdm).

Our flags are taken off the command line before LightRAG's server modules are imported: they
parse ``sys.argv`` at import time and refuse flags they do not know.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, Optional

USAGE = """e2rag-lightrag-backfill [--rebuild] [--doc-id ID ...] [lightrag-server flags]

Builds the e2rag event layer of every processed document (or of --doc-id ones) with the
configuration lightrag-server would use (its flags and .env). With file storages (the defaults)
stop the server first: two processes must not write the same working directory."""


def _own_arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="e2rag-lightrag-backfill", usage=USAGE, add_help=False)
    parser.add_argument("--rebuild", action="store_true", help="redo complete layers too")
    parser.add_argument("--doc-id", action="append", dest="doc_ids", metavar="ID")
    return parser.parse_known_args(argv)


async def _backfill(app: Any, rag: Any, doc_ids: Optional[list[str]], rebuild: bool) -> Any:
    async with app.router.lifespan_context(app):  # the server's own startup and shutdown
        return await rag.abuild_event_layer(doc_ids, rebuild=rebuild)


def main(argv: Optional[list[str]] = None) -> int:
    """Run the backfill; exit status 1 when a requested document is missing or a chunk failed."""
    args = sys.argv[1:] if argv is None else argv
    if "-h" in args or "--help" in args:
        print(USAGE + "\n\nlightrag-server flags: see lightrag-server --help")
        return 0
    own, rest = _own_arguments(args)
    sys.argv = [sys.argv[0], *rest]

    from lightrag.api import config, lightrag_server

    from lightrag_ext.server import install

    install()
    config.initialize_config()
    built: list[Any] = []
    stock_class = lightrag_server.LightRAG

    def recording_class(**kwargs: Any) -> Any:
        rag = stock_class(**kwargs)
        built.append(rag)
        return rag

    lightrag_server.LightRAG = recording_class
    try:
        app = lightrag_server.create_app(config.global_args)
    finally:
        lightrag_server.LightRAG = stock_class
    report = asyncio.run(_backfill(app, built[0], own.doc_ids, own.rebuild))
    print(json.dumps(report.as_dict(), indent=2))
    return 1 if report.missing or report.partial else 0


if __name__ == "__main__":
    sys.exit(main())
