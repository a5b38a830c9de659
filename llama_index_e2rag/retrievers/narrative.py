"""``narrative`` mode: sentence-aligned passages ranked by lexical, dense and graph signals fused.

The default mode of ``E2RAGIndex``. One query:

1. reads the question with the same parser that built the graph (its characters and events) and
   its temporal cue (*after / before / when / first / last* …, ``ranking.temporal``);
2. scores every passage with BM25 (``bm25s``) and the embedding, plus the graph signals of
   ``ranking.narrative`` (mentions, events, co-participation, temporal anchor, story edge,
   answer type);
3. fuses them with the fitted ``NarrativeWeights``, lets strong hits bring their neighbouring
   passage (the one after; for a *before* question the one before: continuation), and fills
   ``budget_words`` (or returns ``similarity_top_k`` passages) without repeating text, cutting
   the last passage at a sentence end.

Every returned node says what brought it: ``metadata["signals"]`` holds each signal's weighted
contribution to its raw score (their sum, ``raw_score``), ``story_match``, the question's best
cosine with any passage, and ``rank``, its 1-based place in the ranking; a passage brought by
continuation also has ``continuation`` (the raw score of the hit it continues, not part of its
own score) and ``metadata["continues"]`` (that hit's id). ``score`` puts the result on the
cosine scale of the other modes, 0-1, from its hit's raw score (a continuation's is its
parent's), ``story_match`` and ``rank`` (``ranking.scores``): scores never rise down the list.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_e2rag.ranking.answer_types import answer_type
from llama_index_e2rag.retrievers.base import (
    BLOCKING,
    RetrievalIO,
    StoresRetriever,
    run_blocking,
)
from llama_index_e2rag.context.keys import (
    ANCHOR_KEY,
    CONTINUATION_KEY,
    CONTINUES_KEY,
    EVIDENCE_KEY,
    POS_KEY,
    POSITION_KEY,
    RANK_KEY,
    SIGNALS_KEY,
    STORY_MATCH_KEY,
    TRIMMED_KEY,
    bookkeeping_keys,
)
from llama_index_e2rag.context.evidence import format_position
from llama_index_e2rag.errors import E2RAGError, MissingModelError
from llama_index_e2rag.extract.grounded import GroundedExtractor
from llama_index_e2rag.extract.passages import DEFAULT_PASSAGE_WORDS
from llama_index_e2rag.retrievers.passage_cache import (
    NarrativeState, narrative_state, restrict_state)
from llama_index_e2rag.ranking.budget import Piece, budget_depth, fill_budget
from llama_index_e2rag.ranking.narrative import (
    SIGNALS,
    NarrativeWeights,
    QueryGraph,
    Ranked,
    Signals,
    locate_anchor,
    rank,
    signals,
)
from llama_index_e2rag.ranking.anchor import Anchor, anchor_metadata
from llama_index_e2rag.ranking.scores import narrative_score
from llama_index_e2rag.ranking.temporal import TemporalCue, temporal_cue
from llama_index_e2rag.retrievers.parsing import extractors_parser
from llama_index_e2rag.schema import NodeKind
from llama_index_e2rag.stores.port import Stores

logger = logging.getLogger(__name__)


class NarrativeRetriever(StoresRetriever):
    """Fused lexical + dense + graph retrieval of sentence-aligned passages.

    Args:
        stores: the index's ``Stores`` (``index.as_retriever()`` passes them).
        embed_model: the embedding the passages were embedded with.
        parser: the ``GroundedExtractor`` that reads questions (default: a new one).
        passage_words: the index's passage length (sizes the ranking depth for a budget).
        similarity_top_k: passages returned when no budget is given (continuations count).
        budget_words: fill this many words instead (no text twice; the last passage is cut at a
            sentence end). ``similarity_top_k`` is then ignored.
        weights: ``NarrativeWeights`` (default: the fitted ones shipped with the package).
        disable: signals to switch off, e.g. ``("anchor", "continuation")``.
        filters: ``MetadataFilters`` on document metadata: only the matching documents'
            passages are scored, ranked and fill the budget.
    """

    def __init__(
        self,
        stores: Stores,
        embed_model: BaseEmbedding,
        parser: Optional[GroundedExtractor] = None,
        passage_words: int = DEFAULT_PASSAGE_WORDS,
        similarity_top_k: int = 10,
        budget_words: Optional[int] = None,
        weights: Optional[NarrativeWeights] = None,
        disable: Sequence[str] = (),
        filters: Optional[MetadataFilters] = None,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        if similarity_top_k < 1:
            raise ValueError(f"similarity_top_k must be at least 1, got {similarity_top_k}")
        super().__init__(stores, embed_model, budget_words, filters, callback_manager, verbose)
        self.passage_words = passage_words
        self.similarity_top_k = similarity_top_k
        self.weights = (weights or NarrativeWeights.fitted()).without(*disable)
        self._parser: Any = parser

    # -- the retrieval ---------------------------------------------------------------------------
    async def _run(self, query: QueryBundle, io: RetrievalIO) -> list[NodeWithScore]:
        return self.results(*await self._read_question(query, io))

    def signals(self, query: str) -> tuple[NarrativeState, Signals]:
        """The index's passage state and this question's signal arrays (before weighting).

        What ``retrieve`` ranks from; public so weights can be fitted without re-parsing and
        re-embedding each question for every candidate weighting.
        """
        return run_blocking(self._read_question(QueryBundle(query), BLOCKING))

    async def _read_question(
        self, query: QueryBundle, io: RetrievalIO
    ) -> tuple[NarrativeState, Signals]:
        """The passage state, and the question (and its anchor clause) embedded and parsed."""
        state = await io.offload(self._state)
        cue, texts = self._texts(query.query_str)
        vectors = [await self._query_embedding(query, io)]
        vectors += await io.embed_queries(self._embed_model, texts[1:])
        graphs = [await io.offload(self._read, t) for t in texts]
        return state, self._signals(state, texts, vectors, graphs, cue)

    # -- steps ---------------------------------------------------------------------------------
    def _state(self) -> NarrativeState:
        """The passages this retrieval ranks: all of them, or the filter's documents' only."""
        state = narrative_state(self._stores)
        scope = self._scope()
        if scope is None:
            return state
        return restrict_state(state, scope, self._stores.graph.doc_orders())

    def _texts(self, query: str) -> tuple[Optional[TemporalCue], list[str]]:
        """The question, and the anchor clause when its temporal cue has one."""
        cue = temporal_cue(query) if self.weights.anchor or self.weights.edge else None
        if cue is not None and cue.clause and self.weights.anchor:
            return cue, [query, cue.clause]
        return cue, [query]

    def _read(self, text: str) -> QueryGraph:
        """Characters and events of a text, by the graph's own parser (none without spaCy)."""
        w = self.weights
        if not (w.mention or w.event or w.co_event or w.answer_type):
            return QueryGraph()
        if self._parser is None:
            self._parser = extractors_parser(())
        if self._parser is False:
            return QueryGraph()
        try:
            return QueryGraph.from_nodes(self._parser.query_nodes(text))
        except (ImportError, MissingModelError) as exc:  # spaCy or its model is not installed
            logger.warning("no spaCy parser (%s): the narrative mode's graph signals are off", exc)
            self._parser = False
            return QueryGraph()

    def _signals(
        self,
        state: NarrativeState,
        texts: list[str],
        vectors: list[list[float]],
        graphs: list[QueryGraph],
        cue: Optional[TemporalCue],
    ) -> Signals:
        width = state.table.vectors.shape[1] if len(state.table) else len(vectors[0])
        if any(len(v) != width for v in vectors):
            raise E2RAGError(
                f"this index's passages have {width}-dimensional vectors but its embed model "
                f"returns {len(vectors[0])}; load the index with the embedding model it was "
                "built with"
            )
        clause = None
        if len(texts) > 1:
            clause = (state.lexical.scores(texts[1]), np.asarray(vectors[1]), graphs[1])
        return signals(
            state.table,
            state.lexical.scores(texts[0]),
            np.asarray(vectors[0]),
            graphs[0],
            cue,
            clause,
            answer_type(texts[0]).value if self.weights.answer_type else None,
        )

    def results(self, state: NarrativeState, sig: Signals) -> list[NodeWithScore]:
        """Rank, continue and fill the budget from precomputed signals."""
        table = state.table
        if not len(table):
            if not len(narrative_state(self._stores).table) and self._stores.graph.nodes(
                NodeKind.CHUNK
            ):
                raise E2RAGError(
                    "this index has no passages (it was built before the narrative mode "
                    "existed): index its documents again (e2rag index PATH --store DIR) or "
                    "choose another mode"
                )
            return []
        located = locate_anchor(table, sig.cue, sig.clause, self.weights)
        ranked = rank(table, sig, self.weights, self._depth(table), located)
        pieces = []
        for r in ranked:
            node = state.passages[r.row]
            pieces.append(Piece(r, node.doc_id, node.span[0] if node.span else None, node.text))
        kept = fill_budget(pieces, self.budget_words)
        if self.budget_words is None:
            kept = kept[: self.similarity_top_k]
        places = {r.row: place for place, r in enumerate(ranked, start=1)}
        anchor = anchor_record(state, located, sig)
        results = []
        for item in kept:
            row: Ranked = item.piece.key
            node = state.passages[row.row]
            explanation = dict(row.contributions)
            explanation[STORY_MATCH_KEY] = round(sig.story_match, 4)
            explanation[RANK_KEY] = places[row.row]
            # a copy: the state's metadata is shared by every query until the index changes
            meta = copy.deepcopy(state.chunk_metadata.get(node.chunk_id or "", {}))
            ours: dict[str, Any] = {SIGNALS_KEY: explanation}
            if row.continued_from is not None:
                explanation[CONTINUATION_KEY] = _score_of(ranked, row.continued_from)
                ours[CONTINUES_KEY] = table.ids[row.continued_from]
            if item.trimmed:
                ours[TRIMMED_KEY] = True
            if anchor is not None:
                ours[ANCHOR_KEY] = anchor
            results.append(
                NodeWithScore(
                    node=_passage_node(node, item.text, item.start, item.end, meta, ours),
                    score=row.score,
                )
            )
        return results

    def _calibrate(self, raw: float, signals: dict[str, float]) -> float:
        """The result as the cosine of equal relevance (``ranking.scores``): a continuation is
        scored from the hit it continues, one place lower, so it never outscores that hit nor
        falls below the hits after it (it is as likely the answer as its own raw sum is not)."""
        return narrative_score(
            signals.get(CONTINUATION_KEY, raw),
            signals.get(STORY_MATCH_KEY, 0.0),
            int(signals.get(RANK_KEY, 1)),
        )

    def _depth(self, table: Any) -> int:
        """How many ranked passages to consider: ``similarity_top_k``, or enough for the budget."""
        if self.budget_words is None:
            return self.similarity_top_k
        return min(len(table), budget_depth(self.budget_words, self.passage_words))



def anchor_record(
    state: NarrativeState, anchor: Optional[Anchor], sig: Signals
) -> Optional[dict[str, Any]]:
    """``metadata["anchor"]`` of an anchored question (``ranking.anchor``), else None."""
    if anchor is None or sig.cue is None:
        return None
    text = state.passages[anchor.row].text
    return anchor_metadata(state.table, anchor, text, sig.cue.clause)


def _score_of(ranked: Sequence[Ranked], row: int) -> float:
    return next((r.score for r in ranked if r.row == row), 0.0)


def _passage_node(
    node: Any,
    text: str,
    start: Optional[int],
    end: Optional[int],
    source_meta: dict[str, Any],
    extra: dict[str, Any],
) -> TextNode:
    ours = {
        POSITION_KEY: format_position(node.pos),
        POS_KEY: list(node.pos),
        "doc_id": node.doc_id,
        "chunk_id": node.chunk_id,
        "span": [start, end],
        "retriever": "narrative",
        EVIDENCE_KEY: [],
        **extra,
    }
    metadata = {**source_meta, **ours}
    hidden = bookkeeping_keys(ours)
    return TextNode(
        id_=node.id,
        text=text,
        metadata=metadata,
        excluded_embed_metadata_keys=hidden,
        excluded_llm_metadata_keys=hidden,
        start_char_idx=start,
        end_char_idx=end,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=node.doc_id)},
    )



__all__ = ["NarrativeRetriever", "SIGNALS", "SIGNALS_KEY"]
