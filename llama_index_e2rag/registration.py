"""``E2RAGIndex`` in llama-index's index registries, without importing llama-index or the index.

``load_index_from_storage`` looks an index store's type key up in two module-level dicts of
llama-index (``data_structs.registry`` for the struct, ``indices.registry`` for the index class),
and llama-index offers no plug-in point to fill them. Importing the package (which every module of
it does first) calls :func:`install`: a registry module already imported gets a lazy entry at once;
one not imported yet gets it right after it executes, through a small ``sys.meta_path`` finder that
handles those two module names only and leaves ``sys.meta_path`` once both are filled. A lazy entry
imports ``llama_index_e2rag.index`` on first use; that module then puts the real classes in their
place. So ``import llama_index_e2rag`` is enough to load a store, in either import order, and
costs neither llama-index nor the index module until a store is loaded.
"""

from __future__ import annotations

import sys
import threading
from importlib import import_module
from types import ModuleType
from typing import Any, Optional, Sequence

from llama_index_e2rag.persist.index_store import STRUCT_TYPES

#: registry module -> the name of its dict
REGISTRIES = {
    "llama_index.core.data_structs.registry": "INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS",
    "llama_index.core.indices.registry": "INDEX_STRUCT_TYPE_TO_INDEX_CLASS",
}
_INDEX_MODULE = "llama_index_e2rag.index"
_lock = threading.Lock()


class LazyIndexClass:
    """Stands in a registry for ``E2RAGIndex`` / ``E2RAGIndexStruct`` until the index module is
    imported: what llama-index calls on a registry entry (``from_json``, ``from_dict``, the
    class itself) imports it and goes to the real class, which has replaced this entry by then."""

    def __init__(self, registry: dict[Any, Any], key: str) -> None:
        self._registry = registry
        self._key = key

    def _real(self) -> Any:
        import_module(_INDEX_MODULE)  # its last lines register the real classes under our keys
        return self._registry[self._key]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._real()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # no import for copy, pickle or introspection probes
            raise AttributeError(name)
        return getattr(self._real(), name)

    def __repr__(self) -> str:
        return f"<{self._key}, imported on first use>"


def register(module: ModuleType) -> None:
    """Add lazy entries for our type keys to the registry dict of ``module`` (one of
    ``REGISTRIES``), keeping entries already there (the real classes, once imported)."""
    registry = getattr(module, REGISTRIES[module.__name__])
    for key in STRUCT_TYPES:
        registry.setdefault(key, LazyIndexClass(registry, key))


class _RegisteringLoader:
    """A registry module's own loader, registering our entries once the module has run."""

    def __init__(self, loader: Any, finder: "_RegistryFinder") -> None:
        self._loader = loader
        self._finder = finder

    def create_module(self, spec: Any) -> Optional[ModuleType]:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        register(module)
        self._finder.done(module.__name__)

    def __getattr__(self, name: str) -> Any:  # get_source, get_code … for tracebacks and tools
        return getattr(self._loader, name)


class _RegistryFinder:
    """A ``sys.meta_path`` entry that only wraps the loaders of the registry modules not yet
    imported; every other import passes through it untouched."""

    def __init__(self, pending: set[str]) -> None:
        self._pending = pending

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Any:
        if fullname not in self._pending:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _RegisteringLoader(spec.loader, self)
                return spec
        return None

    def done(self, fullname: str) -> None:
        """``fullname`` is registered; with none left, leave ``sys.meta_path`` (a new list, so
        that an import iterating the old one is not disturbed)."""
        with _lock:
            self._pending.discard(fullname)
            if not self._pending:
                sys.meta_path = [finder for finder in sys.meta_path if finder is not self]


def install() -> None:
    """Register now in the registry modules already imported, and when the others are."""
    with _lock:
        if any(isinstance(finder, _RegistryFinder) for finder in sys.meta_path):
            return
        pending = set()
        for name in REGISTRIES:
            module = sys.modules.get(name)
            if module is not None:
                register(module)
            else:
                pending.add(name)
        if pending:
            sys.meta_path.insert(0, _RegistryFinder(pending))
