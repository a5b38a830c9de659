"""Query side: stock modes untouched, the e2rag mode's ranking, context and answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lightrag import LightRAG, QueryParam
from lightrag.operate import QueryProgress
from lightrag.prompt import PROMPTS

from lightrag_ext import E2RAG_MODE, E2LightRAG

from lightrag_fakes import ANSWER_PREFIX, hash_embedding_func, offline_tokenizer, stop_workers
from lightrag_story import INSERT_KWARGS, LATE_FACET_QUERY, SECOND_STORY, STORY

STOCK_MODES = ["local", "global", "hybrid", "naive", "mix"]
QUERIES = [LATE_FACET_QUERY, "What did Neville Longbottom lose on the train?"]


async def _stock_contexts(rag_factory, cls: type, working_dir: Path) -> dict:
    rag = await rag_factory(cls, working_dir)
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    await rag.ainsert(SECOND_STORY, ids=["neville"], **INSERT_KWARGS)
    contexts = {}
    for mode in STOCK_MODES:
        for query in QUERIES:
            param = QueryParam(mode=mode, only_need_context=True, enable_rerank=False)
            contexts[mode, query] = await rag.aquery(query, param=param)
    await rag_factory.close(rag)
    return contexts


async def test_stock_modes_identical_with_and_without_the_patch(rag_factory, tmp_path: Path):
    plain = await _stock_contexts(rag_factory, LightRAG, tmp_path / "plain")
    patched = await _stock_contexts(rag_factory, E2LightRAG, tmp_path / "patched")
    assert plain == patched
    # The comparison is not vacuous: every mode found context for the story question.
    assert all("Hermione Granger" in plain[mode, LATE_FACET_QUERY] for mode in STOCK_MODES)


async def test_e2rag_mode_returns_the_later_chunk_for_a_later_facet(rag_factory, tmp_path: Path):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    await rag.ainsert(SECOND_STORY, ids=["neville"], **INSERT_KWARGS)

    data = await rag.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert data["status"] == "success" and data["metadata"]["query_mode"] == E2RAG_MODE
    chunks = data["data"]["chunks"]
    assert chunks[0]["chunk_id"] == "story-chunk-002"  # best-ranked chunk first
    assert all(c["doc_id"] == "story" for c in chunks[:3])
    events = data["data"]["events"]
    assert any("robes" in e["description"] for e in events)
    assert {e["entity_name"] for e in data["data"]["entities"]} >= {"Hermione Granger"}
    assert data["data"]["relationships"], "the linearised subgraph has edges"

    # Context: passages in story order with positions, then the subgraph.
    context = data["metadata"]["context"]
    positions = [context.index(f"[P{i}]") for i in range(1, len(chunks) + 1)]
    assert positions == sorted(positions)
    story_passages = [c for c in chunks if c["doc_id"] == "story"]
    in_story_order = sorted(story_passages, key=lambda c: c["position"])
    texts = [context.index(c["content"].strip()) for c in in_story_order]
    assert texts == sorted(texts)
    assert "Entities and events behind these passages" in context


async def test_e2rag_answer_uses_lightrag_query_llm_and_honours_only_need_context(
    rag_factory, lightrag_llm, tmp_path: Path
):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)

    context = await rag.aquery(
        LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE, only_need_context=True)
    )
    data = await rag.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert context == data["metadata"]["context"]
    assert "lightrag_answer" not in lightrag_llm.kinds()

    answer = await rag.aquery(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert answer.startswith(ANSWER_PREFIX) and LATE_FACET_QUERY in answer
    assert lightrag_llm.kinds().count("lightrag_answer") == 1
    assert context in lightrag_llm.system_prompts[-1]  # the LLM saw our context

    again = await rag.aquery(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert again == answer
    assert lightrag_llm.kinds().count("lightrag_answer") == 1  # served from LightRAG's cache

    full = await rag.aquery_llm(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert full["llm_response"]["content"] == answer
    assert full["data"]["chunks"][0]["chunk_id"] == "story-chunk-002"


async def test_e2rag_reports_lightrags_progress_events_in_order(rag_factory, tmp_path: Path):
    """``/query/stream`` with ``include_progress`` relays these; the answer step is reported only
    when the LLM is really asked (not for context only, nor for a cached answer)."""
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    runs: list[list[str]] = []
    for param in (
        QueryParam(mode=E2RAG_MODE, only_need_context=True),
        QueryParam(mode=E2RAG_MODE),
        QueryParam(mode=E2RAG_MODE),
    ):
        events: list[str] = []

        async def record(event: str, events: list[str] = events) -> None:
            events.append(event)

        await rag.aquery_llm(LATE_FACET_QUERY, param=param, progress_callback=record)
        runs.append(events)
    retrieval = [
        QueryProgress.EXTRACTING_KEYWORDS,
        QueryProgress.RETRIEVING_ENTITIES,
        QueryProgress.RETRIEVING_CHUNKS,
    ]
    assert runs == [retrieval, [*retrieval, QueryProgress.GENERATING_RESPONSE], retrieval]


async def test_e2rag_streams_the_answer_and_never_caches_a_stream(
    rag_factory, lightrag_llm, tmp_path: Path
):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)

    stream = await rag.aquery(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE, stream=True))
    assert not isinstance(stream, str)
    pieces = [piece async for piece in stream]
    assert len(pieces) > 1
    answer = await rag.aquery(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert "".join(pieces) == answer and answer.startswith(ANSWER_PREFIX)
    assert lightrag_llm.kinds().count("lightrag_answer") == 2  # the stream left no cache entry

    full = await rag.aquery_llm(
        LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE, stream=True)
    )
    assert full["llm_response"]["is_streaming"] and full["llm_response"]["content"] is None
    assert "".join([p async for p in full["llm_response"]["response_iterator"]]) == answer


async def test_e2rag_mode_on_an_empty_layer_fails_politely(rag_factory, tmp_path: Path):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    data = await rag.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert data["status"] == "failure" and data["metadata"]["failure_reason"] == "no_results"
    answer = await rag.aquery(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert answer == PROMPTS["fail_response"]


def test_sync_wrappers_reach_the_e2rag_mode(lightrag_llm, tmp_path: Path):
    from lightrag.kg.shared_storage import finalize_share_data

    rag = E2LightRAG(
        working_dir=str(tmp_path / "rag"),
        llm_model_func=lightrag_llm,
        embedding_func=hash_embedding_func(),
        tokenizer=offline_tokenizer(),
        entity_extract_max_gleaning=0,
    )
    asyncio.run(rag.initialize_storages())
    try:
        rag.insert(STORY, ids=["story"], **INSERT_KWARGS)
        data = rag.query_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
        assert data["data"]["chunks"][0]["chunk_id"] == "story-chunk-002"
        context = rag.query(
            LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE, only_need_context=True)
        )
        assert context == data["metadata"]["context"]
        assert rag.build_event_layer().skipped == ["story"]
    finally:
        # The sync wrappers drove LightRAG on the thread's current loop; clean up on it.
        loop = asyncio.get_event_loop_policy().get_event_loop()
        loop.run_until_complete(rag.finalize_storages())
        loop.run_until_complete(stop_workers(rag))
        finalize_share_data()


@pytest.mark.parametrize("mode", ["naive"])
async def test_other_modes_still_dispatch_to_lightrag(rag_factory, tmp_path: Path, mode: str):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    data = await rag.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=mode))
    assert data["metadata"]["query_mode"] == mode and "events" not in data["data"]


async def test_e2rag_budget_and_prompt_preview(rag_factory, lightrag_llm, tmp_path: Path):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)

    one = await rag.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE, chunk_top_k=1))
    assert [c["chunk_id"] for c in one["data"]["chunks"]] == ["story-chunk-002"]
    shown = {e["source_id"] for e in one["data"]["entities"] + one["data"]["events"]}
    assert shown == {"story-chunk-002"}  # the subgraph only describes the passages shown

    tiny = QueryParam(mode=E2RAG_MODE, max_entity_tokens=12)
    few = await rag.aquery_data(LATE_FACET_QUERY, param=tiny)
    assert len(few["data"]["entities"]) + len(few["data"]["events"]) == 1

    prompt = await rag.aquery(
        LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE, only_need_prompt=True)
    )
    assert prompt.endswith(f"---User Query---\n\n{LATE_FACET_QUERY}")
    assert one["metadata"]["context"].split("\n")[0] in prompt
    assert "lightrag_answer" not in lightrag_llm.kinds()


async def _cosines(rag, storage, ids: list[str], text: str) -> dict[str, float]:
    """Similarity of stored vectors to a text, as the e2rag mode computes it."""
    import numpy as np

    query = np.asarray((await rag.embedding_func([text], context="query"))[0], dtype=float)
    vectors = await storage.get_vectors_by_ids(ids)
    out = {}
    for node_id, vector in vectors.items():
        vec = np.asarray(vector, dtype=float)
        out[node_id] = float(vec @ query / (np.linalg.norm(vec) * np.linalg.norm(query)))
    return out


async def test_e2rag_cues_come_from_the_shared_prompt_and_are_cached(
    rag_factory, lightrag_llm, scripted_shared, tmp_path: Path
):
    import json

    from lightrag_ext.query import CUE_CACHE_TYPE, extract_cues

    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    before = lightrag_llm.kinds().count("query_cues")
    first = await rag.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert lightrag_llm.kinds().count("query_cues") == before + 1
    expected = scripted_shared.cues_of(LATE_FACET_QUERY)
    cues = await extract_cues(rag, LATE_FACET_QUERY, QueryParam(mode=E2RAG_MODE))
    assert cues == (expected["entities"], expected["events"]) and cues[0] and cues[1]
    again = await rag.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert again == first and lightrag_llm.kinds().count("query_cues") == before + 1
    await rag.llm_response_cache.index_done_callback()
    cache = json.loads((tmp_path / "rag" / "kv_store_llm_response_cache.json").read_text())
    assert [k for k in cache if k.startswith(f"{E2RAG_MODE}:{CUE_CACHE_TYPE}:")]

    # the caller's keywords are the cues: no cue extraction
    given = QueryParam(mode=E2RAG_MODE, ll_keywords=["Severus Snape"], hl_keywords=["fire"])
    assert await extract_cues(rag, "anything else?", given) == (["Severus Snape"], ["fire"])
    assert lightrag_llm.kinds().count("query_cues") == before + 1


async def test_e2rag_falls_back_to_the_query_when_cues_are_empty(
    rag_factory, scripted_shared, tmp_path: Path
):
    scripted_shared.handlers["query_cues"] = lambda prompt: '{"entities": [], "events": []}'
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    data = await rag.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert data["status"] == "success"
    assert data["data"]["chunks"][0]["chunk_id"] == "story-chunk-002"


async def test_e2rag_deeply_nested_cue_answer_seeds_from_the_query(
    rag_factory, scripted_shared, lightrag_llm, tmp_path: Path
):
    """5,000 ``[`` used to escape the cue parser as RecursionError out of the query."""
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    scripted_shared.handlers["query_cues"] = lambda prompt: "[" * 5_000
    data = await rag.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert data["status"] == "success" and data["data"]["chunks"]
    assert lightrag_llm.kinds().count("json_repair") == 1  # the repair round was taken
    answer = await rag.aquery_llm(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert answer["status"] == "success"


async def test_e2rag_cue_call_past_lightrags_llm_timeout_seeds_from_the_query(
    rag_factory, scripted_shared, tmp_path: Path
):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag", default_llm_timeout=1)
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    scripted_shared.hang_marker = "---Task: query_cues---"  # sleeps 30 s
    data = await rag.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    assert data["status"] == "success" and data["data"]["chunks"]
    assert scripted_shared.hung_calls == 1


async def test_e2rag_reranks_only_competing_mentions_like_the_package(
    rag_factory, scripted_shared, tmp_path: Path
):
    """``ranking.rerank_mentions``: a mention whose name no other candidate shares keeps its
    similarity to its best entity cue; mentions sharing a name (Hermione in every chunk) blend
    it with their best event's similarity to the query, so the later facet wins."""
    from llama_index_e2rag.ranking.e2rag import EVENT_WEIGHT

    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    await rag.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    data = await rag.aquery_data(LATE_FACET_QUERY, param=QueryParam(mode=E2RAG_MODE))
    mentions = {m["mention_id"]: m for m in data["data"]["entities"]}
    layer = rag.event_layer
    cue_sims: dict[str, float] = {}
    for cue in scripted_shared.cues_of(LATE_FACET_QUERY)["entities"]:
        for node_id, sim in (await _cosines(rag, layer.mentions_vdb, list(mentions), cue)).items():
            cue_sims[node_id] = max(sim, cue_sims.get(node_id, -1.0))

    snape = next(m for m in mentions.values() if m["entity_name"] == "Severus Snape")
    assert snape["score"] == pytest.approx(cue_sims[snape["mention_id"]], abs=1e-9)

    record = await layer.get_record("story")
    hermione = [m for m in mentions.values() if m["entity_name"] == "Hermione Granger"]
    assert len(hermione) == 3
    for mention in hermione:
        events = [
            e.target
            for e in await layer.get_edges(
                (mention["mention_id"], n) for n in record["metadata"]["node_ids"]
            )
            if e.kind.value == "participates"
        ]
        event_sims = await _cosines(rag, layer.events_vdb, events, LATE_FACET_QUERY)
        expected = (1 - EVENT_WEIGHT) * cue_sims[mention["mention_id"]] + EVENT_WEIGHT * max(
            event_sims.values()
        )
        assert mention["score"] == pytest.approx(expected, abs=1e-9)
    best = max(hermione, key=lambda m: m["score"])
    assert best["source_id"] == "story-chunk-002"


# -- LightRAG's own calling conventions ---------------------------------------------------------
@pytest.mark.parametrize("method_name", ["aquery_llm", "aquery_data"])
@pytest.mark.parametrize(
    ("mode", "query", "error"),
    [
        ("mix", "中", "RAGQueryTooShortError"),
        ("naive", "   ", "EmptyQueryError"),
        ("bypass", "", "EmptyQueryError"),
        (E2RAG_MODE, "中", "RAGQueryTooShortError"),
        (E2RAG_MODE, "", "EmptyQueryError"),
    ],
)
def test_query_entry_points_called_unbound_validate_before_touching_self(
    method_name: str, mode: str, query: str, error: str
) -> None:
    """LightRAG's test suite calls ``LightRAG.aquery_llm(SimpleNamespace(), ...)``; with
    E2LightRAG in its place the same call must raise LightRAG's validation error, not a
    TypeError from ``super()`` needing a real instance."""
    from types import SimpleNamespace

    from lightrag import query_validation

    expected = getattr(query_validation, error)
    with pytest.raises(expected):
        asyncio.run(getattr(E2LightRAG, method_name)(SimpleNamespace(), query, param=QueryParam(mode=mode)))
