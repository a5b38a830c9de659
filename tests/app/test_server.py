"""``e2rag serve`` / ``server.py``: the HTTP API over one loaded index, and ``e2rag query
--server`` printing what a local query prints."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Settings
from scripted_llm import ScriptedLLM
from cli.test_entry import RUNNER, _env
from test_index import NAMES, SEQUEL, STORY

from llama_index_e2rag.cli.entry import main

QUESTION = "What did Hermione do after the troll fight?"
HEADING = "CHAPTER ONE"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two stories indexed with the scripted LLM; queried with no LLM (extractive answers).
    The first has a chapter heading, which positions name."""
    folder = tmp_path_factory.mktemp("serve")
    (folder / "one.txt").write_text(f"{HEADING}\n\n{STORY}", encoding="utf-8")
    (folder / "two.txt").write_text(SEQUEL, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENAI_API_KEY", raising=False)
        patch.setattr(Settings, "_llm", ScriptedLLM(names=NAMES))
        patch.setattr(Settings, "_embed_model", HashEmbedding())
        argv = ["index", str(folder), "--store", str(folder / "store"), "--chunk-size", "60",
                "--quiet"]
        assert main(argv) == 0
    return folder / "store"


@pytest.fixture
def no_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the server process has: the hash embedding, no LLM, no API key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(Settings, "_llm", None)
    monkeypatch.setattr(Settings, "_embed_model", HashEmbedding())


@pytest.fixture
def client(store: Path, no_llm: None) -> Iterator[object]:
    from fastapi.testclient import TestClient

    from llama_index_e2rag.cli.store import load_store
    from llama_index_e2rag.app.server import create_app

    with TestClient(create_app(load_store(store), str(store))) as test_client:
        yield test_client


def test_query_answers_with_sources_in_story_positions(client, store: Path) -> None:
    health = client.get("/health").json()
    assert health == {"status": "ok", "store": str(store), "documents": 2}

    body = client.post("/query", json={"query": QUESTION, "budget_words": 60}).json()
    assert body["mode"] == "narrative" and body["answer"]
    assert body["sources"] and [s["rank"] for s in body["sources"]] == list(
        range(1, len(body["sources"]) + 1)
    )
    for source in body["sources"]:
        assert Path(source["doc_id"]).name == source["file_name"]
        assert source["text"] and source["explain"].startswith("signals: ")
        _assert_readable_position(source)
    assert sum(len(s["text"].split()) for s in body["sources"]) <= 60

    retrieved = client.post("/retrieve", json={"query": QUESTION, "mode": "vector",
                                               "top_k": 2}).json()
    assert retrieved["mode"] == "vector" and len(retrieved["sources"]) == 2
    for source in retrieved["sources"]:
        _assert_readable_position(source)
    mirror = client.post("/retrieve", json={"query": "What did Harry see in the mirror?",
                                            "top_k": 2}).json()["sources"]
    assert "two.txt" in {s["file_name"] for s in mirror}  # a document without chapters too
    for source in mirror:
        _assert_readable_position(source)


def _assert_readable_position(source: dict) -> None:
    """``where`` says the position as the CLI's answer does (file, chapter, share of the
    story); the numbers an API client computes with stay beside it."""
    doc_order, offset, _ = source["position"]
    assert source["char_offset"] == offset and 0 <= source["percent"] <= 100
    story = Path(source["doc_id"]).read_text(encoding="utf-8")
    assert source["percent"] == pytest.approx(100 * offset / len(story), abs=1.0)
    chapter = "Chapter One" if source["file_name"] == "one.txt" else None
    assert source["chapter"] == chapter
    parts = [source["file_name"], chapter, f"{source['percent']:.0f}% through the story"]
    assert source["where"] == " · ".join(p for p in parts if p)


def test_bad_requests_get_one_line_advice_in_cli_terms(client, store: Path) -> None:
    missing = client.post("/query", json={"query": QUESTION, "mode": "chrono"})
    assert missing.status_code == 400
    detail = missing.json()["detail"]
    assert detail.endswith(f"e2rag index --store {store} --chrono") and "\n" not in detail
    assert client.post("/query", json={"query": "  "}).status_code == 400
    assert client.post("/query", json={"query": QUESTION, "top_k": 0}).status_code == 422
    hyde = client.post("/query", json={"query": QUESTION, "hyde": "comb_extraction"})
    assert hyde.status_code == 400 and "OPENAI_API_KEY" in hyde.json()["detail"]


def test_the_openapi_page_lists_the_endpoints(client) -> None:
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/query", "/retrieve", "/health"} <= set(paths)


def test_importing_the_server_builds_nothing() -> None:
    code = ("import sys, llama_index_e2rag.app.server, llama_index_e2rag.cli.serve; "
            "print('fastapi' in sys.modules, 'uvicorn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.fixture
def server(store: Path, tmp_path: Path) -> Iterator[str]:
    """``e2rag serve --port 0`` as a real process; yields its URL (its first line names it)."""
    (tmp_path / "home").mkdir()
    process = subprocess.Popen(
        [sys.executable, "-c", RUNNER.replace("{patch}", ""), "serve", "--store", str(store),
         "--port", "0", "--quiet"],
        cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith(f"serving {store} at http://127.0.0.1:"), process.stderr.read()
        yield line.split(" at ")[1].split()[0]
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        assert "Traceback" not in err


@pytest.mark.serve  # e2rag serve runs uvicorn
def test_query_through_a_running_server_prints_what_a_local_query_prints(
    server: str, store: Path, no_llm: None, capsys: pytest.CaptureFixture[str]
) -> None:
    for extra in ([], ["--mode", "grounded", "--explain"], ["--budget-words", "40"]):
        assert main(["query", QUESTION, "--store", str(store), "--quiet", *extra]) == 0
        local = capsys.readouterr().out
        assert main(["query", QUESTION, "--server", server, *extra]) == 0
        assert capsys.readouterr().out == local and "\nEvidence:\n[1] " in local

    # concurrent requests are concurrent readers: each gets the answer it gets alone
    payloads = [{"query": q, "top_k": 3} for q in (QUESTION, "Who fought the troll?") * 4]
    alone = [httpx.post(f"{server}/query", json=p, timeout=120).json() for p in payloads[:2]]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(
            lambda p: httpx.post(f"{server}/query", json=p, timeout=120), payloads
        ))
    assert all(r.status_code == 200 for r in together)
    assert [json.dumps(r.json()) for r in together] == [json.dumps(a) for a in alone] * 4


@pytest.mark.serve  # e2rag serve runs uvicorn
def test_query_server_failures_are_one_line(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["query", QUESTION, "--server", server, "--mode", "chrono"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"e2rag: error: the server at {server} answered 400: ")
    assert err.count("\n") == 1 and "--chrono" in err

    port = server.rsplit(":", 1)[1]
    argv = ["serve", "--store", str(tmp_path), "--port", port, "--quiet"]
    assert main(argv) == 1  # the port is taken
    err = capsys.readouterr().err
    assert err.startswith(f"e2rag: error: cannot listen on 127.0.0.1:{port} ")
    assert err.count("\n") == 1


def test_query_without_a_server_says_how_to_start_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    assert main(["query", QUESTION, "--server", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"e2rag: error: cannot reach an e2rag server at {url} ")
    assert err.rstrip().endswith("e2rag serve --store DIR") and err.count("\n") == 1
