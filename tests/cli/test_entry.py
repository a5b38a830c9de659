"""The ``e2rag`` command line: index / show / query round trip, one-line errors, exit codes."""

from __future__ import annotations

import errno
import json
import multiprocessing
import gc
import os
import re
import shutil
import sqlite3
import signal
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Settings
from scripted_llm import ScriptedLLM
from test_index import NAMES, SEQUEL, STORY

from llama_index_e2rag.cli.entry import main

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
    assert lines[0].startswith("[1] [one.txt · ") and "% through the story] score " in lines[0]
    assert "troll fight" in lines[0]
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
        (lambda d: ["index", str(d / "nul.txt"), "--store", str(d / "s")], "not a text or"),
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
    assert "'sentence_graph'" in err  # the valid modes are listed
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
    import llama_index_e2rag.app.demo as demo

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
    from extract.test_chrono import HARBOUR, MOUNTAIN, chrono_llm

    from llama_index_e2rag.cli.store import load_store
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
    assert evidence and all(re.match(r"\[\d+\] \[\S+\.txt · \d+% through the story\] score ", line)
                            for line in evidence)
    assert "None" not in "\n".join(evidence)

    # a later run without --chrono still builds the layers of the new document
    assert main(["index", str(tmp_path / "mountain.txt"), "--store", str(store), "--quiet"]) == 0
    mountain = str((tmp_path / "mountain.txt").resolve())
    graph = load_store(store).graph_store
    assert [c for c in graph.nodes(NodeKind.CHUNK, mountain) if c.attrs.get("layer") == 0]
    assert graph.nodes(NodeKind.FACT, mountain)


# -- SentGraph: index --sentence-graph, query --mode sentence_graph (issue 14) -----------------
SONG = (
    "The Silver Harp is a song by the band Lanternfield. It was released in 1998 on a small "
    "label. Critics praised its quiet melody because it was sung in a whisper. But the radio "
    "stations ignored it."
)
BAND = (
    "Lanternfield is a folk band from Galway. Tomas Reyes plays drums in Lanternfield. After "
    "the first tour, he wrote most of their songs. So the band moved to Dublin."
)
WEATHER = (
    "Galway gets rain on most days of the year. Storms roll in from the Atlantic. Then the "
    "harbour closes for a week."
)
DRUMMER = "Tomas Reyes plays drums in Lanternfield."


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Nothing configured (no LLM, no API key: the MiniLM embedding); a folder of three files,
    the song and its band sharing the entity Lanternfield."""
    monkeypatch.setattr(Settings, "_llm", None)
    monkeypatch.setattr(Settings, "_embed_model", None)
    folder = tmp_path / "wiki"
    folder.mkdir()
    for name, text in (("song.txt", SONG), ("band.txt", BAND), ("weather.txt", WEATHER)):
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.mark.spacy  # the CLI's offline default parses with spaCy
def test_sentence_graph_index_show_and_query_print_positions_and_relation_paths(
    offline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert main(["index", str(offline), "--store", str(store), "--sentence-graph", "--quiet"]) == 0
    indexed = capsys.readouterr().out
    assert "3 topic" in indexed and "sentence (sentence graph core)" in indexed

    assert main(["show", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    nodes = dict(
        item.rsplit("=", 1) for item in out.split("\nnodes: ")[1].split("\n")[0].split(", ")
    )
    sentgraph = int(nodes["sentence (sentence graph core)"]) + int(
        nodes["sentence (sentence graph supplementary)"]
    )
    assert nodes["topic"] == "3" and sentgraph == 11  # one node per sentence of the three files
    assert nodes["sentence"] == "11"  # the grounded extraction's own sentences, counted apart
    assert "rst=" in out and "bridge=" in out

    question = "Who is the drummer of the band behind The Silver Harp?"
    argv = ["query", question, "--store", str(store), "--mode", "sentence_graph", "--quiet"]
    assert main([*argv, "--explain"]) == 0
    lines = capsys.readouterr().out.split("\nEvidence:\n")[1].strip().splitlines()
    results = [line for line in lines if line.startswith("[")]
    assert results and len(lines) == 3 * len(results)  # each: result, path, explanation
    for result, path, why in zip(lines[::3], lines[1::3], lines[2::3]):
        assert re.match(r"\[\d+\] \[\S+\.txt · \d+% through the story\] score ", result)
        assert re.match(r"    path: (anchor|match) \[", path)
        assert why.startswith("    sentence graph: ")
    (drummer,) = [i for i, line in enumerate(lines) if line.endswith(DRUMMER)]
    band = str((offline / "band.txt").resolve())
    share = 100 * BAND.index(DRUMMER) / len(BAND)
    assert lines[drummer].startswith(f"[{drummer // 3 + 1}] [band.txt · {share:.0f}% through the "
                                     "story] score ")
    # the song's sentence is the anchor; the drummer's is reached across the shared band
    assert "-> bridge:shared_entity(mentions Lanternfield) -> [" in lines[drummer + 1]
    assert "hop 1 along a bridge edge" in lines[drummer + 2]

    assert main([*argv, "--budget-words", "10"]) == 0  # budget-aware too
    evidence = capsys.readouterr().out.split("\nEvidence:\n")[1].strip().splitlines()
    assert 1 <= len([line for line in evidence if line.startswith("[")]) <= 2


@pytest.mark.spacy  # the CLI's offline default parses with spaCy
def test_event_graph_index_timeline_and_query(
    offline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``index --event-graph`` fuses entities, ``timeline`` prints one in story order across
    the files, ``query --mode event_graph`` answers with labelled evidence."""
    store = tmp_path / "store"
    query = ["query", "Who plays drums in the band?", "--store", str(store), "--mode",
             "event_graph", "--quiet"]
    assert main(["index", str(offline), "--store", str(store), "--quiet"]) == 0
    capsys.readouterr()
    assert main(query) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"e2rag: error: {store} has no event graph ")
    assert err.rstrip().endswith(f"e2rag index --store {store} --event-graph")

    assert main(["index", str(offline), "--store", str(store), "--event-graph", "--quiet"]) == 0
    assert re.search(r", \d+ entity\b", capsys.readouterr().out)
    assert main(["timeline", "Lanternfield", "--store", str(store)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Lanternfield")
    # each entry says where it is as the CLI's answers do: file and share of it
    places = [re.match(r"(\w+\.txt) · (\d+)% through the story +(mention|event) ", line)
              for line in out[2:]]
    assert all(places) and {m.group(1) for m in places} == {"song.txt", "band.txt"}
    assert main(["timeline", "Lanternfield", "--store", str(store), "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)["entries"]
    found = [tuple(entry["pos"][:2]) for entry in entries]
    assert len(found) == len(out) - 2 and found == sorted(found)  # in story order
    assert [Path(e["doc_id"]).name for e in entries] == [m.group(1) for m in places]
    assert main(["timeline", "Nobody", "--store", str(store)]) == 1
    assert capsys.readouterr().err.count("\n") == 1

    assert main([*query, "--explain"]) == 0
    evidence = capsys.readouterr().out.split("\nEvidence:\n")[1].strip().splitlines()
    assert evidence and any(line.startswith("    event graph: ") for line in evidence)


@pytest.mark.spacy  # the CLI's offline default parses with spaCy
def test_sentence_graph_added_to_a_store_keeps_its_builders(
    offline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llama_index_e2rag.cli.store import load_store
    from llama_index_e2rag.extract.chrono import ChronoLayerBuilder
    from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder
    from llama_index_e2rag.schema import NodeKind

    store = tmp_path / "store"
    song, band = offline / "song.txt", offline / "band.txt"
    assert main(["index", str(song), "--store", str(store), "--chrono", "--quiet"]) == 0
    capsys.readouterr()
    query = ["query", "Who plays drums?", "--store", str(store), "--mode", "sentence_graph",
             "--quiet"]
    assert main(query) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"e2rag: error: {store} has no sentence graph ")
    assert err.count("\n") == 1
    assert err.rstrip().endswith(f"e2rag index --store {store} --sentence-graph")

    assert main(["index", str(band), "--store", str(store), "--sentence-graph", "--quiet"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith(f"indexed 1 document(s) into {store}: ")
    assert out[-1].startswith("added the sentence graph to 2 document(s) (")  # the song's too
    index = load_store(store)
    assert sorted(type(b).__name__ for b in index.doc_builders) == [
        ChronoLayerBuilder.__name__, SentenceGraphBuilder.__name__
    ]
    graph = index.graph_store
    band_id, song_id = str(band.resolve()), str(song.resolve())
    assert [c for c in graph.nodes(NodeKind.CHUNK, band_id) if c.attrs.get("layer") == 0]
    assert graph.nodes(NodeKind.TOPIC, band_id) and graph.nodes(NodeKind.TOPIC, song_id)
    assert main(["show", "--store", str(store)]) == 0
    assert "document builders: ChronoLayerBuilder, " in capsys.readouterr().out

    # the song given again, unchanged: not extracted again, its layers kept
    assert main(["index", str(song), "--store", str(store), "--quiet"]) == 0
    assert capsys.readouterr().out.startswith(
        f"indexed 0 document(s) (1 unchanged, not extracted again) into {store}: "
    )
    graph = load_store(store).graph_store
    assert graph.nodes(NodeKind.TOPIC, song_id)
    assert [c for c in graph.nodes(NodeKind.CHUNK, song_id) if c.attrs.get("layer") == 0]
    assert main(query) == 0
    assert DRUMMER in capsys.readouterr().out


@pytest.mark.parametrize(
    "mode", ["entity_event", "vector", pytest.param("grounded", marks=pytest.mark.spacy)]
)
def test_query_prints_positions_in_every_mode(
    models: ScriptedLLM, books: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    store = tmp_path / "store"
    assert main(["index", str(books), "--store", str(store), "--chunk-size", "60", "--quiet"]) == 0
    capsys.readouterr()
    question = "What did Hermione do after the troll fight?"
    assert main(["query", question, "--store", str(store), "--mode", mode]) == 0
    evidence = capsys.readouterr().out.split("\nEvidence:\n")[1].strip().splitlines()
    assert evidence and all(" through the story] score " in line for line in evidence)
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
    # what calibrates the score is no contribution to it
    assert not any("story_match" in line or "rank" in line for line in explained)
    assert main(["query", question, "--store", str(store), "--budget-words", "0"]) == 1


# -- every failure is one line, never a traceback (issue "nothing lost") --------------------------
TESTS_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = TESTS_DIR.parent
#: ``e2rag`` as a process, with the deterministic embedding (no model download) and no LLM.
RUNNER = (
    f"import sys; sys.path.insert(0, {str(TESTS_DIR)!r})\n"
    "from hash_embedding import HashEmbedding\n"
    "from llama_index.core import Settings\n"
    "Settings.embed_model = HashEmbedding()\n"
    "import llama_index_e2rag.cli.entry as cli\n"
    "import llama_index_e2rag.cli.show as show\n"
    "{patch}\n"
    "sys.exit(cli.main())\n"
)
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
ONE_LINE_ERROR = re.compile(r"e2rag: error: [^\n]+\n")


def _env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home / "home"),
        "XDG_STATE_HOME": str(home / "state"),
        "PYTHONPATH": str(REPO_DIR),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def _e2rag(argv: list[str], home: Path, patch: str = "", stdout: Any = None) -> Any:
    """Run ``e2rag argv`` in a fresh interpreter (cwd ``home``, ``patch`` run first) in a
    process group of its own (a test may send Ctrl-C to that group)."""
    return subprocess.run(
        [sys.executable, "-c", RUNNER.replace("{patch}", patch), *argv],
        cwd=home,
        env=_env(home),
        stdout=subprocess.PIPE if stdout is None else stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
        start_new_session=True,
        # Ctrl-C's default action, as in a terminal, whatever pytest inherited (a shell's
        # background job ignores SIGINT, and so would every process it starts)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small store built once, in process, with the scripted LLM and the hash embedding."""
    folder = tmp_path_factory.mktemp("cli_good")
    (folder / "one.txt").write_text(STORY, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENAI_API_KEY", raising=False)
        patch.setenv("XDG_STATE_HOME", str(folder / "state"))
        patch.setattr(Settings, "_llm", ScriptedLLM(names=NAMES, default_response=ANSWER))
        patch.setattr(Settings, "_embed_model", HashEmbedding())
        store = folder / "store"
        assert main(["index", str(folder / "one.txt"), "--store", str(store), "--quiet"]) == 0
    # the in-process build's SQLite connections close now (checkpointing their WAL file), not
    # at a random later collection while a test copies the store (the file vanished mid-copy)
    gc.collect()
    return store


def _copy(good: Path, d: Path, name: str) -> Path:
    store = d / name
    shutil.copytree(good, store)
    return store


def _truncate(good: Path, d: Path, name: str) -> Path:
    """A copy of the good store whose file ``name`` (relative to the store) is 0 bytes."""
    store = _copy(good, d, "truncated")
    (store / name).write_bytes(b"")
    return store


def _garbage_sqlite(good: Path, d: Path) -> Path:
    store = _copy(good, d, "garbage_sqlite")
    (store / "e2rag" / "graph.sqlite").write_bytes(b"not a database " * 500)
    for extra in (store / "e2rag").glob("graph.sqlite-*"):
        extra.unlink()
    return store


def _unwritable(good: Path, d: Path) -> Path:
    store = _copy(good, d, "read_only")
    for path in [store, *store.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    return store


def _unreadable(d: Path) -> Path:
    path = d / "secret.txt"
    path.write_text(STORY, encoding="utf-8")
    path.chmod(0)
    return path


#: name -> (needs a non-root user, argv from (case folder, good store), words the line must hold;
#: "a|b" is either word)
BAD_INPUTS: dict[str, tuple[bool, Callable[[Path, Path], list[str]], tuple[str, ...]]] = {
    "missing_file": (False, lambda d, g: ["index", str(d / "nope.txt"), "--store", str(d / "s")],
                     ("no such file or folder", "nope.txt")),
    "folder_without_text": (
        False,
        lambda d, g: (d / "pics").mkdir() or (d / "pics" / "a.png").write_bytes(b"\x89PNG")
        and ["index", str(d / "pics"), "--store", str(d / "s")],
        ("holds no files e2rag index reads",),
    ),
    "binary_file": (
        False,
        lambda d, g: (d / "b.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff")
        and ["index", str(d / "b.txt"), "--store", str(d / "s")],
        ("b.txt", "not a text or document file"),
    ),
    "latin1_file": (
        False,
        lambda d, g: (d / "l.txt").write_bytes("Hermione café".encode("latin-1"))
        and ["index", str(d / "l.txt"), "--store", str(d / "s")],
        ("l.txt", "not UTF-8"),
    ),
    "unreadable_file": (True, lambda d, g: ["index", str(_unreadable(d)), "--store", str(d / "s")],
                        ("permission denied", "secret.txt")),
    "store_is_a_file_index": (
        False,
        lambda d, g: (d / "f").write_text("x") and ["index", str(g.parent / "one.txt"),
                                                     "--store", str(d / "f"), "--quiet"],
        ("is a file",),
    ),
    "store_is_a_file_query": (
        False,
        lambda d, g: (d / "f").write_text("x") and ["query", "Who?", "--store", str(d / "f")],
        ("no e2rag store",),
    ),
    "truncated_docstore": (
        False,
        lambda d, g: ["query", "Who?", "--store", str(_truncate(g, d, "docstore.json")), "--quiet"],
        ("docstore.json", "e2rag repair --store"),
    ),
    "truncated_index_store": (
        False,
        lambda d, g: ["query", "Who?", "--quiet", "--store",
                      str(_truncate(g, d, "index_store.json"))],
        ("index_store.json", "e2rag repair --store"),
    ),
    "truncated_index_store_show": (
        False,
        lambda d, g: ["show", "--store", str(_truncate(g, d, "index_store.json"))],
        ("e2rag repair --store",),  # show lists the damaged files on stdout
    ),
    "truncated_graph_store": (
        False,
        lambda d, g: ["query", "Who?", "--quiet", "--store",
                      str(_truncate(g, d, "graph_store.json"))],
        ("graph_store.json", "e2rag repair --store"),
    ),
    "truncated_docstore_index": (
        False,
        lambda d, g: ["index", str(g.parent / "one.txt"), "--store",
                      str(_truncate(g, d, "docstore.json")), "--quiet"],
        ("docstore.json", "e2rag repair --store"),
    ),
    "garbage_graph_database": (
        False,
        lambda d, g: ["query", "Who?", "--store", str(_garbage_sqlite(g, d)), "--quiet"],
        ("graph.sqlite", "e2rag repair --store"),
    ),
    "empty_store_folder": (
        False,
        lambda d, g: (d / "empty").mkdir() or ["query", "Who?", "--store", str(d / "empty")],
        ("no e2rag store",),
    ),
    "query_missing_store": (False, lambda d, g: ["query", "Who?", "--store", str(d / "none")],
                            ("no e2rag store",)),
    "show_not_a_store": (
        False,
        lambda d, g: (d / "docs").mkdir() or ["show", "--store", str(d / "docs")],
        ("no e2rag store",),
    ),
    "migrate_current_store": (False, lambda d, g: ["migrate", "--store", str(_copy(g, d, "c"))],
                              ("0.1.0",)),
    "unwritable_store_index": (
        True,
        lambda d, g: ["index", str(g.parent / "one.txt"), "--store", str(_unwritable(g, d)),
                      "--quiet"],
        ("read_only", "permission|read-only"),
    ),
    "unwritable_new_store": (
        True,
        lambda d, g: (d / "ro").mkdir(mode=0o555) or ["index", str(g.parent / "one.txt"),
                                                      "--store", str(d / "ro" / "s"), "--quiet"],
        ("permission denied",),
    ),
    "empty_question": (False, lambda d, g: ["query", " ", "--store", str(g)],
                       ("the question is empty",)),
    "top_k_zero": (False, lambda d, g: ["query", "Who?", "--store", str(g), "--top-k", "0"],
                   ("--top-k must be at least 1",)),
    "budget_zero": (False, lambda d, g: ["query", "Who?", "--store", str(g), "--budget-words", "0"],
                    ("--budget-words must be at least 1",)),
}


@pytest.fixture(scope="module")
def bad_input_runs(
    good_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Every case of ``BAD_INPUTS`` started at once (each is a process), results by name."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2)))
    runs = {}
    for name, (needs_user, make_argv, _) in BAD_INPUTS.items():
        if needs_user and IS_ROOT:
            continue
        case = tmp_path_factory.mktemp(name)
        (case / "home").mkdir()
        runs[name] = (case, pool.submit(_e2rag, make_argv(case, good_store), case))
    yield runs
    pool.shutdown()
    for case, _ in runs.values():  # let pytest clean up the read-only cases
        for path in [case, *case.rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o700)


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_process_prints_one_error_line_and_no_traceback(
    bad_input_runs: dict[str, Any], name: str
) -> None:
    if name not in bad_input_runs:
        pytest.skip("running as root: file permissions do not apply")
    case, future = bad_input_runs[name]
    result = future.result()
    assert ONE_LINE_ERROR.fullmatch(result.stderr), result.stderr
    assert "Traceback" not in result.stderr and result.returncode == 1
    for word in BAD_INPUTS[name][2]:  # "a|b": either
        assert any(alternative in result.stderr for alternative in word.split("|")), word
    assert not (case / "state").exists()  # an expected error writes no traceback log


def test_the_good_store_has_no_damaged_file(good_store: Path) -> None:
    """The damage check behind the bad-store messages does not flag a sound store (its empty
    lock files included)."""
    from llama_index_e2rag.cli.errors import damaged_files

    assert damaged_files(good_store) == []
    assert damaged_files(good_store.parent / "one.txt") == []


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("boom"),
        RuntimeError("first line\nsecond line"),
        RuntimeError(),
        KeyError("doc-1"),
        AttributeError("'NoneType' object has no attribute 'nodes'"),
        ZeroDivisionError("division by zero"),
    ],
    ids=repr,
)
def test_unexpected_error_is_one_line_naming_a_log_with_the_traceback(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    good_store: Path,
    exc: BaseException,
) -> None:
    import llama_index_e2rag.cli.show as show

    def failing_show(args: object) -> int:
        raise exc

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(show, "run", failing_show)
    assert main(["show", "--store", str(good_store)]) == 1
    err = capsys.readouterr().err
    line = re.fullmatch(r"e2rag: error: unexpected (\w+)(: [^\n]+)? \(traceback in (.+)\)\n", err)
    assert line, err
    assert line.group(1) == type(exc).__name__
    first = str(exc).splitlines()[0] if str(exc) else ""
    assert (line.group(2) or "") == (f": {first}" if first else "")
    log = Path(line.group(3))
    assert log.parent == tmp_path / "state" / "e2rag" / "logs"
    assert re.fullmatch(rf"e2rag-\d{{8}}-\d{{6}}-{os.getpid()}(-\d+)?\.log", log.name)
    text = log.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text and "in failing_show" in text
    assert f"command: e2rag show --store {good_store}" in text
    assert text.rstrip().endswith(traceback.format_exception_only(exc)[-1].rstrip())
    assert log.stat().st_mode & 0o077 == 0  # it may quote the user's documents: private


def test_the_log_falls_back_to_home_then_temp_then_says_it_was_not_saved(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import tempfile

    import llama_index_e2rag.cli.show as show

    def failing_show(args: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(show, "run", failing_show)
    blocker = tmp_path / "a_file"
    blocker.write_text("folders cannot be made under a file", encoding="utf-8")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    argv = ["show", "--store", str(tmp_path)]

    def logged() -> Path:
        assert main(argv) == 1
        err = capsys.readouterr().err
        found = re.fullmatch(r"e2rag: error: unexpected RuntimeError: boom \(traceback in (.+)\)\n",
                             err)
        assert found, err
        return Path(found.group(1))

    assert logged().parent == tmp_path / "home" / ".local" / "state" / "e2rag" / "logs"
    monkeypatch.setenv("HOME", str(blocker / "home"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    assert logged().parent == tmp_path / "tmp"
    monkeypatch.setattr(tempfile, "tempdir", str(blocker / "tmp"))
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("e2rag: error: unexpected RuntimeError: boom (traceback not saved")
    assert err.count("\n") == 1 and "XDG_STATE_HOME" in err


def test_an_unexpected_error_in_a_process_names_its_log(good_store: Path, tmp_path: Path) -> None:
    patch = "def boom(args):\n    raise RuntimeError('boom')\nshow.run = boom"
    result = _e2rag(["show", "--store", str(good_store)], tmp_path, patch)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    found = re.fullmatch(r"e2rag: error: unexpected RuntimeError: boom \(traceback in (.+)\)\n",
                         result.stderr)
    assert found, result.stderr
    log = Path(found.group(1))
    assert log.parent == tmp_path / "state" / "e2rag" / "logs"
    text = log.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text and ", in boom\n" in text


def _interrupt_directly() -> None:
    raise KeyboardInterrupt


def _interrupt_in_a_thread() -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(_interrupt_directly).result()


def _interrupt_in_asyncio() -> None:
    import asyncio

    async def task() -> None:
        raise KeyboardInterrupt

    async def gather() -> None:
        await asyncio.gather(task(), asyncio.sleep(0))

    asyncio.run(gather())


def _interrupt_wrapped() -> None:
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as exc:
        raise RuntimeError("worker stopped") from exc


def _interrupt_grouped() -> None:
    raise BaseExceptionGroup("workers", [ValueError("x"), KeyboardInterrupt()])


@pytest.mark.parametrize(
    "interrupt",
    [_interrupt_directly, _interrupt_in_a_thread, _interrupt_in_asyncio, _interrupt_wrapped,
     _interrupt_grouped],
)
def test_ctrl_c_anywhere_exits_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    interrupt: Callable[[], None],
) -> None:
    import llama_index_e2rag.cli.show as show

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(show, "run", lambda args: interrupt())
    assert main(["show", "--store", str(tmp_path)]) == 130
    assert capsys.readouterr().err == "e2rag: interrupted\n"
    assert not (tmp_path / "state").exists()


CTRL_C_WITH_A_FORKED_WORKER = """
import multiprocessing, os, signal, time
def work(ready):
    ready.set()
    while True:
        time.sleep(1)
def parse_in_a_worker(args):
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=work, args=(ready,))
    proc.start()
    ready.wait()
    try:
        os.killpg(0, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole process group
        while True:
            time.sleep(1)
    finally:
        proc.join()
        print(f"worker exit code {proc.exitcode}", flush=True)
show.run = parse_in_a_worker
"""


@pytest.mark.skipif(
    not hasattr(os, "killpg") or "fork" not in multiprocessing.get_all_start_methods(),
    reason="needs process groups and forked workers",
)
def test_ctrl_c_with_forked_workers_prints_no_worker_traceback(tmp_path: Path) -> None:
    """spaCy's ``n_process`` workers are forked: on Ctrl-C each printed its own traceback."""
    result = _e2rag(["show", "--store", str(tmp_path)], tmp_path, CTRL_C_WITH_A_FORKED_WORKER)
    assert result.stderr == "e2rag: interrupted\n"
    assert result.returncode == 130
    assert result.stdout == "worker exit code 130\n"


def test_a_closed_stdout_pipe_ends_quietly(good_store: Path, tmp_path: Path) -> None:
    """``e2rag show … | head -0``: the reader is gone before e2rag writes."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = _e2rag(["show", "--store", str(good_store)], tmp_path, stdout=write_end)
    finally:
        os.close(write_end)
    assert result.stderr == ""  # no traceback, no "Exception ignored", no error line
    assert result.returncode == 1


def test_a_broken_pipe_elsewhere_is_an_error(good_store: Path, tmp_path: Path) -> None:
    """Only a closed stdout is quiet; a broken pipe to anything else is reported."""
    patch = "def boom(args):\n    raise BrokenPipeError(32, 'Broken pipe')\nshow.run = boom"
    result = _e2rag(["show", "--store", str(good_store)], tmp_path, patch)
    assert result.returncode == 1
    assert ONE_LINE_ERROR.fullmatch(result.stderr) and "Broken pipe" in result.stderr


@pytest.mark.parametrize(
    "module, extra",
    [("psycopg", "postgres"), ("lightrag", "lightrag"), ("spacy", "offline"),
     ("onnxruntime", "offline"), ("qdrant_client", "stores"), ("openai", "openai"),
     ("llama_index.llms.openai", "openai"), ("llama_index.vector_stores.chroma", "stores")],
)
def test_a_missing_extra_names_the_pip_install(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    module: str,
    extra: str,
) -> None:
    import llama_index_e2rag.cli.show as show

    def needs_extra(args: object) -> int:
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)

    monkeypatch.setattr(show, "run", needs_extra)
    assert main(["show", "--store", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f'e2rag: error: {module} is not installed: pip install "llama-index-e2rag[{extra}]"\n'
    )


def _sqlite_failure(state: str, folder: Path) -> sqlite3.Error:
    """A real error of SQLite (it carries its result code, which the message is chosen by):
    a database another connection holds ``locked``, opened ``read-only``, or ``not a
    database``."""
    folder.mkdir()
    path = folder / "graph.sqlite"
    setup = sqlite3.connect(path)
    setup.execute("CREATE TABLE t (x)")
    setup.commit()
    try:
        if state == "locked":
            setup.execute("BEGIN EXCLUSIVE")
            sqlite3.connect(path, timeout=0).execute("SELECT * FROM t")
        elif state == "read-only":
            sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("INSERT INTO t VALUES (1)")
        else:
            path.write_bytes(b"not a database " * 500)
            sqlite3.connect(path).execute("SELECT * FROM t")
    except sqlite3.Error as exc:
        return exc
    finally:
        setup.close()
    raise AssertionError(f"SQLite raised nothing for {state}")


@pytest.mark.parametrize(
    "exc, words",
    [
        (OSError(errno.ENOSPC, "No space left on device", "/s/docstore.json"),
         ("no space left", "/s/docstore.json", "free some space")),
        (PermissionError(errno.EACCES, "Permission denied", "/s/graph.sqlite"),
         ("permission denied", "/s/graph.sqlite", "check the permissions")),
        (OSError(errno.EROFS, "Read-only file system", "/s"), ("read-only file system",)),
        ("locked", ("busy", "run again")),
        ("read-only", ("read-only", "permissions")),
        ("not a database", ("damaged graph database", "graph.sqlite", "e2rag repair --store")),
        (ValueError("chunk_size must be positive\nmore"), ("chunk_size must be positive",)),
    ],
    ids=repr,
)
def test_expected_failures_say_what_to_do_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    exc: BaseException | str,
    words: tuple[str, ...],
) -> None:
    import llama_index_e2rag.cli.show as show

    if isinstance(exc, str):
        exc = _sqlite_failure(exc, tmp_path / "db")

    def failing(args: object) -> int:
        raise exc

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(show, "run", failing)
    assert main(["show", "--store", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert ONE_LINE_ERROR.fullmatch(err), err
    assert "unexpected" not in err and not (tmp_path / "state").exists()
    for word in words:
        assert word in err


# -- damaged stores: show says so, repair mends, a half-saved new store is replaced -------------
def test_show_reports_a_damaged_store_and_repair_mends_it(
    models: ScriptedLLM, books: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert main(["index", str(books), "--store", str(store), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["query", "Who lied to the teachers?", "--store", str(store), "--quiet"]) == 0
    answer = capsys.readouterr().out
    for segment in (store / "e2rag" / "vectors").glob("vectors-*.npy"):
        segment.write_bytes(segment.read_bytes()[:100])  # every vector file cut short
    assert main(["show", "--store", str(store)]) == 1
    captured = capsys.readouterr()
    assert "status: DAMAGED" in captured.out
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("e2rag: error:") and ".npy" in line and "e2rag repair" in line
    assert main(["query", "Who lied?", "--store", str(store), "--quiet"]) == 1
    capsys.readouterr()
    assert main(["repair", "--store", str(store), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "re-embedded" in out and "the store is whole" in out
    assert main(["show", "--store", str(store)]) == 0
    assert "status: ok" in capsys.readouterr().out
    assert main(["query", "Who lied to the teachers?", "--store", str(store), "--quiet"]) == 0
    assert capsys.readouterr().out == answer


def test_index_over_what_a_killed_first_save_left_builds_the_store(
    models: ScriptedLLM, books: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llama_index_e2rag.persist.ownership import mark

    store = tmp_path / "store"
    mark(store)  # what a killed first save left: our marker first, then what it reached
    (store / "docstore.json").write_text('{"docstore/data": {}}')
    (store / "index_store.json").write_text("")
    assert main(["query", "Who?", "--store", str(store), "--quiet"]) == 1
    assert "first save did not finish" in capsys.readouterr().err
    assert main(["index", str(books), "--store", str(store), "--quiet"]) == 0
    assert main(["show", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "status: ok" in out and "one.txt" in out and "two.md" in out
    assert not list(tmp_path.glob(".store*"))  # nothing built aside


def test_index_refuses_the_same_files_without_our_marker(
    models: ScriptedLLM, books: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "docstore.json").write_text('{"docstore/data": {}}')  # llama-index's, not ours
    assert main(["index", str(books), "--store", str(store), "--quiet"]) == 1
    assert "not an e2rag store (docstore.json)" in capsys.readouterr().err
    assert sorted(p.name for p in store.iterdir()) == ["docstore.json"]
    assert (store / "docstore.json").read_text() == '{"docstore/data": {}}'
