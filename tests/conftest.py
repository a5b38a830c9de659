"""Shared fixtures: offline guards, the deterministic embedding, the shared data folder, a
throw-away PostgreSQL server for the ``postgres``-marked tests of any folder, and the skipping of
tests whose optional dependency is missing (``dependencies.py``), so a core-only install runs
what it can and says, per test, what it skipped and how to install it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

# Helper modules (scripted_llm, hash_embedding, fault_worker, lightrag_fakes, ...) are imported by
# bare name from every folder: they live in tests/ and tests/lightrag_ext/, both put on sys.path
# here (and by the subprocess scripts that need them).
TESTS_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS_DIR), str(TESTS_DIR / "lightrag_ext")]

from dependencies import (  # noqa: E402
    FIXTURE_NEEDS,
    NEEDS,
    missing,
    pg_bin,
    skip_reason_of_error,
    skip_reason_of_import,
)
from hash_embedding import HashEmbedding  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PG_SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "postgres.sh"


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch, tmp_path):
    """No test may reach OpenAI or a model hub, whatever the machine's environment says, nor
    leave a CLI traceback log in the user's home."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


@pytest.fixture(scope="module")
def offline() -> Iterator[None]:
    """The autouse offline guard is function-scoped; module-scoped indexes need it too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENAI_API_KEY", raising=False)
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        yield


@pytest.fixture
def hash_embed() -> HashEmbedding:
    return HashEmbedding()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The evaluation data beside the checkout; tests using it skip cleanly without it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


# -- optional dependencies ----------------------------------------------------------------------
@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects on the markers added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark what a test's fixtures load (so a new test is marked by using them), then skip a
    marked test whose dependency is missing, saying which and how to install it."""
    for item in items:
        for fixture in item.fixturenames:
            if fixture in FIXTURE_NEEDS:
                item.add_marker(FIXTURE_NEEDS[fixture])
        for name in sorted({m.name for m in item.iter_markers()} & NEEDS.keys()):
            reason = missing(name)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
                break


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A test that fails because an optional dependency it reached is missing (the error was
    raised from that import) is reported skipped with the dependency's reason, not failed: a
    test needing one need not be marked to skip in a core-only install. With every dependency
    installed nothing is converted."""
    report = yield
    if report.failed and call.excinfo is not None and report.when in ("setup", "call"):
        reason = skip_reason_of_error(call.excinfo.value)
        if reason:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {reason}")
    return report


class _Module(pytest.Module):
    """A test module whose top-level import of an optional dependency fails is skipped with the
    dependency's reason (any other import error stays an error)."""

    def _getobj(self) -> Any:
        try:
            return super()._getobj()
        except self.CollectError as exc:
            reason = skip_reason_of_import(exc.__cause__)
            if reason is None:
                raise
            pytest.skip(reason, allow_module_level=True)


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> Optional[pytest.Module]:
    if module_path.name == "__init__.py":
        return None
    return _Module.from_parent(parent, path=module_path)


@pytest.fixture(scope="session")
def minilm() -> Any:
    """The offline default embedding (marks the test ``minilm``)."""
    from llama_index_e2rag.embeddings import MiniLMEmbedding

    return MiniLMEmbedding()


@pytest.fixture(scope="session")
def nlp() -> Any:
    """The spaCy pipeline grounded extraction uses (marks the test ``spacy``)."""
    from llama_index_e2rag.extract.spacy_model import load_spacy

    return load_spacy()


# -- PostgreSQL ---------------------------------------------------------------------------------
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
    if pg_bin() is None:
        reason = "PostgreSQL binaries not found under /usr/lib/postgresql/*/bin"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}; CI must run `.ci/postgres.sh install` first")
        pytest.skip(f"{reason} (run `.ci/postgres.sh install`)")
    for attempt in range(3):  # another process may take the free port before the server binds it
        root = Path(tempfile.mkdtemp(prefix="e2rag-pg-"))  # mode 0700: the pwfile stays private
        port = _free_port()
        started = subprocess.run([str(PG_SCRIPT), "start", str(root), str(port)], check=False)
        if started.returncode == 0:
            break
        subprocess.run([str(PG_SCRIPT), "stop", str(root)], check=False)
        shutil.rmtree(root, ignore_errors=True)
    else:
        pytest.fail("could not start the test PostgreSQL server (3 tries); see .ci/postgres.sh")
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


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: dict[str, str]) -> str:
    """A libpq URI of the test database (share it; isolate tests with a schema of their own)."""
    env = postgres_server
    return (
        f"postgresql://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}@{env['POSTGRES_HOST']}:"
        f"{env['POSTGRES_PORT']}/{env['POSTGRES_DATABASE']}"
    )


@pytest.fixture
def postgres_schema(postgres_dsn: str) -> Iterator[str]:
    """A schema name no other test uses; the schema (if created) is dropped afterwards."""
    import psycopg
    from psycopg import sql

    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
