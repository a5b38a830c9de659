"""The offline demo: index the bundled story and answer with evidence, with the network cut."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llama_index_e2rag.app.demo import QUESTIONS, SAMPLE_PATH, TOP_N, run_demo

REPO = Path(__file__).resolve().parents[2]
NETWORK_MARKER = "E2RAG-TEST-NETWORK-ATTEMPT"

#: Runs before the demo in the child process: any connection attempt (TCP, UDP connect, DNS)
#: prints a marker and fails, so a hidden download cannot go unnoticed even if it is caught.
PRELUDE = f"""
import socket, sys

def _refuse(*args, **kwargs):
    sys.stderr.write("{NETWORK_MARKER} %r\\n" % (args[1:] or args,))
    raise OSError("network access is disabled in this test")

socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
socket.create_connection = _refuse
socket.getaddrinfo = _refuse

from llama_index_e2rag.app.demo import run_demo
sys.exit(run_demo())
"""

EVIDENCE_LINE = re.compile(r"^\d+\. \[peter_rabbit\.txt · \d+% through the story\] \S")


def _answers(output: str) -> dict[str, str]:
    """Each question's printed answer block."""
    blocks: dict[str, str] = {}
    for question in QUESTIONS:
        start = output.index(f"Q: {question}")
        end = min(
            [output.index(f"Q: {q}") for q in QUESTIONS if output.index(f"Q: {q}") > start]
            or [len(output)]
        )
        blocks[question] = output[start:end]
    return blocks


def _check_answers(output: str) -> None:
    blocks = _answers(output)
    for question, block in blocks.items():
        evidence = [line for line in block.splitlines() if EVIDENCE_LINE.match(line)]
        assert len(evidence) == TOP_N, f"not {TOP_N} evidence lines for {question!r}:\n{block}"
    # Each answer leads with the story's own answer (the bundled text is fixed, so are these
    # words): where -> a place, who -> the helpers, what -> the thing given.
    expected = (("shoes", "cabbages"), ("sparrows",), ("camomile tea",))
    for question, words in zip(QUESTIONS, expected):
        first = next(line for line in blocks[question].splitlines() if EVIDENCE_LINE.match(line))
        assert first.startswith("1. ") and all(w in first for w in words), (question, first)


@pytest.mark.spacy
@pytest.mark.minilm
def test_demo_runs_end_to_end_without_network(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-c", PRELUDE],
        cwd=tmp_path,  # no project .env or stray files can influence the run
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert NETWORK_MARKER not in result.stderr, result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    _check_answers(result.stdout)


@pytest.mark.spacy
@pytest.mark.minilm
def test_demo_persists_then_reloads_the_index(tmp_path):
    store = tmp_path / "store"
    first: list[str] = []
    assert run_demo(store_dir=str(store), echo=first.append) == 0
    assert (store / "docstore.json").is_file()
    assert any(line.startswith("Indexing The Tale of Peter Rabbit") for line in first)

    second: list[str] = []
    assert run_demo(store_dir=str(store), echo=second.append) == 0
    assert second[0] == f"Loading the demo index from {store}"
    # Same index, same questions: the loaded index gives the same answers.
    answers = [line for line in first if EVIDENCE_LINE.match(line)]
    assert answers == [line for line in second if EVIDENCE_LINE.match(line)]
    _check_answers("\n".join(second))


def test_bundled_text_and_notice_ship_with_the_package():
    text = SAMPLE_PATH.read_text(encoding="utf-8")
    assert text.startswith("THE TALE OF")
    assert "Project Gutenberg" not in text and "[Illustration]" not in text
    notice = (SAMPLE_PATH.parent / "NOTICE-samples.txt").read_text(encoding="utf-8")
    assert "SOURCE_gutenberg_books.txt" in notice and "public domain" in notice.lower()


def test_missing_offline_model_gives_exit_code_1_and_an_install_hint(monkeypatch):
    import llama_index_e2rag.app.demo as demo
    from llama_index_e2rag.extract.grounded import GroundedExtractor

    monkeypatch.setattr(
        demo, "GroundedExtractor", lambda: GroundedExtractor(model="en_core_web_not_installed")
    )
    lines: list[str] = []
    assert demo.run_demo(echo=lines.append) == 1
    assert "cannot run" in lines[-1] and "pip install" in lines[-1]
