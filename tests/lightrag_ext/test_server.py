"""``lightrag_ext.server``: the seams of LightRAG's server, checked and bound.

The real server process, over HTTP, is in ``test_server_e2rag.py``.
"""

from __future__ import annotations

import logging
import sys
from typing import Iterator, Literal
from unittest.mock import patch

import pytest
from pydantic import BaseModel, ValidationError

from lightrag_ext import E2LightRAG, UnsupportedLightRAGVersion
from lightrag_ext.logs import PACKAGE_LOGGERS
from lightrag_ext.version import SUPPORTED_LIGHTRAG_VERSION

# LightRAG's server modules parse the command line when first imported; give them none.
with patch.object(sys, "argv", sys.argv[:1]):
    from lightrag.api import lightrag_server
    from lightrag.api.routers import ollama_api, query_routes

    from lightrag_ext.server import (
        E2QueryRequest,
        E2RAGSearchMode,
        STOCK_QUERY_MODES,
        check_server_seams,
        install,
        with_e2rag_prefix,
    )

STOCK_PARSE = ollama_api.parse_query_mode


@pytest.fixture
def bound(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``install()`` for one test; monkeypatch puts LightRAG's own names (and our loggers'
    handlers and levels) back afterwards."""
    for module, name in (
        (lightrag_server, "LightRAG"),
        (query_routes, "QueryRequest"),
        (ollama_api, "parse_query_mode"),
    ):
        monkeypatch.setattr(module, name, getattr(module, name))
    levels = {}
    for name in PACKAGE_LOGGERS:
        package_logger = logging.getLogger(name)
        monkeypatch.setattr(package_logger, "handlers", list(package_logger.handlers))
        monkeypatch.setattr(package_logger, "propagate", package_logger.propagate)
        levels[name] = package_logger.level
    install()
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_the_installed_lightrag_has_the_seams():
    check_server_seams()


def test_install_binds_each_seam_once(bound):
    install()  # idempotent: the chat parser is not wrapped twice
    assert lightrag_server.LightRAG is E2LightRAG
    assert query_routes.QueryRequest is E2QueryRequest
    assert ollama_api.parse_query_mode.__wrapped__ is STOCK_PARSE
    check_server_seams()  # still recognised once bound


def test_query_request_admits_e2rag_and_keeps_lightrags_validation():
    request = E2QueryRequest(query="Why did Hermione break the rules?", mode="e2rag")
    assert request.to_query_params(False).mode == "e2rag"
    for mode in STOCK_QUERY_MODES:
        assert E2QueryRequest(query="Why did Hermione break the rules?", mode=mode).mode == mode
    assert E2QueryRequest(query="Why did Hermione break the rules?").mode == "mix"
    with pytest.raises(ValidationError):
        E2QueryRequest(query="Why did Hermione break the rules?", mode="bogus")
    with pytest.raises(ValidationError):  # LightRAG's own minimum-length rule still applies
        E2QueryRequest(query="a", mode="e2rag")


@pytest.mark.parametrize(
    "rest",
    [" Why did Hermione break the rules?", "[answer in one line] Who came?", "context Who?", "[x]"],
)
def test_e2rag_prefix_is_read_as_lightrag_reads_mix(rest: str):
    parse = with_e2rag_prefix(STOCK_PARSE)
    cleaned, mode, only_context, hint = parse("/e2rag" + rest)
    stock_cleaned, stock_mode, stock_only_context, stock_hint = STOCK_PARSE("/mix" + rest)
    assert stock_mode == ollama_api.SearchMode.mix  # the stock parser did read a prefix
    assert (cleaned, only_context, hint) == (stock_cleaned, stock_only_context, stock_hint)
    assert mode is E2RAGSearchMode.e2rag and mode.value == "e2rag"
    assert mode != ollama_api.SearchMode.bypass


@pytest.mark.parametrize(
    "query",
    ["/local Who came?", "/e2ragx Who came?", "/e2rag", "Who came to Hogwarts?", "/mix Who?"],
)
def test_other_messages_are_lightrags(query: str):
    assert with_e2rag_prefix(STOCK_PARSE)(query) == STOCK_PARSE(query)


def test_a_changed_query_mode_is_refused_naming_the_version(monkeypatch: pytest.MonkeyPatch):
    class MovedRequest(BaseModel):
        query: str
        mode: Literal["local", "mix", "graph"] = "mix"

    monkeypatch.setattr(query_routes, "QueryRequest", MovedRequest)
    with pytest.raises(UnsupportedLightRAGVersion, match=SUPPORTED_LIGHTRAG_VERSION) as info:
        check_server_seams()
    assert "QueryRequest.mode" in str(info.value)


def test_a_server_that_no_longer_builds_lightrag_by_name_is_refused(
    monkeypatch: pytest.MonkeyPatch,
):
    def create_app(args):  # a release that builds its instance some other way
        return args

    monkeypatch.setattr(lightrag_server, "create_app", create_app)
    with pytest.raises(UnsupportedLightRAGVersion, match="create_app"):
        check_server_seams()


def test_a_chat_route_that_no_longer_parses_prefixes_by_name_is_refused(
    monkeypatch: pytest.MonkeyPatch,
):
    class OllamaAPI:
        def setup_routes(self) -> None:
            async def chat(request: str) -> str:
                return request

    monkeypatch.setattr(ollama_api, "OllamaAPI", OllamaAPI)
    with pytest.raises(UnsupportedLightRAGVersion, match="parse_query_mode"):
        check_server_seams()
