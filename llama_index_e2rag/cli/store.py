"""The stores the ``e2rag`` commands open (checked first); files are read by ``cli.files``."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from llama_index_e2rag.errors import E2RAGError, StoreLoadError
from llama_index_e2rag.persist.ownership import Kind, inspect, no_store

if TYPE_CHECKING:
    from llama_index_e2rag.index import E2RAGIndex

#: Failures of a load that already say what they are (what the store's checks found, the file
#: system, a missing extra, the graph database): they reach the user as they are.
NAMED_FAILURES = (E2RAGError, OSError, ImportError, sqlite3.Error)


def has_store(store: Path) -> bool:
    """A store to add to: one of ours (``ownership``; what a killed first save left is not one:
    ``index`` writes over it)."""
    return inspect(store).kind is Kind.STORE


def load_store(store: Path, progress: bool = False, **kwargs: object) -> "E2RAGIndex":
    """Load the e2rag index persisted in ``store``, its files checked first (``load_index``).

    Any other failure of the load is a ``StoreLoadError`` naming the store: the user is told
    which store could not be loaded (and how to repair it) whatever function raised it.
    """
    if not has_store(store):
        raise no_store(store, "create one with: e2rag index FILES --store")
    from llama_index_e2rag.maintenance.load import load_index  # deferred: llama-index, the index
    from tqdm.auto import tqdm  # deferred: tqdm.auto probes for Jupyter widgets (~0.4 s)

    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    with tqdm(total=1, desc="Loading store", unit="step", disable=not progress) as bar:
        try:
            index = load_index(store, **kwargs)
        except NAMED_FAILURES:
            raise
        except Exception as exc:
            raise StoreLoadError(store, exc) from exc
        bar.update()
    return index
