"""Give an existing LightRAG working directory E²RAG's event layer, then ask an e2rag question.

    pip install 'llama-index-e2rag[lightrag]'
    export OPENAI_API_KEY=...
    python examples/lightrag_extend_existing.py ./rag_storage "Why did Hermione break the rules?"

The working directory must have been built by LightRAG (``LightRAG.ainsert``) with the same
storages and embedding model you pass here. Nothing already stored is re-extracted: the backfill
reads LightRAG's chunks and its cached per-chunk entity extractions and only runs the event pass
(cached in LightRAG's LLM cache, so running this again costs no LLM call). Use any LightRAG LLM
binding (Ollama, Azure, ...) by passing its functions to ``extend_existing``.
"""
# requires-env: OPENAI_API_KEY

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any, Callable

from lightrag import QueryParam
from lightrag.utils import EmbeddingFunc

from lightrag_ext import E2RAG_MODE, BackfillReport, E2LightRAG


async def extend_existing(
    working_dir: str,
    question: str,
    *,
    llm_model_func: Callable[..., Any],
    embedding_func: EmbeddingFunc,
    **lightrag_kwargs: Any,
) -> tuple[BackfillReport, dict[str, Any]]:
    """Backfill the event layer of ``working_dir`` and return the report and an e2rag answer."""
    rag = E2LightRAG(
        working_dir=working_dir,
        llm_model_func=llm_model_func,
        embedding_func=embedding_func,
        **lightrag_kwargs,
    )
    await rag.initialize_storages()
    try:
        report = await rag.abuild_event_layer()
        result = await rag.aquery_llm(question, param=QueryParam(mode=E2RAG_MODE))
        return report, result
    finally:
        await rag.finalize_storages()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("working_dir", help="an existing LightRAG working directory")
    parser.add_argument("question", help="a question to answer in e2rag mode")
    args = parser.parse_args()
    if not os.path.isdir(args.working_dir):
        print(f"no LightRAG working directory at {args.working_dir}", file=sys.stderr)
        return 2
    if not os.environ.get("OPENAI_API_KEY"):
        print(
            "This example uses OpenAI through LightRAG (gpt-4o-mini, text-embedding-3-small); "
            "set OPENAI_API_KEY or adapt extend_existing() to your LightRAG LLM binding.",
            file=sys.stderr,
        )
        return 2
    from lightrag.llm.openai import gpt_4o_mini_complete, openai_embed

    report, result = asyncio.run(
        extend_existing(
            args.working_dir,
            args.question,
            llm_model_func=gpt_4o_mini_complete,
            embedding_func=openai_embed,
        )
    )
    print(f"event layer: built {len(report.built)}, already there {len(report.skipped)}, "
          f"with failed chunks {len(report.partial)}")
    print(result["llm_response"]["content"])
    for chunk in result.get("data", {}).get("chunks", []):
        print(f"- {chunk['chunk_id']} (position {chunk['position']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
