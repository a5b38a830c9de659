"""``sentence_graph`` mode: SentGraph's online stage (paper 004, §3.2) over the stores.

Anchors, refinement, path expansion and ordering are ``ranking.sentence_graph``; this module reads
the graph built by ``SentenceGraphBuilder`` into that view (once per store state), runs the
refinement (an LLM callable or the documented rule) and turns the ranked sentences into nodes.
Each node is one sentence with its position and the relation path that reached it (metadata
``relation_path``, shown to the LLM); its ``graph_nodes`` evidence lists the path's sentences and
topics, so the linearised context also prints the ``rst`` and ``bridge`` edges between them.
"""

from __future__ import annotations

import logging
from functools import partial
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Hashable, Literal, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.vector_stores.types import MetadataFilters
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)

from llama_index_e2rag.context.keys import EVIDENCE_KEY, POS_KEY, POSITION_KEY, bookkeeping_keys
from llama_index_e2rag.context.evidence import ContextOrder, format_position
from llama_index_e2rag.errors import (
    E2RAGError,
    LLMOutputError,
    LLMTimeoutError,
    MissingModelError,
)
from llama_index_e2rag.extract.sentence_graph.prompts import EvidencePath, REFINE_PROMPT
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.graph.node_rows import NodeRows, docs_of, prefetch
from llama_index_e2rag.modes import layer_missing_python
from llama_index_e2rag.stores.lexical import LexicalIndex
from llama_index_e2rag.llm.runner import run_sync
from llama_index_e2rag.ranking.sentence_graph import (
    AnchorRetriever,
    Bridge,
    BridgeDirection,
    Candidate,
    Ranked,
    Refinement,
    SentenceGraphView,
    anchor_candidates,
    expand,
    rank,
    refine_by_rule,
    relation_path,
    unused_gate,
)
from llama_index_e2rag.retrievers.filters import DocScope
from llama_index_e2rag.retrievers.base import RetrievalIO, StoresRetriever
from llama_index_e2rag.retrievers import sentence_graph_file
from llama_index_e2rag.retrievers.budget import within_budget
from llama_index_e2rag.retrievers.sentence_graph_refine import llm_refine
from llama_index_e2rag.retrievers.vector import chunk_metadata
from llama_index_e2rag.schema import GraphNode, NodeKind
from llama_index_e2rag.stores import read_model_file
from llama_index_e2rag.stores.state_cache import StateCache
from llama_index_e2rag.stores.port import Stores

if TYPE_CHECKING:
    from llama_index_e2rag.llm.runner import LLMRunner

RefineMode = Literal["auto", "llm", "rule", "none"]
PathOrder = Literal["story", "path"]
#: ``(question, [(topic entity, sentence)] in candidate order)`` → the anchors to keep (0-based
#: positions in that list; none kept means all) and whether to expand.
Refiner = Callable[[str, Sequence[tuple[str, str]]], Awaitable[Refinement]]
logger = logging.getLogger(__name__)


class SentenceGraphMissingError(E2RAGError, ValueError):
    """SentGraph retrieval was asked of an index built without ``SentenceGraphBuilder``."""


def has_sentence_graph(graph: GraphStore) -> bool:
    """True when some document of ``graph`` has SentGraph topics."""
    return any(n.attrs.get("sentgraph") == "topic" for n in graph.nodes(NodeKind.TOPIC))


@dataclass
class _SentenceGraph:
    """The ranking view and, row for row, the sentences' graph nodes (``NodeRows`` when the
    view was read from its file: a node is read when a query returns it)."""

    view: SentenceGraphView
    nodes: Sequence[GraphNode]


def _build(stores: Stores, state: Hashable) -> _SentenceGraph:
    """The view of this content state: read from its persisted model (``sentence_graph_file``),
    else derived from the graph and persisted for the next process."""
    key = sentence_graph_file.content_key(stores, state)
    data = sentence_graph_file.read(stores, key)
    if data is not None:
        return _assemble(stores, data, NodeRows(data["ids"], data["docs"], stores.graph.get_nodes))
    data, nodes = sentence_graph_file.derive(stores)
    sentence_graph_file.write(stores, key, data)
    return _assemble(stores, data, nodes)


def _assemble(stores: Stores, data: dict[str, Any], nodes: Sequence[GraphNode]) -> _SentenceGraph:
    """The ranking view of a model (``sentence_graph_file``), with the sentence vectors."""
    topics, topic_of, texts = data["topics"], data["topic_of"], data["texts"]
    members: dict[str, list[int]] = {}
    for i, topic in enumerate(topic_of):
        members.setdefault(topic, []).append(i)  # cores first: the rows are sorted that way
    bridges_out: dict[str, list[Bridge]] = {}
    bridges_in: dict[str, list[Bridge]] = {}
    for source, target, role, why in data["bridges"]:
        bridges_out.setdefault(source, []).append(Bridge(target, role, why))
        bridges_in.setdefault(target, []).append(Bridge(source, role, why))
    view = SentenceGraphView(
        ids=list(data["ids"]),
        texts=texts,
        topic_of=topic_of,
        role=data["role"],
        vectors=stores.matrix_of(data["ids"]),
        lexical=LexicalIndex.build(
            data["ids"], [f"{topics.get(t, '')} {s}" for t, s in zip(topic_of, texts)]
        ),
        rst=[[(b, type_, cls) for b, type_, cls in found] for found in data["rst"]],
        bridges_out=bridges_out,
        bridges_in=bridges_in,
        members=members,
        topic_names=topics,
    )
    return _SentenceGraph(view, nodes)


_VIEW: StateCache[_SentenceGraph] = StateCache(_build)


def save_read_model(stores: Stores) -> None:
    """Derive and persist the view of the stores' current content now (``e2rag index`` after
    writing an index with the sentence graph layer), so the next process's first query reads it."""
    read_model_file.save_now(stores, _VIEW)


class SentenceGraphRetriever(StoresRetriever):
    """Sentences of the SentGraph layer: anchors, refinement, relation paths, a word budget.

    Args:
        anchor_k: candidate anchors from the fusion of dense cosine and BM25 (``similarity_top_k``
            is an alias, for the CLI); ``anchor_retriever`` picks "hybrid", "dense" or "bm25".
        max_anchors: anchors kept by the refinement.
        refine: "llm" (the index's LLM or ``refiner``; one is required), "rule"
            (``ranking.sentence_graph.refine_by_rule``), "none" (the top ``max_anchors``),
            "auto" (the LLM when there is one, else the rule). An "answer" verdict skips path
            expansion.
        refiner: the refinement to use instead of the paper's prompt (``refine_prompt``, the
            default when the index has an LLM); an unusable or late answer falls back to the
            rule.
        max_path_length, beam, max_expansions, bridge_direction: path expansion
            (``ranking.sentence_graph.expand``).
        fill: after the paths, the unused candidates in fusion order.
        order: "story" presents the kept sentences in narrative order; "path" as ranked.
        budget_words: fill this many words in rank order (no sentence twice).
        filters: ``MetadataFilters`` on document metadata: anchors and kept sentences come from
            the matching documents only.
        faithful: the paper's algorithm: LLM refinement, path sentences only, in path order.
    """

    def __init__(
        self,
        stores: Stores,
        embed_model: BaseEmbedding,
        llm_runner: Optional["LLMRunner"] = None,
        *,
        anchor_k: int = 20,
        similarity_top_k: Optional[int] = None,
        max_anchors: int = 5,
        anchor_retriever: AnchorRetriever = "hybrid",
        refine: Optional[RefineMode] = None,
        refiner: Optional[Refiner] = None,
        max_path_length: int = 3,
        beam: int = 1,
        max_expansions: int = 10,
        bridge_direction: BridgeDirection = "out",
        fill: Optional[bool] = None,
        order: Optional[PathOrder] = None,
        budget_words: Optional[int] = None,
        faithful: bool = False,
        refine_prompt: Any = None,
        filters: Optional[MetadataFilters] = None,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        anchor_k = similarity_top_k if similarity_top_k is not None else anchor_k
        refine = refine or ("llm" if faithful else "auto")
        order = order or ("path" if faithful else "story")
        for name, value in (("anchor_k", anchor_k), ("max_anchors", max_anchors),
                            ("max_path_length", max_path_length), ("beam", beam)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if max_expansions < 0:
            raise ValueError(f"max_expansions must be 0 or more, got {max_expansions}")
        _check_choice("anchor_retriever", anchor_retriever, ("hybrid", "dense", "bm25"))
        _check_choice("refine", refine, ("auto", "llm", "rule", "none"))
        _check_choice("bridge_direction", bridge_direction, ("out", "both"))
        _check_choice("order", order, ("story", "path"))
        if refiner is None and llm_runner is not None:
            refiner = self._llm_refine
        if refine == "llm" and refiner is None:
            raise MissingModelError(
                "refine='llm' needs an LLM: pass llm= to the index (or refiner=...), or use "
                "refine='rule' for the LLM-free rule"
            )
        if not _VIEW.get(stores).nodes and not has_sentence_graph(stores.graph):
            raise SentenceGraphMissingError(
                layer_missing_python("sentence_graph", "mode='sentence_graph'")
            )
        super().__init__(stores, embed_model, budget_words, filters, callback_manager, verbose)
        self._llm_runner = llm_runner
        self._refine_prompt = refine_prompt
        self._refiner = refiner if refine in ("auto", "llm") else None
        self.anchor_k = anchor_k
        self.max_anchors = max_anchors
        self.anchor_retriever = anchor_retriever
        self.refine = refine
        self.max_path_length = max_path_length
        self.beam = beam
        self.max_expansions = max_expansions
        self.bridge_direction = bridge_direction
        self.fill = (not faithful) if fill is None else fill
        self.order = order
        self.faithful = faithful

    @property
    def context_order(self) -> ContextOrder:
        """Story order unless the sentences are presented along their paths."""
        return "retrieval" if self.order == "path" else "story"

    def _get_prompts(self) -> PromptDictType:
        return {"refine_prompt": self._refine_prompt or REFINE_PROMPT}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        self._refine_prompt = prompts_dict.get("refine_prompt", self._refine_prompt)

    async def _llm_refine(self, question: str, candidates: Sequence[tuple[str, str]]) -> Refinement:
        """The paper's refinement prompt (A.4) through the index's runner, one path per anchor."""
        prompt = self._get_prompts()["refine_prompt"]
        paths = [EvidencePath(topic, text) for topic, text in candidates]
        answer = await llm_refine(self._llm_runner, prompt, question, paths)
        return Refinement(answer.keep, answer.action)

    # -- the retrieval ---------------------------------------------------------------------------
    async def _run(self, query: QueryBundle, io: RetrievalIO) -> list[NodeWithScore]:
        question = query.query_str
        q_vec = await self._query_embedding(query, io)
        state = await io.offload(_VIEW.get, self._stores)
        allowed = await io.offload(_allowed, state, self._scope())
        cosines, candidates = await io.offload(
            self._candidates, state.view, question, q_vec, allowed
        )
        refinement, how = await self._refine(state.view, question, candidates, io)
        return await io.offload(
            self._results, state, cosines, candidates, refinement, how, allowed
        )

    # -- steps ---------------------------------------------------------------------------------
    def _candidates(
        self,
        view: SentenceGraphView,
        query: str,
        q_vec: Sequence[float],
        allowed: Optional[np.ndarray] = None,
    ) -> tuple[np.ndarray, list[Candidate]]:
        """Query cosines and the fusion-ranked candidates: the first ``anchor_k`` are the anchor
        candidates; under a word budget with ``fill`` the list goes on (in fusion order) until it
        holds twice the budget, so the fill can use the whole budget, as every mode does.
        ``allowed`` (the filter's sentences) keeps the others out of the candidates and gives
        them the lowest cosine, so paths do not lead there."""
        cosines = view.cosines(q_vec)
        filling = bool(self.fill and self.budget_words)
        depth = self.anchor_k if allowed is None and not filling else len(view)
        if allowed is not None:
            cosines = np.where(allowed, cosines, -1.0).astype(np.float32)
        ranked = anchor_candidates(view, cosines, query, depth, self.anchor_retriever)
        if allowed is not None:
            ranked = [c for c in ranked if allowed[c.idx]]
        if not filling:
            return cosines, ranked[: self.anchor_k]
        words, cut = 0, len(ranked)
        for i, candidate in enumerate(ranked):
            words += len(view.texts[candidate.idx].split())
            if i + 1 >= self.anchor_k and words >= 2 * self.budget_words:
                cut = i + 1
                break
        return cosines, ranked[:cut]

    def _offline_refine(
        self, view: SentenceGraphView, query: str, candidates: list[Candidate]
    ) -> tuple[Refinement, str]:
        """The LLM-free refinement and its name ("rule" or "none")."""
        candidates = candidates[: self.anchor_k]
        if self.refine == "none":
            top = tuple(range(min(self.max_anchors, len(candidates))))
            return Refinement(top, "expand"), "none"
        return refine_by_rule(view, candidates, query, self.max_anchors), "rule"

    async def _refine(
        self, view: SentenceGraphView, query: str, candidates: list[Candidate], io: RetrievalIO
    ) -> tuple[Refinement, str]:
        """The refinement and how it was made ("llm", or the offline one's name); it sees the
        first ``anchor_k`` candidates, the anchor candidates."""
        candidates = candidates[: self.anchor_k]
        refiner = self._refiner
        if refiner is not None and candidates:
            listed = [(view.topic_names.get(view.topic_of[c.idx], ""), view.texts[c.idx])
                      for c in candidates]
            try:
                answer = await io.call(partial(_run_refiner, refiner), refiner, query, listed)
            except (LLMOutputError, LLMTimeoutError) as exc:
                logger.warning("anchor refinement failed (%s); using the LLM-free rule", exc)
            else:
                keep = [i for i in answer.keep if 0 <= i < len(candidates)] or range(
                    len(candidates)
                )
                return Refinement(tuple(keep)[: self.max_anchors], answer.action), "llm"
        return self._offline_refine(view, query, candidates)

    def _results(
        self,
        state: _SentenceGraph,
        cosines: np.ndarray,
        candidates: list[Candidate],
        refinement: Refinement,
        how: str,
        allowed: Optional[np.ndarray] = None,
    ) -> list[NodeWithScore]:
        """Expand (unless the refinement answers), rank, cut to the budget, present (a path
        crossing into a document the filter leaves out drops that sentence)."""
        view = state.view
        anchors = [candidates[i].idx for i in refinement.keep]
        max_len = 1 if refinement.action == "answer" else self.max_path_length
        paths = expand(
            view,
            anchors,
            cosines,
            max_len=max_len,
            beam=self.beam,
            max_expansions=self.max_expansions,
            bridge_direction=self.bridge_direction,
            rst_gate=unused_gate(candidates[: self.anchor_k], anchors),
        )
        ranked = rank(paths, candidates, self.fill)
        if allowed is not None:
            ranked = [r for r in ranked if allowed[r.idx]]
        label = f"{how}:{refinement.action}"
        prefetch(state.nodes, [r.idx for r in ranked])
        sources = chunk_metadata(self._stores, [state.nodes[r.idx].chunk_id for r in ranked])
        nodes = [_to_node(state, r, float(cosines[r.idx]), label, sources) for r in ranked]
        nodes = within_budget(nodes, self.budget_words)
        if self.order == "story":
            nodes.sort(key=lambda n: (tuple(n.node.metadata[POS_KEY]), n.node.node_id))
        return nodes


def _run_refiner(
    refiner: Refiner, question: str, candidates: Sequence[tuple[str, str]]
) -> Refinement:
    """The blocking form of an (async only) refiner: run to completion."""
    return run_sync(refiner(question, candidates))


def _allowed(state: _SentenceGraph, scope: Optional[DocScope]) -> Optional[np.ndarray]:
    """Which sentence rows belong to the filter's documents (``None``: no filter)."""
    if scope is None:
        return None
    return scope.rows(list(docs_of(state.nodes)))


def _check_choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _to_node(
    state: _SentenceGraph,
    ranked: Ranked,
    similarity: float,
    refinement: str,
    sources: dict[str, dict[str, Any]],
) -> NodeWithScore:
    """One sentence as a ``TextNode``: its source's metadata, position and relation path."""
    view, node = state.view, state.nodes[ranked.idx]
    path = [view.ids[i] for i in ranked.path.nodes]
    topics = list(dict.fromkeys(view.topic_of[i] for i in ranked.path.nodes))
    span = node.span or (node.pos[1], node.pos[1] + len(node.text))
    ours = {
        "kind": NodeKind.SENTENCE.value,
        POS_KEY: list(node.pos),
        POSITION_KEY: format_position(node.pos),
        "doc_id": node.doc_id,
        "chunk_id": node.chunk_id,
        "span": list(span),
        "sentence_role": view.role[ranked.idx],
        "topic": view.topic_names.get(view.topic_of[ranked.idx], ""),
        "topic_id": view.topic_of[ranked.idx],
        "anchor_id": path[0],
        "hop": ranked.hop,
        "via": ranked.via,
        "path": path,
        "relation_path": relation_path(view, ranked),
        "refinement": refinement,
        "similarity": similarity,
        EVIDENCE_KEY: path + [t for t in topics if t],
    }
    metadata = {**sources.get(node.chunk_id or "", {}), **ours}
    hidden = bookkeeping_keys(ours)
    text_node = TextNode(
        id_=node.id,
        text=node.text,
        metadata=metadata,
        start_char_idx=span[0],
        end_char_idx=span[1],
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=node.doc_id)},
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
    )
    return NodeWithScore(node=text_node, score=ranked.score)
