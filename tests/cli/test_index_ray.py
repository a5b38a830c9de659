"""``e2rag index --ray``: the same store as a build in one process, and one line naming the extra
(nothing written) when Ray is not installed."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from extract.test_chrono import HARBOUR, MOUNTAIN
from scripted_llm import ScriptedLLM

from llama_index_e2rag.cli.entry import main
from llama_index_e2rag.cli.store import load_store

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    harbour, mountain = tmp_path / "harbour.txt", tmp_path / "mountain.txt"
    harbour.write_text(HARBOUR, encoding="utf-8")
    mountain.write_text(MOUNTAIN, encoding="utf-8")
    return [str(harbour), str(mountain)]


@pytest.fixture
def ray_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The workers of the cluster ``--ray local`` starts import the tests' helpers (the
    scripted LLM) from the environment the command runs in; the cluster ends with the test."""
    import ray

    path = os.pathsep.join([str(TESTS.parent), str(TESTS), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)
    yield
    ray.shutdown()


def test_a_ray_build_writes_the_store_a_single_process_build_writes(
    llm: ScriptedLLM, files: list[str], tmp_path: Path, ray_cluster: None, capsys
) -> None:
    args = ["--chunk-size", "40", "--chrono", "--quiet"]
    single, on_ray = tmp_path / "single", tmp_path / "ray"
    assert main(["index", *files, "--store", str(single), *args]) == 0
    assert main(
        ["index", *files, "--store", str(on_ray), *args, "--ray", "local", "--ray-workers", "2"]
    ) == 0
    # the summary lines (llama-index's splitter also prints warnings about tiny chunks)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("indexed")]
    assert lines[1].replace(str(on_ray), "STORE") == lines[0].replace(str(single), "STORE")
    assert "failed" not in lines[0]
    want, got = load_store(single), load_store(on_ray)
    nodes = {n.id: (n.text, n.attrs) for n in want.graph_store.nodes()}
    assert {n.id: (n.text, n.attrs) for n in got.graph_store.nodes()} == nodes
    edge = lambda e: (e.source, e.target, e.kind, e.key)  # noqa: E731
    assert {edge(e) for e in got.graph_store.edges()} == {edge(e) for e in want.graph_store.edges()}
    vectors, expected = got.stores.embeddings(list(nodes)), want.stores.embeddings(list(nodes))
    assert vectors.keys() == expected.keys() and vectors
    assert all(np.allclose(vectors[i], expected[i], atol=1e-5) for i in expected)


def test_without_ray_one_line_names_the_extra_and_nothing_is_written(
    files: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails as if not installed
    store = tmp_path / "store"
    assert main(["index", *files, "--store", str(store), "--ray", "auto"]) == 1
    assert capsys.readouterr().err == (
        "e2rag: error: building on Ray needs Ray: pip install 'llama-index-e2rag[ray]'\n"
    )
    assert not store.exists()


def test_ray_workers_without_ray_is_refused(files: list[str], tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    assert main(["index", *files, "--store", str(store), "--ray-workers", "2"]) != 0
    assert "--ray-workers needs --ray" in capsys.readouterr().err
    assert not store.exists()
