"""Read models derived from the stores' content, built once per content state.

Several retrievers keep a read model of the stores (GroundedKG's node-embedding matrices, the
narrative mode's passage table, the story order of chunks); each is worth building once and
reusing until the content changes. ``StateCache`` keeps one per ``Stores`` object (weakly: a
dropped index frees it) and rebuilds it when ``Stores.version`` — bumped by every committed
write, by any process — moves on.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Generic, Hashable, Protocol, TypeVar

T = TypeVar("T")


class Versioned(Protocol):
    """What a cache is keyed by: ``Stores``, or a graph store alone (``version`` moves on with
    every committed write)."""

    @property
    def version(self) -> Hashable: ...


class StateCache(Generic[T]):
    """``build(stores, state)`` once per stores object (or graph store) and content state,
    thread-safe.

    Concurrent first queries wait for one build instead of each building; a build is stored
    under the state it was computed for, so it never replaces a newer one.
    """

    def __init__(self, build: Callable[[Any, Hashable], T]) -> None:
        self._build = build
        self._values: "weakref.WeakKeyDictionary[Versioned, tuple[Hashable, T]]" = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self._building = threading.Lock()

    def _cached(self, stores: Versioned, state: Hashable) -> tuple[bool, object]:
        with self._lock:
            cached = self._values.get(stores)
        return (True, cached[1]) if cached is not None and cached[0] == state else (False, None)

    def get(self, stores: Versioned) -> T:
        state = stores.version
        hit, value = self._cached(stores, state)
        if hit:
            return value  # type: ignore[return-value]
        with self._building:
            hit, value = self._cached(stores, state)
            if hit:
                return value  # type: ignore[return-value]
            built = self._build(stores, state)
            with self._lock:
                self._values[stores] = (state, built)
        return built

    def drop(self, stores: Versioned) -> None:
        """Forget what was built for ``stores`` (the next ``get`` builds again)."""
        with self._lock:
            self._values.pop(stores, None)
