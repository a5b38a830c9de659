"""Module attributes loaded on first access (PEP 562), so that importing a module stays cheap.

Both packages' exports (``llama_index_e2rag``, ``lightrag_ext``) and the llama-index prompt
templates (``prompt_text.lazy_templates``) are built this way.
"""

from __future__ import annotations

from functools import partial
from importlib import import_module
from typing import Any, Callable, Mapping


def lazy_getattr(
    module: dict[str, Any], loaders: Mapping[str, Callable[[], Any]]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` returning ``loaders[name]()``, kept in ``module`` (the module's
    ``globals()``) so that each loader runs once."""

    def __getattr__(name: str) -> Any:
        load = loaders.get(name)
        if load is None:
            raise AttributeError(f"module {module['__name__']!r} has no attribute {name!r}")
        value = module[name] = load()
        return value

    return __getattr__


def lazy_exports(module: dict[str, Any], exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` importing ``name`` from the module ``exports[name]``."""
    return lazy_getattr(
        module, {name: partial(_imported, path, name) for name, path in exports.items()}
    )


def _imported(path: str, name: str) -> Any:
    return getattr(import_module(path), name)
