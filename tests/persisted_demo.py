"""Peter Rabbit indexed offline and persisted in a real folder, the store the read-model tests
load again; and a guard that fails a test where a read model is derived when it should be read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llama_index_e2rag.app.demo import sample_document
from llama_index_e2rag.index import E2RAGIndex


def persist_demo(folder: Path, embed_model: Any) -> E2RAGIndex:
    """The demo story indexed with the offline graph and ``embed_model``, persisted in
    ``folder``."""
    index = E2RAGIndex.from_documents([sample_document()], embed_model=embed_model)
    index.storage_context.persist(str(folder))
    return index


def forbid(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, message: str) -> None:
    """Make ``module.name`` fail the test with ``message`` if anything calls it."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(message)

    monkeypatch.setattr(module, name, refuse)
