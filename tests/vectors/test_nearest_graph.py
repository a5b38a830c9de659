"""``vectors.nearest_graph``: a saved graph updated by inserts and deletes finds what a graph
built afresh finds, never a removed row, and is built again when damaged or too dead."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from llama_index_e2rag.disk.array_files import map_rows
from llama_index_e2rag.vectors import nearest, nearest_graph
from llama_index_e2rag.vectors.nearest_graph import open_nearest

from resident import HAS_SMAPS, resident_kb

DIM = 16
THRESHOLD = 200


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = rng.standard_normal((n, DIM))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the graphs built from scratch, past a small threshold."""
    monkeypatch.setattr(nearest, "ANN_MIN_ROWS", THRESHOLD)
    built: list[int] = []
    real = nearest_graph.build_graph
    monkeypatch.setattr(nearest_graph, "build_graph", lambda m: built.append(len(m)) or real(m))
    return built


def found_ids(matrix: np.ndarray, ids: list[str], path, queries, k=10) -> list[list[tuple]]:
    search = open_nearest(matrix, ids, path)
    assert search.approximate
    return [[(ids[r], s) for r, s in hits] for hits in search.top(queries, k, ties=ids)]


class Story:
    """Rows by id, changed by random deletes, inserts and re-embeddings."""

    def __init__(self, rng: np.random.Generator, n: int) -> None:
        self.rng, self.serial = rng, n
        self.rows = dict(zip((f"id-{i}" for i in range(n)), unit_rows(rng, n)))

    def matrix(self) -> tuple[np.ndarray, list[str]]:
        ids = sorted(self.rows)  # another order each time rows come and go
        return np.stack([self.rows[i] for i in ids]), ids

    def change(self, deletes: int, inserts: int) -> list[tuple[str, np.ndarray]]:
        """Delete, insert and re-embed rows; returns the (id, vector) pairs gone."""
        gone = [str(i) for i in self.rng.choice(sorted(self.rows), deletes, replace=False)]
        removed = [(i, self.rows.pop(i)) for i in gone]
        new = unit_rows(self.rng, inserts + 1)
        for vector in new[:-1]:
            self.rows[f"id-{self.serial}"] = vector
            self.serial += 1
        kept = str(self.rng.choice(sorted(self.rows)))
        removed.append((kept, self.rows[kept]))
        self.rows[kept] = new[-1]  # the same id, another vector: its old vector is gone
        return removed


def saved_story(seed: int, n: int, path: Path) -> tuple[Story, np.random.Generator]:
    """A story of ``n`` rows whose graph is built and saved at ``path``."""
    rng = np.random.default_rng(seed)
    story = Story(rng, n)
    found_ids(*story.matrix(), path, unit_rows(rng, 1))
    return story, rng


def test_an_updated_graph_finds_what_a_fresh_graph_finds_and_no_removed_row(
    builds: list[int], tmp_path: Path
) -> None:
    path = tmp_path / "kind.hnsw"
    story, rng = saved_story(11, 600, path)
    assert builds == [600]
    for _ in range(4):  # ~9 % dead at the end: updated every time
        removed = story.change(deletes=12, inserts=15)
        matrix, ids = story.matrix()
        queries = np.concatenate([unit_rows(rng, 8), np.stack([v for _, v in removed])])
        updated = found_ids(matrix, ids, path, queries)
        assert found_ids(matrix, ids, None, queries) == updated  # a graph built afresh
        assert all(len(hits) == 10 for hits in updated)
        deleted = {gone for gone, _ in removed[:-1]}
        assert not deleted & {i for hits in updated for i, _ in hits}
        re_embedded = removed[-1][0]  # its old vector finds it no more, its new one does
        assert updated[-1][0][0] != re_embedded
        assert found_ids(matrix, ids, path, [story.rows[re_embedded]])[0][0][0] == re_embedded
    assert builds == [600, 603, 606, 609, 612]  # the fresh graphs of the comparisons only
    assert found_ids(matrix, ids, path, queries) == updated  # read back as saved


def test_past_the_dead_share_the_graph_is_built_again(
    builds: list[int], tmp_path: Path
) -> None:
    path = tmp_path / "kind.hnsw"
    story, rng = saved_story(12, 500, path)
    story.change(deletes=60, inserts=0)  # 61 of 500 nodes dead: 12 %
    found_ids(*story.matrix(), path, unit_rows(rng, 1))
    assert builds == [500]
    story.change(deletes=60, inserts=0)  # 122 of 500: 24 %
    matrix, ids = story.matrix()
    found_ids(matrix, ids, path, unit_rows(rng, 1))
    assert builds == [500, len(ids)]


def test_a_damaged_or_unmatched_file_is_built_again(
    builds: list[int], tmp_path: Path
) -> None:
    rng = np.random.default_rng(13)
    story, path = Story(rng, 400), tmp_path / "kind.hnsw"
    matrix, ids = story.matrix()
    queries = unit_rows(rng, 4)
    first = found_ids(matrix, ids, path, queries)
    head = path.with_name(path.name + ".json")
    old_head = head.read_text()

    data = bytearray(path.read_bytes())  # damaged after it was saved
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert found_ids(matrix, ids, path, queries) == first
    assert builds == [400, 400]

    story.change(deletes=5, inserts=5)
    found_ids(*story.matrix(), path, queries)  # updated and saved again
    head.write_text(old_head)  # a crash between the graph file and its head
    assert found_ids(matrix, ids, path, queries) == first
    assert builds == [400, 400, 400]

    head.write_text("{not json")
    assert found_ids(matrix, ids, path, queries) == first
    assert len(builds) == 4


def test_a_folder_that_cannot_be_written_only_costs_the_build(
    builds: list[int], tmp_path: Path
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    story = Story(np.random.default_rng(14), 300)
    matrix, ids = story.matrix()
    assert found_ids(matrix, ids, blocked / "m.hnsw", matrix[:1], k=1)[0][0][0] == ids[0]
    assert builds == [300]


@pytest.mark.skipif(not HAS_SMAPS, reason="reads Linux's smaps")
def test_a_graph_built_by_blocks_over_a_mapped_matrix_keeps_none_of_its_pages(
    builds: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph of a memory-mapped matrix is built ``ADD_ROWS`` rows at a time, each block's
    file pages let go; it finds the exact search's rows, and the same graph every time."""
    monkeypatch.setattr(nearest_graph, "ADD_ROWS", 128)
    rng = np.random.default_rng(15)
    rows, path = unit_rows(rng, 1500), tmp_path / "matrix.f32"
    rows.astype("<f4").tofile(path)
    with open(path, "rb") as f:
        mapped = map_rows(f, "<f4", rows.shape)
    ids = [f"id-{i}" for i in range(len(rows))]
    queries = unit_rows(rng, 20)
    search = open_nearest(mapped, ids, tmp_path / "a.hnsw")
    assert search.approximate
    assert resident_kb(path) <= 128 * DIM * 4 // 1024 + 4  # a block's pages at most
    first = [[(ids[r], s) for r, s in hits] for hits in search.top(queries, 10, ties=ids)]
    exact = nearest.NearestRows(rows).top(queries, 10, ties=ids)
    assert first == [[(ids[r], s) for r, s in hits] for hits in exact]
    assert found_ids(mapped, ids, tmp_path / "b.hnsw", queries) == first
    assert builds == [1500, 1500]
