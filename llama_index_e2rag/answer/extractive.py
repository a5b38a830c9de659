"""Answers without an LLM: the sentence that answers first, then more evidence, with positions.

``ExtractiveSynthesizer`` is a llama-index ``BaseSynthesizer`` so it drops into
``RetrieverQueryEngine`` wherever an LLM synthesizer would. It splits the retrieved nodes into
sentences (nodes that already are sentences, like the grounded retriever's, stay whole), scores
them by relevance (cosine similarity to the query with the index's embedding model, or the
retriever's score; the question's vector is the one retrieval computed, and a sentence the index
embedded as one of its sentence nodes is not embedded again), then reads the question the way an answer is looked for: its content words
(lemmas) must be in the sentence, and a *who/where/when/why* question wants a sentence offering a
new person, place, time or cause (``answer_types``). Each sentence is printed with its document
and position, e.g.::

    1. [peter_rabbit.txt · 29% through the story] He lost one of his shoes among the cabbages, ...
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass
from typing import Any, AsyncGenerator, Generator, Literal, Optional, Sequence, Union

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.indices.prompt_helper import ChatPromptHelper, PromptHelper
from llama_index.core.response_synthesizers.base import BaseSynthesizer
from llama_index.core.schema import (
    MetadataMode,
    NodeWithScore,
    QueryBundle,
    QueryType,
    TextNode,
)
from llama_index.core.types import RESPONSE_TEXT_TYPE

from llama_index_e2rag.answer.reading import (
    AnswerWeights, Reading, read_against_question, read_candidates)
from llama_index_e2rag.context.keys import RESPONSE_EVIDENCE_KEY
from llama_index_e2rag.errors import MissingModelError
from llama_index_e2rag.extract.base import DOC_ORDER_KEY
from llama_index_e2rag.extract.linking import chunk_node_id
from llama_index_e2rag.extract.spacy_model import SPACY_MODEL, load_spacy
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.llm.no_llm import NoLLM
from llama_index_e2rag.schema import NodeKind
from llama_index_e2rag.context.story_position import document_chunks, story_map
from llama_index_e2rag.context.story_text import StoryMap, describe_position, source_name
from llama_index_e2rag.retrievers.parsing import extractors_parser
from llama_index_e2rag.stores.port import Stores
from llama_index_e2rag.text import split_sentences

logger = logging.getLogger(__name__)

#: Candidates (best by relevance) parsed to read them against the question: enough for a few
#: hundred words of evidence, few enough that parsing costs tens of milliseconds.
MAX_PARSED = 48
#: A query embedding and the embeddings of the candidate sentences, in candidate order.
_Vectors = tuple[list[float], list[list[float]]]


@dataclass
class Evidence:
    """One evidence sentence: its text, where it is and how well it matches the query."""

    text: str
    source: str
    doc_id: Optional[str]
    doc_order: Optional[int]
    char_offset: Optional[int]
    percent: Optional[float]
    score: float
    node_id: str
    #: True when the node was a scored sentence kept whole, False when split out of a passage.
    whole_node: bool = False
    #: The chapter (book, part, ...) heading the sentence comes under, when the text has them.
    chapter: Optional[str] = None
    #: True when the sentence offers the kind of answer the question asks for (a new person for
    #: *who*, ...); None when the question was not read (no spaCy, ``rank_by="score"``).
    offers_answer: Optional[bool] = None
    #: Retrieval rank (0 = first) of the node the sentence comes from.
    rank: int = 0

    def location(self) -> str:
        """Human-readable place in the story: document, chapter, share of the story."""
        return "[" + describe_position(
            self.source, self.percent, self.chapter, self.char_offset
        ) + "]"

    def render(self) -> str:
        return f"{self.location()} {self.text}"


class ExtractiveSynthesizer(BaseSynthesizer):
    """Answer with the top ``top_n`` evidence sentences and their positions; never calls an LLM.

    Relevance, per ``rank_by``: ``"similarity"`` is cosine similarity to the query with
    ``embed_model``; ``"auto"`` (default) keeps the retriever's score when every node already is a
    scored sentence (the grounded retriever ranks them better than a plain cosine can) and uses
    similarity when sentences had to be split out of passages, whose score says nothing about
    which of their sentences answers. With ``"auto"`` and ``"similarity"`` the best
    ``MAX_PARSED`` sentences are then re-read against the question with the spaCy pipeline
    ``spacy_model`` (the grounded extractor's, loaded once per process): question words present
    and the kind of answer asked for decide with relevance and the retrieval rank of the
    sentence's node (``weights``, default the fitted ``W_*``), so a sentence that only resembles
    the question does not lead, and one from a low-ranked passage must read clearly better than
    one from the top passage. ``"score"`` keeps the retriever's order untouched.
    ``graph_store`` lets positions be shown as chapter and share of the document ("Chapter 3 ·
    93% through the story"); without it only character offsets are shown. ``order="story"``
    lists the chosen sentences in narrative order instead of best first. ``stores`` (the
    index's) lend the vectors of the candidates the index embedded already (its sentence nodes,
    the same texts), so only the rest is embedded.
    """

    def __init__(
        self,
        embed_model: Optional[BaseEmbedding] = None,
        top_n: int = 5,
        graph_store: Optional[GraphStore] = None,
        order: Literal["relevance", "story"] = "relevance",
        rank_by: Literal["auto", "similarity", "score"] = "auto",
        max_candidates: int = 256,
        spacy_model: Optional[str] = SPACY_MODEL,
        weights: Optional["AnswerWeights"] = None,
        callback_manager: Optional[CallbackManager] = None,
        streaming: bool = False,
        stores: Optional[Stores] = None,
    ) -> None:
        if top_n < 1:
            raise ValueError(f"top_n must be at least 1, got {top_n}")
        if order not in ("relevance", "story"):
            raise ValueError(f"order must be 'relevance' or 'story', got {order!r}")
        if rank_by not in ("auto", "similarity", "score"):
            raise ValueError(f"rank_by must be 'auto', 'similarity' or 'score', got {rank_by!r}")
        # BaseSynthesizer sizes prompts from an LLM's metadata and would otherwise resolve
        # llama-index's OpenAI default; NoLLM satisfies it and is never called here. No prompt
        # is ever sized either: prompt helpers counting words spare loading tiktoken (~0.5 s).
        super().__init__(
            llm=NoLLM(),
            callback_manager=callback_manager,
            prompt_helper=PromptHelper(tokenizer=str.split),
            chat_prompt_helper=ChatPromptHelper(tokenizer=str.split),
            streaming=streaming,
            empty_response="No evidence was retrieved for this question.",
        )
        self._embed_model = embed_model
        self._top_n = top_n
        self._graph_store = graph_store
        self._order = order
        self._rank_by = rank_by
        self._max_candidates = max_candidates
        self._spacy_model = spacy_model
        self._weights = weights or AnswerWeights()
        self._stores = stores

    @classmethod
    def from_index(cls, index: Any, **kwargs: Any) -> "ExtractiveSynthesizer":
        """Use the index's embedding model, graph (for story positions), stored vectors and
        spaCy pipeline."""
        kwargs.setdefault("embed_model", getattr(index, "embed_model", None))
        kwargs.setdefault("graph_store", getattr(index, "graph_store", None))
        kwargs.setdefault("stores", getattr(index, "stores", None))
        kwargs.setdefault("spacy_model", extractors_parser(getattr(index, "extractors", ())).model)
        return cls(**kwargs)

    # -- llama-index entry points -------------------------------------------------------------
    def _get_prompts(self) -> dict[str, Any]:
        """No prompts: this synthesizer never talks to an LLM."""
        return {}

    def _update_prompts(self, prompts_dict: dict[str, Any]) -> None:
        """Nothing to update (see ``_get_prompts``)."""

    def synthesize(
        self,
        query: QueryType,
        nodes: list[NodeWithScore],
        additional_source_nodes: Optional[Sequence[NodeWithScore]] = None,
        **response_kwargs: Any,
    ) -> RESPONSE_TYPE:
        """Overridden so positions and sources in node metadata reach the answer."""
        query_str, candidates = _query_str(query), self._candidates(nodes)
        evidence = self._rank(query_str, candidates, self._vectors(query, candidates, nodes))
        return self._respond(query_str, evidence, nodes, additional_source_nodes, is_async=False)

    async def asynthesize(
        self,
        query: QueryType,
        nodes: list[NodeWithScore],
        additional_source_nodes: Optional[Sequence[NodeWithScore]] = None,
        **response_kwargs: Any,
    ) -> RESPONSE_TYPE:
        query_str, candidates = _query_str(query), self._candidates(nodes)
        vectors: Optional[_Vectors] = None
        if self._embed_model is not None and self._by_similarity(candidates):
            stored = await asyncio.to_thread(self._stored, candidates, nodes)
            missing = [c.text for i, c in enumerate(candidates) if i not in stored]
            given = _given(query)
            vectors = (
                given if given is not None
                else await self._embed_model.aget_query_embedding(query_str),
                _aligned(
                    stored,
                    await self._embed_model.aget_text_embedding_batch(missing) if missing else [],
                    len(candidates),
                ),
            )
        evidence = self._rank(query_str, candidates, vectors)
        return self._respond(query_str, evidence, nodes, additional_source_nodes, is_async=True)

    def get_response(
        self, query_str: str, text_chunks: Sequence[str], **response_kwargs: Any
    ) -> RESPONSE_TEXT_TYPE:
        """Plain-text path (no metadata, so no positions): best sentences of the chunks."""
        response = self.synthesize(query_str, _text_nodes(text_chunks))
        return _response_text(response)

    async def aget_response(
        self, query_str: str, text_chunks: Sequence[str], **response_kwargs: Any
    ) -> RESPONSE_TEXT_TYPE:
        response = await self.asynthesize(query_str, _text_nodes(text_chunks))
        return _response_text(response)

    # -- evidence ----------------------------------------------------------------------------
    def _by_similarity(self, candidates: list[Evidence]) -> bool:
        if not candidates or self._rank_by == "score":
            return False
        return self._rank_by == "similarity" or not all(c.whole_node for c in candidates)

    def _candidates(self, nodes: Sequence[NodeWithScore]) -> list[Evidence]:
        """Every sentence of the retrieved nodes, each once, in retrieval order."""
        found: list[Evidence] = []
        seen: set[str] = set()
        for rank, item in enumerate(nodes):
            node = item.node
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            meta = node.metadata or {}
            doc_id = meta.get("doc_id") or node.ref_doc_id
            doc_order, base = _node_position(node)
            score = float(item.score) if item.score is not None else -float(rank)
            is_sentence = meta.get("kind") == NodeKind.SENTENCE.value
            spans = [(0, len(text))] if is_sentence else split_sentences(text)
            for start, end in spans:
                sentence = " ".join(text[start:end].split())
                key = sentence.lower()
                if not key or key in seen:
                    continue
                seen.add(key)
                offset = None if base is None else base + (0 if is_sentence else start)
                story = self._story_map(doc_id) if offset is not None else None
                found.append(
                    Evidence(
                        text=sentence,
                        source=source_name(meta, doc_id, doc_order),
                        doc_id=doc_id,
                        doc_order=doc_order,
                        char_offset=offset,
                        percent=None if story is None else story.percent_at(offset),
                        score=score,
                        node_id=node.node_id,
                        whole_node=is_sentence and item.score is not None,
                        chapter=None if story is None else story.chapter_at(offset),
                        rank=rank,
                    )
                )
                if len(found) >= self._max_candidates:
                    return found
        return found

    def _rank(
        self,
        query_str: str,
        candidates: list[Evidence],
        embeddings: Optional[_Vectors],
    ) -> list[Evidence]:
        """Score relevance (cosine when embeddings were computed), re-read the most relevant
        against the question, keep the best few."""
        ranked = _by_relevance(candidates, embeddings)
        nlp = self._nlp() if self._rank_by != "score" and ranked else None
        if nlp is not None:
            head = read_against_question(nlp, query_str, ranked[:MAX_PARSED], self._weights)
            ranked = head + ranked[MAX_PARSED:]
        best = ranked[: self._top_n]
        if self._order == "story":
            best.sort(key=lambda e: (e.doc_order or 0, e.char_offset or 0))
        return best

    def readings(
        self, query: QueryType, nodes: list[NodeWithScore]
    ) -> list[tuple[Evidence, Reading]]:
        """The candidates the answer chooses from (the ``MAX_PARSED`` most relevant), each read
        against the question; empty without spaCy. Public so that ``AnswerWeights`` can be
        fitted without parsing each question again for every candidate weighting."""
        query_str, candidates = _query_str(query), self._candidates(nodes)
        ranked = _by_relevance(candidates, self._vectors(query, candidates, nodes))[:MAX_PARSED]
        nlp = self._nlp() if ranked else None
        return [] if nlp is None else list(zip(ranked, read_candidates(nlp, query_str, ranked)))

    def _vectors(
        self, query: QueryType, candidates: list[Evidence], nodes: Sequence[NodeWithScore]
    ) -> Optional[_Vectors]:
        """The query's and the candidates' embeddings, when relevance is a cosine: the query's
        from its bundle when retrieval put it there, the candidates' from the stores where the
        index embedded the same sentence; the rest embedded now."""
        if self._embed_model is None or not self._by_similarity(candidates):
            return None
        stored = self._stored(candidates, nodes)
        missing = [c.text for i, c in enumerate(candidates) if i not in stored]
        given = _given(query)
        return (
            given if given is not None else self._embed_model.get_query_embedding(_query_str(query)),
            _aligned(
                stored,
                self._embed_model.get_text_embedding_batch(missing) if missing else [],
                len(candidates),
            ),
        )

    def _stored(
        self, candidates: list[Evidence], nodes: Sequence[NodeWithScore]
    ) -> dict[int, list[float]]:
        """Stored vectors of the candidates (by position) that are sentence nodes of the index
        with the same text: a retrieved sentence itself, or a sentence of a passage or chunk that
        the grounded extractor read at the same place in the chunk the result names. The vector
        of the same text is the same (the offline embedding gives a text the same vector in any
        batch), so the answer does not change; it is only not computed twice."""
        if self._stores is None:
            return {}
        wanted: dict[str, int] = {}
        for i, item in enumerate(candidates):
            node = nodes[item.rank].node
            meta = node.metadata or {}
            if meta.get("kind") == NodeKind.SENTENCE.value:
                wanted[node.node_id] = i
            elif None not in (item.doc_id, item.doc_order, item.char_offset):
                # the grounded extractor's sentence nodes: (doc order, start, 0) in their chunk
                pos = (item.doc_order, item.char_offset, 0)
                for chunk in self._read_in(node, item):
                    wanted[chunk_node_id(item.doc_id, chunk, NodeKind.SENTENCE, pos, item.text)] = i
        same = [
            n.id for n in self._stores.graph.get_nodes(list(wanted))
            if " ".join(n.text.split()) == candidates[wanted[n.id]].text
        ]
        return {
            wanted[node_id]: vector.tolist()
            for node_id, vector in self._stores.embeddings(same).items()
        }

    def _read_in(self, node: Any, item: Evidence) -> list[str]:
        """The chunks the grounded extractor may have read ``item`` in: the result's own, or
        for derived text (a ChronoRAG layer-0 chunk, kind ``chunk``, layer 0) the source chunks
        holding its offset, which the index read when it parsed the document."""
        meta = node.metadata or {}
        source = self._positions()
        if meta.get("layer") != 0 or source is None or item.doc_id is None:
            return [meta.get("chunk_id") or node.node_id]
        return document_chunks(source, item.doc_id).chunks_at(item.char_offset or 0)

    def _nlp(self) -> Any:
        """The spaCy pipeline (shared with the grounded extractor), None when not installed."""
        if self._spacy_model is None:
            return None
        try:
            return load_spacy(self._spacy_model)
        except MissingModelError as exc:
            logger.warning("Extractive answers rank by relevance only: %s", exc)
            self._spacy_model = None
            return None

    def _story_map(self, doc_id: Optional[str]) -> Optional[StoryMap]:
        source = self._positions()
        if source is None or doc_id is None:
            return None
        return story_map(source, doc_id)

    def _positions(self) -> Optional[Union[Stores, GraphStore]]:
        """What story positions are read from: the stores (their read model), else the graph."""
        return self._stores if self._stores is not None else self._graph_store

    def _respond(
        self,
        query_str: str,
        evidence: list[Evidence],
        nodes: Sequence[NodeWithScore],
        additional: Optional[Sequence[NodeWithScore]],
        *,
        is_async: bool,
    ) -> RESPONSE_TYPE:
        source_nodes = list(nodes) + list(additional or [])
        metadata = {n.node.node_id: n.node.metadata for n in source_nodes}
        metadata[RESPONSE_EVIDENCE_KEY] = [asdict(e) for e in evidence]
        lines = self._render_lines(query_str, evidence)
        if not self._streaming:
            return Response("\n".join(lines), source_nodes=source_nodes, metadata=metadata)
        if is_async:
            return AsyncStreamingResponse(
                response_gen=_agen(lines), source_nodes=source_nodes, metadata=metadata
            )
        return StreamingResponse(
            response_gen=_gen(lines), source_nodes=source_nodes, metadata=metadata
        )

    def _render_lines(self, query_str: str, evidence: list[Evidence]) -> list[str]:
        if not evidence:
            return [self._empty_response]
        header = f'Evidence for "{query_str}" (extractive answer, no LLM):'
        return [header] + [f"{i}. {e.render()}" for i, e in enumerate(evidence, 1)]


def _by_relevance(candidates: list[Evidence], embeddings: Optional[_Vectors]) -> list[Evidence]:
    """``candidates`` best first: by cosine when embeddings were computed (it becomes their
    score), else by score; ties keep retrieval order."""
    if embeddings is not None and candidates:
        query_vec, vectors = np.asarray(embeddings[0]), np.asarray(embeddings[1])
        norms = np.linalg.norm(vectors, axis=1) * (np.linalg.norm(query_vec) or 1.0)
        sims = vectors @ query_vec / np.where(norms > 0, norms, 1.0)
        for item, sim in zip(candidates, sims):
            item.score = float(sim)
    order = sorted(range(len(candidates)), key=lambda i: (-candidates[i].score, i))
    return [candidates[i] for i in order]


def _query_str(query: QueryType) -> str:
    return query.query_str if isinstance(query, QueryBundle) else str(query)


def _given(query: QueryType) -> Optional[list[float]]:
    """The question's embedding when its bundle carries one (retrieval puts it there); not the
    blend of a bundle's ``custom_embedding_strs``, which is not the question's own."""
    if isinstance(query, QueryBundle) and not query.custom_embedding_strs:
        return query.embedding
    return None


def _aligned(
    stored: dict[int, list[float]], fresh: list[list[float]], count: int
) -> list[list[float]]:
    """Candidate vectors in candidate order: the stored ones, and ``fresh`` for the rest."""
    rest = iter(fresh)
    return [stored[i] if i in stored else next(rest) for i in range(count)]


def _node_position(node: Any) -> tuple[Optional[int], Optional[int]]:
    """(document order, character offset) from whichever metadata the node carries.

    Retrieved sentences carry ``pos``; the index's vector records carry ``doc_order`` and
    ``char_offset``; chunk TextNodes carry the document order key and ``start_char_idx``.
    """
    meta = node.metadata or {}
    pos = meta.get("pos")
    if isinstance(pos, (list, tuple)) and len(pos) >= 2:
        return int(pos[0]), int(pos[1])
    if meta.get("doc_order") is not None and meta.get("char_offset") is not None:
        return int(meta["doc_order"]), int(meta["char_offset"])
    order = meta.get(DOC_ORDER_KEY)
    start = getattr(node, "start_char_idx", None)
    return (int(order) if order is not None else None), (int(start) if start is not None else None)


def _text_nodes(text_chunks: Sequence[str]) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=t)) for t in text_chunks]


def _response_text(response: RESPONSE_TYPE) -> RESPONSE_TEXT_TYPE:
    if isinstance(response, Response):
        return response.response or ""
    return response.response_gen  # type: ignore[union-attr]


def _gen(lines: list[str]) -> Generator[str, None, None]:
    for i, line in enumerate(lines):
        yield line if i == 0 else "\n" + line


async def _agen(lines: list[str]) -> AsyncGenerator[str, None]:
    for i, line in enumerate(lines):
        yield line if i == 0 else "\n" + line
