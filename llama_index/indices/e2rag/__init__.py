"""Alias so ``from llama_index.indices.e2rag import E2RAGIndex`` works like other llama-index packages."""

from typing import Any

import llama_index_e2rag as _pkg

__all__ = _pkg.__all__
__version__ = _pkg.__version__


def __getattr__(name: str) -> Any:
    return getattr(_pkg, name)
