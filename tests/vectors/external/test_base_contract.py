"""The ``VectorStorage`` contract of ``LlamaIndexVectors`` over every real store (``conftest.SPECS``):
sync, async across event loops, and persist-then-reopen in a new process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from llama_index_e2rag.vectors.base import VectorRecord, VectorStorage

from .conftest import (
    DIM,
    DOCS,
    KINDS,
    Spec,
    assert_ranking,
    brute_force,
    make_queries,
    make_records,
    new_vectors,
    open_spec,
)

REPO = Path(__file__).resolve().parents[3]


def test_sync_contract(opened):
    vectors = new_vectors(opened)
    assert isinstance(vectors, VectorStorage)
    vectors.check()

    # before the first add: deletes are no-ops, reads are empty
    vectors.delete_doc("doc-a")
    vectors.delete_doc("never-seen")
    vectors.delete_ids(["chunk:0", "never-seen"])
    assert vectors.count() == 0
    assert vectors.search("chunk", make_queries()[0], 5) == []
    assert vectors.get_embeddings(["chunk:0"]) == {}

    records = make_records()
    vectors.add(records)
    live = {r.id: r for r in records}
    for kind in KINDS:
        assert vectors.count(kind) == sum(r.kind == kind for r in records)
    assert vectors.count() == len(records)

    # search per kind equals the brute-force cosine ranking
    for q in make_queries():
        for kind in KINDS:
            assert_ranking(vectors.search(kind, q, 5), live, kind, q, 5)
    # top_k larger than the kind: all of that kind, nothing else
    everything = vectors.search("entity", make_queries()[0], 100)
    assert sorted(h.id for h in everything) == sorted(r.id for r in records if r.kind == "entity")
    assert vectors.search("no-such-kind", make_queries()[0], 5) == []

    # get_embeddings round-trip (unit vectors), unknown ids left out
    ids = ["chunk:0", "entity:3", "event:7", "missing:1"]
    got = vectors.get_embeddings(ids)
    if vectors.returns_embeddings:
        assert set(got) == {"chunk:0", "entity:3", "event:7"}
        for gid, vec in got.items():
            want = live[gid].vector / np.linalg.norm(live[gid].vector)
            np.testing.assert_allclose(vec, want, atol=1e-5)
    else:
        assert set(got) <= {"chunk:0", "entity:3", "event:7"}

    # add of a known id replaces it
    q = make_queries()[1]
    moved = VectorRecord("entity:5", "entity", live["entity:5"].doc_id, "moved", q * 3.0)
    vectors.add([moved])
    live["entity:5"] = moved
    assert vectors.count("entity") == sum(r.kind == "entity" for r in live.values())
    top = vectors.search("entity", q, 3)
    assert top[0].id == "entity:5" and top[0].score == pytest.approx(1.0, abs=1e-4)
    assert_ranking(top, live, "entity", q, 3)

    # delete_doc removes exactly that document, whatever characters its id has
    for doc in (DOCS[2], DOCS[0]):
        vectors.delete_doc(doc)
        live = {gid: r for gid, r in live.items() if r.doc_id != doc}
        for kind in KINDS:
            assert vectors.count(kind) == sum(r.kind == kind for r in live.values())
            for q in make_queries():
                assert_ranking(vectors.search(kind, q, 6), live, kind, q, 6)
        assert not set(vectors.get_embeddings([r.id for r in records])) - set(live)
    vectors.delete_doc(DOCS[0])  # again: a no-op
    assert vectors.count() == len(live)

    # delete_ids removes exactly those ids; unknown ids are ignored
    gone = [gid for gid in live if gid.endswith((":1", ":4"))][:4]
    vectors.delete_ids(gone + ["no-such-id"])
    live = {gid: r for gid, r in live.items() if gid not in gone}
    assert vectors.count() == len(live)
    assert not set(vectors.get_embeddings(gone))
    for kind in KINDS:
        assert_ranking(vectors.search(kind, make_queries()[2], 30), live, kind, make_queries()[2], 30)


def test_equal_scores_come_in_id_order(opened):
    """As the embedded vectors: a store's own order of ties (which may change when it is
    reopened) must not leak into results."""
    vectors = new_vectors(opened)
    same = make_queries(seed=8, n=1)[0]
    ids = [f"chunk:t{i}" for i in (5, 2, 9, 0, 7, 3)]
    records = [VectorRecord(i, "chunk", DOCS[0], i, same) for i in ids]
    records += make_records(seed=8, per_kind=4)  # others, scoring lower
    vectors.add(records)
    hits = vectors.search("chunk", same, 6)
    assert [h.id for h in hits] == sorted(ids)
    assert all(h.score == pytest.approx(1.0, abs=1e-4) for h in hits)
    # cut inside the ties: which ones is the store's choice, but they still come in id order
    cut = [h.id for h in vectors.search("chunk", same, 3)]
    assert len(cut) == 3 and set(cut) <= set(ids) and cut == sorted(cut)


def test_async_contract_across_event_loops(opened):
    """aadd/asearch/adelete_doc give the sync results, also when called from several loops."""
    vectors = new_vectors(opened)
    records = make_records(seed=3)
    live = {r.id: r for r in records}

    async def first() -> None:
        await vectors.adelete_doc("doc-a")  # before the first add
        assert await vectors.asearch("chunk", make_queries()[0], 3) == []
        await vectors.aadd(records)
        for q in make_queries():
            for kind in KINDS:
                hits = await vectors.asearch(kind, q, 5)
                assert_ranking(hits, live, kind, q, 5)
                assert hits == vectors.search(kind, q, 5)
        got = await vectors.aget_embeddings(["chunk:1", "event:2"])
        assert set(got) == ({"chunk:1", "event:2"} if vectors.returns_embeddings else set(got))

    async def second() -> None:  # a new loop: loop-bound async clients must still work
        await vectors.adelete_doc(DOCS[1])
        await vectors.adelete_ids(["event:0", "event:1", "no-such-id"])
        kept = {gid: r for gid, r in live.items()
                if r.doc_id != DOCS[1] and gid not in ("event:0", "event:1")}
        for q in make_queries():
            for kind in KINDS:
                assert_ranking(await vectors.asearch(kind, q, 4), kept, kind, q, 4)
        assert vectors.count() == len(kept)

    asyncio.run(first())
    asyncio.run(second())


_CHILD = """
import json, sys
sys.path.insert(0, {repo!r})
import numpy as np
PATH = {path!r}
DIM = {dim}
{code}
from llama_index_e2rag.vectors.external import LlamaIndexVectors
vectors = LlamaIndexVectors(store, dim={dim}, persist_dir={folder!r})
vectors.check()
queries = [np.asarray(q, dtype=np.float32) for q in json.loads({queries!r})]
out = {{kind: [[(h.id, h.score) for h in vectors.search(kind, q, 5)] for q in queries]
        for kind in {kinds!r}}}
out["count"] = vectors.count()
vectors.delete_doc({doc!r})  # writes after the reopen work too
out["count_after_delete"] = vectors.count()
out["after_delete"] = [h.id for h in vectors.search("chunk", queries[0], 100)]
print("RESULT" + json.dumps(out))
close()
"""


def _child_search(spec: Spec, path: Path, folder: Path, queries: list[np.ndarray]) -> dict:
    script = _CHILD.format(
        repo=str(REPO),
        path=str(path),
        code=textwrap.dedent(spec.code),
        dim=DIM,
        folder=str(folder),
        queries=json.dumps([q.tolist() for q in queries]),
        kinds=KINDS,
        doc=DOCS[0],
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


def test_persist_and_reopen_in_new_process(spec: Spec, tmp_path: Path):
    if not spec.file_based:
        pytest.skip(f"{spec.name} keeps nothing on disk")
    ns = open_spec(spec, tmp_path)
    folder = tmp_path / "index"
    try:
        vectors = new_vectors(ns)
        records = make_records(seed=5)
        vectors.add(records)
        vectors.delete_doc(DOCS[1])  # deletions must survive the restart too
        queries = make_queries(seed=21)
        mine = {kind: [[(h.id, h.score) for h in vectors.search(kind, q, 5)] for q in queries]
                for kind in KINDS}
        count = vectors.count()
        vectors.persist(folder)
    finally:
        ns["close"]()  # local Qdrant / Milvus Lite allow one process per path
    theirs = _child_search(spec, tmp_path, folder, queries)
    live = {r.id: r for r in records if r.doc_id != DOCS[1]}
    assert theirs.pop("count") == count == len(live)
    kept = {gid: r for gid, r in live.items() if r.doc_id != DOCS[0]}
    assert theirs.pop("count_after_delete") == len(kept)
    assert sorted(theirs.pop("after_delete")) == sorted(g for g, r in kept.items() if r.kind == "chunk")
    for kind in KINDS:
        for q, mine_hits, their_hits in zip(queries, mine[kind], theirs[kind]):
            assert [h[0] for h in their_hits] == [h[0] for h in mine_hits]
            assert [h[1] for h in their_hits] == pytest.approx([h[1] for h in mine_hits], abs=1e-5)
            assert [h[0] for h in their_hits] == [e[0] for e in brute_force(live, kind, q, 5)]
