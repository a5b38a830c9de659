"""Peter Rabbit indexed offline and persisted in a real folder, the store the read-model tests
load again; and a guard that fails a test where a read model is derived when it should be read."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from llama_index_e2rag.app.demo import sample_document
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.stores import read_model_file

#: Questions about the demo story that the read-model tests rank with.
DEMO_QUESTIONS = (
    "What did Peter do after he lost his shoes?",
    "Who chased Peter round the garden?",
    "Why did Mrs. Rabbit give Peter camomile tea?",
)


def persist_demo(folder: Path, embed_model: Any) -> E2RAGIndex:
    """The demo story indexed with the offline graph and ``embed_model``, persisted in
    ``folder``."""
    index = E2RAGIndex.from_documents([sample_document()], embed_model=embed_model)
    index.storage_context.persist(str(folder))
    return index


def ranking(index: E2RAGIndex, **options: Any) -> list[list[tuple[str, float, str]]]:
    """Each demo question's results (id, score, text) from ``index.as_retriever(**options)``."""
    retriever = index.as_retriever(**options)
    return [
        [(n.node.node_id, round(float(n.score), 6), n.node.get_content())
         for n in retriever.retrieve(q)]
        for q in DEMO_QUESTIONS
    ]


def model_file(store: Path, name: str) -> Path:
    """Where the persisted store ``store`` keeps the read model file ``name``."""
    return store / "e2rag" / read_model_file.READ_MODELS_DIR / name


def damage(path: Path, key: str) -> None:
    """Rename the first ``key`` in a read model file's body: its checksum no longer holds."""
    head, body = path.read_text(encoding="utf-8").split("\n", 1)
    path.write_text(head + "\n" + body.replace(f'"{key}"', f'"{key}_"', 1), encoding="utf-8")


#: What a saved read model may suffer; each means: derive it again.
HARMS = ("damaged", "missing", "another state")


def assert_derived_again(
    path: Path, harm: str, key: str, write_other: Callable[[], None],
    rank: Callable[[], Any], refuse: Callable[[], None],
) -> None:
    """After ``harm`` to the model saved in ``path`` (``damage`` of ``key``, deleted, or
    ``write_other`` saving a model of another state), ``rank()`` (a new load's results) derives
    it again, with the same results, and saves what was saved; once ``refuse()`` forbids
    deriving, the next load reads it."""
    expected = rank()
    saved = path.read_text(encoding="utf-8")
    if harm == "damaged":
        damage(path, key)
    elif harm == "missing":
        path.unlink()
    else:
        write_other()
    derived = rank()
    refuse()
    assert (derived, path.read_text(encoding="utf-8")) == (expected, saved)
    assert rank() == expected


def forbid(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, message: str) -> None:
    """Make ``module.name`` fail the test with ``message`` if anything calls it."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(message)

    monkeypatch.setattr(module, name, refuse)
