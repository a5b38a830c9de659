"""Fixtures of the LightRAG tests: the scripted LLM and instances that clean up.

The PostgreSQL fixtures (``postgres_server``, ``postgres_env``) live in ``tests/conftest.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lightrag.kg.shared_storage import finalize_share_data
from scripted_llm import ScriptedLLM

from lightrag_fakes import (
    ScriptedLightRAGLLM,
    hash_embedding_func,
    offline_tokenizer,
    stop_workers,
)


@pytest.fixture
def scripted_shared() -> ScriptedLLM:
    return ScriptedLLM()


@pytest.fixture
def lightrag_llm(scripted_shared: ScriptedLLM) -> ScriptedLightRAGLLM:
    return ScriptedLightRAGLLM(scripted_shared)


@pytest.fixture
async def rag_factory(lightrag_llm: ScriptedLightRAGLLM):
    """Build and initialise LightRAG-like instances; finalise them (and LightRAG's process-wide
    shared namespace data, which would otherwise leak one working dir into the next) at the end."""
    from lightrag import LightRAG

    created: list[Any] = []

    async def make(cls: type = LightRAG, working_dir: str | Path = ".", **overrides: Any) -> Any:
        kwargs: dict[str, Any] = dict(
            working_dir=str(working_dir),
            llm_model_func=lightrag_llm,
            embedding_func=hash_embedding_func(),
            tokenizer=offline_tokenizer(),
            entity_extract_max_gleaning=0,
            enable_llm_cache=True,
        )
        kwargs.update(overrides)
        rag = cls(**kwargs)
        await rag.initialize_storages()
        created.append(rag)
        return rag

    async def close(rag: Any) -> None:
        await rag.finalize_storages()
        await stop_workers(rag)
        created.remove(rag)
        finalize_share_data()

    make.close = close  # type: ignore[attr-defined]
    yield make
    for rag in list(created):
        await close(rag)
    finalize_share_data()
