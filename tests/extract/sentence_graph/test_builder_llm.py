"""SentenceGraphBuilder's LLM path through the index, with the scripted LLM: relations and bridges
from the paper's prompts, accounted and cached by the index's runner, a malformed answer costing
only its segment, the settings that need a model, and overridable prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Document
from llama_index.core.prompts import PromptTemplate
from scripted_llm import ScriptedLLM

from llama_index_e2rag.errors import MissingModelError
from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder
from llama_index_e2rag.extract.sentence_graph.prompts import NN_TEXT
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.llm.runner import LLMRunner
from llama_index_e2rag.schema import EdgeKind, GraphEdge, NodeKind

TOM = Document(
    id_="tom",
    text="Tom Reed missed the train. Because the road was closed, he walked. "
    "Then he reached the river.",
    metadata={"title": "Tom Reed"},
)
#: With ``segment_sentences=3``: one segment in TOM, two in BAND, "drummer" only in the second.
BAND = Document(
    id_="band",
    text="Lanternfield is a band from Brookhaven. Tom Reed sings in Lanternfield. "
    "Then the band recorded an album. The drummer left in winter. "
    "Because the tour was long, she rested. So the band hired a new drummer.",
    metadata={"title": "Lanternfield"},
)
SENTGRAPH_KINDS = ("sentgraph_nn", "sentgraph_ns", "sentgraph_bridge")


def sentgraph_llm(broken: Optional[str] = None) -> ScriptedLLM:
    """ScriptedLLM knowing both titles, whose N-N answer is malformed for sentence lists
    containing ``broken`` (the JSON-repair round included)."""
    llm = ScriptedLLM(names=["Tom Reed", "Lanternfield"])

    def nn(prompt: str) -> str:
        if broken is not None and broken in prompt:
            return llm.malformed_text
        return json.dumps(llm.nn_relations_of(prompt))

    llm.handlers["sentgraph_nn"] = nn
    return llm


def build(llm: Optional[ScriptedLLM], builder: Optional[SentenceGraphBuilder] = None,
          **kwargs: Any) -> E2RAGIndex:
    return E2RAGIndex.from_documents(
        [TOM, BAND],
        llm=llm,
        embed_model=HashEmbedding(),
        max_retries=0,
        doc_builders=[builder or SentenceGraphBuilder(segment_sentences=3)],
        **kwargs,
    )


def rst_by_segment(index: E2RAGIndex, doc_id: str) -> dict[int, set[str]]:
    """``{segment: the sources of its rst edges}`` of one document."""
    graph = index.graph_store
    sources: dict[int, set[str]] = {}
    for edge in graph.edges(EdgeKind.RST):
        if edge.doc_id == doc_id:
            segment = graph.get_node(edge.source).attrs["segment"]
            sources.setdefault(segment, set()).add(edge.attrs["source"])
    return sources


def sentgraph_calls(counts: Any) -> dict[str, int]:
    return {kind: counts.get(kind, 0) for kind in SENTGRAPH_KINDS}


def edge_set(edges: list[GraphEdge]) -> set[tuple[str, str, str, str]]:
    return {(e.source, e.target, e.kind.value, e.role or "") for e in edges}


def test_relations_and_bridges_come_from_the_llm_and_are_accounted() -> None:
    llm = sentgraph_llm()
    index = build(llm)
    graph = index.graph_store
    # two segments in BAND: the first all core (no N-S call), the second with satellites
    assert rst_by_segment(index, "tom") == {0: {"llm"}}
    assert rst_by_segment(index, "band") == {0: {"llm"}, 1: {"llm"}}
    expected = {"sentgraph_nn": 3, "sentgraph_ns": 2, "sentgraph_bridge": 1}
    assert sentgraph_calls(llm.calls_by_kind) == expected
    assert sentgraph_calls(index.llm_stats()["calls_by_kind"]) == expected
    assert index.extraction_report() == []

    tom = graph.nodes(NodeKind.SENTENCE, "tom")
    typed = {
        (graph.get_node(e.source).text.split()[0], graph.get_node(e.target).text.split()[0],
         e.role)
        for e in graph.edges(EdgeKind.RST) if e.doc_id == "tom"
    }
    assert typed == {("Tom", "Then", "sequence"), ("Tom", "Because", "cause")}
    assert [n.attrs["sentgraph"] for n in sorted(tom, key=lambda n: n.attrs["index"])] == [
        "core", "supplementary", "core"]

    (tom_topic,) = graph.nodes(NodeKind.TOPIC, "tom")
    related = [e for e in graph.edges(EdgeKind.BRIDGE) if e.role == "related"]
    assert {(e.doc_id, e.target) for e in related} == {("band", tom_topic.id)}
    assert len(related) == 2  # from each of BAND's two topics, both named "Lanternfield"
    assert all(e.attrs["source"] == "llm" and e.attrs["relation"] == "related to"
               for e in related)
    # the shared-entity bridge ("Tom Reed sings in Lanternfield") stands beside them
    assert any(e.role == "shared_entity" for e in graph.edges(EdgeKind.BRIDGE))


def test_a_rebuild_is_served_from_the_cache(tmp_path: Path) -> None:
    first = build(sentgraph_llm(), cache_dir=str(tmp_path))
    again_llm = sentgraph_llm()
    again = build(again_llm, cache_dir=str(tmp_path))
    assert sentgraph_calls(again_llm.calls_by_kind) == dict.fromkeys(SENTGRAPH_KINDS, 0)
    assert again.llm_stats()["cache_hits"] >= 6
    for kind in (EdgeKind.RST, EdgeKind.BRIDGE):
        assert edge_set(again.graph_store.edges(kind)) == edge_set(first.graph_store.edges(kind))


def test_a_malformed_answer_loses_only_its_segment() -> None:
    llm = sentgraph_llm(broken="drummer")
    index = build(llm)
    assert rst_by_segment(index, "tom") == {0: {"llm"}}
    assert rst_by_segment(index, "band") == {0: {"llm"}, 1: {"parser"}}
    (failure,) = index.extraction_report()
    assert failure["doc_id"] == "band"
    assert "segment 1 (characters" in failure["reason"]
    assert "parser relations" in failure["reason"] and "LLMOutputError" in failure["reason"]
    second = next(n for n in index.graph_store.nodes(NodeKind.SENTENCE, "band")
                  if n.attrs["segment"] == 1)
    assert failure["chunk_id"] == second.chunk_id
    assert index.llm_stats()["failures"] >= 1
    # the broken segment has no N-S call; the bridging call still ran
    assert sentgraph_calls(llm.calls_by_kind)["sentgraph_ns"] == 1
    assert any(e.role == "related" for e in index.graph_store.edges(EdgeKind.BRIDGE))


@pytest.mark.spacy  # the parser is loaded before the LLM settings are checked
def test_llm_settings_without_a_model_raise_a_one_line_error() -> None:
    with pytest.raises(MissingModelError) as raised:
        build(None, SentenceGraphBuilder(relations="llm"))
    message = str(raised.value)
    assert "\n" not in message and "relations='llm'" in message
    assert "relations='parser'" in message
    with pytest.raises(MissingModelError, match="bridges='entities'"):
        build(None, SentenceGraphBuilder(relations="parser", bridges="llm"))


def test_auto_without_a_model_and_parser_with_one_make_no_calls() -> None:
    index = build(None, SentenceGraphBuilder(segment_sentences=3))
    assert all(sources <= {"parser", "default"}
               for sources in rst_by_segment(index, "band").values())
    assert all(e.attrs["source"] == "entities" for e in index.graph_store.edges(EdgeKind.BRIDGE))
    llm = sentgraph_llm()
    build(llm, SentenceGraphBuilder(relations="parser", bridges="entities"))
    assert sentgraph_calls(llm.calls_by_kind) == dict.fromkeys(SENTGRAPH_KINDS, 0)


def test_an_explicit_runner_is_kept() -> None:
    own, index_llm = sentgraph_llm(), sentgraph_llm()
    build(index_llm, SentenceGraphBuilder(LLMRunner(own), segment_sentences=3))
    assert sentgraph_calls(own.calls_by_kind)["sentgraph_nn"] == 3
    assert sentgraph_calls(index_llm.calls_by_kind) == dict.fromkeys(SENTGRAPH_KINDS, 0)


def test_prompts_are_overridable_and_not_stored() -> None:
    builder = SentenceGraphBuilder(relations="llm", bridges="llm", segment_sentences=3)
    assert set(builder.get_prompts()) == {"nn_prompt", "ns_prompt", "bridge_prompt"}
    changed = NN_TEXT.replace("Instruction:\n", "Instruction:\nName the core sentences first.\n")
    builder.update_prompts({"nn_prompt": PromptTemplate(changed)})
    llm = sentgraph_llm()
    build(llm, builder)
    sent = [p for p in llm.prompts if "---Task: sentgraph_nn---" in p]
    assert len(sent) == 3 and all("Name the core sentences first." in p for p in sent)

    config = builder.to_config()
    assert not any("prompt" in key for key in config)
    restored = SentenceGraphBuilder.from_config(config)
    assert restored.to_config() == config
    assert (restored.relations, restored.bridges) == ("llm", "llm")
    assert "Name the core" not in restored.get_prompts()["nn_prompt"].get_template()
