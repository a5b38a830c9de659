"""The tqdm bars of builds (``show_progress``): one per stage, on stderr, nothing when off.

Shared by indexing (``index``) and by adding layers to stored documents (``layers``), so that
both name their stages alike.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Sequence


def doc_bar(items: Sequence[Any], desc: str, show: bool) -> Any:
    """``items`` (one per document) behind a tqdm bar when ``show``."""
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit="doc", disable=not show)


@contextmanager
def steps_bar(desc: str, total: int, show: bool) -> Iterator[None]:
    """A tqdm bar that completes when the block it wraps does (one commit of ``total`` docs)."""
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=desc, unit="doc", disable=not show) as progress:
        yield
        progress.update(total)
