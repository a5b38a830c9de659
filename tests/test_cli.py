"""The ``e2rag`` command line: index / show / query round trip, one-line errors, exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Settings
from scripted_llm import ScriptedLLM
from test_index import NAMES, SEQUEL, STORY

from llama_index_e2rag.cli import main

ANSWER = "Hermione lied to protect Harry and Ron."


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch) -> ScriptedLLM:
    """Models configured the way users do it: through llama-index ``Settings``."""
    llm = ScriptedLLM(names=NAMES, default_response=ANSWER)
    monkeypatch.setattr(Settings, "_llm", llm)
    monkeypatch.setattr(Settings, "_embed_model", HashEmbedding())
    return llm


@pytest.fixture
def books(tmp_path: Path) -> Path:
    folder = tmp_path / "books"
    folder.mkdir()
    (folder / "one.txt").write_text(STORY, encoding="utf-8")
    (folder / "two.md").write_text(SEQUEL, encoding="utf-8")
    (folder / "cover.png").write_bytes(b"\x89PNG\x00\x00")  # not a text suffix: skipped
    return folder


def test_index_show_query_round_trip(
    models: ScriptedLLM, books: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert main(["index", str(books), "--store", str(store), "--chunk-size", "60", "--quiet"]) == 0
    out = capsys.readouterr().out.strip().splitlines()[-1]
    assert out.startswith(f"indexed 2 document(s) into {store}: ")
    assert (store / "index_store.json").is_file() and (store / "llm_cache.json").is_file()

    assert main(["show", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "one.txt" in out and "two.md" in out
    assert "mention=" in out and "participates=" in out
    assert "extraction failures: 0" in out

    calls_before = sum(models.calls_by_kind.values())
    code = main(
        [
            "query",
            "What did Hermione do after the troll fight?",
            "--store",
            str(store),
            "--mode",
            "entity_event",
            "--top-k",
            "2",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    answer, evidence = out.split("\nEvidence:\n")
    assert answer.strip() == ANSWER
    lines = evidence.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("[1] ")
    assert "one.txt (document 0, character" in lines[0] and "troll fight" in lines[0]
    assert sum(models.calls_by_kind.values()) == calls_before + 2  # cues + answer

    # indexing the same folder again reuses the LLM cache and replaces the documents
    assert main(["index", str(books), "--store", str(store), "--quiet"]) == 0
    assert sum(models.calls_by_kind.values()) == calls_before + 2
    assert main(["show", "--store", str(store)]) == 0
    assert capsys.readouterr().out.count("chunks)") == 2


@pytest.mark.parametrize(
    "make_argv, message",
    [
        (lambda d: ["query", "Who?", "--store", str(d / "nothing")], "no e2rag store"),
        (lambda d: ["show", "--store", str(d / "nothing")], "no e2rag store"),
        (lambda d: ["index", str(d / "missing.txt"), "--store", str(d / "s")], "no such file"),
        (lambda d: ["index", str(d / "empty.txt"), "--store", str(d / "s")], "is empty"),
        (lambda d: ["index", str(d / "latin1.txt"), "--store", str(d / "s")], "not UTF-8"),
        (lambda d: ["index", str(d / "nul.txt"), "--store", str(d / "s")], "NUL bytes"),
        (
            lambda d: ["index", str(d / "ok.txt"), str(d / "empty.txt"), "--store", str(d / "s")],
            "is empty",
        ),
    ],
)
def test_bad_input_exits_1_with_one_line_and_writes_nothing(
    models: ScriptedLLM,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make_argv: object,
    message: str,
) -> None:
    (tmp_path / "empty.txt").write_text("  \n", encoding="utf-8")
    (tmp_path / "latin1.txt").write_bytes("Hermione café".encode("latin-1"))
    (tmp_path / "nul.txt").write_bytes(b"Hermione\x00\x00\x00")
    (tmp_path / "ok.txt").write_text(STORY, encoding="utf-8")
    assert main(make_argv(tmp_path)) == 1  # type: ignore[operator]
    err = capsys.readouterr().err
    assert err.startswith("e2rag: error:") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "s").exists()
    assert sum(models.calls_by_kind.values()) == 0


def test_the_cli_shows_progress_unless_quiet(
    models: ScriptedLLM, books: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert main(["index", str(books), "--store", str(store), "--chunk-size", "60"]) == 0
    err = capsys.readouterr().err
    assert "E2RAG extraction" in err and "Saving e2rag stores" in err
    assert main(["query", "Who is Hermione?", "--store", str(store), "--mode", "vector"]) == 0
    assert "Loading store" in capsys.readouterr().err
    question = ["query", "Who is Hermione?", "--store", str(store), "--mode", "vector", "--quiet"]
    assert main(question) == 0
    assert capsys.readouterr().err == ""


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["query", "Who?", "--store", str(tmp_path), "--mode", "magic"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("e2rag: error: argument --mode: invalid choice: 'magic'")
    assert err.count("\n") == 1


def test_script_runs_as_a_process_without_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "llama_index_e2rag.cli", "show", "--store", str(tmp_path / "no")],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(Path.cwd())},
    )
    assert result.returncode == 1
    assert result.stderr.strip().startswith("e2rag: error: no e2rag store")
    assert "Traceback" not in result.stderr


def test_demo_command_returns_the_demo_exit_code(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import llama_index_e2rag.demo as demo

    calls: list[object] = []

    def fake_run_demo(store_dir: object = None, echo: object = print) -> int:
        calls.append(store_dir)
        return 1

    monkeypatch.setattr(demo, "run_demo", fake_run_demo)
    assert main(["demo", "--store", str(tmp_path)]) == 1
    assert main(["demo"]) == 1
    assert calls == [str(tmp_path), None]


def test_chrono_store_counts_layers_apart_prints_positions_and_keeps_building(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_chrono import HARBOUR, MOUNTAIN, chrono_llm

    from llama_index_e2rag.cli import load_store
    from llama_index_e2rag.schema import NodeKind

    monkeypatch.setattr(Settings, "_llm", chrono_llm(default_response=ANSWER))
    monkeypatch.setattr(Settings, "_embed_model", HashEmbedding())
    (tmp_path / "harbour.txt").write_text(HARBOUR, encoding="utf-8")
    (tmp_path / "mountain.txt").write_text(MOUNTAIN, encoding="utf-8")
    store = tmp_path / "store"
    first = ["index", str(tmp_path / "harbour.txt"), "--store", str(store), "--quiet", "--chrono"]
    assert main(first) == 0
    capsys.readouterr()

    assert main(["show", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    graph = load_store(store).graph_store
    chunks = graph.nodes(NodeKind.CHUNK)
    layer0 = [c for c in chunks if c.attrs.get("layer") == 0]
    assert layer0 and len(layer0) < len(chunks)
    assert f"chunk={len(chunks) - len(layer0)}," in out
    assert f"chunk (chrono layer 0)={len(layer0)}" in out
    assert "document builders: ChronoLayerBuilder" in out

    assert main(["query", "Who lit the lamp?", "--store", str(store), "--mode", "chrono"]) == 0
    evidence = capsys.readouterr().out.split("\nEvidence:\n")[1].strip().splitlines()
    assert evidence and all("(document 0, character " in line for line in evidence)
    assert "None" not in "\n".join(evidence)

    # a later run without --chrono still builds the layers of the new document
    assert main(["index", str(tmp_path / "mountain.txt"), "--store", str(store), "--quiet"]) == 0
    mountain = str((tmp_path / "mountain.txt").resolve())
    graph = load_store(store).graph_store
    assert [c for c in graph.nodes(NodeKind.CHUNK, mountain) if c.attrs.get("layer") == 0]
    assert graph.nodes(NodeKind.FACT, mountain)


@pytest.mark.parametrize("mode", ["entity_event", "vector", "grounded"])
def test_query_prints_positions_in_every_mode(
    models: ScriptedLLM, books: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    store = tmp_path / "store"
    assert main(["index", str(books), "--store", str(store), "--chunk-size", "60", "--quiet"]) == 0
    capsys.readouterr()
    question = "What did Hermione do after the troll fight?"
    assert main(["query", question, "--store", str(store), "--mode", mode]) == 0
    evidence = capsys.readouterr().out.split("\nEvidence:\n")[1].strip().splitlines()
    assert evidence and all(", character " in line for line in evidence)
    assert "None" not in "\n".join(evidence)


@pytest.mark.parametrize("question", ["", "   "])
def test_empty_question_exits_1_with_one_line(
    models: ScriptedLLM,
    books: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    question: str,
) -> None:
    store = tmp_path / "store"
    assert main(["index", str(books), "--store", str(store), "--quiet"]) == 0
    capsys.readouterr()
    calls = sum(models.calls_by_kind.values())
    assert main(["query", question, "--store", str(store)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("e2rag: error: the question is empty") and err.count("\n") == 1
    assert sum(models.calls_by_kind.values()) == calls


def test_query_explain_and_budget(
    models: ScriptedLLM, books: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--explain adds one line per result saying what brought it; --budget-words bounds it."""
    store = tmp_path / "store"
    assert main(["index", str(books), "--store", str(store), "--chunk-size", "60", "--quiet"]) == 0
    capsys.readouterr()
    question = "What did Hermione do after the troll fight?"
    assert main(["query", question, "--store", str(store), "--explain",
                 "--budget-words", "40"]) == 0
    lines = capsys.readouterr().out.split("\nEvidence:\n")[1].strip().splitlines()
    results = [line for line in lines if line.startswith("[")]
    explained = [line for line in lines if line.startswith("    signals: ")]
    assert results and len(explained) == len(results)
    assert any("lexical" in line or "dense" in line for line in explained)
    assert main(["query", question, "--store", str(store), "--budget-words", "0"]) == 1
