"""The ``e2rag`` error line is chosen by the exception's class: not by the module or function
that raised it, nor by the words of its message."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import pytest

import llama_index_e2rag.cli.show as show
import llama_index_e2rag.cli.store as cli_store
import llama_index_e2rag.maintenance.load as maintenance_load
from llama_index_e2rag.cli.entry import main
from llama_index_e2rag.errors import (
    BadDocumentError,
    DamagedFileError,
    E2RAGError,
    StoreDamagedError,
    UsageError,
)

PACKAGE = Path(show.__file__).resolve().parents[1]
#: Where the raising function is said to live: this test, the CLI's own modules (once told
#: apart by their file), a library module.
HOMES = [
    Path(__file__),
    PACKAGE / "cli" / "entry.py",
    PACKAGE / "cli" / "query.py",
    PACKAGE / "cli" / "store.py",
    PACKAGE / "persist" / "load.py",
]

FAILURES: list[Callable[[], BaseException]] = [
    lambda: ValueError("chunk_size must be positive"),
    lambda: UsageError("--top-k must be at least 1"),
    lambda: E2RAGError("the graph says so"),
    lambda: DamagedFileError("graph.json is corrupt: cut short"),
    lambda: StoreDamagedError("graph.sqlite is damaged; run: e2rag repair --store S"),
    lambda: BadDocumentError("damaged.txt is not UTF-8 text"),
    lambda: RuntimeError("boom"),
]


def _raiser(home: Path) -> Callable[[BaseException], None]:
    """A function raising what it is given, compiled as if it were a function of ``home``."""
    scope: dict[str, object] = {}
    exec(compile("def fail(exc):\n    raise exc\n", str(home), "exec"), scope)
    return scope["fail"]  # type: ignore[return-value]


def _damaged_store(tmp_path: Path) -> Path:
    """A folder with a cut store file: the reasons that look for damage find it."""
    store = tmp_path / "store"
    store.mkdir()
    (store / "docstore.json").write_bytes(b"")
    return store


def _line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return re.sub(r"\(traceback in [^)]+\)", "(traceback in LOG)", err)


@pytest.mark.parametrize("failure", FAILURES, ids=lambda f: repr(f()))
def test_moving_the_raising_function_does_not_change_the_message(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    failure: Callable[[], BaseException],
) -> None:
    store = _damaged_store(tmp_path)
    lines = set()
    for home in HOMES:
        fail = _raiser(home)
        monkeypatch.setattr(show, "run", lambda args: fail(failure()))
        lines.add(_line(capsys, ["show", "--store", str(store)]))
    assert len(lines) == 1, lines


def test_message_words_do_not_decide_the_advice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged file found without its store gets the store's fix; an error that merely
    mentions damage does not."""
    store = tmp_path / "s"
    raised: list[BaseException] = []
    monkeypatch.setattr(show, "run", lambda args: (_ for _ in ()).throw(raised[-1]))
    raised.append(BadDocumentError("damaged.txt is not UTF-8 text"))
    assert _line(capsys, ["show", "--store", str(store)]) == (
        "e2rag: error: damaged.txt is not UTF-8 text\n"
    )
    raised.append(DamagedFileError("vectors.npy does not match its checksum"))
    assert _line(capsys, ["show", "--store", str(store)]) == (
        f"e2rag: error: vectors.npy does not match its checksum (or run e2rag repair --store "
        f"{store})\n"
    )


def test_a_corrupt_graph_file_gets_the_stores_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llama_index_e2rag.graph.networkx_store import NetworkXGraphStore

    cut = tmp_path / "graph.json"
    cut.write_text('{"format": "e2rag-graph", "nodes": [', encoding="utf-8")
    monkeypatch.setattr(show, "run", lambda args: NetworkXGraphStore.from_persist_path(str(cut)))
    line = _line(capsys, ["show", "--store", str(tmp_path / "s")])
    assert line.startswith(f"e2rag: error: {cut} is corrupt")
    assert line.endswith(f"(or run e2rag repair --store {tmp_path / 's'})\n")


@pytest.mark.parametrize(
    "cause, logged", [(ValueError("Expecting value: line 1"), False), (KeyError("nodes"), True)]
)
def test_a_failed_load_names_the_store_whatever_function_failed(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cause: BaseException,
    logged: bool,
) -> None:
    """Whatever function inside the load raised, the line names the store and the repair; a
    value llama-index could not parse is foreseen, anything else keeps its traceback."""
    store = tmp_path / "store"

    def load_index(folder: Path, **kwargs: object) -> None:
        raise cause

    monkeypatch.setattr(cli_store, "has_store", lambda folder: True)
    monkeypatch.setattr(maintenance_load, "load_index", load_index)
    line = _line(capsys, ["query", "Who?", "--store", str(store), "--quiet"])
    assert line.startswith(f"e2rag: error: could not load the store {store} (")
    assert f"if it is damaged, run e2rag repair --store {store}" in line
    assert ("(traceback in LOG)" in line) is logged
    assert ("unexpected KeyError" in line) is logged
    assert (tmp_path / "state").exists() is logged


def test_a_damaged_store_line_cut_short_says_the_fix_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s"
    raised: list[BaseException] = []
    monkeypatch.setattr(show, "run", lambda args: (_ for _ in ()).throw(raised[-1]))
    fix = f"; run: e2rag repair --store {store}"
    raised.append(StoreDamagedError(f"graph.sqlite is damaged{fix}"))
    assert _line(capsys, ["show", "--store", str(store)]) == (
        f"e2rag: error: graph.sqlite is damaged{fix}\n"
    )
    raised.append(StoreDamagedError(f"{'x' * 400}.npy does not match its checksum{fix}"))
    line = _line(capsys, ["show", "--store", str(store)])
    assert line.endswith(f"… (or run e2rag repair --store {store})\n")
