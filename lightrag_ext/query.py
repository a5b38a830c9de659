"""The ``e2rag`` query mode: seeds -> one hop -> ranked chunks -> story-ordered context -> answer.

E²RAG §4 on LightRAG's storages: the query embedding seeds mentions and events by vector search
(plus the caller's ``ll_keywords`` as extra mention cues and ``hl_keywords`` as extra event
cues), one hop over the bipartite edges adds the events of seed mentions and the mentions of seed
events, mentions are re-ranked by their events, and the chunks those nodes come from are ranked
by their own similarity to the query. The context is assembled exactly as in llama_index_e2rag
(``context.assemble_context``): passages in story order with positions, then the linearised
subgraph. The answer goes through LightRAG's ``query`` role LLM and its answer cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
from lightrag.base import QueryParam
from lightrag.prompt import PROMPTS
from lightrag.utils import (
    CacheData,
    compute_args_hash,
    generate_reference_list_from_chunks,
    get_llm_cache_identity,
    handle_cache,
    resolve_user_prompt,
    save_to_cache,
    serialize_llm_cache_identity,
)

from llama_index_e2rag.context import ContextBundle, Passage, assemble_context
from llama_index_e2rag.schema import GraphEdge, GraphNode, NodeKind

from lightrag_ext.storage import EventLayerStore

if TYPE_CHECKING:
    from lightrag import LightRAG

E2RAG_MODE = "e2rag"
#: Weight of a mention's own similarity against its best event's (E²RAG re-ranks mentions by
#: the events they take part in, so a name matching the query in an unrelated scene sinks).
MENTION_SELF_WEIGHT = 0.5
ANSWER_CACHE_VERSION = "e2rag-answer-v1"
#: Tokens kept free for the answer's reference list and safety (LightRAG's naive mode: 200).
ANSWER_RESERVE_TOKENS = 200


@dataclass
class Retrieved:
    """What the e2rag mode found: the context bundle and the scores behind it."""

    bundle: ContextBundle
    scores: dict[str, float] = field(default_factory=dict)
    chunk_records: dict[str, dict[str, Any]] = field(default_factory=dict)
    seeds: list[str] = field(default_factory=list)

    def render(self) -> str:
        return self.bundle.render()


def _cosine(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
    return (matrix @ query) / np.where(norms == 0, 1.0, norms)


async def _similarities(storage: Any, ids: list[str], query: np.ndarray) -> dict[str, float]:
    """Query similarity of stored vectors (computed here, so every backend scores alike)."""
    if not ids:
        return {}
    vectors = await storage.get_vectors_by_ids(ids)
    found = [i for i in ids if i in vectors]
    if not found:
        return {}
    matrix = np.asarray([vectors[i] for i in found], dtype=np.float64)
    return dict(zip(found, _cosine(matrix, query).tolist()))


async def _seed_ids(
    layer: EventLayerStore,
    rag: "LightRAG",
    query: str,
    query_vec: np.ndarray,
    param: QueryParam,
) -> list[str]:
    """Mentions and events nearest to the query and to the caller's keyword cues."""
    searches = [(layer.mentions_vdb, query, query_vec), (layer.events_vdb, query, query_vec)]
    cues = [(layer.mentions_vdb, c) for c in param.ll_keywords] + [
        (layer.events_vdb, c) for c in param.hl_keywords
    ]
    if cues:
        vectors = await rag.embedding_func([c for _, c in cues], context="query")
        searches += [(storage, cue, vec) for (storage, cue), vec in zip(cues, vectors)]
    seeds: list[str] = []
    for storage, text, vector in searches:
        hits = await storage.query(text, top_k=param.top_k, query_embedding=vector)
        seeds.extend(hit["id"] for hit in hits)
    return list(dict.fromkeys(seeds))


def _kind(node_id: str) -> Optional[str]:
    """Node kind from its id (``make_id`` prefixes ids with the kind)."""
    kind = node_id.split("-", 1)[0]
    return kind if kind in (NodeKind.MENTION.value, NodeKind.EVENT.value) else None


def _doc_ranks(records: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Document order for positions: LightRAG insertion time (chapters inserted in order keep
    story order across documents), then doc id."""
    created = {
        doc_id: str((rec.get("metadata") or {}).get("doc_created_at") or "")
        for doc_id, rec in records.items()
    }
    ordered = sorted(created, key=lambda d: (created[d], d))
    return {doc_id: rank for rank, doc_id in enumerate(ordered)}


def _with_doc_rank(node: GraphNode, rank: int) -> GraphNode:
    return node.model_copy(update={"pos": (rank, node.pos[1], node.pos[2])})


async def _rank_nodes(
    layer: EventLayerStore, seeds: list[str], query_vec: np.ndarray, top_k: int
) -> tuple[dict[str, GraphNode], dict[str, float], dict[str, list[str]], list[str]]:
    """One hop across the bipartite edges, then scores: events by similarity, mentions by their
    own similarity blended with their best event's. Returns nodes, scores, links, ranking."""
    hop = await layer.neighbor_ids(seeds)
    crossing = [n for s in seeds for n in hop.get(s, []) if _kind(n) not in (_kind(s), None)]
    candidate_ids = list(dict.fromkeys(seeds + crossing))
    links = await layer.neighbor_ids(candidate_ids)
    nodes = await layer.get_nodes(candidate_ids)
    mention_ids = [i for i, n in nodes.items() if n.kind == NodeKind.MENTION]
    event_ids = [i for i, n in nodes.items() if n.kind == NodeKind.EVENT]
    linked_events = {
        m: [e for e in links.get(m, []) if _kind(e) == NodeKind.EVENT.value] for m in mention_ids
    }
    all_events = list(dict.fromkeys(event_ids + [e for es in linked_events.values() for e in es]))
    sims = await _similarities(layer.mentions_vdb, mention_ids, query_vec)
    sims.update(await _similarities(layer.events_vdb, all_events, query_vec))

    scores: dict[str, float] = {i: sims.get(i, 0.0) for i in event_ids}
    for mention_id in mention_ids:
        own = sims.get(mention_id, 0.0)
        linked = [sims[e] for e in linked_events[mention_id] if e in sims]
        scores[mention_id] = (
            MENTION_SELF_WEIGHT * own + (1 - MENTION_SELF_WEIGHT) * max(linked) if linked else own
        )
    ranked = sorted(scores, key=lambda i: (-scores[i], i))[:top_k]
    return nodes, scores, links, ranked


def _take_within(items: list[str], cost: dict[str, int], budget: int, limit: int) -> list[str]:
    """Items in order while their summed cost fits the budget (the first one always fits)."""
    kept, used = [], 0
    for item in items[:limit]:
        if kept and used + cost[item] > budget:
            break
        kept.append(item)
        used += cost[item]
    return kept


async def retrieve(
    rag: "LightRAG", layer: EventLayerStore, query: str, param: QueryParam
) -> Optional[Retrieved]:
    """Run E²RAG retrieval; None when the event layer has nothing near the query.

    Token budget: the subgraph gets ``max_entity_tokens``; passages get what remains of
    ``max_total_tokens`` after it, the answer prompt and the query.
    """
    query_vec = np.asarray((await rag.embedding_func([query], context="query"))[0], dtype=float)
    seeds = await _seed_ids(layer, rag, query, query_vec, param)
    if not seeds:
        return None
    nodes, scores, links, ranked_nodes = await _rank_nodes(layer, seeds, query_vec, param.top_k)

    chunk_ids = list(dict.fromkeys(nodes[i].chunk_id for i in ranked_nodes if nodes[i].chunk_id))
    chunk_scores = await _similarities(rag.chunks_vdb, chunk_ids, query_vec)
    ranked_chunks = sorted(chunk_ids, key=lambda c: (-chunk_scores.get(c, 0.0), c))
    rows = await rag.text_chunks.get_by_ids(ranked_chunks)
    records = {c: r for c, r in zip(ranked_chunks, rows) if r}
    count = lambda text: len(rag.tokenizer.encode(text))  # noqa: E731
    overhead = count(PROMPTS["naive_rag_response"]) + count(query) + ANSWER_RESERVE_TOKENS
    kept = _take_within(
        [c for c in ranked_chunks if c in records],
        {c: count(r["content"]) for c, r in records.items()},
        param.max_total_tokens - overhead - param.max_entity_tokens,
        param.chunk_top_k,
    )

    doc_records = await layer.get_records(records[c]["full_doc_id"] for c in kept)
    ranks = _doc_ranks(doc_records)
    passages = []
    for chunk_id in kept:
        doc_id = records[chunk_id]["full_doc_id"]
        offsets = (doc_records.get(doc_id, {}).get("metadata") or {}).get("chunk_offsets", {})
        passages.append(
            Passage(
                chunk_id=chunk_id,
                doc_id=doc_id,
                pos=(ranks.get(doc_id, 0), int(offsets.get(chunk_id, 0)), 0),
                text=records[chunk_id]["content"],
                score=chunk_scores.get(chunk_id),
            )
        )
    in_passages = [i for i in ranked_nodes if nodes[i].chunk_id in set(kept)]
    shown = _take_within(
        in_passages,
        {i: count(nodes[i].text) for i in in_passages},
        param.max_entity_tokens,
        len(in_passages),
    )
    context_nodes = [_with_doc_rank(nodes[i], ranks.get(nodes[i].doc_id, 0)) for i in shown]
    node_set = set(shown)
    pairs = [(a, b) for a in shown for b in links.get(a, []) if b in node_set]
    edges: list[GraphEdge] = await layer.get_edges(pairs)
    return Retrieved(
        bundle=assemble_context(passages, context_nodes, edges),
        scores={**scores, **chunk_scores},
        chunk_records={c: records[c] for c in kept},
        seeds=seeds,
    )


def user_data(retrieved: Retrieved) -> dict[str, Any]:
    """``aquery_data``-shaped result: LightRAG's keys plus ``events`` and the rendered context."""
    bundle = retrieved.bundle
    chunk_dicts = [
        {
            "content": p.text,
            "file_path": retrieved.chunk_records[p.chunk_id].get("file_path", "unknown_source"),
            "chunk_id": p.chunk_id,
            "doc_id": p.doc_id,
            "position": list(p.pos),
            "score": p.score,
        }
        for p in sorted(bundle.passages, key=lambda p: (-(p.score or 0.0), p.chunk_id))
    ]
    references, chunk_dicts = generate_reference_list_from_chunks(chunk_dicts)
    file_of = {c["chunk_id"]: c["file_path"] for c in chunk_dicts}
    entities = [
        {
            "entity_name": n.name or n.text,
            "entity_type": n.attrs.get("entity_type", "UNKNOWN"),
            "description": n.attrs.get("description", n.text),
            "source_id": n.chunk_id,
            "file_path": file_of.get(n.chunk_id or "", "unknown_source"),
            "mention_id": n.id,
            "score": retrieved.scores.get(n.id),
        }
        for n in bundle.nodes
        if n.kind == NodeKind.MENTION
    ]
    events = [
        {
            "event_id": n.id,
            "title": n.name or "",
            "description": n.attrs.get("description", n.text),
            "participants": n.attrs.get("participants", []),
            "date": n.attrs.get("date"),
            "source_id": n.chunk_id,
            "file_path": file_of.get(n.chunk_id or "", "unknown_source"),
            "score": retrieved.scores.get(n.id),
        }
        for n in bundle.nodes
        if n.kind == NodeKind.EVENT
    ]
    names = {n.id: n.name or n.text for n in bundle.nodes}
    relationships = [
        {
            "src_id": names.get(e.source, e.source),
            "tgt_id": names.get(e.target, e.target),
            "source_node": e.source,
            "target_node": e.target,
            "keywords": e.kind.value,
            "description": e.attrs.get("description", e.kind.value),
        }
        for e in bundle.edges
    ]
    return {
        "status": "success",
        "message": "Query executed successfully",
        "data": {
            "entities": entities,
            "events": events,
            "relationships": relationships,
            "chunks": chunk_dicts,
            "references": references,
        },
        "metadata": {
            "query_mode": E2RAG_MODE,
            "keywords": {"high_level": [], "low_level": []},
            "context": retrieved.render(),
            "processing_info": {
                "seed_nodes": len(retrieved.seeds),
                "context_nodes": len(bundle.nodes),
                "final_chunks_count": len(bundle.passages),
            },
        },
    }


def no_result(mode: str = E2RAG_MODE) -> dict[str, Any]:
    return {
        "status": "failure",
        "message": "Query returned no results",
        "data": {},
        "metadata": {"failure_reason": "no_results", "mode": mode},
    }


async def answer(
    rag: "LightRAG",
    query: str,
    param: QueryParam,
    system_prompt: Optional[str],
    retrieved: Retrieved,
) -> dict[str, Any]:
    """``aquery_llm``-shaped result; honours only_need_context / only_need_prompt / stream."""
    result = user_data(retrieved)
    context = result["metadata"]["context"]
    global_config = rag._build_global_config()
    user_prompt = resolve_user_prompt(
        param.user_prompt,
        global_config.get("user_prompt_prefix", ""),
        param.disable_user_prompt_prefix,
    )
    template = system_prompt or PROMPTS["naive_rag_response"]
    sys_prompt = template.format(
        response_type=param.response_type or "Multiple Paragraphs",
        user_prompt=user_prompt.slot,
        content_data=context,
    )
    if param.only_need_context and not param.only_need_prompt:
        result["llm_response"] = _llm_response(context, generated=False)
        return result
    if param.only_need_prompt:
        prompt = "\n\n".join([sys_prompt, "---User Query---", query])
        result["llm_response"] = _llm_response(prompt, generated=False)
        return result

    identity = get_llm_cache_identity(global_config, "query")
    args_hash = compute_args_hash(
        ANSWER_CACHE_VERSION,
        query,
        sys_prompt,
        "\n<llm_identity>\n",
        serialize_llm_cache_identity(identity),
    )
    use_cache = not param.conversation_history and not param.stream
    cached = (
        await handle_cache(rag.llm_response_cache, args_hash, query, E2RAG_MODE, "query")
        if use_cache
        else None
    )
    if cached is not None:
        result["llm_response"] = _llm_response(cached[0], generated=True)
        return result
    llm = global_config["role_llm_funcs"]["query"]
    response = await llm(
        query,
        system_prompt=sys_prompt,
        history_messages=param.conversation_history,
        stream=param.stream,
    )
    if isinstance(response, str):
        if use_cache and global_config.get("enable_llm_cache"):
            await save_to_cache(
                rag.llm_response_cache,
                CacheData(
                    args_hash=args_hash,
                    content=response,
                    prompt=query,
                    mode=E2RAG_MODE,
                    cache_type="query",
                    queryparam={"mode": E2RAG_MODE, "answer_cache_version": ANSWER_CACHE_VERSION},
                ),
            )
        result["llm_response"] = _llm_response(response, generated=True)
    else:
        result["llm_response"] = {
            "content": None,
            "response_iterator": response,
            "is_streaming": True,
            "llm_generated": True,
        }
    return result


def _llm_response(content: str, *, generated: bool) -> dict[str, Any]:
    return {
        "content": content,
        "response_iterator": None,
        "is_streaming": False,
        "llm_generated": generated,
    }
