"""Fixtures of the LightRAG tests: the scripted LLM and instances that clean up.

The PostgreSQL fixtures (``postgres_server``, ``postgres_env``) live in ``tests/conftest.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

try:
    from lightrag.kg.shared_storage import finalize_share_data
except ImportError:  # a core-only install: tests using these fixtures are marked and skipped
    pass  # (tests/dependencies.py FIXTURE_NEEDS), modules importing LightRAG skip on import
else:
    from scripted_llm import ScriptedLLM

    from fake_openai import FakeOpenAI
    from lightrag_fakes import (
        EMBED_DIM,
        ScriptedLightRAGLLM,
        hash_embedding_func,
        offline_tokenizer,
        stop_workers,
    )
    from server_process import ServerFactory, require_tiktoken_cache


@pytest.fixture
def scripted_shared() -> ScriptedLLM:
    return ScriptedLLM()


@pytest.fixture
def lightrag_llm(scripted_shared: ScriptedLLM) -> ScriptedLightRAGLLM:
    return ScriptedLightRAGLLM(scripted_shared)


@pytest.fixture
def fake_openai(lightrag_llm: ScriptedLightRAGLLM) -> Iterator[FakeOpenAI]:
    """The OpenAI-compatible endpoint real server processes use, answered by ``lightrag_llm``."""
    with FakeOpenAI(lightrag_llm) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def endpoint() -> Iterator[FakeOpenAI]:
    """A fake endpoint of the test module's own, for servers shared by its tests."""
    with FakeOpenAI(ScriptedLightRAGLLM(ScriptedLLM())) as fake:
        yield fake


@pytest.fixture(scope="module")
def module_servers(
    endpoint: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerFactory]:
    """Like ``lightrag_server``, on ``endpoint``, for servers shared by a module's tests."""
    factory = ServerFactory(
        tmp_path_factory.mktemp("servers"), endpoint.base_url, EMBED_DIM, require_tiktoken_cache()
    )
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture
def lightrag_server(fake_openai: FakeOpenAI, tmp_path: Path) -> Iterator[ServerFactory]:
    """``lightrag_server(command=STOCK_SERVER, working_dir=None, input_dir=None, env=None)``
    starts a server process on ``fake_openai`` (see server_process.py); all stop at teardown."""
    factory = ServerFactory(tmp_path, fake_openai.base_url, EMBED_DIM, require_tiktoken_cache())
    try:
        yield factory
    finally:
        factory.stop_all()


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
