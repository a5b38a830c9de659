"""The stores the ``e2rag`` commands open (checked first); files are read by ``cli_files``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from llama_index_e2rag.index import E2RAGIndex


def has_store(store: Path) -> bool:
    """A store to add to: one of ours (``ownership``; what a killed first save left is not one:
    ``index`` writes over it)."""
    from llama_index_e2rag.persist.ownership import Kind, inspect

    return inspect(store).kind is Kind.STORE


def load_store(store: Path, progress: bool = False, **kwargs: object) -> "E2RAGIndex":
    """Load the e2rag index persisted in ``store``, its files checked first (``load_index``)."""
    from llama_index_e2rag.maintenance.load import load_index
    from llama_index_e2rag.persist.load import no_store

    if not has_store(store):
        raise no_store(store, "create one with: e2rag index FILES --store")
    from tqdm.auto import tqdm

    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    with tqdm(total=1, desc="Loading store", unit="step", disable=not progress) as bar:
        index = load_index(store, **kwargs)
        bar.update()
    return index
