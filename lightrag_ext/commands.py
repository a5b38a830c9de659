"""The console scripts of ``lightrag_ext``: one line, not a traceback, when they cannot start.

``lightrag_ext.server`` checks LightRAG's seams when it is imported and ``lightrag_ext.rag``
checks the methods it overrides (``UnsupportedLightRAGVersion``); a console script pointing at
them directly would print that refusal as an import traceback. These entry points import the
real ones inside a guard and print ``<command>: error: <reason>`` (exit status 2) for a
LightRAG of another version or a missing ``[lightrag-server]`` install.

The servers also take the workspace lock (``workspace_lock``, file storages) here, before
LightRAG's server modules are imported: a server started while a backfill writes the workspace
would otherwise fail inside uvicorn's start-up with a traceback, after LightRAG's banner. Now a
busy or foreign workspace is that same one line, and nothing has been read or written.
"""

from __future__ import annotations

import importlib
import sys
from contextlib import ExitStack
from typing import Any, Callable, ContextManager

from llama_index_e2rag.errors import E2RAGError

from lightrag_ext.version import (
    SUPPORTED_LIGHTRAG_VERSION,
    UnsupportedLightRAGVersion,
    check_lightrag_compat,
)
from lightrag_ext.workspace_lock import held_for_server_args

INSTALL_HINT = (
    "install the server extra from a checkout of llama-index-e2rag: "
    "pip install -e '.[lightrag-server]'"
)


def _configured_workspace() -> ContextManager[None]:
    """Hold the workspace the server's flags and ``.env`` name, for as long as it runs."""
    from lightrag.api import config


    return held_for_server_args(config.initialize_config())


def _guarded(prog: str, target: str, *, hold_workspace: bool = False) -> int:
    """Import ``module:function`` and run it; a refusal to start is one line on stderr."""
    module_name, function_name = target.split(":")
    with ExitStack() as held:
        try:
            check_lightrag_compat()  # before LightRAG's server modules print start-up notes
            if hold_workspace:
                held.enter_context(_configured_workspace())
            function: Callable[[], Any] = getattr(
                importlib.import_module(module_name), function_name
            )
        except (UnsupportedLightRAGVersion, E2RAGError) as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return 2
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").split(".")[0]
            if missing not in ("lightrag", "fastapi", "uvicorn", "gunicorn"):
                raise
            print(
                f"{prog}: error: {exc} (lightrag-hku[api]=={SUPPORTED_LIGHTRAG_VERSION} is "
                "needed); " + INSTALL_HINT,
                file=sys.stderr,
            )
            return 2
        return function() or 0


def server() -> int:
    """``e2rag-lightrag-server``: ``lightrag-server`` with the event layer."""
    return _guarded("e2rag-lightrag-server", "lightrag_ext.server:main", hold_workspace=True)


def gunicorn() -> int:
    """``e2rag-lightrag-gunicorn``: ``lightrag-gunicorn`` with the event layer."""
    return _guarded(
        "e2rag-lightrag-gunicorn", "lightrag_ext.server:gunicorn_main", hold_workspace=True
    )


def backfill() -> int:
    """``e2rag-lightrag-backfill``: build the layer of a deployment's documents."""
    return _guarded("e2rag-lightrag-backfill", "lightrag_ext.backfill_command:main")
