"""A query asked of a loaded store, as plain data: what ``e2rag query`` prints and ``e2rag serve``
answers over HTTP are the same dictionaries, built here once for both.

Also the one place where a query's library errors become advice a user can act on: a mode the
store was not built for names the ``e2rag index`` flag that adds it, ``--hyde`` without an LLM
names how to configure one from a shell (the server answers with the same lines).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from llama_index_e2rag.errors import E2RAGError, MissingModelError, UsageError
from llama_index_e2rag.modes import (
    DEFAULT_MODE,
    HYDE_VARIANTS,
    LAYER_OF_MODE,
    RETRIEVER_MODES,
    layer_missing_cli,
)

if TYPE_CHECKING:
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.schema import NodeWithScore

    from llama_index_e2rag.context.story_position import StoryPositions
    from llama_index_e2rag.index import E2RAGIndex

#: How to give the CLI or the server an LLM (they read no Python ``Settings``).
LLM_ADVICE = (
    'set OPENAI_API_KEY (and pip install "llama-index-e2rag[openai]") so that e2rag uses '
    "gpt-4o-mini"
)


@dataclass(frozen=True)
class QueryOptions:
    """What ``e2rag query`` (and ``POST /query``) may ask: checked once, for both."""

    question: str
    mode: Optional[str] = None
    hyde: Optional[str] = None
    top_k: Optional[int] = None
    budget_words: Optional[int] = None

    def checked(self) -> "QueryOptions":
        """These options, or ``UsageError`` (a ``ValueError``) saying what to change."""
        if not self.question.strip():
            raise UsageError("the question is empty; ask something, e.g. e2rag query \"Who is X?\"")
        if self.mode is not None and self.mode not in RETRIEVER_MODES:
            modes = ", ".join(RETRIEVER_MODES)
            raise UsageError(f"unknown mode {self.mode!r}; choose one of {modes}")
        if self.hyde is not None and self.hyde not in HYDE_VARIANTS:
            variants = ", ".join(HYDE_VARIANTS)
            raise UsageError(f"unknown hyde {self.hyde!r}; choose one of {variants}")
        if self.hyde is not None and self.mode not in (None, "entity_event"):
            raise UsageError(f"--hyde works with --mode entity_event, not --mode {self.mode}")
        if self.top_k is not None and self.top_k < 1:
            raise UsageError("--top-k must be at least 1")
        if self.budget_words is not None and self.budget_words < 1:
            raise UsageError("--budget-words must be at least 1")
        return self

    @property
    def resolved_mode(self) -> str:
        return self.mode or ("entity_event" if self.hyde else DEFAULT_MODE)

    def retriever_kwargs(self) -> dict[str, int]:
        options = {"similarity_top_k": self.top_k, "budget_words": self.budget_words}
        return {k: v for k, v in options.items() if v is not None}


def query_engine(index: "E2RAGIndex", store: object, options: QueryOptions) -> "BaseQueryEngine":
    """``index.as_query_engine`` for ``options``; what the store or the set-up lacks is said
    in command-line terms."""
    mode = options.resolved_mode
    try:
        return index.as_query_engine(mode=mode, hyde=options.hyde, **options.retriever_kwargs())
    except E2RAGError as exc:
        raise E2RAGError(query_advice(exc, mode, options.hyde, store)) from exc


def query_advice(exc: BaseException, mode: str, hyde: Optional[str], store: object) -> str:
    """The one-line reason of a query failure, with the command that fixes it."""
    # deferred: the retrievers import llama-index (``e2rag --help`` stays light)
    from llama_index_e2rag.retrievers.chrono import ChronoLayerMissingError
    from llama_index_e2rag.retrievers.event_graph import EventGraphMissingError
    from llama_index_e2rag.retrievers.sentence_graph import SentenceGraphMissingError

    missing = (ChronoLayerMissingError, SentenceGraphMissingError, EventGraphMissingError)
    if isinstance(exc, missing) and mode in LAYER_OF_MODE:
        return layer_missing_cli(mode, store, f"--mode {mode}")
    if isinstance(exc, MissingModelError) and hyde is not None:
        return (f"--hyde {hyde} drafts a hypothetical answer with an LLM and none is "
                f"configured: {LLM_ADVICE}; or query without --hyde")
    if isinstance(exc, MissingModelError):
        return f"--mode {mode} needs an LLM here and none is configured: {LLM_ADVICE}"
    return " ".join(str(exc).split()) or type(exc).__name__


def run_query(index: "E2RAGIndex", store: object, options: QueryOptions) -> dict[str, Any]:
    """Answer ``options.question`` from ``index``: ``{"answer", "mode", "sources"}``."""
    engine = query_engine(index, store, options)

    response = engine.query(options.question)
    positions = _positions(index)
    return {
        "answer": str(response).strip(),
        "mode": options.resolved_mode,
        "sources": [
            source_dict(s, rank, positions) for rank, s in enumerate(response.source_nodes, 1)
        ],
    }


def run_retrieve(index: "E2RAGIndex", store: object, options: QueryOptions) -> dict[str, Any]:
    """The evidence of ``options.question`` without an answer: ``{"mode", "sources"}``."""
    mode = options.resolved_mode
    kwargs: dict[str, Any] = dict(options.retriever_kwargs())
    if options.hyde is not None:
        kwargs["hyde"] = options.hyde
    try:
        retriever = index.as_retriever(mode=mode, **kwargs)
    except E2RAGError as exc:
        raise E2RAGError(query_advice(exc, mode, options.hyde, store)) from exc
    nodes = retriever.retrieve(options.question)
    positions = _positions(index)
    return {
        "mode": mode,
        "sources": [source_dict(s, rank, positions) for rank, s in enumerate(nodes, 1)],
    }


def _positions(index: "E2RAGIndex") -> "StoryPositions":
    """Positions in ``index``'s documents, their story maps read from the store's read model."""
    # deferred: the schema's pydantic models (~1 s; ``e2rag --help`` stays light)
    from llama_index_e2rag.context.story_position import StoryPositions

    return StoryPositions(index.stores)


def source_dict(
    source: "NodeWithScore", rank: int, positions: "StoryPositions"
) -> dict[str, Any]:
    """One result as JSON values: its document, story position (in words, as the extractive
    answer says it, and as numbers), score, text, what brought it (``explain``) and its
    metadata."""
    # deferred: the schema's pydantic models (~1 s; ``e2rag --help`` stays light)
    from llama_index_e2rag.context.keys import POS_KEY
    from llama_index_e2rag.context.story_text import source_name

    meta = source.node.metadata
    pos = meta.get(POS_KEY)
    doc_id = meta.get("doc_id", source.node.ref_doc_id)
    offset = int(pos[1]) if pos else None
    name = source_name(meta, doc_id, int(pos[0]) if pos else None)
    chapter, percent = positions.place(doc_id, offset)
    return {
        "rank": rank,
        "doc_id": doc_id,
        "file_name": meta.get("file_name"),
        "position": list(pos) if pos else None,
        "char_offset": offset,
        "chapter": chapter,
        "percent": percent,
        "where": positions.describe(doc_id, offset, name) if pos else f"{name} · position unknown",
        "score": source.score,
        "text": source.node.get_content(),
        "relation_path": meta.get("relation_path"),
        "explain": explain(meta),
        "metadata": json.loads(json.dumps(meta, default=str)),
    }


#: Keys of ``metadata["signals"]`` that record how a score was calibrated, not what brought it.
_NOT_CONTRIBUTIONS = frozenset({"raw_score", "story_match", "rank"})


def explain(metadata: dict) -> str:
    """One line saying what brought a result: the narrative mode's signal contributions, or
    the evidence another mode records."""
    recorded = metadata.get("signals") or {}
    signals = {k: v for k, v in recorded.items() if k not in _NOT_CONTRIBUTIONS}
    if signals:
        parts = [
            f"{name} {value:+.3f}" for name, value in signals.items() if name != "continuation"
        ]
        line = "signals: " + (", ".join(parts) or "none")
        if "raw_score" in recorded:
            line += f" (raw score {recorded['raw_score']:.3f})"
        if "continuation" in signals:
            line += f"; continues a hit scored {signals['continuation']:.3f}"
        return line
    if "relation_path" in metadata:
        hop, via = metadata["hop"], metadata["via"]
        reached = {"anchor": "an anchor", "fill": "a match on no path"}.get(
            via, f"hop {hop} along a {via} edge"
        )
        return (f"sentence graph: {metadata['sentence_role']} sentence, {reached}, similarity "
                f"{metadata['similarity']:.3f}, refinement {metadata['refinement']}")
    if "evidence_role" in metadata:
        how = metadata.get("decomposition", {}).get("how", "")
        match = f", {metadata['match']} match" if "match" in metadata else ""
        return f"event graph: {metadata['label']} ({metadata['evidence_role']}{match}), query " \
               f"decomposed by {how}"
    seeds = metadata.get("seed_scores")
    if seeds:
        best = max(seeds.values())
        return f"seeds: {len(seeds)} mention/event seed(s) in this chunk, best {best:.3f}"
    if "query_hits" in metadata:
        return (f"graph: {metadata['query_hits']} query node(s) matched, "
                f"{metadata.get('ret_count', 0)} graph node(s) grounded here")
    return "similarity only (this mode records no other signals)"
