"""What each node's vector is made of: its own text, or GroundedKG-RAG's basic node embedding.

GroundedKG-RAG (paper 002, §3.3) embeds an action node as ``α·f(name) + (1−α)·mean f(grounded
sentences)``. The LLM-free extractor's events have exactly that: a short name ("Harry open
door") and the sentence they are grounded in, whose vector the index computes anyway. So their
vector is derived from those two instead of embedding the event's clause on its own, and
ChronoRAG's facts made from events take their event's vector. Names repeat across a book ("he
say"), so far fewer and shorter texts reach the embedding model. A sentence may name the text
it is embedded from instead (``attrs["embed_text"]``: SentGraph's "topic: sentence" option).
Every other node embeds its own text.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import GraphNode, NodeKind

#: α of the basic node embedding: the weight of the name against the grounded sentence.
ALPHA = 0.5


def sources(node: GraphNode, graph: GraphStore) -> tuple[str, ...]:
    """The texts whose vectors make ``node``'s vector (embedded once each, across nodes)."""
    base = _base(node, graph)
    if base is not None and base is not node:
        return sources(base, graph)
    name, sentence = node.name, node.attrs.get("sentence_text")
    if node.kind == NodeKind.EVENT and name and sentence:
        return (name, sentence)
    context = node.attrs.get("embed_text")
    if node.kind == NodeKind.SENTENCE and context:
        return (context,)
    return (node.text,)


def vector(
    node: GraphNode, graph: GraphStore, embedded: Callable[[str], np.ndarray]
) -> np.ndarray:
    """``node``'s unit vector from the vectors of its ``sources``."""
    texts = sources(node, graph)
    if len(texts) == 1:
        return embedded(texts[0])
    name, sentence = (_unit(embedded(t)) for t in texts)
    return _unit(ALPHA * name + (1.0 - ALPHA) * sentence)


def _base(node: GraphNode, graph: GraphStore) -> Optional[GraphNode]:
    """The event a fact was made from (ChronoRAG's LLM-free layer 1), else the node itself.

    Such a fact (``source`` "events") restates its event as a readable sentence, so it takes
    the event's vector whatever its wording; any other fact shares it only with the same text.
    """
    event_id = node.attrs.get("event_id") if node.kind == NodeKind.FACT else None
    if event_id is None:
        return node
    event = graph.get_node(event_id)
    if event is None:
        return node
    return event if node.attrs.get("source") == "events" or event.text == node.text else node


def _unit(vec: np.ndarray) -> np.ndarray:
    vec = np.asarray(vec, dtype=np.float32)
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else vec
