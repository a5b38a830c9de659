"""The stores the ``e2rag`` commands open (checked first); files are read by ``cli_files``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from llama_index_e2rag.errors import E2RAGError

if TYPE_CHECKING:
    from llama_index_e2rag.index import E2RAGIndex


def has_store(store: Path) -> bool:
    """A store to add to: its e2rag folder, or 0.1.0's layout (what a save killed before the
    folder existed left is not one: ``index`` replaces it)."""
    from llama_index_e2rag.loading import is_legacy

    return (store / "e2rag").is_dir() or is_legacy(store)


def load_store(store: Path, progress: bool = False, **kwargs: object) -> "E2RAGIndex":
    """Load the e2rag index persisted in ``store``, its files checked first (``load_index``)."""
    from llama_index_e2rag.loading import load_index

    if not has_store(store):
        raise E2RAGError(f"no e2rag store at {store} (create one with: e2rag index PATH --store)")
    from tqdm.auto import tqdm

    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    with tqdm(total=1, desc="Loading store", unit="step", disable=not progress) as bar:
        index = load_index(store, **kwargs)
        bar.update()
    return index
