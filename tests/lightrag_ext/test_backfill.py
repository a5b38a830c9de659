"""Backfill: an existing plain-LightRAG working directory gets the same layer as E2LightRAG."""

from __future__ import annotations

from pathlib import Path

from lightrag import LightRAG

from lightrag_ext import E2LightRAG

from lightrag_story import INSERT_KWARGS, SECOND_STORY, STORY

DOCS = {"story": STORY, "neville": SECOND_STORY}


async def _insert(rag) -> None:
    for doc_id, text in DOCS.items():
        await rag.ainsert(text, ids=[doc_id], **INSERT_KWARGS)


async def _layer(rag: E2LightRAG) -> dict:
    """The whole layer of the docs: nodes (full records), edges and per-doc metadata."""
    layer: dict = {"nodes": {}, "edges": set(), "meta": {}}
    for doc_id in DOCS:
        record = await rag.event_layer.get_record(doc_id)
        meta = record["metadata"]
        layer["meta"][doc_id] = (record["status"], meta["chunk_offsets"], meta["failed_chunks"])
        nodes = await rag.event_layer.get_nodes(meta["node_ids"])
        layer["nodes"].update({i: n.model_dump() for i, n in nodes.items()})
        edges = await rag.event_layer.get_edges(meta["edges"])
        layer["edges"] |= {(e.source, e.target, e.kind.value) for e in edges}
    return layer


async def test_backfill_equals_insert_time_layer(rag_factory, lightrag_llm, tmp_path: Path):
    inserted = await rag_factory(E2LightRAG, tmp_path / "inserted")
    await _insert(inserted)
    expected = await _layer(inserted)
    await rag_factory.close(inserted)

    plain = await rag_factory(LightRAG, tmp_path / "existing")
    await _insert(plain)
    await rag_factory.close(plain)

    calls_before = len(lightrag_llm.calls)
    rag = await rag_factory(E2LightRAG, tmp_path / "existing")
    report = await rag.abuild_event_layer()
    assert sorted(report.built) == sorted(DOCS) and not report.partial and not report.missing
    new_kinds = lightrag_llm.kinds()[calls_before:]
    # No entity re-extraction: the only LLM work is the event pass, one call per chunk (this
    # working dir's LLM cache never saw an event prompt).
    assert set(new_kinds) == {"event_extraction"}
    assert len(new_kinds) == 4  # 3 story chunks + 1 neville chunk

    backfilled = await _layer(rag)
    assert backfilled == expected
    assert len(expected["nodes"]) > 10 and expected["edges"]


async def test_backfill_is_idempotent_and_reports_missing(
    rag_factory, lightrag_llm, tmp_path: Path
):
    plain = await rag_factory(LightRAG, tmp_path / "existing")
    await _insert(plain)
    await rag_factory.close(plain)

    rag = await rag_factory(E2LightRAG, tmp_path / "existing")
    first = await rag.abuild_event_layer(["story"])
    assert first.built == ["story"]
    calls = len(lightrag_llm.calls)
    second = await rag.abuild_event_layer(["story", "neville", "nope"])
    assert second.skipped == ["story"] and second.built == ["neville"]
    assert second.missing == ["nope"]
    third = await rag.abuild_event_layer()
    assert sorted(third.skipped) == ["neville", "story"] and not third.built
    assert len(lightrag_llm.calls) == calls + 1  # only neville's single chunk was new work

    rebuilt = await rag.abuild_event_layer(["story"], rebuild=True)
    assert rebuilt.built == ["story"]
    assert len(lightrag_llm.calls) == calls + 1  # rebuilt from LightRAG's LLM cache


async def test_backfill_without_cached_extractions_runs_a_mention_pass(
    rag_factory, lightrag_llm, tmp_path: Path
):
    plain = await rag_factory(
        LightRAG, tmp_path / "existing", enable_llm_cache_for_entity_extract=False
    )
    await _insert(plain)
    await rag_factory.close(plain)

    calls_before = len(lightrag_llm.calls)
    rag = await rag_factory(E2LightRAG, tmp_path / "existing")
    report = await rag.abuild_event_layer(["story"])
    assert report.built == ["story"]
    kinds = lightrag_llm.kinds()[calls_before:]
    assert kinds.count("entity_extraction") == 3 and kinds.count("event_extraction") == 3
    assert "lightrag_extract" not in kinds
    record = await rag.event_layer.get_record("story")
    assert record["metadata"]["mention_source"] == "e2rag_mention_pass"
    nodes = await rag.event_layer.get_nodes(record["metadata"]["node_ids"])
    names = {n.name for n in nodes.values() if n.kind.value == "mention"}
    assert {"Hermione Granger", "Severus Snape", "Harry Potter"} <= names


async def test_backfill_rebuilds_layers_of_an_older_format(rag_factory, tmp_path: Path):
    """A layer written before story-order edges existed is rebuilt, not skipped."""
    from lightrag_ext.storage import LAYER_FORMAT_VERSION

    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await _insert(rag)
    record = await rag.event_layer.get_record("story")
    record["metadata"]["e2rag_layer"] = LAYER_FORMAT_VERSION - 1
    await rag.event_layer.docs.upsert({"story": record})

    report = await rag.abuild_event_layer()
    assert report.built == ["story"] and report.skipped == ["neville"]
    again = await rag.event_layer.get_record("story")
    assert again["metadata"]["e2rag_layer"] == LAYER_FORMAT_VERSION
