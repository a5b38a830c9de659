"""``e2rag-lightrag-server``: LightRAG's own server, with ``E2LightRAG`` and the ``e2rag`` mode.

LightRAG's server has no plugin API, so we run its code unchanged (``lightrag-server``'s
``main``: same flags, same ``.env``, same web UI) after rebinding three module-level names it
looks up at run time:

- ``lightrag.api.lightrag_server.LightRAG``: ``create_app`` builds its instance as
  ``LightRAG(...)`` -> ``E2LightRAG``.
- ``lightrag.api.routers.query_routes.QueryRequest``: the body of ``/query``, ``/query/stream``
  and ``/query/data``, whose ``mode`` is a closed ``Literal`` -> a subclass that also admits
  ``"e2rag"`` (its other fields and validators are LightRAG's).
- ``lightrag.api.routers.ollama_api.parse_query_mode``: the Ollama-compatible chat's prefix
  parser, which maps an unknown ``/e2rag`` prefix to ``mix`` and leaves it in the question ->
  a wrapper that reads ``/e2rag`` (``/e2rag[hint] ...``, ``/e2ragcontext``) with LightRAG's own
  parser and hands every other prefix to it.

``check_server_seams`` verifies at import that each name is still there, shaped and used as in
the supported LightRAG release, and raises ``UnsupportedLightRAGVersion`` naming it otherwise;
importing this module binds nothing (``install`` does, and only the entry points call it).
``e2rag-lightrag-gunicorn`` does the same for ``lightrag-gunicorn``.
"""

from __future__ import annotations

import types
from enum import Enum
from typing import Any, Callable, Literal, Optional, get_args, get_origin

from lightrag.api import lightrag_server
from lightrag.api.routers import ollama_api, query_routes
from pydantic import Field

from lightrag_ext.logs import attach_to_lightrag_logging
from lightrag_ext.query import E2RAG_MODE
from lightrag_ext.rag import E2LightRAG
from lightrag_ext.version import SUPPORTED_LIGHTRAG_VERSION, UnsupportedLightRAGVersion

#: ``QueryRequest.mode`` in the supported release.
STOCK_QUERY_MODES = ("local", "global", "hybrid", "naive", "mix", "bypass")
#: Ollama chat prefix for the e2rag mode (``/e2rag question``, ``/e2ragcontext question``).
E2RAG_PREFIX = "/" + E2RAG_MODE
_StockParse = Callable[[str], tuple[str, Any, bool, Optional[str]]]


class E2RAGSearchMode(str, Enum):
    """The chat handler's mode value for ``/e2rag``: it reads ``mode.value`` and compares with
    ``SearchMode.bypass``, which a ``str`` enum of another value never equals."""

    e2rag = E2RAG_MODE


class E2QueryRequest(query_routes.QueryRequest):
    """LightRAG's query request body, with ``"e2rag"`` among the modes."""

    mode: Literal[(*STOCK_QUERY_MODES, E2RAG_MODE)] = Field(  # type: ignore[valid-type]
        default="mix",
        description="Query mode ('e2rag': E²RAG's entity-event retrieval, story-ordered context)",
    )


def with_e2rag_prefix(stock_parse: _StockParse) -> _StockParse:
    """An Ollama prefix parser that reads ``/e2rag`` as LightRAG reads ``/mix``.

    ``/e2rag`` followed by a space, a ``[hint]`` or ``context`` is parsed by LightRAG's own parser
    as the same text with ``/mix``, then given the e2rag mode; anything else is LightRAG's.
    """

    def parse_query_mode(query: str) -> tuple[str, Any, bool, Optional[str]]:
        rest = query[len(E2RAG_PREFIX) :]
        prefixed = rest[:1] in (" ", "[") or rest.startswith("context")
        if query.startswith(E2RAG_PREFIX) and prefixed:
            cleaned, _, only_need_context, user_prompt = stock_parse("/mix" + rest)
            return cleaned, E2RAGSearchMode.e2rag, only_need_context, user_prompt
        return stock_parse(query)

    parse_query_mode.__wrapped__ = stock_parse  # type: ignore[attr-defined]
    return parse_query_mode


def _names_used(function: Callable[..., Any], inner: Optional[str] = None) -> set[str]:
    """Global names a function (or the nested function ``inner`` defined in it) looks up."""
    code = function.__code__
    if inner is not None:
        stack, found = [code], None
        while stack and found is None:
            current = stack.pop()
            for const in current.co_consts:
                if isinstance(const, types.CodeType):
                    if const.co_name == inner:
                        found = const
                        break
                    stack.append(const)
        if found is None:
            return set()
        code = found
    return set(code.co_names)


def check_server_seams() -> None:
    """Raise ``UnsupportedLightRAGVersion`` when a name we rebind moved or changed shape."""
    import lightrag

    problems: list[str] = []
    if getattr(lightrag_server, "LightRAG", None) not in (lightrag.LightRAG, E2LightRAG):
        problems.append("lightrag.api.lightrag_server.LightRAG is not lightrag.LightRAG")
    if "LightRAG" not in _names_used(lightrag_server.create_app):
        problems.append("create_app no longer builds LightRAG(...) by its module name")
    stock_request = query_routes.QueryRequest
    if stock_request is not E2QueryRequest:
        mode = stock_request.model_fields.get("mode")
        annotation = mode.annotation if mode is not None else None
        if get_origin(annotation) is not Literal or get_args(annotation) != STOCK_QUERY_MODES:
            problems.append(f"QueryRequest.mode is {annotation!r}, not Literal{STOCK_QUERY_MODES}")
    if "QueryRequest" not in _names_used(query_routes.create_query_routes):
        problems.append("create_query_routes no longer takes QueryRequest by its module name")
    if not callable(getattr(ollama_api, "parse_query_mode", None)):
        problems.append("ollama_api.parse_query_mode is missing")
    if "parse_query_mode" not in _names_used(ollama_api.OllamaAPI.setup_routes, "chat"):
        problems.append("the Ollama chat route no longer calls parse_query_mode by name")
    for name in ("main", "get_application"):
        if not callable(getattr(lightrag_server, name, None)):
            problems.append(f"lightrag.api.lightrag_server.{name} is missing")
    if problems:
        raise UnsupportedLightRAGVersion(
            f"e2rag-lightrag-server supports lightrag-hku=={SUPPORTED_LIGHTRAG_VERSION}, but the "
            f"installed lightrag-hku {getattr(lightrag, '__version__', 'unknown')} changed the "
            "server where it hooks in: " + "; ".join(problems) + ". Install it with: pip install "
            f"'lightrag-hku=={SUPPORTED_LIGHTRAG_VERSION}'"
        )


check_server_seams()


def install() -> None:
    """Bind the three seams for this process (idempotent) and route our log lines to LightRAG's
    handlers (``logs``); the entry points call it."""
    attach_to_lightrag_logging()
    lightrag_server.LightRAG = E2LightRAG
    query_routes.QueryRequest = E2QueryRequest
    if not hasattr(ollama_api.parse_query_mode, "__wrapped__"):
        ollama_api.parse_query_mode = with_e2rag_prefix(ollama_api.parse_query_mode)


def main() -> None:
    """``lightrag-server`` with the event layer: same command-line flags and ``.env``."""
    install()
    lightrag_server.main()


def gunicorn_main() -> None:
    """``lightrag-gunicorn`` with the event layer. Its master preloads the app
    (``preload_app = True``) through ``lightrag_server.get_application``, so the seams bound
    here reach every forked worker."""
    from lightrag.api import run_with_gunicorn

    install()
    run_with_gunicorn.main()


if __name__ == "__main__":
    import sys

    from lightrag_ext.commands import server

    sys.exit(server())
