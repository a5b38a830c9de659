"""Give an existing LightRAG working directory E²RAG's event layer, then ask an e2rag question.

    pip install -e ".[lightrag,offline]"          # from a checkout of llama-index-e2rag
    python examples/lightrag_extend_existing.py   # offline: builds a demo dir, extends it
    export OPENAI_API_KEY=...                     # with a key: OpenAI through LightRAG
    python examples/lightrag_extend_existing.py ./rag_storage "Why did Hermione break the rules?"

Without ``OPENAI_API_KEY`` the LLM is an OFFLINE STAND-IN (``lightrag_offline_stand_in.py``:
spaCy extraction and an extracted sentence as the answer, not a language model) and the
embeddings are the package's offline MiniLM, so a working directory you built with other models
will not match: without a working directory the example builds one (the package's sample story,
plain ``LightRAG``) in a new temporary folder.

The working directory must have been built by LightRAG (``LightRAG.ainsert``) with the same
storages and embedding model you pass here. Nothing already stored is re-extracted: the backfill
reads LightRAG's chunks and its cached per-chunk entity extractions and only runs the event pass
(cached in LightRAG's LLM cache, so running this again costs no LLM call). Use any LightRAG LLM
binding (Ollama, Azure, ...) by passing its functions to ``extend_existing``.
"""
# tested-by: tests/lightrag_ext/test_backfill_example.py

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from lightrag import LightRAG, QueryParam
from lightrag.utils import EmbeddingFunc

from lightrag_ext import E2RAG_MODE, BackfillReport, E2LightRAG

SAMPLE = Path(__file__).resolve().parents[1] / "llama_index_e2rag" / "data" / "peter_rabbit.txt"
DEFAULT_QUESTION = "Who ran after Peter in the garden?"


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


async def build_demo(working_dir: str, **lightrag_kwargs: Any) -> None:
    """A working directory as plain LightRAG leaves it (the package's sample story), to extend
    when you have none at hand."""
    rag = LightRAG(working_dir=working_dir, **lightrag_kwargs)
    await rag.initialize_storages()
    try:
        await rag.ainsert(SAMPLE.read_text(encoding="utf-8"), ids=["peter_rabbit"])
    finally:
        await rag.finalize_storages()


def models() -> dict[str, Any]:
    """OpenAI through LightRAG with a key; the clearly labelled offline stand-in without one."""
    if os.environ.get("OPENAI_API_KEY"):
        from lightrag.llm.openai import gpt_4o_mini_complete, openai_embed

        return {"llm_model_func": gpt_4o_mini_complete, "embedding_func": openai_embed}
    from lightrag_offline_stand_in import OfflineStandIn, offline_embedding

    from lightrag_ext.word_tokenizer import word_tokenizer

    print(
        "No OPENAI_API_KEY: using the OFFLINE STAND-IN (spaCy extraction and an extracted "
        "sentence as the answer; not a language model), MiniLM embeddings, word tokens.",
        file=sys.stderr,
    )
    return {
        "llm_model_func": OfflineStandIn(),
        "embedding_func": offline_embedding(),
        "tokenizer": word_tokenizer(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "working_dir",
        nargs="?",
        help="an existing LightRAG working directory (default: a new one with the sample story)",
    )
    parser.add_argument("question", nargs="?", default=DEFAULT_QUESTION)
    args = parser.parse_args()
    if args.working_dir and not os.path.isdir(args.working_dir):
        print(f"no LightRAG working directory at {args.working_dir}", file=sys.stderr)
        return 2
    kwargs = models()
    working_dir = args.working_dir
    if working_dir is None:
        working_dir = tempfile.mkdtemp(prefix="lightrag-demo-")
        print(f"building a plain LightRAG working directory in {working_dir}", file=sys.stderr)
        asyncio.run(build_demo(working_dir, **kwargs))
    report, result = asyncio.run(extend_existing(working_dir, args.question, **kwargs))
    print(f"event layer: built {len(report.built)}, already there {len(report.skipped)}, "
          f"with failed chunks {len(report.partial)}")
    print(f"Q: {args.question}")
    print(result["llm_response"]["content"])
    for chunk in result.get("data", {}).get("chunks", []):
        print(f"- {chunk['chunk_id']} (position {chunk['position']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
