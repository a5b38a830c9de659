"""The count of documents without a layer: taken once, then following inserts, deletes and
backfills through real storages, so that an e2rag query reports it without scanning."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from lightrag import LightRAG, QueryParam

from lightrag_ext import E2RAG_MODE, E2LightRAG
from lightrag_ext.storage import LAYER_FORMAT_VERSION
from lightrag_story import INSERT_KWARGS, LATE_FACET_QUERY, SECOND_STORY, STORY

GAP_LINE = "documents have no event layer"


@pytest.fixture(autouse=True)
def _our_log_reaches_caplog(caplog, monkeypatch) -> None:
    """caplog reads the root logger; an entry point run earlier in this worker routes our
    loggers to LightRAG's handlers instead (``logs.attach_to_lightrag_logging`` turns their
    propagation off), so the lines are caught on the logger itself."""
    target = logging.getLogger("lightrag_ext.rag")
    monkeypatch.setattr(target, "propagate", False)
    monkeypatch.setattr(target, "disabled", False)
    monkeypatch.setattr(target, "handlers", [*target.handlers, caplog.handler])


def _count_scans(rag: E2LightRAG) -> list[str]:
    """Record every full read (``get_docs_by_statuses``) of the instance's two doc statuses,
    LightRAG's and the layer's."""
    scans: list[str] = []
    for storage in (rag.doc_status, rag.event_layer.docs):
        stock = storage.get_docs_by_statuses

        async def get_docs_by_statuses(statuses: Any, stock: Any = stock) -> Any:
            scans.append(repr(statuses))
            return await stock(statuses)

        storage.get_docs_by_statuses = get_docs_by_statuses
    return scans


async def _query_reports(rag: E2LightRAG, scans: list[str], caplog) -> tuple[int, list[str]]:
    """(documents without a layer in the e2rag query's metadata, gap lines it logged); the
    query reads no storage in full (``scans``: ``_count_scans(rag)``)."""
    before = len(scans)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lightrag_ext.rag"):
        data = await rag.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert scans[before:] == []
    lines = [r.getMessage() for r in caplog.records if GAP_LINE in r.getMessage()]
    return data["metadata"]["e2rag_documents_without_layer"], lines


async def test_the_count_follows_inserts_backfills_and_deletes_without_a_scan_per_query(
    rag_factory, tmp_path: Path, caplog
):
    working_dir = tmp_path / "rag"
    plain = await rag_factory(LightRAG, working_dir)
    await plain.ainsert(STORY, ids=["story"], **INSERT_KWARGS)  # a document with no layer
    await rag_factory.close(plain)

    with caplog.at_level(logging.WARNING, logger="lightrag_ext.rag"):
        rag = await rag_factory(E2LightRAG, working_dir)
    [line] = [r.getMessage() for r in caplog.records if GAP_LINE in r.getMessage()]
    assert "1 of 1 documents" in line and "e2rag-lightrag-backfill" in line
    scans = _count_scans(rag)

    missing, lines = await _query_reports(rag, scans, caplog)
    assert missing == 1 and len(lines) == 1 and "1 of 1 documents" in lines[0]

    await rag.ainsert(SECOND_STORY, ids=["neville"], **INSERT_KWARGS)  # gets its layer
    missing, lines = await _query_reports(rag, scans, caplog)
    assert missing == 1 and "1 of 2 documents" in lines[0]

    report = await rag.abuild_event_layer()
    assert report.built == ["story"]
    assert await _query_reports(rag, scans, caplog) == (0, [])

    await rag.adelete_by_doc_id("story")
    assert await _query_reports(rag, scans, caplog) == (0, [])

    # A layer of an older format counts as missing (a backfill rebuilds it).
    record = await rag.event_layer.get_record("neville")
    record["metadata"]["e2rag_layer"] = LAYER_FORMAT_VERSION - 1
    await rag.event_layer.docs.upsert({"neville": record})
    missing, lines = await _query_reports(rag, scans, caplog)
    assert missing == 1 and "1 of 1 documents" in lines[0]

    await rag.ainsert("Luna Lovegood read The Quibbler upside down.", ids=["luna"])
    followed = await _query_reports(rag, scans, caplog)
    assert followed[0] == 1 and "1 of 2 documents" in followed[1][0]
    await rag_factory.close(rag)

    reopened = await rag_factory(E2LightRAG, working_dir)
    reopened_scans = _count_scans(reopened)
    # a fresh count agrees
    assert await _query_reports(reopened, reopened_scans, caplog) == followed
    await reopened.adelete_by_doc_id("neville")
    assert await _query_reports(reopened, reopened_scans, caplog) == (0, [])
