"""``event_graph`` mode: E²GraphRAG's retrieval (paper 001, §3.2) over the stores.

The question's chunks come from the chunk vectors; one LLM call (figure 7) drafts an answer
from them and decomposes the question into entity names and event-centred sub-queries (or,
offline, the question's parse does: its entity phrases and clauses). The ranking
(``ranking.event_graph``) aligns the names with entity nodes, matches the sub-queries to events,
adds the events' neighbours and the reasoning paths between the aligned entities; this module
reads the graph into that view (once per store state) and turns the evidence into nodes. Every
node carries the decomposition (metadata ``decomposition``), so the two-stage engine
(``event_graph_engine``) enriches the draft without asking for it again.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Hashable, Literal, Optional, Sequence

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

from llama_index_e2rag.context.keys import (
    EVIDENCE_KEY,
    EVIDENCE_RANK_KEY,
    POS_KEY,
    POSITION_KEY,
    bookkeeping_keys,
)
from llama_index_e2rag.context.evidence import format_position
from llama_index_e2rag.errors import E2RAGError, LLMOutputError, LLMTimeoutError, MissingModelError
from llama_index_e2rag.extract.event_graph.entities import fused_entities
from llama_index_e2rag.extract.event_graph.prompts import (
    DECOMPOSE_PROMPT,
    EVENTGRAPH_DECOMPOSE,
    draft_of,
    parse_decomposition,
)
from llama_index_e2rag.graph.base import pages
from llama_index_e2rag.graph.node_rows import NodeRows, docs_of, ids_of, prefetch, take
from llama_index_e2rag.modes import layer_missing_python
from llama_index_e2rag.ranking.event_graph import (
    Aligned,
    EventGraphView,
    Matched,
    Path,
    align_entities,
    entity_links,
    evidence_order,
    kg_sub,
    link_graph,
    match_events,
    reasoning_paths,
)
from llama_index_e2rag.retrievers.filters import DocScope
from llama_index_e2rag.retrievers.base import RetrievalIO, StoresRetriever
from llama_index_e2rag.retrievers import event_graph_file
from llama_index_e2rag.retrievers.budget import within_budget
from llama_index_e2rag.retrievers.parsing import extractors_parser
from llama_index_e2rag.retrievers.vector import chunk_metadata, chunk_result
from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind, sort_by_position
from llama_index_e2rag.stores import read_model_file
from llama_index_e2rag.stores.state_cache import StateCache
from llama_index_e2rag.stores.port import Stores

if TYPE_CHECKING:
    from llama_index_e2rag.extract.grounded import GroundedExtractor
    from llama_index_e2rag.llm.runner import LLMRunner

DecomposeMode = Literal["auto", "llm", "parse"]
#: How a decomposition was made: the LLM's; the query's parse; the LLM's draft with the parse
#: (its JSON was unreadable); the parse after the LLM call failed.
DecomposedBy = Literal["llm", "parse", "llm_draft+parse", "parse_after_llm_error"]
#: Words of an entity's description shown under a path.
SHORT_DESCRIPTION_WORDS = 25
logger = logging.getLogger(__name__)


class EventGraphMissingError(E2RAGError, ValueError):
    """E²GraphRAG retrieval was asked of an index built without ``EventGraphBuilder``."""


@dataclass(frozen=True)
class Decomposition:
    """The draft answer, the question's entity names and sub-queries, and how they were made."""

    draft: str
    entities: list[str]
    sub_queries: list[str]
    how: DecomposedBy

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Chunk:
    """A retrieved chunk: its graph node, its ``TextNode`` and its cosine with the question."""

    graph_node: GraphNode
    node: TextNode
    score: float


def _build(stores: Stores, state: Hashable) -> EventGraphView:
    """The view of this content state: read from its persisted model (``event_graph_file``),
    else derived from the graph and persisted for the next process; either way its nodes are
    read when a query uses them, its searches exact, or through the HNSW graphs saved beside it
    (``event_graph_file.searches``)."""
    key = event_graph_file.content_key(stores, state)
    data = event_graph_file.read(stores, key)
    if data is None:
        data = _derive(stores)
        event_graph_file.write(stores, key, data)
    view = _view(stores, data)
    view.entity_search, view.event_search = event_graph_file.searches(stores, view)
    return view


def _view(stores: Stores, data: dict[str, Any]) -> EventGraphView:
    """The view of a model: nodes are read from the graph when a query uses them."""
    entities = NodeRows(data["entities"], data["entity_docs"], stores.graph.get_nodes)
    events = NodeRows(data["events"], data["event_docs"], stores.graph.get_nodes)
    entity_vectors, event_vectors = stores.matrix_of(entities.ids), stores.matrix_of(events.ids)
    # copies: the segment pages read for them (~340 MB at 1M words) need not stay mapped
    stores.release_pages()
    return EventGraphView(
        entities=entities,
        entity_vectors=entity_vectors,
        events=events,
        event_vectors=event_vectors,
        participants=data["participants"],
        graph=link_graph(entities.ids, event_graph_file.decode_links(data)),
        forms=event_graph_file.decode_forms(data),
    )


def _derive(stores: Stores) -> dict[str, Any]:
    """The model (``event_graph_file.encode``) from the whole graph: entities, events
    (``graph_event`` nodes, else the ``event`` nodes lifted to an entity), participation and
    the entity links. Events and edges are read a page at a time, in the order the graph lists
    them (the links' order is the order tied paths are listed in), and only their ids kept: a
    million-word story's 140k events and 1.2M edges are never in memory at once."""
    graph = stores.graph
    entities = sort_by_position(fused_entities(graph))
    row = {e.id: i for i, e in enumerate(entities)}
    participates = [
        (e.source, e.target, e.attrs.get("event_graph") == "lifted")
        for page in graph.scan_edges_listed(EdgeKind.PARTICIPATES) for e in page
        if e.source in row and e.attrs.get("event_graph") in ("lifted", "extracted")
    ]
    placed = [(n.pos, n.id, n.doc_id)
              for page in graph.scan_nodes(NodeKind.GRAPH_EVENT) for n in page]
    if not placed:
        lifted = sorted({target for _, target, was_lifted in participates if was_lifted})
        placed = [(n.pos, n.id, n.doc_id) for ids in pages(lifted)
                  for n in graph.get_nodes(ids) if n.kind == NodeKind.EVENT]
    events = [(event_id, doc_id) for _, event_id, doc_id in sorted(placed)]
    event_ids = {event_id for event_id, _ in events}
    participants: dict[str, list[str]] = {}
    for source, target, _ in participates:
        if target in event_ids:
            participants.setdefault(target, []).append(source)
    participants = {k: sorted(set(v), key=row.__getitem__) for k, v in participants.items()}
    links = entity_links(row, (
        edge for kind in (EdgeKind.CO_MENTION, EdgeKind.INSTANCE_OF)
        for page in graph.scan_edges_listed(kind) for edge in page
    ))
    return event_graph_file.encode(entities, events, participants, links)


_VIEW: StateCache[EventGraphView] = StateCache(_build)


def save_read_model(stores: Stores) -> None:
    """Derive and persist the view of the stores' current content now (``e2rag index`` after
    writing an index with the event graph layer), so the next process's first query reads it."""
    read_model_file.save_now(stores, _VIEW)


def restrict_view(view: EventGraphView, scope: Optional[DocScope]) -> EventGraphView:
    """The event graph of ``scope``'s documents only (``view`` itself without a filter), so
    alignment, event matching and paths rank within them."""
    if scope is None:
        return view
    entity_rows = [i for i, doc in enumerate(docs_of(view.entities)) if scope.allows(doc)]
    event_rows = [i for i, doc in enumerate(docs_of(view.events)) if scope.allows(doc)]
    entities = take(view.entities, entity_rows)
    events = take(view.events, event_rows)
    kept = set(ids_of(entities))
    assert view.forms is not None  # set by the view itself
    return EventGraphView(
        entities=entities,
        entity_vectors=view.entity_vectors[entity_rows],
        events=events,
        event_vectors=view.event_vectors[event_rows],
        participants={
            e: [m for m in view.participants.get(e, []) if m in kept] for e in ids_of(events)
        },
        graph=view.graph.subgraph(kept),
        forms=[view.forms[i] for i in entity_rows],
    )


class EventGraphRetriever(StoresRetriever):
    """Chunks, matched events, reasoning paths and aligned entities of the event graph.

    Args:
        chunk_top_k: chunks by dense similarity (the context of the draft, and evidence);
            ``similarity_top_k`` is an alias, for the CLI's ``--top-k``.
        entity_top_k: entities aligned per query entity name.
        event_top_k: events matched per sub-query.
        max_path_length: most edges of a reasoning path between two aligned entities.
        decompose: "llm" (figure 7 through the index's LLM: draft + entities + sub-queries),
            "parse" (the question's entity phrases and clauses, no draft), "auto" (the LLM when
            there is one). An unreadable LLM answer keeps its draft and uses the parse.
        budget_words: fill this many words in evidence order (no sentence twice).
        parser: the question parser for "parse" (default: a new ``GroundedExtractor``).
        decompose_prompt: replaces ``DECOMPOSE_PROMPT`` (variables ``question``, ``evidence``).
        filters: ``MetadataFilters`` on document metadata: chunks, entities, events and paths
            are all taken from the matching documents.
    """

    def __init__(
        self,
        stores: Stores,
        embed_model: BaseEmbedding,
        llm_runner: Optional["LLMRunner"] = None,
        *,
        chunk_top_k: int = 5,
        similarity_top_k: Optional[int] = None,
        entity_top_k: int = 2,
        event_top_k: int = 3,
        max_path_length: int = 4,
        decompose: DecomposeMode = "auto",
        budget_words: Optional[int] = None,
        parser: Optional["GroundedExtractor"] = None,
        decompose_prompt: Any = None,
        filters: Optional[MetadataFilters] = None,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        chunk_top_k = similarity_top_k if similarity_top_k is not None else chunk_top_k
        for name, value in (("chunk_top_k", chunk_top_k), ("entity_top_k", entity_top_k),
                            ("event_top_k", event_top_k), ("max_path_length", max_path_length)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if decompose not in ("auto", "llm", "parse"):
            raise ValueError(f"decompose must be one of auto, llm, parse; got {decompose!r}")
        if decompose == "llm" and llm_runner is None:
            raise MissingModelError(
                "decompose='llm' needs an LLM: pass llm= to the index, or use decompose='parse' "
                "to decompose the question without one"
            )
        if not _VIEW.get(stores).entities:
            raise EventGraphMissingError(layer_missing_python("event_graph", "mode='event_graph'"))
        super().__init__(stores, embed_model, budget_words, filters, callback_manager, verbose)
        self._llm_runner = llm_runner if decompose != "parse" else None
        self._parser = parser
        self._decompose_prompt = decompose_prompt
        self.chunk_top_k = chunk_top_k
        self.entity_top_k = entity_top_k
        self.event_top_k = event_top_k
        self.max_path_length = max_path_length
        self.decompose = decompose

    def _get_prompts(self) -> PromptDictType:
        return {"decompose_prompt": self._decompose_prompt or DECOMPOSE_PROMPT}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        self._decompose_prompt = prompts_dict.get("decompose_prompt", self._decompose_prompt)

    # -- the retrieval ---------------------------------------------------------------------------
    async def _run(self, query: QueryBundle, io: RetrievalIO) -> list[NodeWithScore]:
        question = query.query_str
        q_vec = await self._query_embedding(query, io)
        scope = self._scope()
        view = restrict_view(await io.offload(_VIEW.get, self._stores), scope)
        hits = await io.search(self._stores, scope, NodeKind.CHUNK, q_vec, self.chunk_top_k)
        chunks = await io.offload(self._chunks, hits)
        if self._llm_runner is not None:
            decomposition = await self._llm_decompose(question, chunks, io)
        else:
            decomposition = await io.offload(self._parse, question, "", "parse")
        texts = decomposition.entities + decomposition.sub_queries
        vectors = await io.embed_queries(self._embed_model, texts)
        return await io.offload(self._results, view, chunks, decomposition, vectors)

    # -- steps ---------------------------------------------------------------------------------
    def _chunks(self, hits: Sequence[Any]) -> list[_Chunk]:
        """The hits' chunks, best first."""
        scores = {hit.id: hit.score for hit in hits}
        pairs = self._stores.chunk_pairs(list(scores))
        chunks = [_Chunk(g, n, float(scores[n.node_id])) for g, n in pairs]
        return sorted(chunks, key=lambda c: (-c.score, c.node.node_id))

    def _parse(self, query: str, draft: str, how: DecomposedBy) -> Decomposition:
        """The offline decomposition: the question's entity phrases and its clauses."""
        if self._parser is None:
            self._parser = extractors_parser(())
        entities, sub_queries = self._parser.parse_query(query)
        return Decomposition(draft, entities, sub_queries, how)

    async def _llm_decompose(
        self, query: str, chunks: Sequence[_Chunk], io: RetrievalIO
    ) -> Decomposition:
        """Figure 7: the draft and the decomposition in one call; an unreadable JSON block keeps
        the draft and decomposes by the parse, a failed call decomposes by the parse alone."""
        prompt = self._get_prompts()["decompose_prompt"]
        runner = self._llm_runner
        assert runner is not None  # _run asks only with a runner
        try:
            answer = await io.call(
                runner.complete,
                runner.acomplete,
                prompt,
                kind=EVENTGRAPH_DECOMPOSE,
                question=query,
                evidence=chunk_context(chunks),
            )
        except (LLMOutputError, LLMTimeoutError) as exc:
            logger.warning("query decomposition failed (%s); parsing the question", exc)
            return await io.offload(self._parse, query, "", "parse_after_llm_error")
        try:
            draft, parsed = parse_decomposition(answer)
        except LLMOutputError as exc:
            logger.warning("unreadable query decomposition (%s); parsing the question", exc)
            return await io.offload(self._parse, query, draft_of(answer), "llm_draft+parse")
        return Decomposition(draft, parsed.entities, parsed.sub_queries or [query.strip()], "llm")

    def _results(
        self,
        view: EventGraphView,
        chunks: list[_Chunk],
        decomposition: Decomposition,
        vectors: list[list[float]],
    ) -> list[NodeWithScore]:
        """Align, match, find paths, order the evidence, cut to the budget, story order."""
        n_entities = len(decomposition.entities)
        aligned = align_entities(
            view, decomposition.entities, vectors[:n_entities], self.entity_top_k
        )
        events = match_events(view, vectors[n_entities:], self.event_top_k)
        prefetch(view.events, [m.idx for m in events])
        neighbours = kg_sub(view, events)
        entity_ids = ids_of(view.entities)
        paths = reasoning_paths(
            view.graph, [entity_ids[a.idx] for a in aligned], self.max_path_length
        )
        shown = [e for e, _ in neighbours] + [e for p in paths for e in p.entities]
        prefetch(view.entities, [a.idx for a in aligned] + [view.entity_row(e) for e in shown])
        used = [view.events[m.idx] for m in events] + [view.entities[a.idx] for a in aligned]
        used += [view.entity(e) for e, _ in neighbours]
        used += [view.entity(e) for p in paths for e in p.entities[:1]]
        sources = chunk_metadata(self._stores, [n.chunk_id for n in used])
        items = _Items(view, decomposition, sources)
        ranked = evidence_order(
            [items.chunk(i, c) for i, c in enumerate(chunks)],
            [items.event(i, m) for i, m in enumerate(events)],
            [items.path(i, p, aligned) for i, p in enumerate(paths)],
            [
                items.entity(i, view.entities[a.idx], a.score, {"match": a.match})
                for i, a in enumerate(aligned)
            ],
            [
                items.entity(len(aligned) + i, view.entity(e), m.score,
                             {"match": "event_neighbour", "event_id": view.events[m.idx].id})
                for i, (e, m) in enumerate(neighbours)
            ],
            key=lambda n: n.node.node_id,
        )
        for rank, item in enumerate(ranked):
            item.node.metadata[EVIDENCE_RANK_KEY] = rank
        nodes = within_budget(ranked, self.budget_words)
        nodes.sort(key=lambda n: (tuple(n.node.metadata[POS_KEY]), n.node.node_id))
        return nodes


def chunk_context(chunks: Sequence[_Chunk]) -> str:
    """Figure 7's ``{evidence}``: the chunks best first, labelled ``C_1``… with positions."""
    return "\n\n".join(
        f"[C_{i}] ({format_position(c.graph_node.pos)})\n{c.node.get_content()}"
        for i, c in enumerate(chunks, start=1)
    )


def short_description(entity: GraphNode) -> str:
    """An entity's description to its first sentence (no final stop), at most
    ``SHORT_DESCRIPTION_WORDS`` words."""
    first = str(entity.attrs.get("description") or "").split(". ", 1)[0].strip().rstrip(".")
    words = first.split()
    if len(words) > SHORT_DESCRIPTION_WORDS:
        return " ".join(words[:SHORT_DESCRIPTION_WORDS]) + " …"
    return first


def _described(entity: GraphNode) -> str:
    """``name (short description)`` on a path: one sentence for the whole path, so the budget
    never takes it for a repeat of the entity's own item."""
    short = short_description(entity)
    return f"{entity.name} ({short})" if short else str(entity.name)


class _Items:
    """Builds one evidence node per chunk, event, path or entity."""

    def __init__(
        self,
        view: EventGraphView,
        decomposition: Decomposition,
        sources: dict[str, dict[str, Any]],
    ) -> None:
        self._view = view
        self._decomposition = decomposition.as_dict()
        self._sources = sources

    def _common(self, role: str, label: str, kind: str, evidence: list[str]) -> dict[str, Any]:
        return {
            "evidence_role": role,
            "label": label,
            "kind": kind,
            EVIDENCE_KEY: evidence,
            "decomposition": self._decomposition,
        }

    def chunk(self, i: int, chunk: _Chunk) -> NodeWithScore:
        ours = self._common("chunk", f"C_{i + 1}", NodeKind.CHUNK.value, [chunk.node.node_id])
        item = chunk_result(chunk.node, chunk.graph_node, chunk.score, ours)
        node = item.node  # the LLM reads its label and role, the embedding none of ours
        node.excluded_llm_metadata_keys = list(
            dict.fromkeys([*node.excluded_llm_metadata_keys, EVIDENCE_RANK_KEY])
        )
        node.excluded_embed_metadata_keys = list(
            dict.fromkeys([*node.excluded_embed_metadata_keys, *ours, EVIDENCE_RANK_KEY])
        )
        return item

    def event(self, i: int, matched: Matched) -> NodeWithScore:
        event = self._view.events[matched.idx]
        date = event.attrs.get("date")
        text = f"{event.text} (date: {date})" if date else event.text
        members = self._view.participants.get(event.id, [])
        ours = self._common("event", f"Event {i + 1}", event.kind.value, [event.id, *members])
        ours.update(
            sub_query=self._decomposition["sub_queries"][matched.sub_query],
            participants=[self._view.entity(m).name for m in members],
            date=date,
        )
        return self._node(event.id, event, text, matched.score, ours)

    def entity(
        self, i: int, entity: GraphNode, score: float, extra: dict[str, Any]
    ) -> NodeWithScore:
        description = str(entity.attrs.get("description") or "")
        text = f"{entity.name}: {description}" if description else str(entity.name)
        ours = self._common("entity", f"Entity {i + 1}", entity.kind.value, [entity.id])
        ours.update(name=entity.name, entity_type=entity.attrs.get("entity_type"), **extra)
        return self._node(entity.id, entity, text, score, ours)

    def path(self, i: int, path: Path, aligned: Sequence[Aligned]) -> NodeWithScore:
        nodes = [self._view.entity(e) for e in path.entities]
        text = _described(nodes[0])
        for hop, node in zip(path.hops, nodes[1:]):
            text += f" {'=' if hop == 'same_entity' else '—'} {_described(node)}"
        ours = self._common("path", f"Path {i + 1}", "path", list(path.entities))
        ours.update(path=list(path.entities), hops=list(path.hops))
        score = min(aligned[path.pair[0]].score, aligned[path.pair[1]].score)
        key = hashlib.sha1("\x1f".join(path.entities).encode()).hexdigest()[:20]
        return self._node(f"eventgraph_path-{key}", nodes[0], text, score, ours)

    def _node(
        self, node_id: str, anchor: GraphNode, text: str, score: float, ours: dict[str, Any]
    ) -> NodeWithScore:
        """A graph item as a ``TextNode`` at ``anchor``'s place, with its source's metadata."""
        ours.update({
            POS_KEY: list(anchor.pos),
            POSITION_KEY: format_position(anchor.pos),
            "doc_id": anchor.doc_id,
            "chunk_id": anchor.chunk_id,
            "similarity": score,
        })
        metadata = {**self._sources.get(anchor.chunk_id or "", {}), **ours}
        hidden = [*bookkeeping_keys(ours), EVIDENCE_RANK_KEY]
        text_node = TextNode(
            id_=node_id,
            text=text,
            metadata=metadata,
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=anchor.doc_id)},
            excluded_llm_metadata_keys=hidden,
            excluded_embed_metadata_keys=[*ours, EVIDENCE_RANK_KEY],  # none of ours
        )
        return NodeWithScore(node=text_node, score=score)
