"""Scratch folders: a killed owner's folder is swept by the next one made, a live owner's never,
and a folder this module did not make is never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from llama_index_e2rag.disk import scratch
from llama_index_e2rag.disk.scratch import make_scratch_dir, remove_scratch_dir
from llama_index_e2rag.graph.sqlite_store import SQLiteGraphStore

pytestmark = pytest.mark.skipif(scratch.fcntl is None, reason="no flock on this system")

#: A child that makes a scratch folder (directly, or as a temporary SQLite graph with a row in
#: it), prints its path and waits to be killed.
_OWNER = """
import sys, time
from llama_index_e2rag.disk.scratch import make_scratch_dir
if sys.argv[1] == "graph":
    from llama_index_e2rag.graph.sqlite_store import SQLiteGraphStore
    from llama_index_e2rag.schema import GraphNode, NodeKind
    graph = SQLiteGraphStore()
    graph.upsert_nodes([GraphNode(id="n", kind=NodeKind.CHUNK, doc_id="d", text="t", pos=(0, 0, 0))])
    print(graph._temp_dir, flush=True)
else:
    print(make_scratch_dir(sys.argv[1])[0], flush=True)
time.sleep(120)
"""


@pytest.fixture()
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _owner(tmp_root: Path, what: str) -> tuple[subprocess.Popen[str], Path]:
    env = {**os.environ, "TMPDIR": str(tmp_root)}
    child = subprocess.Popen(
        [sys.executable, "-c", _OWNER, what], stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    return child, Path(child.stdout.readline().strip())


def _kill(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait()


def test_a_killed_owners_folder_is_swept_and_a_live_ones_kept(tmp_root: Path) -> None:
    dead, dead_dir = _owner(tmp_root, "e2rag-t-")
    live, live_dir = _owner(tmp_root, "e2rag-t-")
    try:
        _kill(dead)
        assert dead_dir.is_dir() and live_dir.is_dir()
        mine, lock = make_scratch_dir("e2rag-t-")
        assert not dead_dir.exists()
        assert live_dir.is_dir() and Path(mine).is_dir()
        remove_scratch_dir(mine, lock)
        assert not Path(mine).exists()
    finally:
        _kill(live)
    assert scratch.sweep_stale("e2rag-t-") == [str(live_dir)]


def test_folders_not_made_here_are_never_swept(tmp_root: Path) -> None:
    foreign = tmp_root / "e2rag-t-foreign"  # same prefix, no lock file: another version's
    foreign.mkdir()
    (foreign / "graph.sqlite").write_text("theirs")
    other, other_dir = _owner(tmp_root, "other-")
    _kill(other)
    make_scratch_dir("e2rag-t-")
    assert (foreign / "graph.sqlite").read_text() == "theirs"
    assert other_dir.is_dir()  # another prefix: not this sweep's


def test_a_killed_builds_staging_graph_is_swept_by_the_next_one(tmp_root: Path) -> None:
    child, staged = _owner(tmp_root, "graph")
    _kill(child)
    assert staged.is_dir() and any(staged.iterdir())
    graph = SQLiteGraphStore()
    assert not staged.exists()
    assert graph._temp_dir is not None and Path(graph._temp_dir).is_dir()
    graph.discard()
    assert list(tmp_root.iterdir()) == []
