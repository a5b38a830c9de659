"""EntityEventExtractor: per-chunk mentions and events, links, failures, passes, async path."""

from __future__ import annotations

import pytest
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from scripted_llm import ScriptedLLM

from llama_index_e2rag.extract.base import DOC_ORDER_KEY, EXTRACTION_ERROR_KEY, pop_graph
from llama_index_e2rag.extract.e2rag import EntityEventExtractor
from llama_index_e2rag.extract.linking import story_order_edges
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.llm.runner import LLMRunner
from llama_index_e2rag.schema import EdgeKind, NodeKind

CHAPTER_9 = "Hermione scolded Ron for breaking the rules. Ron ignored Hermione all day."
CHAPTER_16 = "Hermione stole the ingredients for the potion. Snape never noticed the theft."


def chunks(*texts: str, doc_id: str = "book", doc_order: int = 2) -> list[TextNode]:
    """Chunk TextNodes the way the index hands them over (source, offsets, doc order)."""
    nodes, offset = [], 0
    for i, text in enumerate(texts):
        node = TextNode(
            id_=f"{doc_id}-chunk-{i}",
            text=text,
            start_char_idx=offset,
            end_char_idx=offset + len(text),
            metadata={DOC_ORDER_KEY: doc_order},
        )
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc_id)
        nodes.append(node)
        offset += len(text) + 1
    return nodes


def extract(llm: ScriptedLLM, nodes, **kwargs):
    extractor = EntityEventExtractor(llm_runner=LLMRunner(llm, backoff=0.0), **kwargs)
    extractor(nodes)
    return [pop_graph(node) for node in nodes]


def test_same_name_in_two_chunks_gives_two_mentions_linked_to_their_own_events():
    nodes = chunks(CHAPTER_9, CHAPTER_16)
    (nodes_9, edges_9, err_9), (nodes_16, edges_16, err_16) = extract(ScriptedLLM(), nodes)
    assert err_9 is None and err_16 is None
    hermione_9 = next(n for n in nodes_9 if n.kind is NodeKind.MENTION and n.name == "Hermione")
    hermione_16 = next(n for n in nodes_16 if n.kind is NodeKind.MENTION and n.name == "Hermione")
    assert hermione_9.id != hermione_16.id
    assert hermione_9.chunk_id == "book-chunk-0" and hermione_16.chunk_id == "book-chunk-1"
    assert "breaking the rules" in hermione_9.text and "stole" in hermione_16.text
    assert hermione_9.attrs == {
        "entity_type": "Person",
        "description": f"Hermione in this passage: {CHAPTER_9.split('. ')[0]}.",
    }

    events_9 = {n.id for n in nodes_9 if n.kind is NodeKind.EVENT}
    events_16 = {n.id for n in nodes_16 if n.kind is NodeKind.EVENT}
    linked_9 = {
        e.target for e in edges_9 if e.kind is EdgeKind.PARTICIPATES and e.source == hermione_9.id
    }
    linked_16 = {
        e.target for e in edges_16 if e.kind is EdgeKind.PARTICIPATES and e.source == hermione_16.id
    }
    assert linked_9 == events_9 and len(linked_9) == 2  # she is in both chapter-9 events
    assert len(linked_16) == 1 and linked_16 < events_16  # only "stole", not Snape's
    snape = next(n for n in nodes_16 if n.name == "Snape")
    assert {
        e.target for e in edges_16 if e.source == snape.id and e.kind is EdgeKind.PARTICIPATES
    } == events_16 - linked_16


def test_positions_spans_and_event_fields():
    nodes = chunks(CHAPTER_9, CHAPTER_16)
    (_, _, _), (graph_nodes, edges, _) = extract(ScriptedLLM(), nodes)
    start = nodes[1].start_char_idx
    snape = next(n for n in graph_nodes if n.name == "Snape")
    offset = CHAPTER_16.index("Snape")
    assert snape.pos == (2, start + offset, 1)
    assert snape.span == (start + offset, start + offset + 5)
    assert snape.doc_id == "book"
    theft = next(n for n in graph_nodes if n.kind is NodeKind.EVENT and "theft" in n.text)
    assert theft.name == "Snape never noticed the theft"
    assert theft.text == "Snape never noticed the theft: Snape never noticed the theft."
    assert theft.attrs == {
        "description": "Snape never noticed the theft.",
        "participants": ["Snape"],
        "date": None,
    }
    assert theft.pos == (2, start + offset, 1)  # at its first participant
    assert theft.span == (start, start + len(CHAPTER_16))
    co = {(e.kind, e.source, e.target) for e in edges if e.kind is not EdgeKind.PARTICIPATES}
    mentions = sorted((n for n in graph_nodes if n.kind is NodeKind.MENTION), key=lambda n: n.pos)
    events = sorted((n for n in graph_nodes if n.kind is NodeKind.EVENT), key=lambda n: n.pos)
    assert co == {
        (EdgeKind.CO_MENTION, mentions[0].id, mentions[1].id),
        (EdgeKind.CO_EVENT, events[0].id, events[1].id),
    }


def test_a_name_not_found_in_the_chunk_falls_back_to_the_chunk_start():
    llm = ScriptedLLM(names=["Nobody Here"])
    nodes = chunks("Filler words come first. Then Harry arrived at the castle gate.")
    llm_answer = llm.entities_of(nodes[0].text)
    assert all(e["name"] != "Nobody Here" for e in llm_answer)  # sanity: fake finds names only
    llm.handlers["entity_extraction"] = lambda prompt: (
        '{"entities": [{"name": "Nobody Here", "type": "Person", "description": "absent"}]}'
    )
    [(graph_nodes, _, _)] = extract(llm, nodes)
    ghost = next(n for n in graph_nodes if n.kind is NodeKind.MENTION)
    assert ghost.pos == (2, 0, 0) and ghost.span == (0, len(nodes[0].text))


def test_rebuilding_gives_the_same_ids():
    first = extract(ScriptedLLM(), chunks(CHAPTER_9, CHAPTER_16))
    second = extract(ScriptedLLM(), chunks(CHAPTER_9, CHAPTER_16))
    ids = lambda result: sorted(n.id for nodes, _, _ in result for n in nodes)  # noqa: E731
    assert ids(first) == ids(second) and len(ids(first)) == len(set(ids(first))) > 0


def test_two_passes_by_default_one_call_when_combined():
    two = ScriptedLLM()
    separate = extract(two, chunks(CHAPTER_9, CHAPTER_16))
    assert two.calls_by_kind == {"entity_extraction": 2, "event_extraction": 2}
    one = ScriptedLLM()
    combined = extract(one, chunks(CHAPTER_9, CHAPTER_16), combined=True)
    assert one.calls_by_kind == {"combined_extraction": 2}
    texts = lambda result: sorted(n.text for nodes, _, _ in result for n in nodes)  # noqa: E731
    assert texts(separate) == texts(combined)


def test_a_malformed_chunk_is_recorded_and_the_others_are_extracted():
    llm = ScriptedLLM(malformed_marker="POISON")
    nodes = chunks(CHAPTER_9, "POISON chunk that Harry wrote badly.", CHAPTER_16)
    extractor = EntityEventExtractor(llm_runner=LLMRunner(llm, backoff=0.0))
    returned = extractor(nodes)
    assert list(returned) == nodes  # the failed chunk stays, to be indexed as text
    reason = nodes[1].metadata[EXTRACTION_ERROR_KEY]
    assert "entity_extraction failed: LLMOutputError" in reason
    assert "event_extraction failed: LLMOutputError" in reason
    assert EXTRACTION_ERROR_KEY in nodes[1].excluded_embed_metadata_keys
    results = [pop_graph(node) for node in nodes]
    assert results[1][0] == [] and results[1][2] == reason
    assert results[0][0] and results[2][0] and results[0][2] is None and results[2][2] is None
    assert extractor.llm_runner.stats.failures == 2


def test_a_hung_chunk_times_out_is_recorded_and_the_others_are_extracted():
    llm = ScriptedLLM(hang_marker="POISON")  # sleeps 30 s: only the timeout ends it quickly
    nodes = chunks(CHAPTER_9, "POISON chunk that Harry wrote badly.", CHAPTER_16)
    runner = LLMRunner(llm, timeout=0.2, max_retries=1, backoff=0.0)
    returned = EntityEventExtractor(llm_runner=runner)(nodes)
    assert list(returned) == nodes
    reason = nodes[1].metadata[EXTRACTION_ERROR_KEY]
    assert "entity_extraction failed: LLMTimeoutError" in reason
    assert "event_extraction failed: LLMTimeoutError" in reason
    assert "timed out after 0.2 s" in reason
    results = [pop_graph(node) for node in nodes]
    assert results[1][0] == []
    assert results[0][0] and results[2][0] and results[0][2] is None and results[2][2] is None
    # two passes, each tried twice
    assert runner.stats.timeouts == 4 == llm.hung_calls and runner.stats.failures == 2


def test_a_deeply_nested_answer_is_repaired_once_then_recorded():
    llm = ScriptedLLM(malformed_marker="POISON", malformed_text="[" * 5_000)
    nodes = chunks(CHAPTER_9, "POISON chunk that Harry wrote badly.")
    runner = LLMRunner(llm, backoff=0.0)
    EntityEventExtractor(llm_runner=runner)(nodes)
    reason = nodes[1].metadata[EXTRACTION_ERROR_KEY]
    assert "entity_extraction failed: LLMOutputError" in reason
    assert "event_extraction failed: LLMOutputError" in reason
    assert "levels deep" in reason
    assert runner.stats.repairs == 2 and llm.calls_by_kind["json_repair"] == 2
    assert pop_graph(nodes[0])[0] and pop_graph(nodes[1])[0] == []


def test_index_reports_a_timed_out_chunk_and_indexes_the_rest():
    """``E2RAGIndex(llm_timeout=...)``: the hung chunk is in ``extraction_report()`` (and stays
    searchable as text), the other chunks have their graph, ``llm_stats()`` counts timeouts."""
    from llama_index.core import Document
    from test_index import NAMES, PARAGRAPHS, chunk_containing, make_index, vector_ids

    hung = PARAGRAPHS[1].replace("Neville lost", "STUCK Neville lost")
    text = "\n\n".join([PARAGRAPHS[0], hung, PARAGRAPHS[2]])
    llm = ScriptedLLM(names=NAMES, hang_marker="STUCK")
    index = make_index([Document(text=text, id_="phantom")], llm=llm, llm_timeout=0.2,
                       max_retries=1)
    assert index.llm_runner.timeout == 0.2
    bad = chunk_containing(index, "STUCK")
    report = index.extraction_report()
    assert {(r["doc_id"], r["chunk_id"]) for r in report} == {("phantom", bad.id)}
    assert "LLMTimeoutError" in report[0]["reason"]
    assert "timed out after 0.2 s" in report[0]["reason"]
    assert bad.id in vector_ids(index, NodeKind.CHUNK)
    assert not [m for m in index.graph_store.nodes(NodeKind.MENTION) if m.chunk_id == bad.id]
    good = chunk_containing(index, "troll fight")
    assert [m for m in index.graph_store.nodes(NodeKind.MENTION) if m.chunk_id == good.id]
    stats = index.llm_stats()
    assert stats["timeouts"] == 4 and stats["failures"] == 2


def test_a_failing_pass_keeps_what_the_other_pass_found():
    llm = ScriptedLLM(fail_marker="---Task: event_extraction---")
    nodes = chunks(CHAPTER_9)
    extractor = EntityEventExtractor(llm_runner=LLMRunner(llm, max_retries=1, backoff=0.0))
    extractor(nodes)
    graph_nodes, _, reason = pop_graph(nodes[0])
    assert {n.kind for n in graph_nodes} == {NodeKind.MENTION}
    assert reason.startswith("event_extraction failed: RuntimeError: scripted failure")


async def test_async_path_matches_sync_and_bounds_concurrency():
    sync_nodes = chunks(CHAPTER_9, CHAPTER_16, "Harry flew. Ron followed Harry home.")
    EntityEventExtractor(llm_runner=LLMRunner(ScriptedLLM()))(sync_nodes)
    llm = ScriptedLLM(async_delay=0.01)
    async_nodes = chunks(CHAPTER_9, CHAPTER_16, "Harry flew. Ron followed Harry home.")
    runner = LLMRunner(llm, num_workers=2)
    returned = await EntityEventExtractor(llm_runner=runner).acall(async_nodes)
    assert len(returned) == 3 and llm.max_in_flight == 2
    assert [pop_graph(n) for n in async_nodes] == [pop_graph(n) for n in sync_nodes]


def test_prompts_are_overridable_and_cached_answers_are_reused(tmp_path):
    custom = PromptTemplate(
        "---Task: entity_extraction---\nCUSTOM PROMPT\n---Input Text---\n{text}\n---Output---\n"
    )
    llm = ScriptedLLM()
    extractor = EntityEventExtractor(llm_runner=LLMRunner(llm, cache=tmp_path / "c.json"))
    assert set(extractor.get_prompts()) == {"entity_prompt", "event_prompt", "combined_prompt"}
    extractor.update_prompts({"entity_prompt": custom})
    extractor(chunks(CHAPTER_9))
    assert any("CUSTOM PROMPT" in p for p in llm.prompts)

    again = ScriptedLLM()
    rerun = EntityEventExtractor(llm_runner=LLMRunner(again, cache=tmp_path / "c.json"))
    rerun.update_prompts({"entity_prompt": custom})
    nodes = chunks(CHAPTER_9)
    rerun(nodes)
    assert again.prompts == [] and pop_graph(nodes[0])[0]


def test_empty_chunks_make_no_calls():
    llm = ScriptedLLM()
    nodes = chunks("   \n ")
    extract(llm, nodes)
    assert llm.prompts == [] and EXTRACTION_ERROR_KEY not in nodes[0].metadata


@pytest.mark.parametrize("combined", [False, True])
def test_function_calling_llm_extracts_the_same_graph(combined):
    plain = extract(ScriptedLLM(), chunks(CHAPTER_9), combined=combined)
    tools = extract(ScriptedLLM(function_calling=True), chunks(CHAPTER_9), combined=combined)
    assert tools == plain


def test_runs_as_a_step_of_an_ingestion_pipeline():
    from llama_index.core import Document
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter

    llm = ScriptedLLM()
    pipeline = IngestionPipeline(
        transformations=[
            SentenceSplitter(chunk_size=64, chunk_overlap=0),
            EntityEventExtractor(llm_runner=LLMRunner(llm)),
        ]
    )
    nodes = pipeline.run(documents=[Document(text=f"{CHAPTER_9} {CHAPTER_16}", id_="book")])
    graph_nodes = [n for node in nodes for n in pop_graph(node)[0]]
    assert {n.doc_id for n in graph_nodes} == {"book"}
    assert {n.name for n in graph_nodes if n.kind is NodeKind.MENTION} >= {"Hermione", "Snape"}
    assert llm.calls_by_kind["entity_extraction"] == len(nodes)


#: Split with an overlap, the Snitch sentence ends chunk 1 and starts chunk 2, as the first
#: event and first name of both: same position, text and ordinal in each chunk.
OVERLAPPING_STORY = "\n\n".join(
    [
        "It rained all morning over the quiet hills. The wind howled across the empty grounds.",
        "Harry caught the Snitch at the match. Snape glared at Harry while Ron cheered loudly.",
        "Hermione stole the ingredients for the potion. Snape never noticed the theft at all.",
    ]
)
IN_CHUNK_EDGES = (
    EdgeKind.PARTICIPATES,
    EdgeKind.GROUNDED_IN,
    EdgeKind.CO_MENTION,
    EdgeKind.CO_EVENT,
)


def overlapping_chunks(text: str) -> list[TextNode]:
    """Chunks as the index makes them with an overlap > 0 (sentences shared by two chunks)."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    splitter = SentenceSplitter(chunk_size=40, chunk_overlap=15)
    nodes = splitter.get_nodes_from_documents([Document(text=text, id_="book")])
    for node in nodes:
        node.metadata[DOC_ORDER_KEY] = 0
    starts = [n.start_char_idx for n in nodes]
    ends = [n.end_char_idx for n in nodes]
    assert len(nodes) >= 3 and any(s < e for s, e in zip(starts[1:], ends))  # they do overlap
    return nodes


def test_overlapping_chunks_each_own_their_nodes_and_links():
    nodes = overlapping_chunks(OVERLAPPING_STORY)
    EntityEventExtractor(llm_runner=LLMRunner(ScriptedLLM(), backoff=0.0))(nodes)
    graph = NetworkXGraphStore()
    fragments = [pop_graph(node) for node in nodes]
    assert all(error is None for _, _, error in fragments)
    graph.upsert_nodes(n for found, _, _ in fragments for n in found)
    graph.upsert_edges(e for _, found, _ in fragments for e in found)
    for edge in graph.edges():
        if edge.kind in IN_CHUNK_EDGES:
            source, target = graph.get_node(edge.source), graph.get_node(edge.target)
            assert source.chunk_id == target.chunk_id, (edge.kind, source.text, target.text)
    assert len(graph.nodes()) == sum(len(found) for found, _, _ in fragments)  # no id shared
    # the overlap's event is read by both chunks: one node each, at the same story position
    snitch = [n for n in graph.nodes(NodeKind.EVENT) if n.name.startswith("Harry caught")]
    assert len({n.chunk_id for n in snitch}) == len(snitch) == 2
    assert len({n.pos[:2] for n in snitch}) == 1

    # story order still chains every event once, both copies of the overlap's event included
    graph.upsert_edges(story_order_edges(graph, "book"))
    events = graph.nodes(NodeKind.EVENT, "book")
    event_ids = {n.id for n in events}
    chained = {(e.source, e.target) for e in graph.edges(EdgeKind.NEXT) if e.source in event_ids}
    assert chained == {(a.id, b.id) for a, b in zip(events, events[1:])}  # position, ordinal, id
    assert all(a.pos <= b.pos for a, b in zip(events, events[1:]))
    assert {n.id for n in snitch} <= event_ids and len(chained) == len(events) - 1
