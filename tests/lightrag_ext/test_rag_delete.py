"""Deletion: a document's mentions, events, edges, vectors and record go with it."""

from __future__ import annotations

import json
from pathlib import Path

from lightrag import QueryParam

from lightrag_ext import E2RAG_MODE, EVENT_CACHE_TYPE, E2LightRAG

from lightrag_story import INSERT_KWARGS, SECOND_STORY, STORY

#: Close to nodes of both documents, so a leftover of the deleted one would show up.
BOTH_STORIES_QUERY = "Hermione Granger broke the rules while Neville Longbottom lost Trevor"


async def _all_layer_node_ids(rag: E2LightRAG) -> set[str]:
    return {n["id"] for n in await rag.event_layer.graph.get_all_nodes()}


async def test_delete_leaves_no_orphans(rag_factory, tmp_path: Path):
    workdir = tmp_path / "rag"
    rag = await rag_factory(E2LightRAG, workdir)
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    await rag.ainsert(SECOND_STORY, ids=["neville"], **INSERT_KWARGS)
    story_ids = set((await rag.event_layer.get_record("story"))["metadata"]["node_ids"])
    neville_ids = set((await rag.event_layer.get_record("neville"))["metadata"]["node_ids"])
    assert await _all_layer_node_ids(rag) == story_ids | neville_ids
    for vdb in (rag.event_layer.mentions_vdb, rag.event_layer.events_vdb):
        assert {h["id"] for h in await vdb.query(BOTH_STORIES_QUERY, top_k=50)} & story_ids

    result = await rag.adelete_by_doc_id("story")
    assert result.status == "success"
    assert await rag.event_layer.get_record("story") is None
    assert await _all_layer_node_ids(rag) == neville_ids
    edges = await rag.event_layer.graph.get_all_edges()
    assert edges and all({e["source"], e["target"]} <= neville_ids for e in edges)
    for vdb in (rag.event_layer.mentions_vdb, rag.event_layer.events_vdb):
        assert await vdb.get_by_ids(sorted(story_ids)) in ([], [None] * len(story_ids))
        hits = await vdb.query(BOTH_STORIES_QUERY, top_k=50)
        assert hits and not {h["id"] for h in hits} & story_ids
    data = await rag.aquery_data(BOTH_STORIES_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert [c["doc_id"] for c in data["data"]["chunks"]] == ["neville"]
    await rag_factory.close(rag)

    # Persisted: a fresh instance on the same working dir sees the same state.
    reopened = await rag_factory(E2LightRAG, workdir)
    assert await _all_layer_node_ids(reopened) == neville_ids
    assert await reopened.event_layer.get_record("story") is None
    assert (await reopened.event_layer.get_record("neville"))["status"] == "processed"


async def test_delete_with_llm_cache_drops_our_cache_entries(rag_factory, tmp_path: Path):
    workdir = tmp_path / "rag"
    rag = await rag_factory(E2LightRAG, workdir)
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    await rag.ainsert(SECOND_STORY, ids=["neville"], **INSERT_KWARGS)
    await rag.adelete_by_doc_id("story", delete_llm_cache=True)
    cache = json.loads((workdir / "kv_store_llm_response_cache.json").read_text())
    ours = [v for v in cache.values() if v["cache_type"] == EVENT_CACHE_TYPE]
    assert [v["chunk_id"] for v in ours] == ["neville-chunk-000"]


async def test_deleting_an_unknown_document_touches_nothing(rag_factory, tmp_path: Path):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(SECOND_STORY, ids=["neville"], **INSERT_KWARGS)
    before = await _all_layer_node_ids(rag)
    result = await rag.adelete_by_doc_id("nope")
    assert result.status == "not_found"
    assert await _all_layer_node_ids(rag) == before
