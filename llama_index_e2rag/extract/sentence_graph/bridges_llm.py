"""SentGraph's cross-document step with an LLM (paper 004, §3.1, prompt A.3): the model's
background knowledge relates the topic entities of different documents, and each triple it
finds becomes a ``related`` bridge between the two topics.

The entity list of a call holds new topics first, then candidates in the caller's order (the
shared-entity neighbours first), up to ``batch_names`` names; a pair is considered only when
both names share a call. Names are mapped back to topics through their normalised variants,
so "The Beatles" in an answer finds the topic "Beatles". Triples naming an unlisted entity, or
two topics of one document, are dropped. A call that fails is reported against the batch
documents whose topics it carried; the other calls' bridges stand.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Mapping, Sequence

from llama_index_e2rag.extract.linking import name_variants
from llama_index_e2rag.extract.sentence_graph.bridges import owner
from llama_index_e2rag.extract.sentence_graph.prompts import SENTGRAPH_BRIDGE, BridgeAnswer
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode

if TYPE_CHECKING:
    from llama_index_e2rag.extract.builders import BuildFailure
    from llama_index_e2rag.llm.runner import LLMRunner, PromptLike

logger = logging.getLogger(__name__)

#: The LLM states no strength; 1.0 is the lowest weight a shared-entity bridge can have.
LLM_BRIDGE_WEIGHT = 1.0


async def llm_bridges(
    runner: "LLMRunner",
    prompt: "PromptLike",
    new_topics: Sequence[GraphNode],
    candidates: Sequence[GraphNode],
    batch_order: Mapping[str, int],
    batch_names: int = 50,
) -> tuple[list[GraphEdge], list["BuildFailure"]]:
    """``related`` bridges between the batch's ``new_topics`` and ``candidates`` (other batch
    topics or committed ones), each owned by the later batch document among its ends
    (``bridges.owner``), and the failures of calls that got no usable answer.

    Edges run from the owner's topic to the other one (the LLM's pairs are undirected); the
    triple itself is kept in ``attrs`` (``relation``, ``description``).
    """
    if batch_names < 2:
        raise ValueError(f"batch_names must be at least 2, got {batch_names}")
    topics = [*new_topics, *candidates]
    by_name = _topics_by_name(topics)
    new_names = _unique_names(new_topics)
    other_names = [name for name in _unique_names(candidates) if name not in new_names]
    room = batch_names - min(len(other_names), batch_names // 2)
    calls = []
    for i in range(0, len(new_names), room):
        names = new_names[i : i + room]
        names += other_names[: batch_names - len(names)]
        if len(names) > 1:
            calls.append(names)
    answers = await asyncio.gather(
        *(
            runner.astructured(
                prompt, BridgeAnswer, kind=SENTGRAPH_BRIDGE, entity_list=_entity_list(names)
            )
            for names in calls
        ),
        return_exceptions=True,
    )
    edges: dict[tuple[str, str], GraphEdge] = {}
    failures: list[BuildFailure] = []
    for names, answer in zip(calls, answers):
        if isinstance(answer, BaseException):
            if not isinstance(answer, Exception):
                raise answer
            failures += _failures(names, topics, batch_order, answer)
            continue
        listed = {key for topic in topics if topic.text in names for key in _keys(topic)}
        for head, relation, tail in answer.triples:
            for edge in _triple_bridges(head, relation, tail, listed, by_name, batch_order):
                edges.setdefault((edge.source, edge.target), edge)
    return list(edges.values()), failures


def _unique_names(topics: Sequence[GraphNode]) -> list[str]:
    names: list[str] = []
    for topic in topics:
        if topic.text and topic.text not in names:
            names.append(topic.text)
    return names


def _entity_list(names: Sequence[str]) -> str:
    """``{entity_list}``: the names one per line, as the model should write them back."""
    return "".join(f"\n- {name}" for name in names)


def _keys(topic: GraphNode) -> set[str]:
    """The normalised forms an LLM may use for a topic's entity."""
    return {*name_variants(topic.text), *topic.attrs.get("entity_keys", [])}


def _topics_by_name(topics: Sequence[GraphNode]) -> dict[str, list[GraphNode]]:
    by_name: dict[str, list[GraphNode]] = defaultdict(list)
    for topic in topics:
        for key in _keys(topic):
            if all(known.id != topic.id for known in by_name[key]):
                by_name[key].append(topic)
    return by_name


def _lookup(name: str, listed: set[str], by_name: Mapping[str, list[GraphNode]]) -> list[GraphNode]:
    """The topics an answer's name stands for, if the name was in the call's list."""
    for key in name_variants(name):
        if key in listed and key in by_name:
            return by_name[key]
    return []


def _triple_bridges(
    head: str,
    relation: str,
    tail: str,
    listed: set[str],
    by_name: Mapping[str, list[GraphNode]],
    batch_order: Mapping[str, int],
) -> list[GraphEdge]:
    edges = []
    for a in _lookup(head, listed, by_name):
        for b in _lookup(tail, listed, by_name):
            if a.doc_id == b.doc_id or not ({a.doc_id, b.doc_id} & batch_order.keys()):
                continue
            doc = owner(a.doc_id, b.doc_id, batch_order)
            source, target = (a, b) if a.doc_id == doc else (b, a)
            edges.append(
                GraphEdge(
                    source=source.id,
                    target=target.id,
                    kind=EdgeKind.BRIDGE,
                    doc_id=doc,
                    role="related",
                    attrs={
                        "entities": [a.text, b.text],
                        "relation": relation,
                        "weight": LLM_BRIDGE_WEIGHT,
                        "source": "llm",
                        "description": f"{head} {relation} {tail}",
                    },
                )
            )
    return edges


def _failures(
    names: Sequence[str],
    topics: Sequence[GraphNode],
    batch_order: Mapping[str, int],
    error: Exception,
) -> list["BuildFailure"]:
    """One failure per batch document whose topics were in the failed call."""
    reason = f"{type(error).__name__}: {error}"
    logger.warning("sentence graph: an LLM bridging call failed (%s)", reason)
    listed = set(names)
    docs = {t.doc_id for t in topics if t.text in listed and t.doc_id in batch_order}
    return [
        {
            "doc_id": doc,
            "chunk_id": "",
            "reason": f"sentence graph: LLM bridges among {len(names)} topics failed: {reason}",
        }
        for doc in sorted(docs, key=lambda d: batch_order[d])
    ]
