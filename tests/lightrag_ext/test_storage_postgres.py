"""The event layer on a real PostgreSQL server (started by the fixture).

LightRAG 1.5.7's PostgreSQL storages: ``PGKVStorage``, ``PGDocStatusStorage`` and
``PGTableGraphStorage`` (plain tables; ``PGGraphStorage`` needs Apache AGE, which Debian does not
ship). Vectors stay in ``NanoVectorDBStorage`` files (``PGVectorStorage`` needs pgvector, also not
in Debian).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import asyncpg
import pytest
from lightrag import QueryParam

from lightrag_ext import E2RAG_MODE, E2LightRAG, StorageCollisionError, layer_workspace

from lightrag_fakes import hash_embedding_func, offline_tokenizer, stop_workers
from lightrag_story import INSERT_KWARGS, LATE_FACET_QUERY, SECOND_STORY, STORY

pytestmark = pytest.mark.postgres

PG_STORAGES = {
    "kv_storage": "PGKVStorage",
    "doc_status_storage": "PGDocStatusStorage",
    "graph_storage": "PGTableGraphStorage",
    "vector_storage": "NanoVectorDBStorage",
}


async def _connect(env: dict[str, str]) -> asyncpg.Connection:
    return await asyncpg.connect(
        host=env["POSTGRES_HOST"],
        port=int(env["POSTGRES_PORT"]),
        user=env["POSTGRES_USER"],
        password=env["POSTGRES_PASSWORD"],
        database=env["POSTGRES_DATABASE"],
    )


async def _rows(conn: asyncpg.Connection, workspace: str) -> dict[str, set]:
    nodes = await conn.fetch(
        "SELECT id FROM lightrag_graph_nodes WHERE workspace=$1 AND namespace=$2",
        workspace,
        "chunk_entity_relation",
    )
    edges = await conn.fetch(
        "SELECT src_id, tgt_id FROM lightrag_graph_edges WHERE workspace=$1", workspace
    )
    docs = await conn.fetch(
        "SELECT id, status FROM lightrag_doc_status WHERE workspace=$1", workspace
    )
    return {
        "nodes": {r["id"] for r in nodes},
        "edges": {(r["src_id"], r["tgt_id"]) for r in edges},
        "docs": {(r["id"], r["status"]) for r in docs},
    }


async def test_event_layer_in_postgres_survives_restart_and_deletes_cleanly(
    rag_factory, postgres_env, tmp_path: Path
):
    workspace = f"t{uuid.uuid4().hex[:8]}"
    layer_ws = layer_workspace(workspace)
    rag = await rag_factory(E2LightRAG, tmp_path / "rag", workspace=workspace, **PG_STORAGES)
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    await rag.ainsert(SECOND_STORY, ids=["neville"], **INSERT_KWARGS)
    story_ids = set((await rag.event_layer.get_record("story"))["metadata"]["node_ids"])
    neville_ids = set((await rag.event_layer.get_record("neville"))["metadata"]["node_ids"])
    await rag_factory.close(rag)

    conn = await _connect(postgres_env)
    try:
        rows = await _rows(conn, layer_ws)
        assert rows["nodes"] == story_ids | neville_ids
        assert rows["edges"] and all({s, t} <= rows["nodes"] for s, t in rows["edges"])
        assert rows["docs"] == {("story", "processed"), ("neville", "processed")}
        own = await _rows(conn, workspace)  # LightRAG's own graph holds entities only
        assert own["nodes"] and not own["nodes"] & rows["nodes"]
        assert {d for d, _ in own["docs"]} == {"story", "neville"}

        # A new process: a fresh instance on the same database and working dir.
        again = await rag_factory(E2LightRAG, tmp_path / "rag", workspace=workspace, **PG_STORAGES)
        data = await again.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
        assert data["data"]["chunks"][0]["chunk_id"] == "story-chunk-002"
        report = await again.abuild_event_layer()
        assert sorted(report.skipped) == ["neville", "story"] and not report.built

        result = await again.adelete_by_doc_id("story")
        assert result.status == "success"
        rows = await _rows(conn, layer_ws)
        assert rows["nodes"] == neville_ids
        assert all({s, t} <= neville_ids for s, t in rows["edges"])
        assert rows["docs"] == {("neville", "processed")}
        assert await again.event_layer.get_record("story") is None
    finally:
        await conn.close()


async def test_forced_shared_workspace_is_refused(
    postgres_env, lightrag_llm, monkeypatch, tmp_path: Path
):
    from lightrag.kg.shared_storage import finalize_share_data

    monkeypatch.setenv("POSTGRES_WORKSPACE", "everything")
    rag = E2LightRAG(
        working_dir=str(tmp_path / "rag"),
        llm_model_func=lightrag_llm,
        embedding_func=hash_embedding_func(),
        tokenizer=offline_tokenizer(),
        **PG_STORAGES,
    )
    try:
        with pytest.raises(StorageCollisionError, match="POSTGRES_WORKSPACE"):
            await rag.initialize_storages()
    finally:
        await rag.finalize_storages()
        await stop_workers(rag)
        finalize_share_data()


async def test_dropping_lightrags_documents_in_postgres_drops_the_layer_rows(
    rag_factory, postgres_env, tmp_path: Path
):
    """The server's clear route drops LightRAG's storages; in PostgreSQL the layer's rows of the
    workspace go with them, and another workspace's rows stay."""
    workspace, other = f"t{uuid.uuid4().hex[:8]}", f"t{uuid.uuid4().hex[:8]}"
    rag = await rag_factory(E2LightRAG, tmp_path / "rag", workspace=workspace, **PG_STORAGES)
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    await rag_factory.close(rag)
    kept = await rag_factory(E2LightRAG, tmp_path / "other", workspace=other, **PG_STORAGES)
    await kept.ainsert(SECOND_STORY, ids=["neville"], **INSERT_KWARGS)
    await rag_factory.close(kept)

    rag = await rag_factory(E2LightRAG, tmp_path / "rag", workspace=workspace, **PG_STORAGES)
    for storage in (rag.full_docs, rag.text_chunks, rag.doc_status):
        assert (await storage.drop())["status"] == "success"
    conn = await _connect(postgres_env)
    try:
        assert await _rows(conn, layer_workspace(workspace)) == {
            "nodes": set(),
            "edges": set(),
            "docs": set(),
        }
        assert (await _rows(conn, layer_workspace(other)))["docs"] == {("neville", "processed")}
    finally:
        await conn.close()
