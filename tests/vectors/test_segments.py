"""The embedded vector storage's segments: a saved one opens only as the files its manifest
checked, an unsaved one is bounded and spilled, a group of them is written as one file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from llama_index_e2rag.disk.array_files import drop_pages
from llama_index_e2rag.vectors import segments
from llama_index_e2rag.vectors.embedded import MANIFEST, EmbeddedVectors
from llama_index_e2rag.vectors.segments import Segment

from resident import HAS_SMAPS, resident_kb
from vectors.test_embedded import KINDS, assert_matches_brute_force, records, snapshot


def test_a_long_add_is_held_in_bounded_segments_and_saved_as_one_file(tmp_path, monkeypatch):
    """An add longer than ``TAIL_ROWS`` goes on in new unsaved segments (no buffer holding the
    whole kind is ever grown and copied), each full one moved to a temporary file, so memory
    holds about one segment per kind; a persist writes them, deletions left out, as one
    file per kind with the bytes ``np.save`` gives their concatenation, a few rows per write
    and without concatenating them; results are those of one segment."""
    monkeypatch.setattr(segments, "TAIL_ROWS", 10)
    monkeypatch.setattr(segments, "WRITE_ROWS", 3)
    rng = np.random.default_rng(21)
    store, live = EmbeddedVectors(), {}
    for start in range(0, 95, 7):  # pages of 7 rows, like a commit's pages of records
        page = records(rng, 7, start=start)
        store.add(page)
        live.update((r.id, r) for r in page)
    store.delete_ids(["n00004", "n00050"])
    for gone in ("n00004", "n00050"):
        live.pop(gone)
    held = [seg for kind in KINDS for seg in store._kinds[kind]]
    assert len(held) > len(KINDS) and all(len(seg.vectors) <= 10 for seg in held)
    full = [seg for seg in held if seg.n == 10]  # moved to temporary files, mapped
    assert full and all(isinstance(seg.vectors, np.memmap) and seg.spill.is_file() for seg in full)
    assert all(seg.spill is None for seg in held if seg.n < 10)
    spilled = [seg.spill for seg in full]
    expected = {kind: np.concatenate([seg.vectors[: seg.n][seg.alive[: seg.n]]
                                      for seg in store._kinds[kind]]) for kind in KINDS}
    assert_matches_brute_force(store, live, rng)
    before = snapshot(store)

    def refuse(*args, **kwargs):
        raise AssertionError("a persist concatenated a kind's rows")

    monkeypatch.setattr(segments.np, "concatenate", refuse)
    store.persist(tmp_path)
    monkeypatch.undo()
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert sorted(e["kind"] for e in manifest["segments"]) == sorted(KINDS)
    for entry in manifest["segments"]:
        saved = tmp_path / f"{entry['name']}.npy"
        np.save(tmp_path / "expected.npy", expected[entry["kind"]])
        assert saved.read_bytes() == (tmp_path / "expected.npy").read_bytes()
    (tmp_path / "expected.npy").unlink()
    assert not any(path.exists() for path in spilled)  # saved: the temporary files are gone
    assert snapshot(store) == before == snapshot(EmbeddedVectors.open(tmp_path))
    assert_matches_brute_force(EmbeddedVectors.open(tmp_path), live, rng)


def _saved_entry(tmp_path):
    """A persisted folder whose one mention segment has deleted rows: its manifest entry."""
    store = EmbeddedVectors()
    store.add(records(np.random.default_rng(30), 90))
    store.persist(tmp_path)
    store.delete_ids(["n00000", "n00003"])
    store.persist(tmp_path)
    entries = json.loads((tmp_path / MANIFEST).read_text())["segments"]
    entry = next(e for e in entries if e["kind"] == "mention")
    assert entry["dead"] and set(entry["crc"]) == {"npy", "json", "dead"}
    return store, entry


def _rows(seg: Segment) -> tuple[list[str], list[list[float]]]:
    live = np.flatnonzero(seg.alive[: seg.n])
    return [seg.ids[r] for r in live], np.asarray(seg.vectors)[live].tolist()


@pytest.mark.parametrize("part", ["npy", "json", "dead"])
def test_a_saved_segment_opens_only_as_the_files_its_manifest_checked(tmp_path, part):
    store, entry = _saved_entry(tmp_path)
    seg = Segment.open(tmp_path, entry, store.dim)
    assert isinstance(seg.vectors, np.memmap) and seg.live() == seg.n - 2
    expected = _rows(seg)
    path = tmp_path / (entry["dead"] if part == "dead" else f"{entry['name']}.{part}")
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ValueError, match=f"{path.name} does not match its checksum"):
        Segment.open(tmp_path, entry, store.dim)
    path.write_bytes(data[:-1])
    with pytest.raises(ValueError, match=f"{path.name} does not match its checksum"):
        Segment.open(tmp_path, entry, store.dim)
    path.unlink()
    with pytest.raises(ValueError, match=f"{path.name} is missing"):
        Segment.open(tmp_path, entry, store.dim)
    path.write_bytes(data)  # as saved; and a folder saved before checksums opens unchecked
    assert _rows(Segment.open(tmp_path, {**entry, "crc": None}, store.dim)) == expected
    with pytest.raises(ValueError, match="does not have 30 rows"):
        Segment.open(tmp_path, entry, store.dim + 1)


def test_a_segment_maps_the_very_file_it_checked(tmp_path, monkeypatch):
    """A save of another process renaming a new file over the path between the check and the
    mapping changes nothing: the rows are those of the file checked."""
    store, entry = _saved_entry(tmp_path)
    path = tmp_path / f"{entry['name']}.npy"
    expected = _rows(Segment.open(tmp_path, entry, store.dim))
    other = tmp_path / "other.npy"
    np.save(other, np.zeros((30, store.dim), np.float32))
    real = segments.map_npy

    def renamed_meanwhile(f):
        other.replace(path)
        return real(f)

    monkeypatch.setattr(segments, "map_npy", renamed_meanwhile)
    assert _rows(Segment.open(tmp_path, entry, store.dim)) == expected


@pytest.mark.skipif(not HAS_SMAPS, reason="reads Linux's smaps")
def test_copying_a_saved_segment_leaves_none_of_its_pages_in_the_process(tmp_path, monkeypatch):
    """A persist merging a saved segment into a new file reads it through the readers' own
    mapping, which lives on; the pages it read are let go as they are copied (a library's merge
    of its older segments otherwise held them all at once), and the new file has its rows."""
    monkeypatch.setattr(segments, "WRITE_ROWS", 64)
    store = EmbeddedVectors()
    store.add(records(np.random.default_rng(31), 3000, kinds=["sentence"]))
    store.persist(tmp_path)
    (seg,) = store._kinds["sentence"]
    path = tmp_path / f"{seg.name}.npy"
    expected = _rows(seg)[1]
    assert resident_kb(path) >= 3000 * store.dim * 4 // 1024 - 8  # read: its pages are held
    drop_pages(seg.vectors)
    segments.write_rows(tmp_path / "copy.npy", [seg])
    assert resident_kb(path) <= 64 * store.dim * 4 // 1024 + 8  # a write's rows at most
    assert np.load(tmp_path / "copy.npy").tolist() == expected
