"""E²RAG query-time retrieval (paper §4 "Query-time retrieval", appendix H Algorithm 3).

1. Cue extraction ``(S_ent, S_evt) = g(q)`` with the paper's prompt (D.3); offline, with the
   grounded parser.
2. ``z = f(g(q))``: every entity phrase and every event phrase is embedded on its own.
3. Seeds ``V_q``: each entity phrase looks up the ``e2rag_mention`` namespace, each event phrase
   the ``e2rag_event`` namespace. Mentions of one entity (same normalised name) are near-ties for
   an entity phrase, so they are re-ranked by their events (§4 step 5): a contested mention scores
   ``(1 - event_weight) * sim(mention, cue) + event_weight * max sim(event, z_q)`` over the events
   it takes part in, and only the best ``seed_top_k`` mentions become seeds. This is how
   "Hermione, rule-obsessed first-year" and "Hermione, pragmatic rule-breaker" are told apart:
   by what happens around each.
4. One hop over the bipartite ``participates`` edges gives ``V_q+``.
5. The chunks behind ``V_q+`` are ranked by ``<f(p), z_q>`` (Alg. 3 lines 11-14), querying only
   those ids in ``e2rag_chunk``.
6. Context: passages in story order plus the subgraph of ``V_q+`` inside them
   (``retrieve_with_context``; the query engine rebuilds it from each node's ``graph_nodes``).
   Each returned chunk also carries an LLM-visible ``evidence`` text (its part of ``V_q+`` and
   the edges touching it), for engines that only show chunk text and metadata.

Steps 3-4 (mention re-ranking, one hop) are the framework-free functions of ``ranking``.

``z_q`` embeds the retrieval text: the query, or with HyDE what Alg. 3 calls the "hypothetical
response transformed text" (``[q; h]`` for the comb. variants, ``h`` for the hyp. variants). The
HyDE variants (§4 "Hypothetical response coupling") differ only in steps 1-2:
``comb_extraction`` extracts cues from ``q + "\\n" + h``, ``hyp_extraction`` from ``h``;
``comb_embedding`` / ``hyp_embedding`` skip the extractor and seed both namespaces from
``f([q; h])`` / ``f(h)``. Without cues (or when the extractor finds none) seeds come from ``z_q``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Coroutine, Iterable, Optional, TypeVar

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryResult

from llama_index_e2rag.context import (
    EVIDENCE_KEY,
    SIGNALS_KEY,
    ContextBundle,
    bundle_from_retrieved,
    render_evidence,
)
from llama_index_e2rag.errors import LLMOutputError, MissingModelError
from llama_index_e2rag.ranking import mention_events, one_hop, rerank_mentions
from llama_index_e2rag.ranking.temporal import TemporalCue, anchored, temporal_cue
from llama_index_e2rag.retrievers.budget import budget_depth, check_budget, within_budget
from llama_index_e2rag.retrievers.parsing import index_parser
from llama_index_e2rag.retrievers.vector import CHUNK_WORDS_FLOOR, chunk_result
from llama_index_e2rag.schema import GraphNode, NodeKind, sort_by_position
from llama_index_e2rag.state_cache import StateCache

logger = logging.getLogger(__name__)

HYDE_VARIANTS = ("comb_extraction", "hyp_extraction", "comb_embedding", "hyp_embedding")
#: Temporal anchoring of chunks (not in the paper; off with ``faithful=True``): the bonus of a
#: chunk where the cue points (cosine units), how many chunks it reaches, how fast it falls, and
#: the share the anchor's own chunk gets (it often holds the start of what follows).
ANCHOR_WEIGHT = 0.15
ANCHOR_SPAN = 6
ANCHOR_DECAY = 0.8
ANCHOR_SELF = 0.5
T = TypeVar("T")


@dataclass(frozen=True)
class RetrievalPlan:
    """The texts one query turns into (steps 1-2), per HyDE variant."""

    rank_text: str
    extraction_text: Optional[str]
    hypothetical: Optional[str] = None
    entity_cues: tuple[str, ...] = ()
    event_cues: tuple[str, ...] = ()


@dataclass
class _Seeds:
    scores: dict[str, float] = field(default_factory=dict)

    def offer(self, hits: dict[str, float]) -> None:
        for node_id, score in hits.items():
            if score > self.scores.get(node_id, float("-inf")):
                self.scores[node_id] = score


class EntityEventRetriever(BaseRetriever):
    """Entity–event retrieval over an ``E2RAGIndex`` (Alg. 3), returning chunks.

    Args:
        index: the ``E2RAGIndex``.
        similarity_top_k: k, passages returned.
        hyde: ``None`` or one of ``HYDE_VARIANTS`` (needs an LLM).
        seed_top_k: seeds taken per cue and namespace (the final mention seeds are also capped
            at this number after re-ranking).
        llm: LLM for cue extraction and HyDE; default: the index's LLM; without any, cues come
            from the offline grounded parser.
        mention_pool: mentions fetched per entity cue = ``seed_top_k * mention_pool``, so the
            event-based re-ranking has near-tied mentions of the same entity to choose from.
        event_weight: weight of the events' similarity in a contested mention's score.
        budget_words: fill this many words with the ranked chunks instead of returning
            ``similarity_top_k`` (overlaps counted once, the last chunk cut at a sentence end);
            when the chunks of ``V_q+`` run out first, the chunks most similar to the query
            follow them (unless ``faithful``).
        faithful: the paper's algorithm only. Off (default), a question with a temporal cue
            (*after / before / when …* X) also finds X's anchor event and favours the chunks
            where the cue points (``ranking.temporal``): "after the troll incident" prefers the
            chunks that follow the incident, so a character's later facet comes first.
        anchor_weight: bonus (in cosine units) of a chunk where the cue points fully.
    """

    def __init__(
        self,
        index: Any,
        similarity_top_k: int = 5,
        hyde: Optional[str] = None,
        seed_top_k: int = 10,
        llm: Optional[LLM] = None,
        mention_pool: int = 3,
        event_weight: float = 0.5,
        budget_words: Optional[int] = None,
        faithful: bool = False,
        anchor_weight: float = ANCHOR_WEIGHT,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        check_budget(budget_words)
        if similarity_top_k < 1 or seed_top_k < 1 or mention_pool < 1:
            raise ValueError("similarity_top_k, seed_top_k and mention_pool must be >= 1")
        if hyde is not None and hyde not in HYDE_VARIANTS:
            raise ValueError(f"unknown hyde variant {hyde!r}; choose one of {HYDE_VARIANTS}")
        if not 0.0 <= event_weight <= 1.0:
            raise ValueError(f"event_weight must be between 0 and 1, got {event_weight}")
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        from llama_index_e2rag.extract.prompts import HYPOTHETICAL_ANSWER_PROMPT, QUERY_CUE_PROMPT

        self._index = index
        self.similarity_top_k = similarity_top_k
        self.hyde = hyde
        self.seed_top_k = seed_top_k
        self.mention_pool = mention_pool
        self.event_weight = event_weight
        self.budget_words = budget_words
        self.faithful = faithful
        self.anchor_weight = anchor_weight
        self._cue_prompt: BasePromptTemplate = QUERY_CUE_PROMPT
        self._hyde_prompt: BasePromptTemplate = HYPOTHETICAL_ANSWER_PROMPT
        if llm is not None:
            from llama_index_e2rag.llm import LLMRunner

            self._runner = LLMRunner(llm)
        else:
            self._runner = index.llm_runner
        if hyde is not None and self._runner is None:
            raise MissingModelError(
                f"hyde={hyde!r} drafts a hypothetical answer with an LLM, and none is configured; "
                "pass llm=..., set Settings.llm or OPENAI_API_KEY, or use hyde=None"
            )
        self._parser = index_parser(index) if self._runner is None else None

    # -- prompts ------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {
            "query_cue_prompt": self._cue_prompt,
            "hypothetical_answer_prompt": self._hyde_prompt,
        }

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        self._cue_prompt = prompts_dict.get("query_cue_prompt", self._cue_prompt)
        self._hyde_prompt = prompts_dict.get("hypothetical_answer_prompt", self._hyde_prompt)

    # -- llama-index entry points -------------------------------------------------------------
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return _run_blocking(self._run(query_bundle.query_str, aio=False))[0]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return (await self._run(query_bundle.query_str, aio=True))[0]

    def retrieve_with_context(self, query: str) -> tuple[list[NodeWithScore], ContextBundle]:
        """Passages and their assembled context (passages, subgraph, descriptions)."""
        nodes = self.retrieve(query)
        return nodes, bundle_from_retrieved(self._index.graph_store, nodes)

    async def aretrieve_with_context(self, query: str) -> tuple[list[NodeWithScore], ContextBundle]:
        nodes = await self.aretrieve(query)
        return nodes, bundle_from_retrieved(self._index.graph_store, nodes)

    def plan(self, query: str) -> RetrievalPlan:
        """Steps 1-2 only: the texts and cues this retriever derives from ``query``."""
        return _run_blocking(self._plan(query, aio=False))

    # -- the algorithm (one body; ``aio`` picks real async or blocking I/O) --------------------
    async def _run(self, query: str, aio: bool) -> tuple[list[NodeWithScore], RetrievalPlan]:
        plan = await self._plan(query, aio)
        graph = self._index.graph_store
        cue = None if self.faithful else temporal_cue(query)
        clause = [cue.clause] if cue is not None and cue.clause else []
        phrases = list(
            dict.fromkeys([plan.rank_text, *plan.entity_cues, *plan.event_cues, *clause])
        )
        vectors = dict(zip(phrases, await self._embed(phrases, aio), strict=True))
        z_q = vectors[plan.rank_text]
        pool = self.seed_top_k * self.mention_pool
        if plan.entity_cues or plan.event_cues:
            mention_vectors = [vectors[cue] for cue in plan.entity_cues]
            event_vectors = [vectors[cue] for cue in plan.event_cues]
        else:
            mention_vectors, event_vectors = [z_q], [z_q]
        mentions, events = _Seeds(), _Seeds()
        for hits in await _gather(
            aio, [self._lookup(NodeKind.MENTION, v, pool, aio) for v in mention_vectors]
        ):
            mentions.offer(hits)
        for hits in await _gather(
            aio, [self._lookup(NodeKind.EVENT, v, self.seed_top_k, aio) for v in event_vectors]
        ):
            events.offer(hits)
        seeds = await self._rerank_mentions(mentions.scores, z_q, aio)
        seeds.update(events.scores)
        expanded = one_hop(graph, seeds)
        chunk_ids = {n.chunk_id for n in expanded if n.chunk_id}
        chunk_sims = await self._similarities(NodeKind.CHUNK, z_q, chunk_ids, aio)
        ranking = chunk_sims
        if cue is not None and clause:
            ranking = await self._anchored(chunk_sims, cue, vectors[cue.clause], aio)
        positions = {n.id: n.pos for n in graph.get_nodes(chunk_sims)}
        ranked = sorted(
            (cid for cid in chunk_sims if cid in positions),
            key=lambda cid: (-ranking[cid], positions[cid]),
        )
        signals = {
            cid: {"similarity": round(sim, 4), "anchor": round(ranking[cid] - sim, 4)}
            for cid, sim in chunk_sims.items()
        }
        if self.budget_words is None:
            top = ranked[: self.similarity_top_k]
            return self._to_nodes(top, ranking, expanded, seeds, signals), plan
        if not self.faithful:  # chunks beyond V_q+ keep filling the budget, best first
            depth = budget_depth(self.budget_words, CHUNK_WORDS_FLOOR, self.similarity_top_k)
            extra = await self._lookup(NodeKind.CHUNK, z_q, depth, aio)
            ranked += [cid for cid in sorted(extra, key=lambda c: -extra[c]) if cid not in ranking]
            for cid, sim in extra.items():
                signals.setdefault(cid, {"similarity": round(sim, 4), "beyond_v_q": 1.0})
            ranking = {**extra, **ranking}
        nodes = self._to_nodes(ranked, ranking, expanded, seeds, signals)
        return within_budget(nodes, self.budget_words), plan

    async def _anchored(
        self, sims: dict[str, float], cue: TemporalCue, clause_vector: list[float], aio: bool
    ) -> dict[str, float]:
        """Chunk scores with the temporal bonus around the anchor event of ``cue``'s clause."""
        hits = await self._lookup(NodeKind.EVENT, clause_vector, 1, aio)
        anchors = [n.chunk_id for n in self._index.graph_store.get_nodes(hits) if n.chunk_id]
        if not anchors:
            return sims
        sequence = _CHUNK_SEQUENCE.get(self._index)
        return anchored(
            sims, sequence, anchors, cue.relation, self.anchor_weight, ANCHOR_SPAN, ANCHOR_DECAY,
            ANCHOR_SELF,
        )

    async def _plan(self, query: str, aio: bool) -> RetrievalPlan:
        hypothetical = None
        if self.hyde is not None:
            hypothetical = (
                await self._call(
                    aio,
                    self._runner.complete,
                    self._runner.acomplete,
                    self._hyde_prompt,
                    kind="hypothetical_answer",
                    query=query,
                )
            ).strip()
        if self.hyde is None:
            rank_text, extraction_text = query, query
        elif self.hyde.startswith("comb_"):
            rank_text = f"{query}\n{hypothetical}"
            extraction_text = rank_text if self.hyde == "comb_extraction" else None
        else:
            rank_text = hypothetical or query
            extraction_text = rank_text if self.hyde == "hyp_extraction" else None
        entities: list[str] = []
        events: list[str] = []
        if extraction_text is not None:
            entities, events = await self._cues(extraction_text, aio)
        return RetrievalPlan(
            rank_text=rank_text,
            extraction_text=extraction_text,
            hypothetical=hypothetical,
            entity_cues=tuple(entities),
            event_cues=tuple(events),
        )

    async def _cues(self, text: str, aio: bool) -> tuple[list[str], list[str]]:
        """``g(text)``: entity and event phrases (LLM, or the grounded parser offline)."""
        if self._runner is None:
            entities, events = self._parser.parse_query(text)
        else:
            from llama_index_e2rag.extract.prompts import QueryCues

            try:
                cues = await self._call(
                    aio,
                    self._runner.structured,
                    self._runner.astructured,
                    self._cue_prompt,
                    QueryCues,
                    kind="query_cues",
                    query=text,
                )
            except LLMOutputError as exc:
                logger.warning("query cue extraction failed (%s); seeding from the query", exc)
                return [], []
            entities, events = cues.entities, cues.events
        return _clean(entities), _clean(events)

    async def _rerank_mentions(
        self, scores: dict[str, float], z_q: list[float], aio: bool
    ) -> dict[str, float]:
        """Re-rank mentions of the same entity by their events; keep the best ``seed_top_k``."""
        graph = self._index.graph_store
        linked = mention_events(graph, scores)
        event_ids = {e for ids in linked.values() for e in ids}
        event_sims = await self._similarities(NodeKind.EVENT, z_q, event_ids, aio)
        return rerank_mentions(
            graph, scores, linked, event_sims, self.event_weight, self.seed_top_k
        )

    # -- I/O helpers (each has a blocking and an async form) ----------------------------------
    @staticmethod
    async def _call(
        aio: bool,
        sync_fn: Callable[..., T],
        async_fn: Callable[..., Awaitable[T]],
        *args: Any,
        **kwargs: Any,
    ) -> T:
        return await async_fn(*args, **kwargs) if aio else sync_fn(*args, **kwargs)

    async def _embed(self, texts: list[str], aio: bool) -> list[list[float]]:
        embed = self._index.embed_model
        if aio:
            return list(await asyncio.gather(*(embed.aget_query_embedding(t) for t in texts)))
        return [embed.get_query_embedding(t) for t in texts]

    async def _query(self, kind: NodeKind, query: VectorStoreQuery, aio: bool) -> dict[str, float]:
        store = self._index.vector_store(kind)
        result = await self._call(aio, store.query, store.aquery, query)
        return _hits(result)

    async def _lookup(
        self, kind: NodeKind, vector: list[float], top_k: int, aio: bool
    ) -> dict[str, float]:
        return await self._query(
            kind, VectorStoreQuery(query_embedding=vector, similarity_top_k=top_k), aio
        )

    async def _similarities(
        self, kind: NodeKind, vector: list[float], ids: Iterable[str], aio: bool
    ) -> dict[str, float]:
        """Similarity of ``vector`` to the given nodes only (``node_ids`` restriction).

        A store that refuses ``node_ids`` (raises, or ignores it and answers with other ids) is
        queried for all its nodes of that kind and filtered here.
        """
        wanted = set(ids)
        if not wanted:
            return {}
        restricted = VectorStoreQuery(
            query_embedding=vector, similarity_top_k=len(wanted), node_ids=sorted(wanted)
        )
        try:
            hits = await self._query(kind, restricted, aio)
            if set(hits) <= wanted:
                return hits
        except (NotImplementedError, ValueError, TypeError) as exc:
            logger.debug("vector store refused node_ids (%s); filtering a full query", exc)
        total = max(len(self._index.graph_store.nodes(kind)), len(wanted))
        hits = await self._lookup(kind, vector, total, aio)
        return {i: s for i, s in hits.items() if i in wanted}

    # -- results ------------------------------------------------------------------------------
    def _to_nodes(
        self,
        ranked: list[str],
        sims: dict[str, float],
        expanded: list[GraphNode],
        seeds: dict[str, float],
        signals: dict[str, dict[str, float]],
    ) -> list[NodeWithScore]:
        """Chunks with the evidence that led there: ids (hidden) and a compact text (LLM-visible).

        The text lists the chunk's nodes of ``V_q+`` with their descriptions and the subgraph
        edges among ``V_q+`` touching them, so llama-index's own engines show it to the LLM.
        """
        graph = self._index.graph_store
        by_chunk: dict[str, list[GraphNode]] = {}
        for node in expanded:
            by_chunk.setdefault(node.chunk_id or "", []).append(node)
        expanded_by_id = {n.id: n for n in expanded}
        edges = graph.subgraph_edges(list(expanded_by_id))
        results = []
        for chunk in self._index.get_chunks(ranked):
            evidence = by_chunk.get(chunk.node_id, [])
            here = {n.id for n in evidence}
            touching = [e for e in edges if e.source in here or e.target in here]
            shown = here | {e.source for e in touching} | {e.target for e in touching}
            extra = {
                EVIDENCE_KEY: [n.id for n in evidence],
                "seed_scores": {n.id: seeds[n.id] for n in evidence if n.id in seeds},
                "retriever": "entity_event",
                SIGNALS_KEY: {k: v for k, v in signals.get(chunk.node_id, {}).items() if v},
            }
            text = render_evidence(
                chunk.node_id, [expanded_by_id[i] for i in shown if i in expanded_by_id], touching
            )
            results.append(
                chunk_result(
                    chunk, graph.get_node(chunk.node_id), sims[chunk.node_id], extra, text
                )
            )
        return results


def _chunk_sequence(index: Any, state: Any) -> list[tuple[str, int]]:
    """The extraction chunks in story order (ChronoRAG's layer-0 chunks are another unit)."""
    chunks = [c for c in index.graph_store.nodes(NodeKind.CHUNK) if c.attrs.get("layer") != 0]
    return [(c.id, c.pos[0]) for c in sort_by_position(chunks)]


_CHUNK_SEQUENCE: StateCache[list[tuple[str, int]]] = StateCache(_chunk_sequence)


def _hits(result: VectorStoreQueryResult) -> dict[str, float]:
    ids = result.ids or [n.node_id for n in result.nodes or []]
    sims = result.similarities or [0.0] * len(ids)
    return dict(zip(ids, (float(s) for s in sims), strict=True))


def _clean(phrases: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(p.strip() for p in phrases if p and p.strip()))



async def _gather(aio: bool, coros: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Concurrently on the async path; one after another on the blocking path."""
    if aio:
        return list(await asyncio.gather(*coros))
    return [await coro for coro in coros]


def _run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (the ``aio=False`` path) without an event loop.

    The blocking path reuses the async algorithm's body but only calls blocking I/O, so the
    coroutine finishes on its first step; no loop is created, which keeps the sync API usable
    from threads and from inside running loops alike.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the blocking retrieval path awaited real asynchronous I/O")
