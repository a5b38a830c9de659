"""EntityEventRetriever (E²RAG Alg. 3): local mentions, re-ranking, HyDE, persistence, threads."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document
from llama_index.core.schema import NodeWithScore
from scripted_llm import ScriptedLLM
from test_index import NAMES, STORY, chunk_containing, load, make_index

from llama_index_e2rag.errors import MissingModelError
from llama_index_e2rag.extract.e2rag import EntityEventExtractor
from llama_index_e2rag.extract.grounded import GroundedExtractor
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.llm.runner import LLMRunner
from llama_index_e2rag.retrievers.entity_event import HYDE_VARIANTS, EntityEventRetriever
from llama_index_e2rag.schema import EdgeKind, NodeKind

LATER_FACET = "What did Hermione do after the troll fight?"
QUERIES = [
    LATER_FACET,
    "Why did Ron mock Hermione?",
    "Where did Neville search for his toad?",
    "What happened on Halloween?",
    "Which rules did Hermione quote?",
]
HYPOTHESIS = "Hermione protected her friends from the teachers after the troll attack."


def summary(nodes: list[NodeWithScore]) -> list[tuple[str, float]]:
    return [(n.node.node_id, round(n.score or 0.0, 9)) for n in nodes]


@pytest.fixture(scope="module")
def index() -> E2RAGIndex:
    return make_index()


def test_same_name_mentions_stay_distinct_and_local(index: E2RAGIndex) -> None:
    graph = index.graph_store
    hermiones = [m for m in graph.nodes(NodeKind.MENTION) if m.name == "Hermione"]
    assert len(hermiones) >= 2
    assert len({m.id for m in hermiones}) == len(hermiones)
    assert len({m.chunk_id for m in hermiones}) == len(hermiones)
    early = chunk_containing(index, "Hermione studied alone")
    late = chunk_containing(index, "troll fight")
    assert {early.id, late.id} <= {m.chunk_id for m in hermiones}
    for mention in hermiones:
        events = graph.neighbors(mention.id, [EdgeKind.PARTICIPATES])
        assert events, "every Hermione mention takes part in its chunk's events"
        assert {e.chunk_id for e in events} == {mention.chunk_id}
    later = [m for m in hermiones if m.chunk_id == late.id][0]
    assert "troll fight" in later.text and "troll" not in hermiones[0].text


def test_query_about_the_later_facet_ranks_the_later_chunk_first(index: E2RAGIndex) -> None:
    nodes = index.as_retriever(mode="entity_event", similarity_top_k=3).retrieve(LATER_FACET)
    assert nodes[0].node.node_id == chunk_containing(index, "troll fight").id
    assert len({n.node.node_id for n in nodes}) == len(nodes)
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)


def test_mentions_of_one_entity_are_reranked_by_their_events(index: E2RAGIndex) -> None:
    """With one mention seed, the events decide which "Hermione" it is (§4 step 5); the
    temporal anchor, which would also rank the chunks after the troll fight, is off."""
    early = chunk_containing(index, "Hermione studied alone")
    late = chunk_containing(index, "troll fight")

    def seed_mentions(event_weight: float) -> tuple[str, set[str]]:
        retriever = index.as_retriever(mode="entity_event", seed_top_k=1, event_weight=event_weight,
                                       anchor_weight=0.0)
        nodes = retriever.retrieve(LATER_FACET)
        seeds = {
            s for n in nodes for s in n.node.metadata["seed_scores"] if s.startswith("mention")
        }
        return nodes[0].node.node_id, {index.graph_store.get_node(s).chunk_id for s in seeds}

    # the name alone prefers the short early description ...
    assert seed_mentions(0.0) == (early.id, {early.id})
    # ... its events pick the Hermione of the troll fight
    assert seed_mentions(0.5) == (late.id, {late.id})


def test_results_carry_positions_and_the_evidence_that_led_there(index: E2RAGIndex) -> None:
    retriever = index.as_retriever(mode="entity_event", similarity_top_k=5)
    nodes, bundle = retriever.retrieve_with_context(LATER_FACET)
    graph = index.graph_store
    for nws in nodes:
        meta = nws.node.metadata
        chunk = graph.get_node(nws.node.node_id)
        assert meta["pos"] == list(chunk.pos) and meta["doc_id"] == "phantom"
        assert meta["position"] == f"document 0, character {chunk.pos[1]}"
        evidence = graph.get_nodes(meta["graph_nodes"])
        assert evidence and all(e.chunk_id == chunk.id for e in evidence)
        assert set(meta["seed_scores"]) <= set(meta["graph_nodes"])
        # one hop: every seed mention brings all of its events along
        for seed in meta["seed_scores"]:
            for event in graph.neighbors(seed, [EdgeKind.PARTICIPATES]):
                assert event.id in meta["graph_nodes"]
        assert "graph_nodes" not in nws.node.get_content(metadata_mode="llm")
    assert [p.pos for p in bundle.passages] == sorted(p.pos for p in bundle.passages)
    assert {p.chunk_id for p in bundle.passages} == {n.node.node_id for n in nodes}
    assert {n.id for n in bundle.nodes} == {
        i for n in nodes for i in n.node.metadata["graph_nodes"]
    }
    assert "Relations among them" in bundle.render()


class _RecordingEmbedding(HashEmbedding):
    """HashEmbedding that remembers every query text it embedded."""

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        object.__setattr__(self, "seen", [])

    def _get_query_embedding(self, query: str) -> list[float]:
        self.seen.append(query)
        return super()._get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        self.seen.append(query)
        return super()._get_query_embedding(query)


@pytest.fixture(scope="module")
def recorded() -> tuple[E2RAGIndex, _RecordingEmbedding]:
    embed = _RecordingEmbedding()
    return make_index(embed=embed), embed


@pytest.mark.parametrize("hyde", [None, *HYDE_VARIANTS])
def test_hyde_variants_send_the_right_text(
    recorded: tuple[E2RAGIndex, _RecordingEmbedding], hyde: str | None
) -> None:
    index, embed = recorded
    llm = ScriptedLLM(names=NAMES, hypothetical_text=HYPOTHESIS)
    retriever = index.as_retriever(mode="entity_event", hyde=hyde, llm=llm, faithful=True)
    embed.seen.clear()
    nodes = retriever.retrieve(LATER_FACET)
    combined = f"{LATER_FACET}\n{HYPOTHESIS}"
    cue_prompts = [p for p in llm.prompts if "---Task: query_cues---" in p]
    assert llm.calls_by_kind["hypothetical_answer"] == (0 if hyde is None else 1)
    if hyde is None:
        (prompt,) = cue_prompts
        assert f"Query: {LATER_FACET}\nOutput:" in prompt
        assert embed.seen[0] == LATER_FACET and "Hermione" in embed.seen
    elif hyde == "comb_extraction":
        (prompt,) = cue_prompts
        assert f"Query: {combined}\nOutput:" in prompt
        assert embed.seen[0] == combined
    elif hyde == "hyp_extraction":
        (prompt,) = cue_prompts
        assert f"Query: {HYPOTHESIS}\nOutput:" in prompt and LATER_FACET not in prompt
        assert embed.seen[0] == HYPOTHESIS
    elif hyde == "comb_embedding":
        assert cue_prompts == [] and embed.seen == [combined]
    else:
        assert cue_prompts == [] and embed.seen == [HYPOTHESIS]
    assert nodes and nodes[0].node.node_id == chunk_containing(index, "troll fight").id


def test_hyde_without_an_llm_is_refused_clearly() -> None:
    extractor = EntityEventExtractor(llm_runner=LLMRunner(ScriptedLLM(names=NAMES)))
    index = E2RAGIndex.from_documents(
        [Document(text=STORY, id_="phantom")], embed_model=HashEmbedding(), extractors=[extractor]
    )
    assert index.llm is None
    with pytest.raises(MissingModelError, match="hypothetical answer"):
        index.as_retriever(mode="entity_event", hyde="comb_extraction")


def llm_free(index: E2RAGIndex) -> EntityEventRetriever:
    """The retriever without an LLM: cues from the grounded parser."""
    return EntityEventRetriever(index.stores, index.embed_model, parser=GroundedExtractor())


def test_unusable_cue_output_falls_back_to_the_parsers_cues(index: E2RAGIndex) -> None:
    llm = ScriptedLLM(names=NAMES, malformed_marker="troll fight")
    retriever = index.as_retriever(mode="entity_event", llm=llm)
    nodes = retriever.retrieve(LATER_FACET)
    assert llm.calls_by_kind["query_cues"] >= 1 and llm.calls_by_kind["json_repair"] >= 1
    assert nodes[0].node.node_id == chunk_containing(index, "troll fight").id
    offline = llm_free(index)
    plan, expected = retriever.plan(LATER_FACET), offline.plan(LATER_FACET)
    assert plan.entity_cues == expected.entity_cues and "Hermione" in plan.entity_cues
    assert plan.event_cues == expected.event_cues
    assert summary(nodes) == summary(offline.retrieve(LATER_FACET))


async def test_a_deeply_nested_cue_answer_still_retrieves(index: E2RAGIndex) -> None:
    """5,000 ``[`` used to escape the parser as RecursionError out of ``retrieve()``."""
    llm = ScriptedLLM(names=NAMES, handlers={"query_cues": lambda prompt: "[" * 5_000})
    retriever = index.as_retriever(mode="entity_event", llm=llm)
    nodes = retriever.retrieve(LATER_FACET)
    assert nodes and llm.calls_by_kind["json_repair"] == 1  # the repair round was taken
    assert summary(await retriever.aretrieve(LATER_FACET)) == summary(nodes)
    assert summary(nodes) == summary(llm_free(index).retrieve(LATER_FACET))


async def test_a_hung_cue_call_times_out_to_the_parsers_cues(index: E2RAGIndex) -> None:
    llm = ScriptedLLM(names=NAMES, hang_marker="---Task: query_cues---")  # sleeps 30 s
    runner = LLMRunner(llm, timeout=0.2, max_retries=0)
    retriever = EntityEventRetriever(
        index.stores, index.embed_model, llm_runner=runner, parser=GroundedExtractor()
    )
    try:
        nodes = retriever.retrieve(LATER_FACET)  # blocking path: the LLM call runs in a thread
        again = await retriever.aretrieve(LATER_FACET)  # async path: the call is cancelled
    finally:
        llm.release()
    assert nodes and summary(again) == summary(nodes)
    assert summary(nodes) == summary(llm_free(index).retrieve(LATER_FACET))
    assert llm.hung_calls == 2 and runner.stats.timeouts == 2


def test_persisted_index_retrieves_exactly_the_same(index: E2RAGIndex, tmp_path: Path) -> None:
    index.storage_context.persist(str(tmp_path))
    loaded = load(tmp_path, llm=ScriptedLLM(names=NAMES))
    for query in QUERIES:
        before = index.as_retriever(mode="entity_event", similarity_top_k=3).retrieve(query)
        after = loaded.as_retriever(mode="entity_event", similarity_top_k=3).retrieve(query)
        assert summary(after) == summary(before)
        assert [n.node.metadata for n in after] == [n.node.metadata for n in before]


async def test_concurrent_retrievals_equal_sequential_ones(index: E2RAGIndex) -> None:
    retriever = index.as_retriever(
        mode="entity_event", similarity_top_k=3, llm=ScriptedLLM(names=NAMES, async_delay=0.01)
    )
    sequential = [summary(retriever.retrieve(q)) for q in QUERIES]
    gathered = await asyncio.gather(*(retriever.aretrieve(q) for q in QUERIES * 2))
    assert [summary(r) for r in gathered] == sequential * 2
    with ThreadPoolExecutor(max_workers=4) as pool:
        threaded = list(pool.map(lambda q: summary(retriever.retrieve(q)), QUERIES * 2))
    assert threaded == sequential * 2


def test_prompts_are_exposed_and_replaceable(index: E2RAGIndex) -> None:
    from llama_index.core.prompts import PromptTemplate

    retriever = index.as_retriever(mode="entity_event", llm=ScriptedLLM(names=NAMES))
    assert set(retriever.get_prompts()) == {"query_cue_prompt", "hypothetical_answer_prompt"}
    retriever.update_prompts(
        {
            "query_cue_prompt": PromptTemplate(
                "---Task: query_cues---\nCUSTOM\nQuery: {query}\nOutput:"
            )
        }
    )
    assert "CUSTOM" in retriever.get_prompts()["query_cue_prompt"].get_template()


def test_offline_defaults_spacy_cues_and_minilm_embeddings() -> None:
    """No LLM anywhere: grounded extraction, parser cues, the real MiniLM embedding."""
    from llama_index_e2rag.embeddings import MiniLMEmbedding
    from llama_index_e2rag.extract.grounded import GroundedExtractor

    index = E2RAGIndex.from_documents(
        [Document(text=STORY, id_="phantom")],
        embed_model=MiniLMEmbedding(),
        chunk_size=40,
        chunk_overlap=0,
    )
    assert index.llm is None and isinstance(index.extractors[0], GroundedExtractor)
    retriever = index.as_retriever(mode="entity_event", similarity_top_k=2)
    plan = retriever.plan(LATER_FACET)
    assert "Hermione" in plan.entity_cues and plan.event_cues
    nodes = retriever.retrieve(LATER_FACET)
    assert nodes[0].node.node_id == chunk_containing(index, "troll fight").id
    assert nodes[0].node.metadata["graph_nodes"]


def test_ranking_module_expands_one_hop_and_reranks_contested_mentions() -> None:
    """``ranking`` works on a bare graph store, so lightrag_ext can share it."""
    from llama_index_e2rag.graph import NetworkXGraphStore
    from llama_index_e2rag.ranking import mention_events, one_hop, rerank_mentions
    from llama_index_e2rag.schema import GraphEdge, GraphNode

    def node(node_id: str, kind: NodeKind, offset: int, name: str = "") -> GraphNode:
        return GraphNode(
            id=node_id,
            kind=kind,
            text=f"{name or node_id}: text",
            doc_id="d",
            pos=(0, offset, 0),
            chunk_id=f"c{offset}",
            name=name or None,
        )

    graph = NetworkXGraphStore()
    graph.upsert_nodes(
        [
            node("m_early", NodeKind.MENTION, 0, "Hermione"),
            node("e_early", NodeKind.EVENT, 1),
            node("m_late", NodeKind.MENTION, 50, "Hermione"),
            node("e_late", NodeKind.EVENT, 51),
            node("m_ron", NodeKind.MENTION, 60, "Ron"),
        ]
    )
    graph.upsert_edges(
        [
            GraphEdge(source="m_early", target="e_early", kind=EdgeKind.PARTICIPATES, doc_id="d"),
            GraphEdge(source="m_late", target="e_late", kind=EdgeKind.PARTICIPATES, doc_id="d"),
            GraphEdge(source="m_early", target="m_late", kind=EdgeKind.NEXT, doc_id="d"),
        ]
    )
    assert [n.id for n in one_hop(graph, ["m_late", "unknown"])] == ["m_late", "e_late"]
    # another layer's participation (E²GraphRAG's entity -> event) is not E²RAG's hop
    graph.upsert_nodes([node("n_hermione", NodeKind.ENTITY, 0, "Hermione")])
    graph.upsert_edges([GraphEdge(source="n_hermione", target="e_late",
                                  kind=EdgeKind.PARTICIPATES, doc_id="d")])
    assert [n.id for n in one_hop(graph, ["e_late"])] == ["m_late", "e_late"]
    scores = {"m_early": 0.9, "m_late": 0.8, "m_ron": 0.85}
    linked = mention_events(graph, scores)
    assert linked == {"m_early": ["e_early"], "m_late": ["e_late"]}  # Ron is uncontested
    event_sims = {"e_early": 0.1, "e_late": 1.0}
    by_name = rerank_mentions(graph, scores, linked, event_sims, 0.0, 2)
    assert list(by_name) == ["m_early", "m_ron"]
    by_events = rerank_mentions(graph, scores, linked, event_sims, 0.5, 2)
    assert list(by_events) == ["m_late", "m_ron"]
    assert by_events["m_late"] == pytest.approx(0.9) and by_events["m_ron"] == 0.85
