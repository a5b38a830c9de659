"""LLM indexing cost without calling an LLM: calls and prompt tokens per 1,000 source tokens.

E²RAG's extraction path runs for real with the test suite's ``ScriptedLLM`` (canned JSON, every
prompt recorded), so the prompts counted are exactly the ones a real model would receive. LightRAG's
side is rebuilt from lightrag-hku 1.5.7's own templates (``lightrag/prompt.py``) the way
``operate.extract_entities`` formats them in its default text mode: one system prompt, one user
prompt per chunk, and the gleaning pass that is on by default (``DEFAULT_MAX_GLEANING = 1``). The
gleaning call replays the first answer as history; no model answered here, so that replayed answer
is not counted and LightRAG's gleaning figure is a lower bound. SentGraph's builder runs its LLM
path for real too (the N-N and N-S prompts per segment, then the bridging prompt over all sources
as one batch); an index with an LLM pays it on top of E²RAG's extraction. Tokens are cl100k_base
(tiktoken, with the encoding file llama-index-core ships, so it works offline).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from llama_index.core.schema import TextNode

_REPO = Path(__file__).resolve().parents[1]
SCRIPTED_LLM_PATH = _REPO / "tests" / "scripted_llm.py"

#: The paper's own count on The Phantom of the Opera (E²RAG vs LightRAG prompt tokens).
PAPER_E2RAG_TOKENS = 807_619
PAPER_LIGHTRAG_TOKENS = 456_277

TokenCounter = Callable[[str], int]
#: The ``---Task: <kind>---`` header every prompt of the project starts with.
_TASK = re.compile(r"---Task: (\w+)---")


def cl100k_counter() -> TokenCounter:
    """Token counter for cl100k_base, using llama-index-core's bundled encoding file."""
    import llama_index.core
    import tiktoken

    bundled = Path(llama_index.core.__file__).parent / "_static" / "tiktoken_cache"
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    encoding = tiktoken.get_encoding("cl100k_base")
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def _cl100k_encoding() -> Any:
    import tiktoken

    cl100k_counter()  # sets the offline cache directory
    return tiktoken.get_encoding("cl100k_base")


def load_scripted_llm_class() -> type:
    """``ScriptedLLM`` imported by path (the tests folder is not a package)."""
    spec = importlib.util.spec_from_file_location("scripted_llm", SCRIPTED_LLM_PATH)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {SCRIPTED_LLM_PATH}")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # pydantic resolves annotations through it
    spec.loader.exec_module(module)
    module = sys.modules[spec.name]
    return module.ScriptedLLM


def index_chunk_settings() -> tuple[int, int]:
    """The index's default ``chunk_size`` / ``chunk_overlap`` (SentenceSplitter tokens)."""
    from llama_index_e2rag.index import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE

    return int(DEFAULT_CHUNK_SIZE), int(DEFAULT_CHUNK_OVERLAP)


def index_chunks(text: str, doc_id: str = "doc-0") -> list[TextNode]:
    """The text cut the way the index cuts it (SentenceSplitter at its default settings)."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    from llama_index_e2rag.extract.base import DOC_ORDER_KEY

    size, overlap = index_chunk_settings()
    nodes = SentenceSplitter(chunk_size=size, chunk_overlap=overlap).get_nodes_from_documents(
        [Document(text=text, id_=doc_id)])
    for node in nodes:
        node.metadata[DOC_ORDER_KEY] = 0
    return nodes


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, dict):
        return str(prompt.get("prompt") or prompt.get("text") or prompt)
    for attr in ("prompt", "text"):
        value = getattr(prompt, attr, None)
        if isinstance(value, str):
            return value
    return str(prompt)


def e2rag_cost(chunks: Sequence[TextNode], combined: bool, count: TokenCounter) -> dict[str, Any]:
    """Run ``EntityEventExtractor`` with ``ScriptedLLM`` and count what the model was sent."""
    from llama_index_e2rag.extract.e2rag import EntityEventExtractor
    from llama_index_e2rag.llm.runner import LLMRunner

    llm = load_scripted_llm_class()()
    runner = LLMRunner(llm, num_workers=1)
    extractor = EntityEventExtractor(llm_runner=runner, combined=combined)
    extractor([chunk.model_copy(deep=True) for chunk in chunks])
    prompts = [_prompt_text(p) for p in llm.prompts]
    return {
        "chunks": len(chunks),
        "calls": len(prompts),
        "prompt_tokens": sum(count(p) for p in prompts),
        "calls_by_kind": dict(getattr(llm, "calls_by_kind", {}) or {}),
        "runner_stats": runner.stats.as_dict(),
    }


def sentgraph_cost(sources: Sequence[tuple[str, str, list[TextNode]]],
                   count: TokenCounter) -> dict[str, Any]:
    """Run ``SentenceGraphBuilder``'s LLM path with ``ScriptedLLM`` over ``(name, text, chunks)``
    sources: ``abuild`` per source, then one ``alink`` for the batch; count what the model was
    sent."""
    from llama_index.core import Document

    from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder
    from llama_index_e2rag.graph import NetworkXGraphStore
    from llama_index_e2rag.llm.runner import LLMRunner, run_sync
    from llama_index_e2rag.schema import NodeKind

    llm = load_scripted_llm_class()()
    runner = LLMRunner(llm)
    builder = SentenceGraphBuilder(runner, relations="llm", bridges="llm")

    async def build() -> tuple[int, int]:
        staged, segments, failures = [], 0, 0
        for order, (name, text, chunks) in enumerate(sources):
            graph = NetworkXGraphStore()
            nodes, edges, problems = await builder.abuild(
                Document(text=text, id_=name), order, chunks, graph)
            graph.upsert_nodes(nodes)
            graph.upsert_edges(edges)
            staged.append((name, graph))
            segments += sum(1 for node in nodes if node.kind == NodeKind.TOPIC)
            failures += len(problems)
        _, problems = await builder.alink(staged, NetworkXGraphStore())
        return segments, failures + len(problems)

    segments, failures = run_sync(build())
    tokens_by_kind: dict[str, int] = {}
    for prompt in (_prompt_text(p) for p in llm.prompts):
        match = _TASK.search(prompt)
        kind = match.group(1) if match else "unknown"
        tokens_by_kind[kind] = tokens_by_kind.get(kind, 0) + count(prompt)
    return {
        "chunks": sum(len(chunks) for _, _, chunks in sources),
        "segments": segments,
        "failures": failures,
        "calls": len(llm.prompts),
        "prompt_tokens": sum(tokens_by_kind.values()),
        "prompt_tokens_by_kind": tokens_by_kind,
        "calls_by_kind": dict(llm.calls_by_kind),
        "runner_stats": runner.stats.as_dict(),
    }


def eventgraph_cost(
    sources: Sequence[tuple[str, str]], count: TokenCounter, min_mentions: int = 1
) -> dict[str, Any]:
    """Build the index with ``ScriptedLLM`` and ``EventGraphBuilder(events="llm")`` over
    ``(name, text)`` sources (the paper runs its event pass on LightRAG's entity layer; here on
    E²RAG's extraction, whose entity pass gives the described mentions fusion needs) and count
    what the model was sent, by kind. Fusion uses the offline MiniLM embedding.
    ``min_mentions`` > 1 skips the event pass for entities mentioned fewer times."""
    from llama_index.core import Document

    from benchmarks.systems import make_embed_model
    from llama_index_e2rag.extract.event_graph.builder import EventGraphBuilder
    from llama_index_e2rag.index import E2RAGIndex
    from llama_index_e2rag.schema import NodeKind

    llm = load_scripted_llm_class()()
    size, overlap = index_chunk_settings()  # the other rows' chunks, not MiniLM's 256-token cap
    index = E2RAGIndex.from_documents(
        [Document(text=text, id_=name) for name, text in sources],
        llm=llm,
        embed_model=make_embed_model(),
        chunk_size=size,
        chunk_overlap=overlap,
        doc_builders=[EventGraphBuilder(events="llm", min_mentions=min_mentions)],
    )
    tokens_by_kind: dict[str, int] = {}
    for prompt in (_prompt_text(p) for p in llm.prompts):
        match = _TASK.search(prompt)
        kind = match.group(1) if match else "unknown"
        tokens_by_kind[kind] = tokens_by_kind.get(kind, 0) + count(prompt)
    graph = index.graph_store
    entities = [e for e in graph.nodes(NodeKind.ENTITY) if e.attrs.get("event_graph")]
    return {
        "chunks": len(graph.nodes(NodeKind.CHUNK)),
        "entities": len(entities),
        "fused_entities": sum(1 for e in entities if len(e.attrs.get("aliases", [])) > 1),
        "graph_events": len(graph.nodes(NodeKind.GRAPH_EVENT)),
        "failures": len(index.extraction_report()),
        "calls": len(llm.prompts),
        "prompt_tokens": sum(tokens_by_kind.values()),
        "prompt_tokens_by_kind": tokens_by_kind,
        "calls_by_kind": dict(llm.calls_by_kind),
    }


def lightrag_prompts(chunk_text: str) -> tuple[str, str, str]:
    """(system, user, continue) prompts LightRAG 1.5.7 sends for one chunk in text mode."""
    from lightrag.constants import (
        DEFAULT_MAX_EXTRACTION_ENTITIES,
        DEFAULT_MAX_EXTRACTION_RECORDS,
        DEFAULT_SUMMARY_LANGUAGE,
    )
    from lightrag.prompt import PROMPTS, get_default_entity_extraction_prompt_profile

    profile = get_default_entity_extraction_prompt_profile()
    base = dict(tuple_delimiter=PROMPTS["DEFAULT_TUPLE_DELIMITER"],
                completion_delimiter=PROMPTS["DEFAULT_COMPLETION_DELIMITER"],
                entity_types_guidance=profile["entity_types_guidance"],
                language=DEFAULT_SUMMARY_LANGUAGE)
    examples = "\n".join(profile["entity_extraction_examples"]).format(**base)
    context = dict(base, examples=examples, max_total_records=DEFAULT_MAX_EXTRACTION_RECORDS,
                   max_entity_records=DEFAULT_MAX_EXTRACTION_ENTITIES)
    system = PROMPTS["entity_extraction_system_prompt"].format(**context)
    user = PROMPTS["entity_extraction_user_prompt"].format(
        **context, input_text=chunk_text, heading_context_block="")
    cont = PROMPTS["entity_continue_extraction_user_prompt"].format(**context,
                                                                    input_text=chunk_text)
    return system, user, cont


def lightrag_cost(chunk_texts: Sequence[str], count: TokenCounter,
                  gleaning_passes: int | None = None) -> dict[str, Any]:
    """Calls and prompt tokens of LightRAG's extraction: first pass plus gleaning (default 1)."""
    from lightrag.constants import DEFAULT_MAX_GLEANING

    glean = DEFAULT_MAX_GLEANING if gleaning_passes is None else gleaning_passes
    first = gleaning = 0
    for text in chunk_texts:
        system, user, cont = lightrag_prompts(text)
        first += count(system) + count(user)
        if glean > 0:  # operate.extract_entities runs at most one gleaning call
            gleaning += count(system) + count(user) + count(cont)
    calls_per_chunk = 1 + (1 if glean > 0 else 0)
    return {
        "chunks": len(chunk_texts),
        "calls": calls_per_chunk * len(chunk_texts),
        "prompt_tokens": first + gleaning,
        "first_pass_tokens": first,
        "gleaning_tokens_lower_bound": gleaning,
    }


def lightrag_default_chunks(text: str) -> list[str]:
    """The text cut by LightRAG's own default chunker (1,200 tokens, 100 overlap)."""
    from lightrag.chunker.token_size import chunking_by_token_size
    from lightrag.utils import Tokenizer

    tokenizer = Tokenizer("cl100k_base", _cl100k_encoding())
    return [c["content"] for c in chunking_by_token_size(tokenizer, text)]


def run_llm_cost(texts: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Cost rows for (name, text) sources, summed over sources; errors become error rows."""
    count = cl100k_counter()
    source_tokens = sum(count(text) for _, text in texts)
    rows: dict[str, dict[str, Any]] = {}

    def add(label: str, fn: Callable[[], list[dict[str, Any]]]) -> None:
        try:
            parts = fn()
        except Exception as exc:  # noqa: BLE001 - a missing component is a reported result
            rows[label] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            return
        total: dict[str, Any] = {}
        for part in parts:
            for key, value in part.items():
                if isinstance(value, (int, float)):
                    total[key] = total.get(key, 0) + value
                elif isinstance(value, dict):
                    merged = total.setdefault(key, {})
                    for k, v in value.items():
                        if isinstance(v, (int, float)):
                            merged[k] = merged.get(k, 0) + v
        total["calls_per_1k_source_tokens"] = 1000 * total["calls"] / source_tokens
        total["prompt_tokens_per_1k_source_tokens"] = 1000 * total["prompt_tokens"] / source_tokens
        rows[label] = total

    chunked: dict[str, list[TextNode]] = {}

    def chunks_of(name: str, text: str) -> list[TextNode]:
        if name not in chunked:
            chunked[name] = index_chunks(text, doc_id=name)
        return chunked[name]

    add("E²RAG, entity + event passes", lambda: [
        e2rag_cost(chunks_of(n, t), False, count) for n, t in texts])
    add("E²RAG, combined=True", lambda: [
        e2rag_cost(chunks_of(n, t), True, count) for n, t in texts])
    add("SentGraph, N-N + N-S per segment + bridges", lambda: [
        sentgraph_cost([(n, t, chunks_of(n, t)) for n, t in texts], count)])
    add("E²GraphRAG, E²RAG's passes + event pass", lambda: [eventgraph_cost(texts, count)])
    add("E²GraphRAG, event pass for entities with 2+ mentions", lambda: [
        eventgraph_cost(texts, count, min_mentions=2)])
    add("LightRAG 1.5.7, same chunks", lambda: [
        lightrag_cost([c.get_content() for c in chunks_of(n, t)], count) for n, t in texts])
    add("LightRAG 1.5.7, same chunks, gleaning off", lambda: [
        lightrag_cost([c.get_content() for c in chunks_of(n, t)], count, gleaning_passes=0)
        for n, t in texts])
    add("LightRAG 1.5.7, its default 1,200-token chunks", lambda: [
        lightrag_cost(lightrag_default_chunks(t), count) for _, t in texts])

    reference = rows.get("LightRAG 1.5.7, same chunks", {}).get("prompt_tokens")
    for row in rows.values():
        if reference and "prompt_tokens" in row:
            row["ratio_to_lightrag_same_chunks"] = row["prompt_tokens"] / reference
    try:
        chunk_settings: Any = index_chunk_settings()
    except Exception as exc:  # noqa: BLE001
        chunk_settings = f"unknown ({type(exc).__name__})"
    return {
        "sources": [name for name, _ in texts],
        "source_tokens": source_tokens,
        "tokenizer": "cl100k_base (tiktoken, llama-index-core's bundled file)",
        "index_chunk_size_overlap": chunk_settings,
        "rows": rows,
        "paper": {"e2rag": PAPER_E2RAG_TOKENS, "lightrag": PAPER_LIGHTRAG_TOKENS,
                  "ratio": PAPER_E2RAG_TOKENS / PAPER_LIGHTRAG_TOKENS},
    }
