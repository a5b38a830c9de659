"""Fixtures of the LightRAG tests: the scripted LLM, instances that clean up, PostgreSQL."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Optional

import pytest
from lightrag.kg.shared_storage import finalize_share_data
from scripted_llm import ScriptedLLM

from lightrag_fakes import (
    ScriptedLightRAGLLM,
    hash_embedding_func,
    offline_tokenizer,
    stop_workers,
)

PG_SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "postgres.sh"


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


# -- PostgreSQL ---------------------------------------------------------------------------------
def _pg_bin() -> Optional[Path]:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin")):
        if (candidate / "initdb").exists():
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server() -> Any:
    """A throw-away cluster (``.ci/postgres.sh``) on a free localhost port, stopped afterwards.

    Skips when PostgreSQL is not installed, unless ``CI=true`` (then it is an error: CI installs
    it with ``.ci/postgres.sh install``).
    """
    if _pg_bin() is None:
        reason = "PostgreSQL binaries not found under /usr/lib/postgresql/*/bin"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}; CI must run `.ci/postgres.sh install` first")
        pytest.skip(f"{reason} (run `.ci/postgres.sh install`)")
    root = Path(tempfile.mkdtemp(prefix="e2rag-pg-"))
    root.chmod(0o755)
    port = _free_port()
    subprocess.run([str(PG_SCRIPT), "start", str(root), str(port)], check=True)
    env = {
        "POSTGRES_HOST": "127.0.0.1",
        "POSTGRES_PORT": str(port),
        "POSTGRES_USER": "e2rag",
        "POSTGRES_PASSWORD": "e2rag",
        "POSTGRES_DATABASE": "e2rag",
    }
    try:
        yield env
    finally:
        subprocess.run([str(PG_SCRIPT), "stop", str(root)], check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_env(postgres_server: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict:
    for key, value in postgres_server.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("POSTGRES_WORKSPACE", raising=False)
    return postgres_server

