"""Clear paths: whatever removes LightRAG's documents removes their event layer too.

``DELETE /documents`` (run against the real server in ``test_server_e2rag.py``) drops LightRAG's
storages one by one; here each document storage's ``drop`` is checked on its own, then the
pipeline's cancellation, and documents that went while no ``E2LightRAG`` was running.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lightrag import LightRAG, QueryParam
from lightrag.base import DocStatus
from lightrag.kg.shared_storage import get_namespace_data

from lightrag_ext import E2RAG_MODE, E2LightRAG

from lightrag_story import INSERT_KWARGS, SECOND_STORY, STORY

#: Close to nodes of both documents, so a leftover of either would show up.
BOTH_STORIES_QUERY = "Hermione Granger broke the rules while Neville Longbottom lost Trevor"


async def _layer_state(rag: E2LightRAG) -> dict[str, object]:
    """Everything of the layer a query could reach: nodes, vector hits, records."""
    layer = rag.event_layer
    hits = set()
    for vdb in (layer.mentions_vdb, layer.events_vdb):
        hits |= {h["id"] for h in await vdb.query(BOTH_STORIES_QUERY, top_k=50)}
    return {
        "nodes": {n["id"] for n in await layer.graph.get_all_nodes()},
        "hits": hits,
        "records": set(await layer.doc_ids()),
    }


async def _e2rag_doc_ids(rag: E2LightRAG) -> list[str]:
    data = await rag.aquery_data(BOTH_STORIES_QUERY, param=QueryParam(mode=E2RAG_MODE))
    return [c["doc_id"] for c in (data.get("data") or {}).get("chunks", [])]


@pytest.mark.parametrize("storage", ["full_docs", "text_chunks", "doc_status"])
async def test_dropping_a_document_storage_drops_the_layer(rag_factory, tmp_path: Path, storage):
    workdir = tmp_path / "rag"
    rag = await rag_factory(E2LightRAG, workdir)
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    before = await _layer_state(rag)
    assert before["nodes"] and before["hits"] and before["records"] == {"story"}

    result = await getattr(rag, storage).drop()

    assert result["status"] == "success"
    assert await _layer_state(rag) == {"nodes": set(), "hits": set(), "records": set()}
    assert await _e2rag_doc_ids(rag) == []
    await rag_factory.close(rag)
    reopened = await rag_factory(E2LightRAG, workdir)
    assert await _layer_state(reopened) == {"nodes": set(), "hits": set(), "records": set()}


async def test_a_failing_layer_drop_is_reported_in_lightrags_result_shape(
    rag_factory, tmp_path: Path
):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")

    async def broken_drop() -> dict[str, str]:
        return {"status": "error", "message": "disk gone"}

    rag.event_layer.graph.drop = broken_drop
    result = await rag.doc_status.drop()
    assert result["status"] == "error"
    assert "disk gone" in result["message"]


async def test_cancelled_document_loses_its_layer(rag_factory, tmp_path: Path):
    """The pipeline is cancelled after the document's layer was written (before LightRAG's
    merge): LightRAG marks it FAILED, and its layer goes; the other document's stays."""
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(SECOND_STORY, ids=["neville"], **INSERT_KWARGS)
    kept = await _layer_state(rag)
    written: list[str] = []
    write_doc = rag.event_layer.write_doc

    async def write_then_cancel(layer) -> None:
        await write_doc(layer)
        written.append(layer.doc_id)
        status = await get_namespace_data("pipeline_status", workspace=rag.workspace)
        status["cancellation_requested"] = True

    rag.event_layer.write_doc = write_then_cancel
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)

    assert written == ["story"]
    assert (await rag.doc_status.get_by_id("story"))["status"] == DocStatus.FAILED
    assert await rag.event_layer.get_record("story") is None
    assert await _layer_state(rag) == kept
    assert set(await _e2rag_doc_ids(rag)) == {"neville"}


async def test_start_forgets_layers_of_documents_deleted_by_a_stock_lightrag(
    rag_factory, tmp_path: Path
):
    workdir = tmp_path / "rag"
    rag = await rag_factory(E2LightRAG, workdir)
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    await rag.ainsert(SECOND_STORY, ids=["neville"], **INSERT_KWARGS)
    neville = set((await rag.event_layer.get_record("neville"))["metadata"]["node_ids"])
    await rag_factory.close(rag)

    stock = await rag_factory(LightRAG, workdir)
    assert (await stock.adelete_by_doc_id("story")).status == "success"
    await rag_factory.close(stock)

    reopened = await rag_factory(E2LightRAG, workdir)
    state = await _layer_state(reopened)
    assert state["records"] == {"neville"}
    assert state["nodes"] == neville and state["hits"] <= neville
    assert set(await _e2rag_doc_ids(reopened)) == {"neville"}


async def test_start_drops_the_layer_of_a_deleted_workspace(rag_factory, tmp_path: Path):
    """LightRAG's own workspace folder removed by hand: nothing of it may remain reachable."""
    workdir = tmp_path / "rag"
    rag = await rag_factory(E2LightRAG, workdir, workspace="books")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    assert (await _layer_state(rag))["nodes"]
    await rag_factory.close(rag)
    assert (workdir / "books_e2rag").is_dir()

    shutil.rmtree(workdir / "books")

    reopened = await rag_factory(E2LightRAG, workdir, workspace="books")
    assert await _layer_state(reopened) == {"nodes": set(), "hits": set(), "records": set()}
