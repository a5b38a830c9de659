"""Insert path: LightRAG's entity pass plus our event pass land in the layer's storages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lightrag_ext import EVENT_CACHE_TYPE, E2LightRAG, layer_workspace
from llama_index_e2rag.schema import EdgeKind, NodeKind

from lightrag_story import INSERT_KWARGS, PARAGRAPHS, STORY


async def _layer_nodes(rag: E2LightRAG, doc_id: str) -> list:
    record = await rag.event_layer.get_record(doc_id)
    assert record is not None, "no commit record for the document"
    return list((await rag.event_layer.get_nodes(record["metadata"]["node_ids"])).values())


async def test_events_and_bipartite_edges_land_in_storages(rag_factory, tmp_path: Path):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)

    nodes = await _layer_nodes(rag, "story")
    events = [n for n in nodes if n.kind == NodeKind.EVENT]
    mentions = [n for n in nodes if n.kind == NodeKind.MENTION]
    # ScriptedLLM: one event per sentence, two sentences per paragraph (= chunk).
    assert len(events) == 2 * len(PARAGRAPHS)
    chunk_ids = {n.chunk_id for n in nodes}
    assert len(chunk_ids) == len(PARAGRAPHS)
    # Mentions are per chunk: Hermione appears once in each chunk, never merged.
    hermione = [m for m in mentions if m.name == "Hermione Granger"]
    assert len(hermione) == len(PARAGRAPHS)
    assert len({m.chunk_id for m in hermione}) == len(PARAGRAPHS)
    assert len({m.text for m in hermione}) == len(PARAGRAPHS)
    # Story order: positions follow the text.
    ordered = sorted(hermione, key=lambda m: m.pos)
    assert [STORY.index(p) <= m.pos[1] for p, m in zip(PARAGRAPHS, ordered)] == [True] * 3
    start, end = ordered[-1].span
    assert STORY[start:end] == "Hermione Granger"

    # Bipartite edges: every mention of Hermione takes part in an event of its own chunk.
    edges = await rag.event_layer.get_edges(
        [(m.id, e.id) for m in hermione for e in events if e.chunk_id == m.chunk_id]
    )
    participates = [e for e in edges if e.kind == EdgeKind.PARTICIPATES]
    assert {e.source for e in participates} == {m.id for m in hermione}
    by_id = {n.id: n for n in nodes}
    assert all(by_id[e.target].chunk_id == by_id[e.source].chunk_id for e in participates)

    # Vectors are searchable under the layer's own workspace.
    hits = await rag.event_layer.events_vdb.query("robes fire Snape", top_k=3)
    assert hits and by_id[hits[0]["id"]].chunk_id.endswith("002")
    assert rag.event_layer.workspace == layer_workspace(rag.workspace) == "e2rag"
    assert (tmp_path / "rag" / "e2rag" / "graph_chunk_entity_relation.graphml").exists()


async def test_lightrag_own_storages_hold_no_layer_data(rag_factory, tmp_path: Path):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    labels = await rag.chunk_entity_relation_graph.get_all_labels()
    assert labels and not any(label.startswith(("mention-", "event-")) for label in labels)
    # LightRAG merges Hermione's chunk records into one entity; our layer keeps three mentions.
    assert labels.count("Hermione Granger") == 1


async def test_reinsert_costs_no_llm_call(rag_factory, lightrag_llm, tmp_path: Path):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    cache = json.loads((tmp_path / "rag" / "kv_store_llm_response_cache.json").read_text())
    ours = [k for k, v in cache.items() if v["cache_type"] == EVENT_CACHE_TYPE]
    assert len(ours) == len(PARAGRAPHS)
    assert all(k.startswith(f"default:{EVENT_CACHE_TYPE}:") for k in ours)

    before = len(lightrag_llm.calls)
    record = await rag.event_layer.get_record("story")
    await rag.adelete_by_doc_id("story")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    assert len(lightrag_llm.calls) == before  # entity and event answers come from the cache
    again = await rag.event_layer.get_record("story")
    assert again["metadata"]["node_ids"] == record["metadata"]["node_ids"]


async def test_bad_event_output_for_one_chunk_keeps_the_document(
    rag_factory, scripted_shared, tmp_path: Path
):
    scripted_shared.malformed_marker = "troll"  # the second paragraph
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)

    status = await rag.doc_status.get_by_id("story")
    assert status["status"] == "processed"  # LightRAG indexed the whole document
    record = await rag.event_layer.get_record("story")
    failed = record["metadata"]["failed_chunks"]
    assert list(failed) == ["story-chunk-001"] and "event_extraction" in failed["story-chunk-001"]
    # the shared parser's error (llm_parsing.parse_with_repair), as LLMRunner reports it
    shared_error = (
        "The LLM's e2rag_event (chunk story-chunk-001) answer could not be parsed as "
        "EventExtraction, even after one repair round"
    )
    assert shared_error in failed["story-chunk-001"]
    nodes = await _layer_nodes(rag, "story")
    events_by_chunk = {n.chunk_id for n in nodes if n.kind == NodeKind.EVENT}
    assert events_by_chunk == {"story-chunk-000", "story-chunk-002"}
    # The failed chunk still has its mentions.
    assert any(n.chunk_id == "story-chunk-001" and n.kind == NodeKind.MENTION for n in nodes)


async def test_deeply_nested_event_output_is_a_failed_chunk_after_the_repair_round(
    rag_factory, scripted_shared, lightrag_llm, tmp_path: Path
):
    """5,000 ``[`` used to escape the shared parser as RecursionError (no repair round)."""
    scripted_shared.malformed_marker = "troll"  # the second paragraph
    scripted_shared.malformed_text = "[" * 5_000
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)

    assert (await rag.doc_status.get_by_id("story"))["status"] == "processed"
    record = await rag.event_layer.get_record("story")
    failed = record["metadata"]["failed_chunks"]
    assert list(failed) == ["story-chunk-001"]
    assert "LLMOutputError" in failed["story-chunk-001"]
    assert "more than 64 levels deep" in failed["story-chunk-001"]
    repairs = [p for kind, p in lightrag_llm.calls if kind == "json_repair"]
    assert len(repairs) == 1 and "troll" in repairs[0]
    nodes = await _layer_nodes(rag, "story")
    events_by_chunk = {n.chunk_id for n in nodes if n.kind == NodeKind.EVENT}
    assert events_by_chunk == {"story-chunk-000", "story-chunk-002"}


async def test_event_call_past_lightrags_llm_timeout_is_a_failed_chunk(
    rag_factory, scripted_shared, tmp_path: Path
):
    """The event pass calls LightRAG's wrapped ``extract`` role function, so LightRAG's own
    timeout applies (its queue gives up after ``2 * default_llm_timeout`` s)."""
    scripted_shared.hang_marker = "troll"  # only our event prompt reaches the shared fake
    rag = await rag_factory(E2LightRAG, tmp_path / "rag", default_llm_timeout=1)
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)

    assert (await rag.doc_status.get_by_id("story"))["status"] == "processed"
    record = await rag.event_layer.get_record("story")
    failed = record["metadata"]["failed_chunks"]
    assert list(failed) == ["story-chunk-001"]
    assert "TimeoutError" in failed["story-chunk-001"]
    assert "timeout after 2s" in failed["story-chunk-001"]  # 2 * default_llm_timeout
    assert scripted_shared.hung_calls == 1
    nodes = await _layer_nodes(rag, "story")
    assert {n.chunk_id for n in nodes if n.kind == NodeKind.EVENT} == {
        "story-chunk-000",
        "story-chunk-002",
    }
    assert any(n.chunk_id == "story-chunk-001" and n.kind == NodeKind.MENTION for n in nodes)


async def test_failed_chunk_is_retried_by_backfill(rag_factory, scripted_shared, tmp_path: Path):
    scripted_shared.malformed_marker = "troll"
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    scripted_shared.malformed_marker = None

    report = await rag.abuild_event_layer()
    assert report.built == ["story"] and not report.partial
    record = await rag.event_layer.get_record("story")
    assert record["status"] == "processed" and not record["metadata"]["failed_chunks"]
    nodes = await _layer_nodes(rag, "story")
    assert {n.chunk_id for n in nodes if n.kind == NodeKind.EVENT} == {
        f"story-chunk-00{i}" for i in range(3)
    }


async def test_event_prompt_can_be_replaced(rag_factory, lightrag_llm, tmp_path: Path):
    from llama_index.core.prompts import PromptTemplate

    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    default = rag.get_prompts()["event_prompt"].get_template()
    custom = PromptTemplate(default.replace("---Role---", "---Role---\nOnly plot events."))
    rag.update_prompts({"event_prompt": custom})
    with pytest.raises(ValueError, match="unknown prompt names"):
        rag.update_prompts({"answer_prompt": custom})
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    sent = [p for kind, p in lightrag_llm.calls if kind == "event_extraction"]
    assert len(sent) == len(PARAGRAPHS) and all("Only plot events." in p for p in sent)


async def test_layer_has_the_packages_story_order_edges(rag_factory, tmp_path: Path):
    """The same ``next`` edges as llama_index_e2rag's index builds (``story_chain_edges``):
    events in story order across chunks, and each character's timeline of mentions."""
    from llama_index_e2rag.extract.linking import story_chain_edges

    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    record = await rag.event_layer.get_record("story")
    nodes = await _layer_nodes(rag, "story")
    stored = await rag.event_layer.get_edges(record["metadata"]["edges"])

    def kinds(edges: list, kind: EdgeKind) -> set:
        return {(e.source, e.target) for e in edges if e.kind == kind}

    expected = story_chain_edges(nodes, "story")
    assert kinds(stored, EdgeKind.NEXT) == kinds(expected, EdgeKind.NEXT)
    events = sorted((n for n in nodes if n.kind == NodeKind.EVENT), key=lambda n: (n.pos, n.id))
    event_chain = {(a.id, b.id) for a, b in zip(events, events[1:])}
    assert event_chain <= kinds(stored, EdgeKind.NEXT) and len(events) == 2 * len(PARAGRAPHS)
    hermione = sorted(
        (n for n in nodes if n.name == "Hermione Granger"), key=lambda n: (n.pos, n.id)
    )
    assert {(a.id, b.id) for a, b in zip(hermione, hermione[1:])} <= kinds(stored, EdgeKind.NEXT)
    # a pair linked twice keeps both links (LightRAG stores one edge per pair)
    both = kinds(stored, EdgeKind.NEXT) & kinds(stored, EdgeKind.CO_EVENT)
    assert both, "two events of one chunk, told one after the other"
