"""The ``e2rag`` mode's results in LightRAG's shapes: ``aquery_data`` records and the answer.

The answer goes through LightRAG's ``query`` role LLM with its ``naive_rag_response`` prompt and
its answer cache, so ``only_need_context``, ``only_need_prompt``, ``stream`` and conversation
history behave as in LightRAG's own modes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from lightrag.base import QueryParam
from lightrag.operate import QueryProgress
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

from llama_index_e2rag.schema import NodeKind

from lightrag_ext.query import E2RAG_MODE, ProgressCallback, Retrieved, report

if TYPE_CHECKING:
    from lightrag import LightRAG

ANSWER_CACHE_VERSION = "e2rag-answer-v1"


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
    progress: ProgressCallback = None,
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
    await report(progress, QueryProgress.GENERATING_RESPONSE)
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
