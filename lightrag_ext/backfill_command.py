"""``e2rag-lightrag-backfill``: give a LightRAG Server deployment's documents their event layer.

Switching a deployment from ``lightrag-server`` to ``e2rag-lightrag-server`` leaves the documents
it already holds without a layer. This command builds it with the deployment's own configuration:
it takes the same flags and ``.env`` as ``lightrag-server`` (plus its own ``--rebuild`` and
``--doc-id``), builds the instance through LightRAG's own ``create_app`` (so storages, workspace,
models and role LLMs are the server's), runs the app's startup and shutdown around
``E2LightRAG.abuild_event_layer`` and prints the report as JSON: stdout holds only that JSON
(LightRAG's start-up banner and anything else the server code prints go to stderr, with the
progress bar and the log lines).

With file storages the instance takes the workspace's lock while it runs (``workspace_lock``):
beside a running ``e2rag-lightrag-server`` the command refuses with one line and exit status 2
instead of writing layers that server would overwrite.

Our flags are taken off the command line before LightRAG's server modules are imported: they
parse ``sys.argv`` at import time and refuse flags they do not know.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from lightrag_ext.workspace_lock import held_for_server_args
from llama_index_e2rag.errors import E2RAGError

PROG = "e2rag-lightrag-backfill"

USAGE = """e2rag-lightrag-backfill [--rebuild] [--doc-id ID ...] [lightrag-server flags]

Builds the e2rag event layer of every processed document (or of --doc-id ones) with the
configuration lightrag-server would use (its flags and .env). With file storages (the defaults)
stop the server first: two processes must not write the same working directory (the command
refuses while an e2rag-lightrag-server holds it). Prints the report as JSON on stdout."""


def _own_arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog=PROG, usage=USAGE, add_help=False)
    parser.add_argument("--rebuild", action="store_true", help="redo complete layers too")
    parser.add_argument("--doc-id", action="append", dest="doc_ids", metavar="ID")
    return parser.parse_known_args(argv)


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send everything written to stdout (file descriptor 1, so prints of any library too)
    to stderr, keeping stdout for the report."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


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
    try:
        with _stdout_to_stderr():
            report = _run(own)
    except E2RAGError as exc:  # a busy or foreign workspace: nothing was written
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.as_dict(), indent=2))
    return 1 if report.missing or report.partial else 0


def _run(own: argparse.Namespace) -> Any:
    """Build the server's instance with LightRAG's ``create_app`` and backfill it."""
    from lightrag.api import config


    config.initialize_config()
    with held_for_server_args(config.global_args):
        return _backfill_app(config.global_args, own)


def _backfill_app(args: Any, own: argparse.Namespace) -> Any:
    from lightrag.api import lightrag_server

    from lightrag_ext.server import install  # deferred: LightRAG's API server, FastAPI (~2.5 s)

    install()
    built: list[Any] = []
    stock_class = lightrag_server.LightRAG

    def recording_class(**kwargs: Any) -> Any:
        rag = stock_class(**kwargs)
        built.append(rag)
        return rag

    lightrag_server.LightRAG = recording_class
    try:
        app = lightrag_server.create_app(args)
    finally:
        lightrag_server.LightRAG = stock_class
    return asyncio.run(_backfill(app, built[0], own.doc_ids, own.rebuild))


if __name__ == "__main__":
    from lightrag_ext.commands import backfill

    sys.exit(backfill())
