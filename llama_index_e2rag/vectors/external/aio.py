"""How the backends call stores: one code path per operation, run synchronously or natively async.

Each backend operation is a coroutine that talks to its store only through an ``IO``. With
``IO(aio=False)`` every await completes at once, so ``drive`` runs the coroutine without an event
loop (the sync API); with ``IO(aio=True)`` the store's own async methods are awaited. Native async
calls always run on one private event-loop thread per process, because gRPC/HTTP async clients
(Qdrant's, Milvus's) are bound to the loop they first ran on: a second ``asyncio.run`` would find
them broken ("Event loop is closed").
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Optional

_LOOP: Optional[asyncio.AbstractEventLoop] = None
_LOOP_THREAD: Optional[threading.Thread] = None
_LOOP_LOCK = threading.Lock()


def io_loop() -> asyncio.AbstractEventLoop:
    """The private loop (started on first use, restarted if its thread died)."""
    global _LOOP, _LOOP_THREAD
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.is_closed() or not (_LOOP_THREAD and _LOOP_THREAD.is_alive()):
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="e2rag-vector-io", daemon=True)
            thread.start()
            _LOOP, _LOOP_THREAD = loop, thread
        return _LOOP


def on_io_loop(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` on the private loop and block for its result (never from that loop)."""
    loop = io_loop()
    if threading.current_thread() is _LOOP_THREAD:
        coro.close()
        raise RuntimeError("blocking call on the e2rag vector io loop")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


def drive(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a flow whose awaits never suspend (its ``IO`` is synchronous) without a loop."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("a synchronous vector flow suspended")  # pragma: no cover - a bug


class IO:
    """How a flow talks to a store: natively async (on the private loop) or synchronously."""

    def __init__(self, aio: bool) -> None:
        self.aio = aio

    async def __call__(
        self,
        sync_fn: Optional[Callable[[], Any]],
        async_fn: Optional[Callable[[], Awaitable[Any]]] = None,
    ) -> Any:
        if self.aio and async_fn is not None:
            return await async_fn()
        if sync_fn is not None:
            return sync_fn()
        if async_fn is None:  # pragma: no cover - a bug
            raise RuntimeError("no way to call the store")
        return on_io_loop(async_fn())  # async-only store, called from sync code
