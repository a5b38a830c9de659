"""``e2rag-lightrag-server`` as a real process over HTTP, on the fake OpenAI endpoint.

A document goes in over HTTP; the ``e2rag`` mode answers on ``/query``, ``/query/stream``,
``/query/data`` and the Ollama-compatible ``/api/chat``; stock modes answer as the stock server
does; ``DELETE /documents`` leaves nothing of the layer; and an existing stock deployment
switches over with ``e2rag-lightrag-backfill``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from lightrag.operate import QueryProgress

from fake_openai import FakeOpenAI
from lightrag_fakes import ANSWER_PREFIX
from lightrag_story import INSERT_KWARGS, LATE_FACET_QUERY, PARAGRAPHS, STORY
from server_process import (
    E2RAG_SERVER,
    STOCK_SERVER,
    ServerFactory,
    ServerProcess,
    documents,
    insert_text,
    run_backfill,
)

SOURCE = "story.txt"
ANSWER = f"{ANSWER_PREFIX}: {LATE_FACET_QUERY}"
CHUNKING = {"strategy": "fixed_token", "params": INSERT_KWARGS}
STOCK_MODES = ["naive", "local", "global", "hybrid", "mix"]


def _insert_story(server: ServerProcess) -> str:
    status = insert_text(server, STORY, SOURCE, chunking=CHUNKING)
    [document] = status["documents"]
    assert document["status"] == "processed", document
    return document["id"]


def _query_data(server: ServerProcess, mode: str) -> dict[str, Any]:
    result = server.client.post("/query/data", json={"query": LATE_FACET_QUERY, "mode": mode})
    return result.raise_for_status().json()


def _timeless(data: Any) -> Any:
    """``data`` without ``created_at`` stamps (the two servers indexed seconds apart)."""
    if isinstance(data, dict):
        return {k: _timeless(v) for k, v in data.items() if k != "created_at"}
    if isinstance(data, list):
        return [_timeless(v) for v in data]
    return data


def _layer_files(working_dir: Path) -> dict[str, Any]:
    """What the layer holds on disk (default file storages, workspace ``e2rag``); a dropped
    storage may have removed its file."""
    folder = working_dir / "e2rag"

    def read(name: str, empty: str) -> str:
        path = folder / name
        return path.read_text() if path.exists() else empty

    vectors = {
        name: json.loads(read(f"vdb_{name}.json", "{}")).get("data", [])
        for name in ("entities", "chunks")
    }
    return {
        "nodes": read("graph_chunk_entity_relation.graphml", "").count("<node "),
        "vectors": {name: len(rows) for name, rows in vectors.items()},
        "records": json.loads(read("kv_store_doc_status.json", "{}")),
    }


@pytest.fixture(scope="module")
def story_server(module_servers: ServerFactory) -> ServerProcess:
    """Our server with the story inserted over HTTP (one chunk per paragraph), shared by the
    tests that only read (a server start and an insert cost seconds)."""
    server = module_servers(E2RAG_SERVER)
    _insert_story(server)
    return server


@pytest.fixture
def e2rag_server(lightrag_server: ServerFactory) -> ServerProcess:
    """A server of the test's own with the story, for tests that change or compare it."""
    server = lightrag_server(E2RAG_SERVER)
    _insert_story(server)
    return server


def test_insert_over_http_builds_the_event_layer(story_server: ServerProcess, endpoint: FakeOpenAI):
    kinds = endpoint.calls_by_kind()
    assert kinds["event_extraction"] == len(PARAGRAPHS)
    assert kinds["lightrag_extract"] == len(PARAGRAPHS)
    layer = _layer_files(story_server.working_dir)
    assert layer["nodes"] and layer["vectors"]["entities"] and layer["vectors"]["chunks"]
    [(doc_id, record)] = layer["records"].items()
    assert record["status"] == "processed"
    assert [d["id"] for d in documents(story_server)] == [doc_id]


def test_query_answers_in_e2rag_mode_from_the_later_chunk(story_server: ServerProcess):
    result = story_server.client.post(
        "/query",
        json={"query": LATE_FACET_QUERY, "mode": "e2rag", "include_chunk_content": True},
    )
    body = result.raise_for_status().json()
    assert body["response"] == ANSWER and body["llm_generated"] is True
    [reference] = body["references"]
    assert reference["file_path"] == SOURCE and PARAGRAPHS[2] in reference["content"]


def test_query_data_in_e2rag_mode_ranks_the_later_facet_first(story_server: ServerProcess):
    body = _query_data(story_server, "e2rag")
    assert body["status"] == "success"
    data = body["data"]
    assert data["chunks"][0]["content"] == PARAGRAPHS[2]
    assert data["events"] and "Hermione Granger" in {e["entity_name"] for e in data["entities"]}
    assert body["metadata"]["query_mode"] == "e2rag"


def test_query_stream_in_e2rag_mode_reports_progress_then_streams(story_server: ServerProcess):
    request = {"query": LATE_FACET_QUERY, "mode": "e2rag", "include_progress": True}
    with story_server.client.stream("POST", "/query/stream", json=request) as result:
        result.raise_for_status()
        lines = [json.loads(line) for line in result.iter_lines() if line]
    assert not [line for line in lines if "error" in line]
    progress = [line["progress"] for line in lines if "progress" in line]
    assert progress == [
        QueryProgress.EXTRACTING_KEYWORDS,
        QueryProgress.RETRIEVING_ENTITIES,
        QueryProgress.RETRIEVING_CHUNKS,
        QueryProgress.GENERATING_RESPONSE,
    ]
    references = next(line["references"] for line in lines if "references" in line)
    assert [ref["file_path"] for ref in references] == [SOURCE]
    pieces = [line["response"] for line in lines if "response" in line]
    assert len(pieces) > 1 and "".join(pieces) == ANSWER


@pytest.mark.parametrize("stream", [False, True])
def test_ollama_chat_reads_the_e2rag_prefix(story_server: ServerProcess, stream: bool):
    def chat(content: str) -> str:
        request = {
            "model": "lightrag:latest",
            "messages": [{"role": "user", "content": content}],
            "stream": stream,
        }
        result = story_server.client.post("/api/chat", json=request).raise_for_status()
        messages = [json.loads(line) for line in result.text.splitlines() if line]
        assert messages[-1]["done"] is True
        return "".join(m["message"]["content"] for m in messages)

    assert chat(f"/e2rag {LATE_FACET_QUERY}") == ANSWER  # the prefix is not left in the question
    context = chat(f"/e2ragcontext {LATE_FACET_QUERY}")
    assert PARAGRAPHS[2] in context and not context.startswith(ANSWER_PREFIX)
    data = _query_data(story_server, "e2rag")
    assert context == data["metadata"]["context"]


def test_unknown_modes_are_still_refused(story_server: ServerProcess):
    result = story_server.client.post("/query", json={"query": LATE_FACET_QUERY, "mode": "graph"})
    assert result.status_code == 422


def test_stock_modes_answer_as_the_stock_server_does(
    e2rag_server: ServerProcess, lightrag_server: ServerFactory
):
    stock = lightrag_server(STOCK_SERVER)
    _insert_story(stock)
    for mode in STOCK_MODES:
        ours, theirs = _query_data(e2rag_server, mode), _query_data(stock, mode)
        assert ours["status"] == theirs["status"] == "success"
        assert ours["data"]["chunks"] and _timeless(ours["data"]) == _timeless(theirs["data"]), mode
        for server in (e2rag_server, stock):
            answer = server.client.post("/query", json={"query": LATE_FACET_QUERY, "mode": mode})
            assert answer.raise_for_status().json()["response"] == ANSWER


def test_clearing_documents_leaves_nothing_of_the_layer(e2rag_server: ServerProcess):
    assert _layer_files(e2rag_server.working_dir)["nodes"]

    result = e2rag_server.client.delete("/documents").raise_for_status().json()

    assert result["status"] == "success", result
    assert documents(e2rag_server) == []
    empty = {"nodes": 0, "vectors": {"entities": 0, "chunks": 0}, "records": {}}
    assert _layer_files(e2rag_server.working_dir) == empty
    assert _query_data(e2rag_server, "e2rag")["status"] == "failure"
    e2rag_server.restart()
    assert _layer_files(e2rag_server.working_dir) == empty
    assert _query_data(e2rag_server, "e2rag")["status"] == "failure"


def test_an_existing_stock_deployment_switches_with_the_backfill(
    lightrag_server: ServerFactory, fake_openai: FakeOpenAI
):
    stock = lightrag_server(STOCK_SERVER)
    doc_id = _insert_story(stock)
    stock.stop()
    assert fake_openai.calls_by_kind()["event_extraction"] == 0

    backfill = run_backfill(stock)

    assert backfill.returncode == 0, backfill.stderr[-3000:]
    assert json.loads(backfill.stdout)["built"] == [doc_id]  # stdout is the JSON report only
    assert "e2rag event layer" in backfill.stderr  # the progress bar
    kinds = fake_openai.calls_by_kind()
    assert kinds["event_extraction"] == len(PARAGRAPHS)
    assert kinds["lightrag_extract"] == len(PARAGRAPHS)  # mentions came from LightRAG's cache

    ours = lightrag_server(E2RAG_SERVER, working_dir=stock.working_dir, input_dir=stock.input_dir)
    assert _query_data(ours, "e2rag")["data"]["chunks"][0]["content"] == PARAGRAPHS[2]


def test_the_gunicorn_entry_point_serves_the_e2rag_mode(lightrag_server: ServerFactory):
    """``e2rag-lightrag-gunicorn``: the master preloads the app, the forked worker serves it."""
    command = (
        sys.executable,
        "-c",
        "from lightrag_ext.server import gunicorn_main; gunicorn_main()",
    )
    server = lightrag_server(command, env={"WORKERS": "2"})
    _insert_story(server)
    body = _query_data(server, "e2rag")
    assert body["status"] == "success" and body["data"]["chunks"][0]["content"] == PARAGRAPHS[2]
