"""The rules of ``EmbeddedVectors``: exact search, replace, delete, crash-safe incremental saves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from llama_index_e2rag.errors import VectorStoreError
from llama_index_e2rag.vectors import embedded
from llama_index_e2rag.vectors.base import VectorRecord, VectorStorage
from llama_index_e2rag.vectors.embedded import MANIFEST, PREFIX, EmbeddedVectors

REPO = Path(__file__).resolve().parents[2]
DIM = 16
KINDS = ("mention", "event", "passage")


def records(rng, n, start=0, doc_count=5, dim=DIM, kinds=KINDS):
    return [VectorRecord(f"n{i:05d}", kinds[i % len(kinds)], f"d{i % doc_count}", f"text {i}",
                         rng.standard_normal(dim).astype(np.float32))
            for i in range(start, start + n)]


def brute_force(live: dict[str, VectorRecord], kind, query, top_k):
    """Reference ranking: float64 cosine over every live record of ``kind``, ties by id."""
    q = np.asarray(query, np.float64) / np.linalg.norm(query)
    scored = []
    for r in live.values():
        if r.kind == kind:
            v = np.asarray(r.vector, np.float32).astype(np.float64)
            scored.append((-float(v @ q) / np.linalg.norm(v), r.id))
    return [(id_, -neg) for neg, id_ in sorted(scored)[:top_k]]


def assert_matches_brute_force(store, live, rng, top_ks=(1, 5, 40, 1000)):
    for kind in KINDS:
        for top_k in top_ks:
            query = rng.standard_normal(DIM)
            got = [(h.id, h.score) for h in store.search(kind, query, top_k)]
            expected = brute_force(live, kind, query, top_k)
            assert [i for i, _ in got] == [i for i, _ in expected]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], atol=1e-6)


def snapshot(store, rng_seed=7):
    """Search results and embeddings to compare exactly across processes or layouts."""
    rng = np.random.default_rng(rng_seed)
    hits = {kind: [[(h.id, h.score) for h in store.search(kind, rng.standard_normal(DIM), 25)]
                   for _ in range(5)] for kind in KINDS}
    ids = sorted(i for kind in KINDS for i in store.kind_matrix(kind)[0])
    vectors = store.get_embeddings(ids)
    return hits, {i: vectors[i].tolist() for i in ids}


def folder_files(folder: Path) -> dict[str, tuple[int, int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ino)
            for p in folder.iterdir()}


def referenced_files(folder: Path) -> set[str]:
    manifest = json.loads((folder / MANIFEST).read_text())
    names = {f"{e['name']}{ext}" for e in manifest["segments"] for ext in (".npy", ".json")}
    return names | {e["dead"] for e in manifest["segments"] if e["dead"]} | {MANIFEST}


def run_python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_is_a_vector_storage():
    assert isinstance(EmbeddedVectors(), VectorStorage)


def test_search_equals_brute_force_across_segments_replacements_and_deletions(tmp_path):
    rng = np.random.default_rng(1)
    store, live = EmbeddedVectors(), {}
    for batch in range(4):  # four batches, persisted in between: several segments per kind
        new = records(rng, 150, start=batch * 100)  # overlaps the previous batch: replacements
        store.add(new)
        live.update((r.id, r) for r in new)
        store.persist(tmp_path)
    store.delete_doc("d3")
    live = {i: r for i, r in live.items() if r.doc_id != "d3"}
    tail = records(rng, 30, start=1000)  # an unsaved tail on top of mapped segments
    moved = [VectorRecord(i, "passage", "d9", "", rng.standard_normal(DIM))
             for i in sorted(live)[:10]]  # known ids re-added with new vectors and kind
    for new in (tail, moved):
        store.add(new)
        live.update((r.id, r) for r in new)
    assert store.count() == len(live)
    assert_matches_brute_force(store, live, rng)


def test_ties_are_broken_by_id():
    store = EmbeddedVectors()
    v = np.ones(DIM, np.float32)
    store.add([VectorRecord(i, "mention", "d", "", v) for i in ("c", "a", "b")])
    store.add([VectorRecord("z", "mention", "d", "", -v)])
    assert [h.id for h in store.search("mention", v, 3)] == ["a", "b", "c"]
    assert [h.id for h in store.search("mention", v, 10)] == ["a", "b", "c", "z"]
    assert store.search("mention", v, 1)[0].score == pytest.approx(1.0)


def test_re_adding_an_id_replaces_it():
    rng = np.random.default_rng(2)
    store = EmbeddedVectors()
    old = VectorRecord("x", "mention", "d1", "", rng.standard_normal(DIM))
    new = VectorRecord("x", "event", "d2", "", rng.standard_normal(DIM) * 3)
    store.add([old, VectorRecord("y", "mention", "d1", "", rng.standard_normal(DIM))])
    store.add([new])
    assert store.count() == 2 and store.count("event") == 1 and store.count("mention") == 1
    assert [h.id for h in store.search("mention", old.vector, 5)] == ["y"]
    np.testing.assert_allclose(store.get_embeddings(["x"])["x"],
                               new.vector / np.linalg.norm(new.vector), rtol=1e-6)
    store.delete_doc("d1")  # x moved to d2: deleting its old document leaves it
    assert store.count() == 1 and list(store.get_embeddings(["x", "y"])) == ["x"]
    store.add([new, old])  # a repeated id within one add: one row, the last wins
    assert store.count() == store.count("mention") == 1


def test_delete_doc_and_delete_ids():
    rng = np.random.default_rng(3)
    EmbeddedVectors().delete_doc("nothing")  # before any add: a no-op
    store = EmbeddedVectors()
    all_records = records(rng, 60, doc_count=3)
    store.add(all_records)
    store.delete_doc("d1")
    store.delete_doc("unknown")
    store.delete_ids(["n00000", "missing"])
    left = {r.id for r in all_records if r.doc_id != "d1"} - {"n00000"}
    assert store.count() == len(left)
    assert set(store.get_embeddings([r.id for r in all_records])) == left
    assert {i for kind in KINDS for i in store.kind_matrix(kind)[0]} == left
    for kind in KINDS:
        assert {h.id for h in store.search(kind, rng.standard_normal(DIM), 100)} <= left


def test_get_embeddings_and_kind_matrix_are_unit_float32_and_agree():
    rng = np.random.default_rng(4)
    store = EmbeddedVectors()
    recs = records(rng, 50)
    store.add(recs)
    got = store.get_embeddings([r.id for r in recs] + ["unknown"])
    assert len(got) == 50 and all(v.dtype == np.float32 for v in got.values())
    for r in recs:
        np.testing.assert_allclose(got[r.id], r.vector / np.linalg.norm(r.vector), rtol=1e-6)
    ids, matrix = store.kind_matrix("event")
    assert ids == [r.id for r in recs if r.kind == "event"]
    assert matrix.dtype == np.float32 and not matrix.flags.writeable
    np.testing.assert_array_equal(matrix, np.stack([got[i] for i in ids]))


def test_matrix_of_aligns_rows_across_segments_with_zeros_for_unknown_ids(tmp_path):
    """The vectorised matrix: the same rows as ``get_embeddings`` in the order asked, an id
    asked twice twice, a replaced or deleted id as it is now, and no column when none is known."""
    rng = np.random.default_rng(9)
    store = EmbeddedVectors()
    store.add(records(rng, 60))
    store.persist(tmp_path)
    store.add(records(rng, 20, start=50))  # a second segment, replacing ten ids of the first
    store.delete_doc("d1")
    ids = ["n00055", "unknown", "n00003", "n00001", "n00003", "n00079", "n00012"]
    got = store.get_embeddings(ids)
    matrix = store.matrix_of(ids)
    assert "n00001" not in got and matrix.shape == (len(ids), DIM)
    for row, id_ in zip(matrix, ids):
        np.testing.assert_array_equal(row, got.get(id_, np.zeros(DIM, np.float32)))
    assert store.matrix_of(["unknown", "n00001"]).shape == (2, 0)


def test_persist_then_open_in_a_new_process_gives_identical_results(tmp_path):
    rng = np.random.default_rng(5)
    store = EmbeddedVectors()
    store.add(records(rng, 300))
    store.persist(tmp_path)
    store.add(records(rng, 40, start=280))  # replacements + additions, second segment
    store.delete_doc("d2")
    store.persist(tmp_path)
    expected = snapshot(store)
    out = run_python(
        "import json, sys; sys.path.insert(0, 'tests/vectors'); from pathlib import Path\n"
        "from test_embedded import snapshot\n"
        "from llama_index_e2rag.vectors.embedded import EmbeddedVectors\n"
        f"store = EmbeddedVectors.open(Path({str(tmp_path)!r}))\n"
        "print(json.dumps([snapshot(store), store.count(), store.dim]))")
    (hits, vectors), count, dim = json.loads(out)
    assert count == store.count() and dim == DIM
    assert {k: [[tuple(h) for h in q] for q in v] for k, v in hits.items()} == expected[0]
    assert vectors == expected[1]


def test_incremental_persist_writes_only_the_change(tmp_path):
    rng = np.random.default_rng(6)
    store = EmbeddedVectors()
    everything = records(rng, 3000, doc_count=10) + records(rng, 20, 5000, 10, kinds=("event",))
    store.add(everything[:3000])
    store.persist(tmp_path)
    first = folder_files(tmp_path)
    store = EmbeddedVectors.open(tmp_path)
    store.add(everything[3000:])
    store.persist(tmp_path)
    second = folder_files(tmp_path)
    new = {name for name in second if name not in first or second[name] != first[name]}
    assert all(first[name] == second[name] for name in first if name.startswith(PREFIX))
    new_npy = [name for name in new if name.endswith(".npy")]
    assert len(new_npy) == 1 and second[new_npy[0]][0] == 128 + 20 * DIM * 4
    assert new - {MANIFEST} == {new_npy[0], new_npy[0][:-4] + ".json"}
    store.delete_doc("d1")  # 10% of rows spread over all segments: only tombstone files
    store.delete_ids(["n05000"])
    store.persist(tmp_path)
    third = folder_files(tmp_path)
    new = {name for name in third if name not in second or third[name] != second[name]}
    assert all(second[name] == third[name] for name in second if name.startswith(PREFIX))
    assert new - {MANIFEST} and all(name.endswith(".dead.npy") for name in new - {MANIFEST})
    assert sum(third[name][0] for name in new - {MANIFEST}) < 4000
    assert set(third) == referenced_files(tmp_path)
    left = [r for r in everything if r.doc_id != "d1" and r.id != "n05000"]
    assert EmbeddedVectors.open(tmp_path).count() == store.count() == len(left) == 3020 - 302 - 1


def test_persist_to_another_folder_writes_a_full_copy(tmp_path):
    rng = np.random.default_rng(7)
    store = EmbeddedVectors()
    store.add(records(rng, 200))
    store.persist(tmp_path / "a")
    store.add(records(rng, 10, start=500))
    store.persist(tmp_path / "b")
    assert EmbeddedVectors.open(tmp_path / "a").count() == 200
    copy = EmbeddedVectors.open(tmp_path / "b")
    assert copy.count() == 210 and snapshot(copy) == snapshot(store)
    assert len(json.loads((tmp_path / "b" / MANIFEST).read_text())["segments"]) == len(KINDS)


def test_a_crash_before_the_manifest_switch_leaves_the_previous_state(tmp_path, monkeypatch):
    rng = np.random.default_rng(8)
    store = EmbeddedVectors()
    store.add(records(rng, 200))
    store.persist(tmp_path)
    before = snapshot(EmbeddedVectors.open(tmp_path))
    store.add(records(rng, 50, start=150))
    store.delete_doc("d4")

    def crash(*args):
        raise OSError("simulated crash")

    monkeypatch.setattr(embedded.os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        store.persist(tmp_path)
    assert snapshot(EmbeddedVectors.open(tmp_path)) == before
    monkeypatch.undo()
    after = snapshot(store)  # the failed persist changed nothing in memory
    store.persist(tmp_path)
    assert snapshot(EmbeddedVectors.open(tmp_path)) == after
    assert set(os.listdir(tmp_path)) == referenced_files(tmp_path)  # orphans collected


def test_killing_the_process_at_any_moment_leaves_a_whole_state(tmp_path):
    """A child persists batch after batch; SIGKILL lands at random moments; every survivor opens
    to a state with a whole number of batches."""
    child = (
        "import sys, numpy as np; from pathlib import Path\n"
        "from llama_index_e2rag.vectors.base import VectorRecord\n"
        "from llama_index_e2rag.vectors.embedded import EmbeddedVectors\n"
        f"folder = Path({str(tmp_path)!r})\n"
        "store = EmbeddedVectors.open(folder)\n"
        "rng = np.random.default_rng()\n"
        "print('ready', flush=True)\n"
        "for b in range(store.count() // 100, 10**6):\n"
        "    store.add([VectorRecord(f'b{b}-{i}', 'mention', f'd{b}', '', rng.standard_normal(64))"
        " for i in range(100)])\n"
        "    if b % 3 == 2: store.delete_doc(f'd{b - 1}'); store.add([VectorRecord(f'b{b - 1}-{i}',"
        " 'mention', f'd{b - 1}', '', rng.standard_normal(64)) for i in range(100)])\n"
        "    store.persist(folder)\n")
    rng = np.random.default_rng(9)
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", child], cwd=REPO, stdout=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.05, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        store = EmbeddedVectors.open(tmp_path)
        ids, matrix = store.kind_matrix("mention")
        assert store.count() % 100 == 0 and len(set(ids)) == matrix.shape[0] == store.count()
        for row in range(0, len(ids), 97):
            assert store.search("mention", matrix[row], 1)[0].id == ids[row]
    assert store.count() > 0


def test_compaction_keeps_results_identical(tmp_path, monkeypatch):
    rng = np.random.default_rng(10)
    store = EmbeddedVectors()
    live = {}
    for batch in range(12):  # many small persists: trailing segments merge, counts stay small
        new = records(rng, 30, start=batch * 30, doc_count=10)
        store.add(new)
        live.update((r.id, r) for r in new)
        store.persist(tmp_path)
        segments = json.loads((tmp_path / MANIFEST).read_text())["segments"]
        assert sum(e["kind"] == "mention" for e in segments) <= 4
    before = snapshot(store)
    store.delete_doc("d0")  # 10%: tombstones only
    store.persist(tmp_path)
    assert any(e["dead"] for e in json.loads((tmp_path / MANIFEST).read_text())["segments"])
    live = {i: r for i, r in live.items() if r.doc_id != "d0"}
    for doc in ("d1", "d2"):  # past 20% deleted: every kind becomes one clean segment
        store.delete_doc(doc)
        live = {i: r for i, r in live.items() if r.doc_id != doc}
    tombstoned = snapshot(store)
    store.persist(tmp_path)
    segments = json.loads((tmp_path / MANIFEST).read_text())["segments"]
    assert sorted(e["kind"] for e in segments) == sorted(KINDS)
    assert not any(e["dead"] for e in segments) and sum(e["rows"] for e in segments) == len(live)
    assert snapshot(store) == tombstoned == snapshot(EmbeddedVectors.open(tmp_path))
    assert tombstoned != before
    assert set(os.listdir(tmp_path)) == referenced_files(tmp_path)
    assert_matches_brute_force(EmbeddedVectors.open(tmp_path), live, rng)


def test_dimension_mismatches_raise_and_change_nothing():
    rng = np.random.default_rng(11)
    store = EmbeddedVectors()
    store.add(records(rng, 10))
    with pytest.raises(VectorStoreError, match="dimension 8 does not match this storage's 16"):
        store.add(records(rng, 3, start=100, dim=8))
    with pytest.raises(VectorStoreError, match="differ in dimension"):
        store.add(records(rng, 2, start=200) + records(rng, 2, start=300, dim=8))
    with pytest.raises(VectorStoreError, match="dimension 16"):
        store.search("mention", np.ones(8), 3)
    with pytest.raises(VectorStoreError, match="finite"):
        store.add([VectorRecord("nan", "mention", "d", "", np.full(DIM, np.nan))])
    assert store.count() == 10 and store.dim == DIM
    store.check_dim(DIM)
    with pytest.raises(VectorStoreError, match="16-d vectors but the embedding model gives 8-d"):
        store.check_dim(8)
    EmbeddedVectors().check_dim(8)  # empty: any dimension may come


def test_empty_storage(tmp_path):
    for store in (EmbeddedVectors(), EmbeddedVectors.open(tmp_path / "missing")):
        assert store.dim is None and store.count() == 0 and store.count("mention") == 0
        assert store.search("mention", np.ones(DIM), 5) == []
        assert store.get_embeddings(["a"]) == {}
        ids, matrix = store.kind_matrix("mention")
        assert ids == [] and matrix.shape == (0, 0)
        store.delete_doc("d")
        store.check()
    assert not (tmp_path / "missing").exists()
    store = EmbeddedVectors()
    store.add(records(np.random.default_rng(12), 4, dim=8))
    assert store.dim == 8 and store.search("mention", np.ones(8), 0) == []
    for doc in ("d0", "d1", "d2", "d3"):
        store.delete_doc(doc)
    assert store.dim is None and store.count() == 0  # emptied: any dimension may come next
    store.add(records(np.random.default_rng(13), 2))
    assert store.dim == DIM
    store.delete_ids(["n00000", "n00001"])
    store.persist(tmp_path / "empty")
    reopened = EmbeddedVectors.open(tmp_path / "empty")
    assert reopened.dim is None and reopened.count() == 0
    assert os.listdir(tmp_path / "empty") == [MANIFEST]


def test_newer_or_foreign_manifests_are_refused(tmp_path):
    store = EmbeddedVectors()
    store.add(records(np.random.default_rng(14), 5))
    store.persist(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    (tmp_path / MANIFEST).write_text(json.dumps({**manifest, "version": 99}))
    with pytest.raises(VectorStoreError, match="version 99, newer than 1: upgrade"):
        EmbeddedVectors.open(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({**manifest, "format": "other"}))
    with pytest.raises(VectorStoreError, match="not an e2rag-vectors manifest"):
        EmbeddedVectors.open(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    next(tmp_path.glob(f"{PREFIX}*.npy")).write_bytes(b"truncated")
    with pytest.raises(VectorStoreError, match="damaged"):
        EmbeddedVectors.open(tmp_path)


def test_readers_never_see_half_an_add():
    """Every add replaces the same 50 ids with one new vector; a reader must always see 50 equal
    rows (all from one add), never a mix of two adds or the gap between removing and adding."""
    store, stop, failures = EmbeddedVectors(), threading.Event(), []
    basis = np.eye(8, dtype=np.float32)

    def add(b):
        store.add([VectorRecord(f"x{i}", "mention", "d", "", basis[b % 8]) for i in range(50)])
        store.add([VectorRecord(f"y{b}", "event", "d", "", basis[0])])  # grows another kind

    def read():
        while not stop.is_set():
            ids, matrix = store.kind_matrix("mention")
            hits = store.search("mention", basis[1], 100)
            if len(ids) != 50 or len(hits) != 50 or not (matrix == matrix[0]).all():
                failures.append((len(ids), len(hits)))

    add(0)
    readers = [threading.Thread(target=read) for _ in range(3)]
    for thread in readers:
        thread.start()
    for b in range(1, 400):
        add(b)
    stop.set()
    for thread in readers:
        thread.join()
    assert not failures
    assert store.count("event") == 400 and store.count("mention") == 50


def test_release_maps_the_saved_files_again_and_changes_no_result(tmp_path):
    """``release`` swaps each saved segment's mapping for a new one of the same file (the
    pages reads brought in leave the process); an unsaved segment keeps its rows."""
    rng = np.random.default_rng(22)
    store = EmbeddedVectors()
    store.add(records(rng, 300))
    store.persist(tmp_path)
    store.add(records(rng, 5, start=1000))
    before, saved = snapshot(store), {}
    for kind in KINDS:
        for seg in store._kinds[kind]:
            saved[seg] = seg.vectors
    store.release()
    for seg, vectors in saved.items():
        assert (seg.vectors is vectors) == (seg.name is None)
        assert np.array_equal(seg.vectors, vectors)
    assert any(seg.name is None for seg in saved) and any(seg.name for seg in saved)
    assert snapshot(store) == before
    EmbeddedVectors().release()  # nothing saved: nothing to do
