"""The light look at a vector folder (``vectors.embedded_survey``): the counts its manifest
records are the live vectors per document and kind, through adds, deletes and compactions;
a file cut short or missing is named, one changed in place at its size is not (the full
check's checksum finds it)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from llama_index_e2rag.vectors.base import VectorRecord
from llama_index_e2rag.vectors.embedded import MANIFEST, EmbeddedVectors
from llama_index_e2rag.vectors.embedded_survey import survey


def _records(rng: random.Random, ids: range) -> list[VectorRecord]:
    return [VectorRecord(f"n{i}", rng.choice(["chunk", "event"]), f"d{rng.randrange(4)}",
                         f"text {i}", [rng.random() + 0.1 for _ in range(8)]) for i in ids]


def test_the_recorded_counts_follow_adds_deletes_and_compactions(tmp_path: Path) -> None:
    rng = random.Random(3)
    folder = tmp_path / "vectors"
    store = EmbeddedVectors()
    live: set[str] = set()
    for step in range(12):
        store.add(_records(rng, range(step * 50, step * 50 + 50)))
        live |= {f"n{i}" for i in range(step * 50, step * 50 + 50)}
        gone = rng.sample(sorted(live), 30)  # past MAX_DEAD_SHARE now and then: compaction
        store.delete_ids(gone)
        live -= set(gone)
        store.persist(folder)
        found = survey(folder)
        assert found.damaged == []
        assert found.doc_counts == EmbeddedVectors.open(folder).doc_counts()
    assert sum(n for kinds in found.doc_counts.values() for n in kinds.values()) == len(live)


def test_sizes_find_a_cut_or_missing_file_and_not_one_changed_in_place(tmp_path: Path) -> None:
    folder = tmp_path / "vectors"
    store = EmbeddedVectors()
    store.add(_records(random.Random(1), range(40)))
    store.persist(folder)
    npy = next(folder.glob("vectors-*.npy"))
    data = bytearray(npy.read_bytes())
    data[-1] ^= 0xFF
    npy.write_bytes(bytes(data))
    assert survey(folder).damaged == []  # same size: left to the checksum
    npy.write_bytes(bytes(data[:-4]))
    assert [d for d in survey(folder).damaged if str(npy) in d and "bytes" in d]
    npy.unlink()
    assert [d for d in survey(folder).damaged if f"{npy} is missing" in d]


def test_a_manifest_without_counts_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "vectors"
    store = EmbeddedVectors()
    store.add(_records(random.Random(2), range(10)))
    store.persist(folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    for entry in manifest["segments"]:
        del entry["docs"]
    (folder / MANIFEST).write_text(json.dumps(manifest))
    assert survey(folder).doc_counts is None
    assert survey(tmp_path / "none").doc_counts == {}  # no folder: no vectors
    (folder / MANIFEST).write_text("{")
    assert survey(folder).damaged
