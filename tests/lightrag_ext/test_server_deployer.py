"""A LightRAG deployer's first hour, through real server and backfill processes.

Stock server -> ours without a backfill (it says how many documents have no layer, at start and
per query) -> our layer lines in the server's output and ``lightrag.log`` -> a backfill beside
the running server is refused and changes nothing -> with the server stopped it runs and prints
pure JSON -> a server started while a backfill holds the workspace is refused in one line and
changes nothing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from lightrag_story import INSERT_KWARGS, LATE_FACET_QUERY, SECOND_STORY, STORY
from server_process import (
    E2RAG_SERVER,
    STOCK_SERVER,
    ServerFactory,
    ServerProcess,
    insert_text,
    run_backfill,
    run_with_configuration,
)

CHUNKING = {"strategy": "fixed_token", "params": INSERT_KWARGS}
GAP = re.compile(r"e2rag: (\d+) of (\d+) documents have no event layer")


def _insert(server: ServerProcess, text: str, source: str) -> str:
    [document] = insert_text(server, text, source, chunking=CHUNKING)["documents"]
    assert document["status"] == "processed", document
    return document["id"]


def _logs(server: ServerProcess) -> tuple[str, str]:
    """(the server's stderr, its ``lightrag.log``: LOG_DIR defaults to its working directory)."""
    log = server.run_dir / "lightrag.log"
    return server.stderr_path.read_text(), log.read_text() if log.exists() else ""


def _gaps(text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in GAP.findall(text)]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# Holds the workspace as e2rag-lightrag-backfill does (its own code, under its name) until its
# stdin closes: a backfill that stays busy as long as the test needs.
_BACKFILL_HOLDING = """
import sys
sys.argv[0] = "e2rag-lightrag-backfill"
from lightrag.api import config
from lightrag_ext.workspace_lock import held_for_server_args
with held_for_server_args(config.initialize_config()):
    print("held", flush=True)
    sys.stdin.read()
"""


def _layer_folder(working_dir: Path) -> dict[str, bytes]:
    folder = working_dir / "e2rag"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "e2rag.lock"}


def test_a_server_without_layers_says_how_many_documents_lack_one(
    lightrag_server: ServerFactory,
):
    stock = lightrag_server(STOCK_SERVER)
    _insert(stock, STORY, "story.txt")
    stock.stop()

    ours = lightrag_server(E2RAG_SERVER, working_dir=stock.working_dir, input_dir=stock.input_dir)
    stderr, log = _logs(ours)
    assert _gaps(stderr) == [(1, 1)] and _gaps(log) == [(1, 1)]
    assert "e2rag-lightrag-backfill" in stderr

    body = ours.client.post("/query/data", json={"query": LATE_FACET_QUERY, "mode": "e2rag"})
    assert body.raise_for_status().json()["metadata"]["e2rag_documents_without_layer"] == 1
    answer = ours.client.post("/query", json={"query": LATE_FACET_QUERY, "mode": "e2rag"})
    assert answer.raise_for_status().json()["response"]
    assert _gaps(_logs(ours)[0]) == [(1, 1)] * 3  # start, /query/data, /query

    ours.stop()
    assert run_backfill(stock).returncode == 0
    ours.start()
    assert _gaps(_logs(ours)[0]) == [(1, 1)] * 3  # no new line: nothing is missing any more
    body = ours.client.post("/query/data", json={"query": LATE_FACET_QUERY, "mode": "e2rag"})
    assert body.raise_for_status().json()["metadata"]["e2rag_documents_without_layer"] == 0


def test_the_layer_lines_reach_the_server_output_and_lightrag_log(
    lightrag_server: ServerFactory,
):
    server = lightrag_server(E2RAG_SERVER)
    doc_id = _insert(server, STORY, "story.txt")
    line = re.compile(
        rf"e2rag layer of {doc_id}: (\d+) mentions, (\d+) events, \d+ edges, 0 failed chunks"
    )
    stderr, log = _logs(server)
    for text in (stderr, log):
        [(mentions, events)] = line.findall(text)
        assert int(mentions) > 0 and int(events) > 0


def test_a_backfill_beside_a_running_server_is_refused_and_changes_nothing(
    lightrag_server: ServerFactory,
):
    server = lightrag_server(E2RAG_SERVER)
    first = _insert(server, STORY, "story.txt")
    second = _insert(server, SECOND_STORY, "neville.txt")
    before = _layer_folder(server.working_dir)

    refused = run_backfill(server)

    assert refused.returncode == 2 and refused.stdout == ""
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith("e2rag-lightrag-backfill: error: ") and "in use by another" in line
    assert "(pid " in line  # the holder names itself in the lock file
    assert _layer_folder(server.working_dir) == before

    third = _insert(server, "Luna Lovegood read The Quibbler upside down.", "luna.txt")
    server.stop()  # its last flush: all three layers stay
    records = json.loads((server.working_dir / "e2rag" / "kv_store_doc_status.json").read_text())
    assert sorted(records) == sorted([first, second, third])

    done = run_backfill(server)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)  # stdout is the report and nothing else
    assert sorted(report["skipped"]) == sorted([first, second, third]) and not report["built"]
    assert "Server is ready" in done.stderr


def test_a_server_started_during_a_backfill_is_refused_in_one_line_and_changes_nothing(
    lightrag_server: ServerFactory,
):
    server = lightrag_server(E2RAG_SERVER)
    _insert(server, STORY, "story.txt")
    server.stop()
    backfill = subprocess.Popen(
        [sys.executable, "-c", _BACKFILL_HOLDING],
        cwd=server.run_dir,
        env=server.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert backfill.stdout is not None and backfill.stdout.readline() == "held\n"
        before = _files(server.working_dir)

        refused = run_with_configuration(server, E2RAG_SERVER)

        assert refused.returncode == 2, refused.stderr[-3000:]
        [line] = refused.stderr.strip().splitlines()
        assert line.startswith("e2rag-lightrag-server: error: ")
        assert f"in use by another process (pid {backfill.pid}: e2rag-lightrag-backfill)" in line
        assert "wait for it to end or stop it" in line
        assert refused.stdout == ""  # not even LightRAG's banner: nothing was started
        assert _files(server.working_dir) == before
    finally:
        backfill.communicate("", timeout=60)  # the backfill ends, releasing the workspace
    assert backfill.returncode == 0
    server.start()  # the workspace is free again
    body = server.client.post("/query/data", json={"query": LATE_FACET_QUERY, "mode": "e2rag"})
    assert body.raise_for_status().json()["metadata"]["e2rag_documents_without_layer"] == 0
