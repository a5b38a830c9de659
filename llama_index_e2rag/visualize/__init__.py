"""Pictures of the story: one self-contained HTML page per store, query or character.

``story_page`` reads a ``GraphStore`` and plain ``Evidence`` (``evidence_from_results`` turns a
retriever's results into it) and returns the HTML: the story axis overview, the query's subgraph
along the story, the evidence passages with their positions and a character's timeline.
``E2RAGIndex.visualize`` and ``e2rag show --html`` call it; ``write_page`` saves it whole.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.visualize.data import (
    Evidence,
    StoryPage,
    collect_page,
    evidence_from_results,
)
from llama_index_e2rag.visualize.render import render_page

if TYPE_CHECKING:  # (the port imports llama-index, which the page itself never needs)
    from llama_index_e2rag.stores.port import Stores


def story_page(
    graph: GraphStore,
    *,
    query: Optional[str] = None,
    evidence: Sequence[Evidence] = (),
    entity: Optional[str] = None,
    mode: Optional[str] = None,
) -> str:
    """The HTML page of ``graph``: with ``query``, its ``evidence`` and their subgraph; with
    ``entity``, that character's timeline; always the story axis overview."""
    page = collect_page(graph, query=query, evidence=evidence, entity=entity, mode=mode)
    return render_page(page)


def stores_page(
    stores: "Stores",
    results: Sequence[Any] = (),
    *,
    query: Optional[str] = None,
    entity: Optional[str] = None,
    mode: Optional[str] = None,
    path: Optional[str | os.PathLike[str]] = None,
) -> str:
    """``story_page`` of the stores' graph, read under their read lock, with a retriever's
    ``results`` for ``query`` as evidence (``E2RAGIndex.visualize``); written whole to ``path``
    when given. Returns the HTML."""
    with stores.reading():
        page = story_page(
            stores.graph,
            query=query,
            evidence=evidence_from_results(results),
            entity=entity,
            mode=mode if query is not None else None,
        )
    if path is not None:
        write_page(path, page)
    return page


def write_page(path: str | os.PathLike[str], html: str) -> Path:
    """Write ``html`` to ``path`` whole or not at all (a temporary file renamed into place)."""
    target = Path(path)
    if target.is_dir():
        raise E2RAGError(f"cannot write the page to {target}: it is a folder; name an .html file")
    if not target.parent.is_dir():
        raise E2RAGError(
            f"cannot write the page to {target}: folder {target.parent} does not exist"
        )
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(html)
        os.chmod(tmp, 0o644)  # a page to share, not mkstemp's private 0600
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


__all__ = [
    "Evidence",
    "StoryPage",
    "collect_page",
    "evidence_from_results",
    "render_page",
    "stores_page",
    "story_page",
    "write_page",
]
