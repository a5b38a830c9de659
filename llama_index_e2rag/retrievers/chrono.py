"""ChronoRAG retrieval (paper 003, §3.1 "Neighborhood Assembling", §3.2): keys, values, children.

A layer-1 fact found by vector search is only the *key*; what the LLM reads is its *value*, the
window of neighbouring facts of the same document concatenated in narrative-index order, followed by
the layer-0 chunks the key was derived from (they keep the details and dialogue a summary drops).
Passages come out ranked by relevance (the paper) or in story order, and never exceed the budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Hashable, Literal, Optional

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_e2rag.retrievers.base import RetrievalIO, StoresRetriever
from llama_index_e2rag.context.keys import POS_KEY, POSITION_KEY, bookkeeping_keys
from llama_index_e2rag.context.evidence import ContextOrder, format_position
from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.extract.chrono import TOKEN_EPSILON, TokenCounter, approx_token_count
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.modes import layer_missing_python
from llama_index_e2rag.retrievers.budget import within_budget
from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind, Position, normalize_text
from llama_index_e2rag.stores.state_cache import StateCache
from llama_index_e2rag.stores.port import Stores
from llama_index_e2rag.vectors.base import VectorHit

PassageOrder = Literal["relevance", "story"]

_TERM = re.compile(r"[a-z0-9]+")
_WORD = re.compile(r"\S+")
_STOP = frozenset(
    "a an the of and or to in on at by for with from as is was were be been it its he she they "
    "his her their them him i you we this that these those what who whom how when where why did "
    "do does not no but so then there had has have into out up down".split()
)


class ChronoLayerMissingError(E2RAGError, ValueError):
    """ChronoRAG retrieval was asked of an index built without the chrono layers."""


def has_chrono_layer(graph: GraphStore) -> bool:
    """True when some document of ``graph`` was built by ``ChronoLayerBuilder``."""
    if any(node.attrs.get("layer") == 1 for node in graph.nodes(NodeKind.FACT)):
        return True
    return any(node.attrs.get("layer") == 0 for node in graph.nodes(NodeKind.CHUNK))


@dataclass
class _Passage:
    """One retrieved passage before it becomes a NodeWithScore."""

    id: str
    layer: int
    text: str
    score: float
    doc_id: str
    pos: Position
    span: tuple[int, int]
    metadata: dict[str, Any] = field(default_factory=dict)
    relationships: dict[NodeRelationship, Any] = field(default_factory=dict)


class ChronoRetriever(StoresRetriever):
    """Hierarchical ChronoRAG retriever over an ``E2RAGIndex`` built with ``ChronoLayerBuilder``.

    ``similarity_top_k`` facts are retrieved as keys (20 and a 1,500-token budget in the paper);
    each key's value is its window of ±``window`` neighbouring facts; after it come up to
    ``children_per_fact`` of its layer-0 chunks, those sharing most words with the query and the
    key. Facts already shown by a better-ranked passage are not repeated. ``order="story"``
    re-sorts the selected passages by narrative position, and the query engine shows them to the
    LLM in the same order (``context_order``); ``token_budget`` (counted with ``token_counter`` on
    passage texts) is filled in relevance order, the overflowing passage cut. Every passage carries
    ``pos`` (``[doc_order, char_offset, ordinal]``) and a readable ``position``.

    ``similarity_top_k`` counts facts used as keys; each brings one value passage and up to
    ``children_per_fact`` chunk passages, so a result holds up to ``similarity_top_k * (1 +
    children_per_fact)`` nodes. ``budget_words`` replaces ``token_budget``: the passages fill that
    many words in relevance order, no sentence twice, the last one cut at a sentence end.
    ``faithful=True`` keeps the paper's presentation (by relevance) as the default ``order``;
    otherwise passages are presented in story order, so a character's earlier and later facets
    read in the order they happen. ``filters`` (``MetadataFilters`` on document metadata) takes
    the keys from the matching documents only.
    """

    def __init__(
        self,
        stores: Stores,
        embed_model: BaseEmbedding,
        similarity_top_k: int = 20,
        window: int = 1,
        order: Optional[PassageOrder] = None,
        token_budget: Optional[int] = 1500,
        children_per_fact: int = 1,
        token_counter: Optional[TokenCounter] = None,
        budget_words: Optional[int] = None,
        faithful: bool = False,
        filters: Optional[MetadataFilters] = None,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        if order is None:
            order = "relevance" if faithful else "story"
        if similarity_top_k < 1:
            raise ValueError(f"similarity_top_k must be at least 1, got {similarity_top_k}")
        if window < 0:
            raise ValueError(f"window must be 0 or more, got {window}")
        if order not in ("relevance", "story"):
            raise ValueError(f"order must be 'relevance' or 'story', got {order!r}")
        if token_budget is not None and token_budget <= 0:
            raise ValueError(f"token_budget must be positive or None, got {token_budget}")
        if children_per_fact < 0:
            raise ValueError(f"children_per_fact must be 0 or more, got {children_per_fact}")
        if not _TIMELINES.get(stores) and not has_chrono_layer(stores.graph):
            raise ChronoLayerMissingError(layer_missing_python("chrono", "mode='chrono'"))
        super().__init__(stores, embed_model, budget_words, filters, callback_manager, verbose)
        self.similarity_top_k = similarity_top_k
        self.window = window
        self.order = order
        self.token_budget = None if budget_words is not None else token_budget
        self.faithful = faithful
        self.children_per_fact = children_per_fact
        self.token_counter: TokenCounter = token_counter or approx_token_count

    @property
    def context_order(self) -> ContextOrder:
        """How the query engine presents the passages: as ranked (the paper) or in story order."""
        return "retrieval" if self.order == "relevance" else "story"

    async def _run(self, query: QueryBundle, io: RetrievalIO) -> list[NodeWithScore]:
        embedding = await self._query_embedding(query, io)
        scope = self._scope()
        hits = await io.search(self._stores, scope, NodeKind.FACT, embedding, self.similarity_top_k)
        return await io.offload(self._assemble, query.query_str, hits)

    # -- assembling -----------------------------------------------------------------------------
    def _assemble(self, query: str, hits: list[VectorHit]) -> list[NodeWithScore]:
        """Keys → values → children, then budget and order (shared by sync and async)."""
        graph: GraphStore = self._stores.graph
        timelines = _TIMELINES.get(self._stores)
        keys = self._keys(graph, hits, timelines)
        shown: set[str] = set()
        passages: list[_Passage] = []
        query_terms = _terms(query)
        for key, score in keys:
            timeline, index_of = timelines[key.doc_id]
            at = index_of[key.id]
            window = timeline[max(at - self.window, 0) : at + self.window + 1]
            new_facts = _without_repeats([fact for fact in window if fact.id not in shown])
            shown.update(fact.id for fact in window)
            children = [
                c for c in graph.neighbors(key.id, [EdgeKind.CHILD], "out")
                if c.attrs.get("layer") == 0
            ]
            if new_facts:
                passages.append(_value_passage(key, new_facts, children, score))
            for chunk in self._best_children(children, query_terms | _terms(key.text), shown):
                shown.add(chunk.id)
                passages.append(_chunk_passage(chunk, key, score))
        selected = self._within_budget(passages)
        nodes = [_to_node(p) for p in selected]
        if self.budget_words is not None:
            nodes = within_budget(nodes, self.budget_words)
        if self.order == "story":
            position = {p.id: (p.pos, p.layer, p.id) for p in selected}
            nodes.sort(key=lambda n: position[n.node.node_id])
        return nodes

    def _keys(
        self, graph: GraphStore, hits: list[VectorHit], timelines: "_Timelines"
    ) -> list[tuple[GraphNode, float]]:
        """Chrono facts among the vector hits (still in the timelines), best first, each once."""
        nodes = {n.id: n for n in graph.get_nodes([hit.id for hit in hits])}
        keys: list[tuple[GraphNode, float]] = []
        seen: set[str] = set()
        for hit in hits:
            node = nodes.get(hit.id)
            if node is None or node.id in seen or node.attrs.get("layer") != 1:
                continue
            if node.id not in timelines.get(node.doc_id, ((), {}))[1]:
                continue
            seen.add(node.id)
            keys.append((node, hit.score))
        return keys

    def _best_children(
        self, children: list[GraphNode], terms: set[str], shown: set[str]
    ) -> list[GraphNode]:
        """The key's layer-0 chunks sharing most words with query and key (story order on ties)."""
        fresh = [c for c in children if c.id not in shown]
        ranked = sorted(fresh, key=lambda c: (-len(terms & _terms(c.text)), c.pos, c.id))
        return ranked[: self.children_per_fact]

    def _within_budget(self, passages: list[_Passage]) -> list[_Passage]:
        """Passages in relevance order until the budget is spent; the overflowing one is cut."""
        if self.token_budget is None:
            return passages
        selected: list[_Passage] = []
        remaining = float(self.token_budget)
        for passage in passages:
            cost = self.token_counter(passage.text)
            if cost <= remaining + TOKEN_EPSILON:
                selected.append(passage)
                remaining -= cost
                continue
            cut = _truncate(passage.text, remaining, self.token_counter)
            if cut:
                passage.text = cut
                passage.metadata["truncated"] = True
                selected.append(passage)
            break
        return selected


_Timelines = dict[str, tuple[list[GraphNode], dict[str, int]]]


def _timelines(stores: Stores, state: Hashable) -> _Timelines:
    """Per document, its layer-1 facts in narrative-index order and each fact's place there
    (windows never leave the document). Built once per content state: a query reads a few
    windows, not every fact of the book."""
    by_doc: dict[str, list[GraphNode]] = {}
    for fact in stores.graph.nodes(NodeKind.FACT):
        if fact.attrs.get("layer") == 1:
            by_doc.setdefault(fact.doc_id, []).append(fact)
    out: _Timelines = {}
    for doc_id, facts in by_doc.items():
        facts.sort(key=lambda f: (int(f.attrs.get("chrono_index", 0)), f.pos, f.id))
        out[doc_id] = (facts, {f.id: i for i, f in enumerate(facts)})
    return out


_TIMELINES: StateCache[_Timelines] = StateCache(_timelines)


def _without_repeats(facts: list[GraphNode]) -> list[GraphNode]:
    """Drop facts whose text another fact of the value already says (nested event clauses)."""
    said = [normalize_text(f.text) for f in facts]
    kept = []
    for i, fact in enumerate(facts):
        inside = any(
            j != i and said[i] in said[j] and (said[i] != said[j] or j < i)
            for j in range(len(facts))
        )
        if not inside:
            kept.append(fact)
    return kept


def _terms(text: str) -> set[str]:
    """Content-word stems (5-letter prefixes) for the cheap query/chunk overlap."""
    return {w[:5] for w in _TERM.findall(text.lower()) if w not in _STOP}


def _truncate(text: str, budget: float, counter: TokenCounter) -> str:
    """Longest word prefix of ``text`` (original spacing kept) whose count stays within budget."""
    ends = [m.end() for m in _WORD.finditer(text)]
    lo, hi = 0, len(ends)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter(text[: ends[mid - 1]]) <= budget + TOKEN_EPSILON:
            lo = mid
        else:
            hi = mid - 1
    return text[: ends[lo - 1]] if lo else ""


def _value_passage(
    key: GraphNode, facts: list[GraphNode], children: list[GraphNode], score: float
) -> _Passage:
    first = facts[0]
    spans = [f.span or (f.pos[1], f.pos[1]) for f in facts]
    return _Passage(
        id=key.id,
        layer=1,
        text="\n".join(" ".join(f.text.split()) for f in facts),
        score=score,
        doc_id=key.doc_id,
        pos=first.pos,
        span=(min(s[0] for s in spans), max(s[1] for s in spans)),
        metadata={
            "layer": 1,
            "doc_id": key.doc_id,
            POS_KEY: list(first.pos),
            POSITION_KEY: format_position(first.pos),
            "narrative_index": key.attrs.get("narrative_index"),
            "key": key.text,
            "fact_ids": [f.id for f in facts],
            "child_ids": [c.id for c in children],
        },
        relationships={
            NodeRelationship.CHILD: [RelatedNodeInfo(node_id=c.id) for c in children],
        },
    )


def _chunk_passage(chunk: GraphNode, key: GraphNode, score: float) -> _Passage:
    start = (chunk.span or (chunk.pos[1], chunk.pos[1]))[0]
    return _Passage(
        id=chunk.id,
        layer=0,
        text=chunk.text,
        score=score,
        doc_id=chunk.doc_id,
        pos=chunk.pos,
        span=chunk.span or (start, start + len(chunk.text)),
        metadata={
            "layer": 0,
            "doc_id": chunk.doc_id,
            POS_KEY: list(chunk.pos),
            POSITION_KEY: format_position(chunk.pos),
            "chrono_index": chunk.attrs.get("chrono_index"),
            "parent_id": key.id,
        },
        relationships={NodeRelationship.PARENT: RelatedNodeInfo(node_id=key.id)},
    )


def _to_node(passage: _Passage) -> NodeWithScore:
    relationships = dict(passage.relationships)
    relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=passage.doc_id)
    hidden = bookkeeping_keys(passage.metadata)  # every key of a passage is ours
    node = TextNode(
        id_=passage.id,
        text=passage.text,
        metadata=passage.metadata,
        relationships=relationships,
        start_char_idx=passage.span[0],
        end_char_idx=passage.span[1],
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=[*passage.metadata],
    )
    return NodeWithScore(node=node, score=passage.score)
