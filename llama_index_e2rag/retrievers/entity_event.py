"""E²RAG query-time retrieval (paper §4 "Query-time retrieval", appendix H Algorithm 3).

1. Cue extraction ``(S_ent, S_evt) = g(q)`` with the paper's prompt (D.3); offline, with the
   grounded parser, which also stands in when the LLM's answer is unusable or times out.
2. ``z = f(g(q))``: every entity phrase and every event phrase is embedded on its own.
3. Seeds ``V_q``: each entity phrase looks up the mention vectors, each event phrase the event
   vectors. Mentions of one entity (same normalised name) are near-ties for
   an entity phrase, so they are re-ranked by their events (§4 step 5): a contested mention scores
   ``(1 - event_weight) * sim(mention, cue) + event_weight * max sim(event, z_q)`` over the events
   it takes part in, and only the best ``seed_top_k`` mentions become seeds. This is how
   "Hermione, rule-obsessed first-year" and "Hermione, pragmatic rule-breaker" are told apart:
   by what happens around each.
4. One hop over the bipartite ``participates`` edges gives ``V_q+``.
5. The chunks behind ``V_q+`` are ranked by ``<f(p), z_q>`` (Alg. 3 lines 11-14), from their
   stored vectors.
6. Context: passages in story order plus the subgraph of ``V_q+`` inside them
   (``retrieve_with_context``; the query engine rebuilds it from each node's ``graph_nodes``).
   Each returned chunk also carries an LLM-visible ``evidence`` text (its part of ``V_q+`` and
   the edges touching it), for engines that only show chunk text and metadata.

Steps 3-5 are ``ranking.e2rag.e2rag_ranking`` (seeds, one hop, chunks ranked), the same code
and defaults ``lightrag_ext`` runs; this module reads the stores for them (``StoresSource``).
``query_bundle.embedding``, when given, is ``z_q`` (unless HyDE changes the text ranked by).

``z_q`` embeds the retrieval text: the query, or with HyDE what Alg. 3 calls the "hypothetical
response transformed text" (``[q; h]`` for the comb. variants, ``h`` for the hyp. variants). The
HyDE variants (§4 "Hypothetical response coupling") differ only in steps 1-2:
``comb_extraction`` extracts cues from ``q + "\\n" + h``, ``hyp_extraction`` from ``h``;
``comb_embedding`` / ``hyp_embedding`` skip the extractor and seed both namespaces from
``f([q; h])`` / ``f(h)``. Without cues (or when the extractor finds none) seeds come from ``z_q``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Collection, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_e2rag.retrievers.filters import DocScope
from llama_index_e2rag.retrievers.base import (
    BLOCKING,
    RetrievalIO,
    StoresRetriever,
    run_blocking,
)
from llama_index_e2rag.context.keys import ANCHOR_KEY, EVIDENCE_KEY, SIGNALS_KEY
from llama_index_e2rag.context.evidence import ContextBundle, bundle_from_retrieved, render_evidence
from llama_index_e2rag.errors import LLMOutputError, LLMTimeoutError, MissingModelError
from llama_index_e2rag.extract.prompts import (
    HYPOTHETICAL_ANSWER_PROMPT,
    QUERY_CUE_PROMPT,
    QueryCues,
)
from llama_index_e2rag.modes import HYDE_VARIANTS
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.llm.runner import LLMRunner
from llama_index_e2rag.ranking.e2rag import (
    EVENT_WEIGHT,
    MENTION_POOL,
    SEED_TOP_K,
    clean_cues,
    e2rag_ranking,
)
from llama_index_e2rag.ranking.anchor import Anchor, anchor_metadata, side_cost, unit_anchor
from llama_index_e2rag.ranking.narrative import (
    NarrativeWeights,
    PassageTable,
    QueryGraph,
    clause_signals,
    locate_anchor,
)
from llama_index_e2rag.ranking.temporal import TemporalCue, temporal_cue
from llama_index_e2rag.retrievers.passage_cache import narrative_state, restrict_state
from llama_index_e2rag.retrievers.budget import budget_depth, within_budget
from llama_index_e2rag.retrievers.parsing import extractors_parser
from llama_index_e2rag.retrievers.vector import CHUNK_WORDS_FLOOR, chunk_result
from llama_index_e2rag.schema import GraphNode, NodeKind
from llama_index_e2rag.stores.port import Stores


logger = logging.getLogger(__name__)

#: Temporal anchoring of chunks (not in the paper; off with ``faithful=True``): the bonus of a
#: chunk where the cue points fully, in cosine units. The anchor, its confidence and its region
#: are the ``narrative`` mode's (``ranking.anchor``); a chunk wholly on the side a used anchor's
#: question does not look at costs ``ANCHOR_WEIGHT`` times the narrative mode's ratio of
#: ``anchor_side`` to ``anchor`` times ``side_cost(confidence)``, the same relative cost.
ANCHOR_WEIGHT = 0.15


@dataclass(frozen=True)
class RetrievalPlan:
    """The texts one query turns into (steps 1-2), per HyDE variant."""

    rank_text: str
    extraction_text: Optional[str]
    hypothetical: Optional[str] = None
    entity_cues: tuple[str, ...] = ()
    event_cues: tuple[str, ...] = ()


class StoresSource:
    """``ranking.E2RAGSource`` over the stores, searching as ``io`` waits (blocking or
    awaited); searches stay within ``scope``'s documents when there is one."""

    def __init__(self, stores: Stores, io: RetrievalIO, scope: Optional[DocScope] = None) -> None:
        self._stores = stores
        self._io = io
        self._scope = scope

    async def lookup(self, kind: NodeKind, vector: np.ndarray, top_k: int) -> dict[str, float]:
        hits = await self._io.search(self._stores, self._scope, kind, vector, top_k)
        return {hit.id: hit.score for hit in hits}

    async def similarities(
        self, kind: NodeKind, vector: np.ndarray, ids: Collection[str]
    ) -> dict[str, float]:
        return self._stores.similarities(vector, sorted(ids)) if ids else {}

    async def neighbourhood(self, ids: Sequence[str]) -> GraphStore:
        return self._stores.graph


class EntityEventRetriever(StoresRetriever):
    """Entity–event retrieval over an ``E2RAGIndex`` (Alg. 3), returning chunks.

    Args:
        stores: the index's ``Stores`` (``index.as_retriever(mode="entity_event")`` passes them).
        embed_model: the embedding the graph was embedded with.
        llm_runner: the index's LLM door for cues and HyDE (``None``: the offline parser).
        parser: the offline cue parser (default: a new ``GroundedExtractor``); with an LLM it
            stands in when the LLM's cue answer is unusable or times out.
        similarity_top_k: k, passages returned.
        hyde: ``None`` or one of ``HYDE_VARIANTS`` (needs an LLM).
        seed_top_k: seeds taken per cue and namespace (the final mention seeds are also capped
            at this number after re-ranking).
        llm: LLM for cue extraction and HyDE instead of ``llm_runner``'s.
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
        filters: ``MetadataFilters`` on document metadata: seeds, expansion results and the
            budget's extra chunks all come from the matching documents.
    """

    def __init__(
        self,
        stores: Stores,
        embed_model: BaseEmbedding,
        llm_runner: Optional["LLMRunner"] = None,
        parser: Any = None,
        similarity_top_k: int = 5,
        hyde: Optional[str] = None,
        seed_top_k: int = SEED_TOP_K,
        llm: Optional[LLM] = None,
        mention_pool: int = MENTION_POOL,
        event_weight: float = EVENT_WEIGHT,
        budget_words: Optional[int] = None,
        faithful: bool = False,
        anchor_weight: float = ANCHOR_WEIGHT,
        filters: Optional[MetadataFilters] = None,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        if similarity_top_k < 1 or seed_top_k < 1 or mention_pool < 1:
            raise ValueError("similarity_top_k, seed_top_k and mention_pool must be >= 1")
        if hyde is not None and hyde not in HYDE_VARIANTS:
            raise ValueError(f"unknown hyde variant {hyde!r}; choose one of {HYDE_VARIANTS}")
        if not 0.0 <= event_weight <= 1.0:
            raise ValueError(f"event_weight must be between 0 and 1, got {event_weight}")
        super().__init__(stores, embed_model, budget_words, filters, callback_manager, verbose)

        self.similarity_top_k = similarity_top_k
        self.hyde = hyde
        self.seed_top_k = seed_top_k
        self.mention_pool = mention_pool
        self.event_weight = event_weight
        self.faithful = faithful
        self.anchor_weight = anchor_weight
        self._cue_prompt: BasePromptTemplate = QUERY_CUE_PROMPT
        self._hyde_prompt: BasePromptTemplate = HYPOTHETICAL_ANSWER_PROMPT
        if llm is not None:
            self._runner = LLMRunner(llm)
        else:
            self._runner = llm_runner
        if hyde is not None and self._runner is None:
            raise MissingModelError(
                f"hyde={hyde!r} drafts a hypothetical answer with an LLM, and none is configured; "
                "pass llm=..., set Settings.llm or OPENAI_API_KEY, or use hyde=None"
            )
        self._parser = None
        self._fallback_parser = parser  # LLM-free cues when the LLM's cue answer is unusable
        if self._runner is None:
            self._parser = parser if parser is not None else extractors_parser(())

    # -- prompts ------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {
            "query_cue_prompt": self._cue_prompt,
            "hypothetical_answer_prompt": self._hyde_prompt,
        }

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        self._cue_prompt = prompts_dict.get("query_cue_prompt", self._cue_prompt)
        self._hyde_prompt = prompts_dict.get("hypothetical_answer_prompt", self._hyde_prompt)

    # -- entry points beyond llama-index's ----------------------------------------------------
    def retrieve_with_context(self, query: str) -> tuple[list[NodeWithScore], ContextBundle]:
        """Passages and their assembled context (passages, subgraph, descriptions)."""
        nodes = self.retrieve(query)
        return nodes, bundle_from_retrieved(self._stores.graph, nodes)

    async def aretrieve_with_context(self, query: str) -> tuple[list[NodeWithScore], ContextBundle]:
        nodes = await self.aretrieve(query)
        return nodes, bundle_from_retrieved(self._stores.graph, nodes)

    def plan(self, query: str) -> RetrievalPlan:
        """Steps 1-2 only: the texts and cues this retriever derives from ``query``."""
        return run_blocking(self._plan(query, BLOCKING))

    # -- the algorithm --------------------------------------------------------------------------
    async def _run(self, query: QueryBundle, io: RetrievalIO) -> list[NodeWithScore]:
        plan = await self._plan(query.query_str, io)
        scope = self._scope()
        source = StoresSource(self._stores, io, scope)
        cue = None if self.faithful else temporal_cue(query.query_str)
        clause = [cue.clause] if cue is not None and cue.clause else []
        vectors = await self._vectors(query, plan, clause, io)
        z_q = vectors[plan.rank_text]
        found = await e2rag_ranking(
            source,
            z_q,
            [vectors[c] for c in plan.entity_cues],
            [vectors[c] for c in plan.event_cues],
            self.seed_top_k,
            self.mention_pool,
            self.event_weight,
        )
        graph, seeds, expanded, chunk_sims = found.graph, found.seeds, found.expanded, found.chunks
        ranking, anchor, beyond = chunk_sims, None, {}
        located = self._locate(cue, vectors[cue.clause]) if cue is not None and clause else None
        if located is not None:
            if located[1].used and self.anchor_weight:
                # the part of the story a used anchor points at may hold no seed (the heroine's
                # earlier facet, chapters before the incident): the chunks nearest the question
                # join V_q+ and the anchor ranks them all
                nearest = await source.lookup(NodeKind.CHUNK, z_q, self.similarity_top_k)
                beyond = {c: sim for c, sim in nearest.items() if c not in chunk_sims}
                chunk_sims = {**chunk_sims, **beyond}
            ranking, anchor = self._anchored(chunk_sims, located[0], located[1]), located[2]
        positions = {
            n.id: n.pos
            for n in graph.get_nodes(chunk_sims)
            if scope is None or scope.allows(n.doc_id)  # expansion may cross a document link
        }
        positions.update((n.id, n.pos) for n in self._stores.graph.get_nodes(list(beyond)))
        ranked = sorted(
            (cid for cid in chunk_sims if cid in positions),
            key=lambda cid: (-ranking[cid], positions[cid]),
        )
        signals = {
            cid: {"similarity": round(sim, 4), "anchor": round(ranking[cid] - sim, 4),
                  "beyond_v_q": 1.0 if cid in beyond else 0.0}
            for cid, sim in chunk_sims.items()
        }
        if self.budget_words is None:
            top = ranked[: self.similarity_top_k]
            return self._to_nodes(top, ranking, expanded, seeds, signals, anchor)
        if not self.faithful:  # chunks beyond V_q+ keep filling the budget, best first
            depth = budget_depth(self.budget_words, CHUNK_WORDS_FLOOR, self.similarity_top_k)
            extra = await source.lookup(NodeKind.CHUNK, z_q, depth)
            ranked += [cid for cid in sorted(extra, key=lambda c: -extra[c]) if cid not in ranking]
            for cid, sim in extra.items():
                signals.setdefault(cid, {"similarity": round(sim, 4), "beyond_v_q": 1.0})
            ranking = {**extra, **ranking}
        nodes = self._to_nodes(ranked, ranking, expanded, seeds, signals, anchor)
        return within_budget(nodes, self.budget_words)

    async def _vectors(
        self, query: QueryBundle, plan: RetrievalPlan, clause: list[str], io: RetrievalIO
    ) -> dict[str, np.ndarray]:
        """``z_q`` and each cue's vector, by phrase; ``z_q`` is the caller's ``query.embedding``
        when the query itself is ranked (no HyDE text), as in every mode."""
        phrases = [plan.rank_text, *plan.entity_cues, *plan.event_cues, *clause]
        known = {}
        if plan.rank_text == query.query_str:
            known[plan.rank_text] = await self._query_embedding(query, io)
        rest = [p for p in dict.fromkeys(phrases) if p not in known]
        known.update(zip(rest, await io.embed_queries(self._embed_model, rest), strict=True))
        return {p: np.asarray(v, dtype=np.float32) for p, v in known.items()}

    def _locate(
        self, cue: TemporalCue, clause_vector: np.ndarray
    ) -> Optional[tuple[PassageTable, Anchor, dict[str, Any]]]:
        """The anchor of ``cue``'s clause and ``metadata["anchor"]`` (None: no anchor).

        The anchor is found among the index's passages exactly as the ``narrative`` mode finds
        it (``ranking.narrative.locate_anchor``). An index without passages is not anchored.
        """
        state = narrative_state(self._stores)
        scope = self._scope()
        if scope is not None:
            state = restrict_state(state, scope, self._stores.graph.doc_orders())
        table = state.table
        clause = clause_signals(
            table, state.lexical.scores(cue.clause), clause_vector, self._clause_graph(cue.clause)
        ) if len(table) else None
        anchor = locate_anchor(table, cue, clause, NarrativeWeights.fitted())
        if anchor is None:
            return None
        text = self._stores.graph.get_nodes([table.ids[anchor.row]])
        record = anchor_metadata(table, anchor, text[0].text if text else "", cue.clause)
        return table, anchor, record

    def _anchored(
        self, sims: dict[str, float], table: PassageTable, anchor: Anchor
    ) -> dict[str, float]:
        """Chunk scores with the anchor's bonus and cost: a chunk reads the region through its
        passages (``ranking.anchor.unit_anchor``)."""
        weights = NarrativeWeights.fitted()
        chunks = [c for c in self._stores.graph.get_nodes(list(sims)) if c.span]
        bonus, wrong = unit_anchor(
            table, anchor, [(c.pos[0], c.span[0], c.span[1]) for c in chunks]  # type: ignore[index]
        )
        side = (self.anchor_weight * weights.anchor_side / weights.anchor
                * side_cost(anchor.confidence))
        ranking = dict(sims)
        for chunk, gain, cost in zip(chunks, bonus, wrong):
            lift = self.anchor_weight * float(gain) - side * float(cost)
            ranking[chunk.id] = sims[chunk.id] + lift
        return ranking

    def _clause_graph(self, clause: str) -> QueryGraph:
        """The anchor clause's characters and events, by the offline parser (none without it)."""
        try:
            parser = self._parser or self._fallback_parser
            if parser is None:
                parser = self._fallback_parser = extractors_parser(())
            return QueryGraph.from_nodes(parser.query_nodes(clause))
        except (ImportError, MissingModelError) as exc:
            logger.warning("no spaCy parser (%s): the anchor clause is read without events", exc)
            return QueryGraph()

    async def _plan(self, query: str, io: RetrievalIO) -> RetrievalPlan:
        hypothetical = None
        if self.hyde is not None:
            hypothetical = (
                await io.call(
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
            entities, events = await self._cues(extraction_text, io)
        return RetrievalPlan(
            rank_text=rank_text,
            extraction_text=extraction_text,
            hypothetical=hypothetical,
            entity_cues=tuple(entities),
            event_cues=tuple(events),
        )

    async def _cues(self, text: str, io: RetrievalIO) -> tuple[list[str], list[str]]:
        """``g(text)``: entity and event phrases (LLM, or the grounded parser offline).

        When the LLM's answer is unusable after the runner's repair round (``LLMOutputError``)
        or the LLM does not answer within the runner's timeout (``LLMTimeoutError``), the
        grounded parser's LLM-free cues stand in (``_fallback_cues``). Other errors (a wrong
        API key, a provider that is down after the retries) are raised.
        """
        if self._runner is None:
            entities, events = self._parser.parse_query(text)
        else:
            try:
                cues = await io.call(
                    self._runner.structured,
                    self._runner.astructured,
                    self._cue_prompt,
                    QueryCues,
                    kind="query_cues",
                    query=text,
                )
            except (LLMOutputError, LLMTimeoutError) as exc:
                logger.warning("query cue extraction failed (%s); using LLM-free cues", exc)
                return self._fallback_cues(text)
            entities, events = cues.entities, cues.events
        return clean_cues(entities), clean_cues(events)

    def _fallback_cues(self, text: str) -> tuple[list[str], list[str]]:
        """The grounded parser's cues (the index's own parser, else a new one); no cues (seeds
        from the query) when the parser cannot run either (spaCy or its model missing)."""
        try:
            parser = self._fallback_parser
            if parser is None:
                parser = self._fallback_parser = extractors_parser(())
            entities, events = parser.parse_query(text)
        except MissingModelError as exc:
            logger.warning("LLM-free cues unavailable (%s); seeding from the query", exc)
            return [], []
        return clean_cues(entities), clean_cues(events)

    # -- results ------------------------------------------------------------------------------
    def _to_nodes(
        self,
        ranked: list[str],
        sims: dict[str, float],
        expanded: list[GraphNode],
        seeds: dict[str, float],
        signals: dict[str, dict[str, float]],
        anchor: Optional[dict[str, Any]] = None,
    ) -> list[NodeWithScore]:
        """Chunks with the evidence that led there: ids (hidden) and a compact text (LLM-visible).

        The text lists the chunk's nodes of ``V_q+`` with their descriptions and the subgraph
        edges among ``V_q+`` touching them, so llama-index's own engines show it to the LLM.
        """
        graph = self._stores.graph
        by_chunk: dict[str, list[GraphNode]] = {}
        for node in expanded:
            by_chunk.setdefault(node.chunk_id or "", []).append(node)
        expanded_by_id = {n.id: n for n in expanded}
        edges = graph.subgraph_edges(list(expanded_by_id))
        results = []
        for graph_chunk, chunk in self._stores.chunk_pairs(ranked):
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
            if anchor is not None:
                extra[ANCHOR_KEY] = anchor
            text = render_evidence(
                chunk.node_id, [expanded_by_id[i] for i in shown if i in expanded_by_id], touching
            )
            results.append(
                chunk_result(
                    chunk, graph_chunk, sims[chunk.node_id], extra, text
                )
            )
        return results
