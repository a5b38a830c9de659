"""SentGraph's intra-document step with an LLM (paper 004, §3.1): per segment, the N-N call
(prompt A.1) finds the core sentences and the N-N relations among them, the supplementary
sentences are attached to a core locally, then the N-S call (prompt A.2) types how each
supplementary sentence supports its nucleus.

The LLM's numbers and types are checked against the segment: a number out of range, a relation
whose ends have the wrong role, an unknown type or a repeated pair is dropped and counted on the
topic (``attrs["llm_dropped"]``), so a sloppy answer costs only its bad items. A call that fails
outright (``LLMOutputError``, ``LLMTimeoutError``, ...) raises: the builder then falls back to
the LLM-free rules for that segment and reports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from llama_index_e2rag.extract.sentence_graph.discourse import attach as lexical_attach
from llama_index_e2rag.extract.sentence_graph.prompts import (
    SENTGRAPH_NN,
    SENTGRAPH_NS,
    NNAnswer,
    NSAnswer,
    format_sentence_list,
)
from llama_index_e2rag.extract.sentence_graph.relations import (
    NN_TYPES,
    NS_TYPES,
    normalise_type,
    rst_edge,
)
from llama_index_e2rag.extract.sentence_graph.segments import Segment
from llama_index_e2rag.schema import GraphEdge

if TYPE_CHECKING:
    from llama_index_e2rag.llm.runner import LLMRunner, PromptLike

#: ``is_core -> {supplementary index: core index}`` within a segment: the local attachment
#: ("semantic similarity and contextual distance") between the two LLM calls.
Attach = Callable[[Sequence[bool]], dict[int, int]]


@dataclass
class SegmentRelations:
    """One segment's relations, indices into ``Segment.sentences``."""

    is_core: list[bool]
    #: ``{supplementary sentence: its nucleus}``, the nucleus always a core sentence.
    nucleus: dict[int, int]
    edges: list[GraphEdge]


async def llm_segment_relations(
    runner: "LLMRunner",
    nn_prompt: "PromptLike",
    ns_prompt: "PromptLike",
    segment: Segment,
    topic_entity: str,
    attach: Optional[Attach] = None,
) -> SegmentRelations:
    """The core split, attachments and ``rst`` edges (``source="llm"``) of one segment.

    ``attach`` defaults to the LLM-free lexical attachment (``discourse.attach`` without cues).
    A one-sentence segment needs no call; a segment whose sentences are all core skips the N-S
    call. A satellite the N-S answer leaves out keeps its local nucleus with a default
    ``elaboration`` edge (``source="default"``).
    """
    nodes = segment.sentences
    texts = [node.text for node in nodes]
    n = len(nodes)
    if n < 2:
        return SegmentRelations([True] * n, {}, [])
    nn = await runner.astructured(
        nn_prompt,
        NNAnswer,
        kind=SENTGRAPH_NN,
        topic_entity=topic_entity,
        sentence_list=format_sentence_list(texts),
    )
    is_core, nn_edges, dropped = _nn_relations(nn, segment)
    if attach is None:
        nucleus = lexical_attach(texts, is_core, [None] * n)
    else:
        nucleus = attach(is_core)
    ns_edges: list[GraphEdge] = []
    if nucleus:
        roles = [
            "core" if is_core[i] else f"supplementary, attached to [{nucleus[i] + 1}]"
            for i in range(n)
        ]
        ns = await runner.astructured(
            ns_prompt,
            NSAnswer,
            kind=SENTGRAPH_NS,
            topic_entity=topic_entity,
            sentence_list=format_sentence_list(texts, roles),
        )
        ns_edges, ns_dropped = _ns_relations(ns, segment, is_core, nucleus)
        dropped += ns_dropped
    segment.topic.attrs["llm_dropped"] = dropped
    return SegmentRelations(is_core, nucleus, nn_edges + ns_edges)


def _index(number: int, n: int) -> Optional[int]:
    """A 1-based prompt number as an index into the segment, None when out of range."""
    return number - 1 if 1 <= number <= n else None


def _nn_relations(answer: NNAnswer, segment: Segment) -> tuple[list[bool], list[GraphEdge], int]:
    """Core flags, N-N edges (earlier → later) and the number of answer items dropped.

    The ends of a valid N-N relation are core even when the core list forgot them; a segment
    the LLM gives no core keeps its first sentence as core, so every satellite has a nucleus.
    """
    nodes = segment.sentences
    n = len(nodes)
    dropped = 0
    is_core = [False] * n
    for number in answer.core:
        at = _index(number, n)
        if at is None:
            dropped += 1
        else:
            is_core[at] = True
    pairs: dict[tuple[int, int], str] = {}
    for relation in answer.relations:
        a, b = _index(relation.a, n), _index(relation.b, n)
        type_ = normalise_type(relation.type)
        if a is None or b is None or a == b or type_ not in NN_TYPES:
            dropped += 1
            continue
        pair = (min(a, b), max(a, b))
        if pair in pairs:
            dropped += 1
            continue
        pairs[pair] = type_
        is_core[a] = is_core[b] = True
    if not any(is_core):
        is_core[0] = True
    doc_id = nodes[0].doc_id
    edges = [
        rst_edge(nodes[a].id, nodes[b].id, "N-N", type_, doc_id, "llm")
        for (a, b), type_ in sorted(pairs.items())
    ]
    return is_core, edges, dropped


def _ns_relations(
    answer: NSAnswer, segment: Segment, is_core: list[bool], nucleus: dict[int, int]
) -> tuple[list[GraphEdge], int]:
    """One N-S edge per satellite and the number of answer items dropped.

    The LLM may hang a satellite from another core than the local attachment proposed
    (``nucleus`` is updated); its first valid relation for a satellite wins.
    """
    nodes = segment.sentences
    n = len(nodes)
    dropped = 0
    typed: dict[int, tuple[int, str]] = {}
    for relation in answer.relations:
        head, tail = _index(relation.nucleus, n), _index(relation.satellite, n)
        type_ = normalise_type(relation.type)
        if (
            head is None
            or tail is None
            or not is_core[head]
            or is_core[tail]
            or type_ not in NS_TYPES
            or tail in typed
        ):
            dropped += 1
            continue
        typed[tail] = (head, type_)
    doc_id = nodes[0].doc_id
    edges = []
    for satellite in sorted(nucleus):
        head, type_ = typed.get(satellite, (nucleus[satellite], ""))
        nucleus[satellite] = head
        source = "llm" if type_ else "default"
        edges.append(
            rst_edge(
                nodes[head].id, nodes[satellite].id, "N-S", type_ or "elaboration", doc_id, source
            )
        )
    return edges, dropped
