"""The ``e2rag`` command: one module per command, errors mapped to one-line messages.

``llama_index_e2rag.cli:main`` is the console script's entry point; it is exported lazily so
that importing one command's module does not load the argument parser and every command.
"""

from __future__ import annotations

from llama_index_e2rag.lazy import lazy_exports

__all__ = ["main"]

__getattr__ = lazy_exports(globals(), {"main": "llama_index_e2rag.cli.entry"})
