"""Blocking work awaited from the event loop, on threads that a Ctrl-C can stop.

Why not ``asyncio.to_thread``: its executor's threads are joined when the interpreter exits, so
after a Ctrl-C ``e2rag index`` said "interrupted" and then waited for the rest of the book's
parse (or the queued embedding calls) to finish; and a process forked from such a thread (spaCy's
parsing workers) failed on its way out, as ``concurrent.futures``' exit hook tried to join the
very thread that forked it ("cannot join current thread", spaCy's W127 on every book).

``in_thread`` runs a call on a daemon thread of its own (never joined at exit, safe to fork
from). Long jobs call ``check()`` between steps (a parsed batch, one model run): once the job
is stopped, by ``stop_all()`` (``run_sync`` calls it when a Ctrl-C reaches it) or by cancelling
the coroutine that awaits it, ``check()`` raises ``Interrupted`` and the job unwinds, closing
what it opened (worker processes included).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar

T = TypeVar("T")

#: How long ``stop_all`` waits, at most, for stopped jobs to unwind.
STOP_WAIT_SECONDS = 1.5


class Interrupted(KeyboardInterrupt):
    """A job stopped because its caller was interrupted (a ``KeyboardInterrupt``: it is one)."""


@dataclass(eq=False)
class _Job:
    stop: threading.Event
    thread: threading.Thread
    #: whether the call polls ``check()`` (worth waiting for) or is simply abandoned (LLM calls)
    stoppable: bool


_JOBS: set[_Job] = set()
_JOBS_LOCK = threading.Lock()
_CURRENT_STOP: contextvars.ContextVar[Optional[threading.Event]] = contextvars.ContextVar(
    "e2rag_job_stop", default=None
)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def stopping() -> bool:
    """True when the job running this code was asked to stop (never outside a job)."""
    event = _CURRENT_STOP.get()
    return event is not None and event.is_set()


def check() -> None:
    """Raise ``Interrupted`` if the job running this code was asked to stop."""
    if stopping():
        raise Interrupted("stopped: the caller was interrupted")


async def in_thread(call: Callable[[], T], stoppable: bool = True) -> T:
    """``call()`` on a daemon thread of its own, awaited without blocking the loop.

    The caller's context variables (llama-index's callback and instrumentation state) go with
    the call. If the awaiting coroutine is cancelled or interrupted, the job is told to stop
    (``check()``); a call that never returns is abandoned and does not keep the process alive.
    ``stoppable=False`` marks calls that never poll ``check()`` (``stop_all`` does not wait for
    them).
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()
    stop = threading.Event()

    def settle(result: Any, error: Optional[BaseException]) -> None:
        if future.done():  # given up on (timed out or cancelled)
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def body() -> T:
        _CURRENT_STOP.set(stop)
        return call()

    def run() -> None:
        result: Any = None
        error: Optional[BaseException] = None
        try:
            result = context.run(body)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting coroutine
            error = exc
        finally:
            with _JOBS_LOCK:
                _JOBS.discard(job)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    job = _Job(stop, threading.Thread(target=run, name="e2rag-job", daemon=True), stoppable)
    with _JOBS_LOCK:
        _JOBS.add(job)
    job.thread.start()
    try:
        return await future
    except BaseException:
        stop.set()
        raise


def stop_all(wait: float = STOP_WAIT_SECONDS) -> None:
    """Tell every running job to stop and give the stoppable ones up to ``wait`` seconds to
    unwind (terminating their worker processes), so that the process can end at once."""
    with _JOBS_LOCK:
        jobs = list(_JOBS)
    for job in jobs:
        job.stop.set()
    deadline = time.monotonic() + wait
    for job in jobs:
        if job.stoppable and job.thread is not threading.current_thread():
            job.thread.join(max(0.0, deadline - time.monotonic()))
