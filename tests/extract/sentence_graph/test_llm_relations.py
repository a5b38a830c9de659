"""SentGraph's LLM paths with the scripted LLM: the four prompts, relations typed from the
answers, bad items and bad answers costing only themselves, bridges and the refine decision."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from llama_index.core.prompts import PromptTemplate
from scripted_llm import ScriptedLLM

from llama_index_e2rag.errors import LLMOutputError
from llama_index_e2rag.extract.sentence_graph import prompts
from llama_index_e2rag.extract.sentence_graph.bridges_llm import llm_bridges
from llama_index_e2rag.extract.sentence_graph.llm_relations import llm_segment_relations
from llama_index_e2rag.extract.sentence_graph.segments import Segment, sentence_nodes, topic_node
from llama_index_e2rag.llm.runner import LLMRunner, ResponseCache
from llama_index_e2rag.llm.prompt_text import fill
from llama_index_e2rag.retrievers.sentence_graph_refine import llm_refine
from llama_index_e2rag.schema import EdgeKind, GraphNode

TOM = (
    "Tom missed the train. Because the road was closed, he walked. "
    "Then he reached the river. So he arrived late."
)
TEXTS = {
    "NN_PROMPT": prompts.NN_TEXT,
    "NS_PROMPT": prompts.NS_TEXT,
    "BRIDGE_PROMPT": prompts.BRIDGE_TEXT,
    "REFINE_PROMPT": prompts.REFINE_TEXT,
}
#: A sentence of each figure (5-8), as the paper writes it.
PAPER_LINES = {
    "NN_PROMPT": "- Multinuclear Restatement: Sentences A and B restate the same content with "
    "equal emphasis.",
    "NS_PROMPT": "- Solutionhood: Sentence B proposes a solution to a problem, question, or "
    "challenge described in Sentence A.",
    "BRIDGE_PROMPT": "- Do NOT output both directions for the same pair",
    "REFINE_PROMPT": "- Keep paths unless they are clearly irrelevant.",
}


def _segment(text: str, doc_id: str = "doc-1", topic: str = "Tom", g: int = 0) -> Segment:
    sentences = sentence_nodes(text, doc_id, 0, [])
    found = [set() for _ in sentences]
    return Segment(g, sentences, topic_node(doc_id, 0, g, sentences, found, topic, "title"))


def _relations(runner: LLMRunner, seg: Segment, topic: str = "Tom"):
    return asyncio.run(
        llm_segment_relations(runner, prompts.NN_PROMPT, prompts.NS_PROMPT, seg, topic)
    )


def _typed(seg: Segment, edges) -> set[tuple[int, int, str, str, str]]:
    index = {node.id: i + 1 for i, node in enumerate(seg.sentences)}
    return {
        (index[e.source], index[e.target], e.role, e.attrs["class"], e.attrs["source"])
        for e in edges
    }


# -- prompts ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_each_prompt_is_the_papers_text_with_our_output_section(name: str):
    text = TEXTS[name]
    template = getattr(prompts, name)
    assert isinstance(template, PromptTemplate) and template.get_template() == text
    kind = prompts.__dict__[f"SENTGRAPH_{name.split('_')[0]}"]
    assert text.startswith(f"---Task: {kind}---\nInstruction:\n")
    assert PAPER_LINES[name] in text
    paper, ours = text.split("---Output---")
    assert "JSON" not in paper and "JSON" in ours
    values = {var: "{x}" for var in template.template_vars}
    assert fill(text, **values) == template.format(**values)


def test_importing_the_prompts_does_not_import_llama_index():
    code = (
        "import sys; import llama_index_e2rag.extract.sentence_graph.prompts; "
        "print('llama_index.core' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_answer_models_read_sloppy_json_and_drop_unreadable_items():
    nn = prompts.NNAnswer.model_validate(
        {
            "core": "1, [3]",
            "relations": [
                {"a": "[1]", "b": 3.0, "type": "Multinuclear  Restatement"},
                {"a": None, "b": 2, "type": "contrast"},
                "not a relation",
            ],
        }
    )
    assert nn.core == [1, 3]
    assert [(r.a, r.b, r.type) for r in nn.relations] == [(1, 3, "multinuclear restatement")]
    assert prompts.NSAnswer.model_validate({"relations": None}).relations == []
    bridge = prompts.BridgeAnswer.model_validate(
        {
            "triples": [
                ["Ada Finch", "drummer of", "Lanternfield"],
                {"head": "A", "relation": "r", "tail": "B"},
                "(C, directed, D)",
                ["only", "two"],
                ["", "empty", "head"],
            ]
        }
    )
    assert bridge.triples == [
        ("Ada Finch", "drummer of", "Lanternfield"),
        ("A", "r", "B"),
        ("C", "directed", "D"),
    ]
    refine = prompts.RefineAnswer.model_validate({"keep": None, "action": "Answer."})
    assert (refine.keep, refine.action) == ([], "answer")
    assert prompts.RefineAnswer.model_validate({"keep": [2]}).action == "expand"
    with pytest.raises(ValueError):
        prompts.RefineAnswer.model_validate({"action": "maybe"})


def test_sentence_lists_and_paths_are_numbered_from_one():
    roles = ["core", "supplementary, attached to [1]"]
    listed = prompts.format_sentence_list(["A  b.", "C d."], roles)
    assert listed == "\n[1] (core) A b.\n[2] (supplementary, attached to [1]) C d."
    paths = prompts.format_paths(
        [
            prompts.EvidencePath("Lanternfield", "The band formed."),
            prompts.EvidencePath("Ada", "Ada  plays\ndrums."),
        ]
    )
    assert paths == "\n[1] (Lanternfield) The band formed.\n[2] (Ada) Ada plays drums."


# -- intra-document relations ---------------------------------------------------------------------
@pytest.mark.parametrize("function_calling", [False, True])
def test_relations_are_typed_from_the_llm_answers(function_calling: bool):
    llm = ScriptedLLM(function_calling=function_calling)
    runner = LLMRunner(llm)
    seg = _segment(TOM)
    result = _relations(runner, seg)
    assert result.is_core == [True, False, True, False]
    assert set(result.nucleus) == {1, 3} and set(result.nucleus.values()) <= {0, 2}
    assert _typed(seg, result.edges) == {
        (1, 3, "sequence", "N-N", "llm"),
        (result.nucleus[1] + 1, 2, "cause", "N-S", "llm"),
        (result.nucleus[3] + 1, 4, "result", "N-S", "llm"),
    }
    assert all(e.kind == EdgeKind.RST and e.doc_id == "doc-1" for e in result.edges)
    assert seg.topic.attrs["llm_dropped"] == 0
    assert runner.stats.calls_by_kind == {"sentgraph_nn": 1, "sentgraph_ns": 1}
    ns_prompt = next(p for p in llm.prompts if "---Task: sentgraph_ns---" in p)
    assert "Topic Entity: Tom" in ns_prompt
    assert f"[2] (supplementary, attached to [{result.nucleus[1] + 1}]) Because" in ns_prompt


def test_numbers_out_of_range_wrong_roles_and_types_are_dropped_and_counted():
    nn = {
        "core": [1, 3, 9],
        "relations": [
            {"a": 1, "b": 9, "type": "sequence"},
            {"a": 3, "b": 1, "type": "Multinuclear Restatement"},
            {"a": 1, "b": 3, "type": "conjunction"},
            {"a": 1, "b": 2, "type": "banana"},
            {"a": 2, "b": 2, "type": "contrast"},
        ],
    }
    ns = {
        "relations": [
            {"nucleus": 3, "satellite": 4, "type": "Evaluation"},
            {"nucleus": 7, "satellite": 2, "type": "cause"},
            {"nucleus": 2, "satellite": 4, "type": "cause"},
            {"nucleus": 1, "satellite": 3, "type": "cause"},
            {"nucleus": 1, "satellite": 4, "type": "result"},
            {"nucleus": 1, "satellite": 2, "type": "sequence"},
        ]
    }
    llm = ScriptedLLM(
        handlers={
            "sentgraph_nn": lambda _: json.dumps(nn),
            "sentgraph_ns": lambda _: json.dumps(ns),
        }
    )
    seg = _segment(TOM)
    result = _relations(LLMRunner(llm), seg)
    assert result.is_core == [True, False, True, False]
    assert result.nucleus[3] == 2
    assert _typed(seg, result.edges) == {
        (1, 3, "restatement", "N-N", "llm"),
        (result.nucleus[1] + 1, 2, "elaboration", "N-S", "default"),
        (3, 4, "evaluation", "N-S", "llm"),
    }
    # nn: 9 in core, 1-9, the repeated pair 1-3, "banana", 2-2; ns: all but the first
    assert seg.topic.attrs["llm_dropped"] == 5 + 5


def test_relation_ends_become_core_and_a_segment_always_keeps_one_core():
    nn = {"core": [], "relations": [{"a": 2, "b": 4, "type": "contrast"}]}
    llm = ScriptedLLM(handlers={"sentgraph_nn": lambda _: json.dumps(nn)})
    assert _relations(LLMRunner(llm), _segment(TOM)).is_core == [False, True, False, True]
    llm = ScriptedLLM(handlers={"sentgraph_nn": lambda _: '{"core": [], "relations": []}'})
    assert _relations(LLMRunner(llm), _segment(TOM)).is_core == [True, False, False, False]


def test_small_segments_make_fewer_calls():
    llm = ScriptedLLM()
    runner = LLMRunner(llm)
    single = _relations(runner, _segment("Tom missed the train."))
    assert (single.is_core, single.edges) == ([True], [])
    all_core = _relations(runner, _segment("Tom missed the train. Then he walked home."))
    assert all_core.is_core == [True, True] and not all_core.nucleus
    assert runner.stats.calls_by_kind == {"sentgraph_nn": 1}


def test_a_malformed_answer_loses_only_its_segment_and_is_counted():
    llm = ScriptedLLM(malformed_marker="Lanternfield")
    runner = LLMRunner(llm, max_retries=0)
    first = _segment(TOM)
    second = _segment("Lanternfield is a band. So it tours.", doc_id="doc-2", topic="Lanternfield")

    async def both():
        return await asyncio.gather(
            *(
                llm_segment_relations(runner, prompts.NN_PROMPT, prompts.NS_PROMPT, seg, topic)
                for seg, topic in ((first, "Tom"), (second, "Lanternfield"))
            ),
            return_exceptions=True,
        )

    intact, broken = asyncio.run(both())
    assert isinstance(broken, LLMOutputError)
    assert len(intact.edges) == 3 and first.topic.attrs["llm_dropped"] == 0
    assert "llm_dropped" not in second.topic.attrs
    assert runner.stats.failures == 1


def test_the_cache_makes_a_rebuild_free(tmp_path):
    first = LLMRunner(ScriptedLLM(), cache=ResponseCache(tmp_path / "cache"))
    built = _relations(first, _segment(TOM))
    first.flush()
    again = LLMRunner(ScriptedLLM(), cache=ResponseCache(tmp_path / "cache"))
    rebuilt = _relations(again, _segment(TOM))
    assert again.stats.calls == 0 and again.stats.cache_hits == 2
    assert rebuilt.edges == built.edges


# -- bridges ----------------------------------------------------------------------------------
def _topic(name: str, doc_id: str) -> GraphNode:
    return _segment(f"{name} is here.", doc_id=doc_id, topic=name).topic


def _bridges(llm: ScriptedLLM, new, candidates, order, **kwargs):
    runner = LLMRunner(llm, max_retries=0)
    edges, failures = asyncio.run(
        llm_bridges(runner, prompts.BRIDGE_PROMPT, new, candidates, order, **kwargs)
    )
    return runner, edges, failures


def test_bridge_triples_are_mapped_to_topics_and_owned_by_the_later_batch_document():
    ada, band = _topic("Ada Finch", "doc-1"), _topic("Lanternfield", "doc-2")
    old = _topic("The Silver Harp (song)", "doc-0")
    llm = ScriptedLLM(names=["The Silver Harp (song)", "Ada Finch", "Lanternfield"])
    runner, edges, failures = _bridges(llm, [ada, band], [old], {"doc-1": 0, "doc-2": 1})
    assert failures == [] and runner.stats.calls_by_kind == {"sentgraph_bridge": 1}
    assert "- Ada Finch\n- Lanternfield\n- The Silver Harp (song)\n---Output---" in llm.prompts[0]
    got = {(e.source, e.target, e.doc_id) for e in edges}
    assert got == {
        (ada.id, old.id, "doc-1"),
        (band.id, old.id, "doc-2"),
        (band.id, ada.id, "doc-2"),
    }
    edge = next(e for e in edges if e.target == ada.id)
    assert edge.kind == EdgeKind.BRIDGE and edge.role == "related"
    assert edge.attrs["source"] == "llm" and edge.attrs["relation"] == "related to"
    assert edge.attrs["description"] == "Ada Finch related to Lanternfield"


def test_bridge_names_are_matched_loosely_and_bad_triples_dropped():
    band = _topic("The Lanternfield", "doc-2")
    old = _topic("Dmitri Varfolomeyev (footballer)", "doc-0")
    other = _topic("Tomas Reyes", "doc-2")
    triples = [
        ["lanternfield", "home club of", "Dmitri Varfolomeyev"],  # variants of listed names
        ["Lanternfield", "rivals", "Unlisted FC"],  # a name nobody listed
        ["Lanternfield", "drummer", "Tomas Reyes"],  # one document
    ]
    llm = ScriptedLLM(handlers={"sentgraph_bridge": lambda _: json.dumps({"triples": triples})})
    _, edges, _ = _bridges(llm, [band, other], [old], {"doc-2": 0})
    assert [(e.source, e.target, e.attrs["relation"]) for e in edges] == [
        (band.id, old.id, "home club of")
    ]


def test_bridge_calls_stay_within_batch_names_and_a_failed_call_is_reported():
    new = [_topic(f"Band {c}", f"doc-{c}") for c in "ABCDE"]
    old = [_topic("Old Song", "doc-0")]
    order = {f"doc-{c}": i for i, c in enumerate("ABCDE")}
    llm = ScriptedLLM(names=["Band A", "Band E", "Old Song"], malformed_marker="Band C")
    runner, edges, failures = _bridges(llm, new, old, order, batch_names=3)
    lists = [p.split("Entity List:")[1].split("---Output---")[0] for p in llm.prompts]
    assert all(1 < entities.count("\n- ") <= 3 for entities in lists)
    assert runner.stats.calls_by_kind["sentgraph_bridge"] == 3 + 1  # the repair round
    assert {(e.source, e.target) for e in edges} == {
        (new[0].id, old[0].id),
        (new[4].id, old[0].id),
    }
    assert [f["doc_id"] for f in failures] == ["doc-C", "doc-D"]
    assert all("LLMOutputError" in f["reason"] for f in failures)


# -- refinement ---------------------------------------------------------------------------------
PATHS = [
    prompts.EvidencePath("Lanternfield", "Lanternfield is a band."),
    prompts.EvidencePath("Ada Finch", "Ada plays drums."),
]


def _refine(llm: ScriptedLLM, paths=PATHS):
    runner = LLMRunner(llm, max_retries=0)
    return asyncio.run(llm_refine(runner, prompts.REFINE_PROMPT, "Who drums?", paths))


def test_refine_decision_is_parsed_and_numbers_mapped_to_candidates():
    llm = ScriptedLLM()
    refinement = _refine(llm)
    assert (refinement.keep, refinement.action) == ((0, 1), "expand")
    assert "Question: Who drums?" in llm.prompts[0]
    assert "[2] (Ada Finch) Ada plays drums." in llm.prompts[0]
    assert _refine(ScriptedLLM(refine_action="answer")).action == "answer"


def test_refine_keeping_nothing_in_range_keeps_every_path():
    llm = ScriptedLLM(handlers={"sentgraph_refine": lambda _: '{"keep": [5], "action": "answer"}'})
    assert _refine(llm).keep == (0, 1)


def test_refine_errors_reach_the_caller_for_its_fallback():
    with pytest.raises(LLMOutputError):
        _refine(ScriptedLLM(malformed_marker="Who drums?"))
