"""The stock LightRAG server process over HTTP, on the fake OpenAI endpoint.

These prove the server-process infrastructure (``server_process.py``, ``fake_openai.py``) with
LightRAG's own server, so the same fixture can run ours: documents go in over HTTP, are
extracted by the scripted LLM through the OpenAI protocol, and every query route answers.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

import pytest

from fake_openai import FakeOpenAI
from lightrag_fakes import ANSWER_PREFIX
from lightrag_story import INSERT_KWARGS, LATE_FACET_QUERY, PARAGRAPHS, STORY
from server_process import (
    ServerFactory,
    ServerProcess,
    documents,
    insert_text,
)

SOURCE = "story.txt"
ANSWER = f"{ANSWER_PREFIX}: {LATE_FACET_QUERY}"
CHUNKING = {"strategy": "fixed_token", "params": INSERT_KWARGS}


def with_story(server: ServerProcess) -> ServerProcess:
    """The server once the story is in (one chunk per paragraph) and processed."""
    status = insert_text(server, STORY, SOURCE, chunking=CHUNKING)
    [document] = status["documents"]
    assert document["status"] == "processed", document
    assert document["chunks_count"] == len(PARAGRAPHS)
    return server


@pytest.fixture(scope="module")
def story_server(module_servers: ServerFactory) -> ServerProcess:
    """One stock server with the story, shared by the read-only tests (a server start and an
    insert cost seconds). Its LLM cache is off, so each query reaches the fake whatever ran
    before it, and tests count the calls their own request made."""
    return with_story(module_servers(env={"ENABLE_LLM_CACHE": "false"}))


def test_inserted_text_is_extracted_through_the_openai_protocol(
    story_server: ServerProcess, endpoint: FakeOpenAI
):
    assert endpoint.calls_by_kind()["lightrag_extract"] == len(PARAGRAPHS)
    assert endpoint.requests["embeddings"] > 0
    [listed] = documents(story_server)
    assert listed["status"] == "processed" and listed["file_path"] == SOURCE


@pytest.mark.parametrize("mode", ["naive", "mix"])
def test_query_answers_with_the_scripted_llm(
    story_server: ServerProcess, endpoint: FakeOpenAI, mode: str
):
    before = endpoint.calls_by_kind()
    result = story_server.client.post("/query", json={"query": LATE_FACET_QUERY, "mode": mode})
    body = result.raise_for_status().json()
    assert body["response"] == ANSWER
    assert [ref["file_path"] for ref in body["references"]] == [SOURCE]
    made = endpoint.calls_by_kind() - before
    # only mix mode asks for keywords (to search the graph); naive reads chunks alone
    assert made == Counter(lightrag_answer=1, lightrag_keywords=int(mode == "mix"))


def test_query_data_returns_the_graph_and_the_late_chunk(story_server: ServerProcess):
    result = story_server.client.post(
        "/query/data", json={"query": LATE_FACET_QUERY, "mode": "mix"}
    )
    body = result.raise_for_status().json()
    assert body["status"] == "success"
    data = body["data"]
    assert "Hermione Granger" in {e["entity_name"] for e in data["entities"]}
    assert data["relationships"]
    assert PARAGRAPHS[2] in [chunk["content"] for chunk in data["chunks"]]
    assert [ref["file_path"] for ref in data["references"]] == [SOURCE]


def test_query_stream_sends_references_then_the_streamed_answer(
    story_server: ServerProcess, endpoint: FakeOpenAI
):
    streams_before = endpoint.requests["chat_stream"]
    with story_server.client.stream(
        "POST", "/query/stream", json={"query": LATE_FACET_QUERY, "mode": "mix"}
    ) as result:
        result.raise_for_status()
        lines = [json.loads(line) for line in result.iter_lines() if line]
    assert [ref["file_path"] for ref in lines[0]["references"]] == [SOURCE]
    pieces = [line["response"] for line in lines if "response" in line]
    assert len(pieces) > 1 and "".join(pieces) == ANSWER
    assert not [line for line in lines if "error" in line]
    assert endpoint.requests["chat_stream"] == streams_before + 1


@pytest.mark.parametrize("stream", [False, True])
def test_ollama_chat_reads_the_mix_prefix(
    story_server: ServerProcess, endpoint: FakeOpenAI, stream: bool
):
    before = endpoint.calls_by_kind()
    request: dict[str, Any] = {
        "model": "lightrag:latest",
        "messages": [{"role": "user", "content": f"/mix {LATE_FACET_QUERY}"}],
        "stream": stream,
    }
    result = story_server.client.post("/api/chat", json=request).raise_for_status()
    messages = [json.loads(line) for line in result.text.splitlines() if line]
    assert messages[-1]["done"] is True
    assert "".join(m["message"]["content"] for m in messages) == ANSWER
    assert endpoint.calls_by_kind() - before == Counter(lightrag_answer=1, lightrag_keywords=1)


def test_documents_survive_a_restart_until_cleared(
    lightrag_server: ServerFactory, fake_openai: FakeOpenAI
):
    server = with_story(lightrag_server())
    server.restart()
    [listed] = documents(server)
    assert listed["status"] == "processed"
    result = server.client.post("/query", json={"query": LATE_FACET_QUERY, "mode": "mix"})
    assert result.raise_for_status().json()["response"] == ANSWER
    assert fake_openai.calls_by_kind()["lightrag_extract"] == len(PARAGRAPHS)  # not redone

    cleared = server.client.delete("/documents").raise_for_status().json()
    assert cleared["status"] == "success", cleared
    assert documents(server) == []


def test_a_server_that_dies_at_start_fails_with_its_stderr(lightrag_server: ServerFactory):
    command = [sys.executable, "-c", "import sys; sys.exit('no model configured')"]
    with pytest.raises(pytest.fail.Exception, match="no model configured"):
        lightrag_server(command)
