"""The one door to LLMs: structured output, retries, JSON repair, a persistent cache, accounting
(the counters and token counts themselves are in ``llm.usage``).

Every LLM call of the library goes through ``LLMRunner`` so that one place decides how structured
output is obtained (function calling where the model has it, else JSON parsed from text with one
repair round), how long a call may take, how failures are retried, how many calls run at once,
which answers are reused from the cache (an interrupted build resumes without paying twice), and
what was spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
from typing import Any, AsyncIterator, Callable, Coroutine, Optional, Type, TypeVar, Union

from llama_index.core import Settings
from llama_index.core.async_utils import asyncio_run
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from pydantic import BaseModel, ValidationError

from llama_index_e2rag.background import in_thread, stop_all
from llama_index_e2rag.errors import LLMOutputError, LLMTimeoutError, MissingModelError
from llama_index_e2rag.llm.cache import CACHE_VERSION, ResponseCache
from llama_index_e2rag.llm.no_llm import NoLLM
from llama_index_e2rag.llm.parsing import (
    JSON_REPAIR_PROMPT,
    OutputParseError,
    parse_json_output,
    parse_with_repair,
)
from llama_index_e2rag.llm.usage import LLMStats, count_tokens, usage_of

#: Re-exported: the cache, the parser and the accounting lived here before they got modules of
#: their own.
__all__ = [
    "CACHE_VERSION",
    "DEFAULT_LLM_TIMEOUT",
    "JSON_REPAIR_PROMPT",
    "LLMRunner",
    "LLMStats",
    "OutputParseError",
    "ResponseCache",
    "count_tokens",
    "parse_json_output",
    "parse_with_repair",
    "resolve_llm",
    "run_sync",
]

logger = logging.getLogger(__name__)

Model = TypeVar("Model", bound=BaseModel)
T = TypeVar("T")
PromptLike = Union[BasePromptTemplate, str]

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
#: Seconds one LLM request may take before it counts as failed. An extraction answer for a
#: 1,200-token chunk takes gpt-4o-mini some 5-60 s; 120 s leaves room for slow providers and
#: local models while a hung connection costs minutes, not the whole build. LightRAG's default
#: is 240 s (``LLM_TIMEOUT``).
DEFAULT_LLM_TIMEOUT = 120.0


def resolve_llm(llm: Optional[LLM] = None) -> Optional[LLM]:
    """The LLM to use: explicit > user-set ``Settings.llm`` > OpenAI if a key is set > None.

    ``Settings._llm`` is read directly because the ``Settings.llm`` property would build
    llama-index's OpenAI default (and fail without a key). A ``MockLLM`` there is what
    ``Settings.llm = None`` leaves behind, i.e. the user asked for no LLM: we return None.
    So does an explicit ``NoLLM`` (``no_llm.py``).
    """
    if llm is not None:
        return None if isinstance(llm, NoLLM) else llm
    user_llm = getattr(Settings, "_llm", None)
    if user_llm is not None:
        from llama_index.core.llms.mock import MockLLM

        return None if isinstance(user_llm, MockLLM) else user_llm
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from llama_index.llms.openai import OpenAI
        except ImportError as exc:
            raise MissingModelError(
                "OPENAI_API_KEY is set but llama-index-llms-openai is not installed; "
                "pip install 'llama-index-e2rag[openai]' or pass llm=... explicitly."
            ) from exc
        return OpenAI(model=DEFAULT_OPENAI_MODEL)
    return None


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from sync code (also inside a running loop, e.g. Jupyter).

    Uses llama-index's ``asyncio_run`` but carries exceptions out as values: ``asyncio_run``
    treats any ``RuntimeError`` raised *by the coroutine* as a loop problem, retries the spent
    coroutine and reports "Detected nested async" instead of the real error.
    """

    async def captured() -> tuple[Optional[T], Optional[BaseException]]:
        try:
            return await coro, None
        except Exception as exc:  # noqa: BLE001 - re-raised below, outside asyncio_run
            return None, exc

    try:
        result, error = asyncio_run(captured())
    except KeyboardInterrupt:  # Ctrl-C: the work running off the loop stops too, at once
        stop_all()
        raise
    if error is not None:
        raise error
    return result  # type: ignore[return-value]


# -- the runner -------------------------------------------------------------------------------


class LLMRunner:
    """Structured and text calls to one LLM with retries, repair, cache, bounded concurrency.

    Args:
        llm: any llama-index LLM.
        cache: a ``ResponseCache``, a path for one, or None (no caching).
        num_workers: most LLM requests in flight at once (per event loop, and across threads
            for the sync methods).
        max_retries: further attempts after an exception, waiting ``backoff * 2**attempt`` s.
        backoff: first retry delay in seconds.
        use_function_calling: force or forbid the function-calling path; default: the LLM's
            ``metadata.is_function_calling_model``.
        timeout: seconds one LLM request may take (default 120; ``None``: no limit). A request
            past it is abandoned, counted in ``stats.timeouts`` and retried like any failure;
            when the retries are spent the call raises ``LLMTimeoutError``. The limit covers
            the request only, not the wait for a concurrency slot nor the backoff.

    With a timeout, the sync methods (``structured`` / ``complete``) run each blocking LLM call
    in a daemon thread of its own and wait for it from the event loop, so the limit fires even
    when the LLM client never returns. Python cannot kill a thread: a timed-out thread is
    abandoned, keeps its connection until the client gives up, and no longer holds a
    concurrency slot (a hung provider can therefore have more than ``num_workers`` abandoned
    requests open). Async calls are cancelled instead; an LLM client that ignores cancellation
    keeps running in the background.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        cache: Union[ResponseCache, str, os.PathLike, None] = None,
        num_workers: int = 4,
        max_retries: int = 3,
        backoff: float = 0.5,
        use_function_calling: Optional[bool] = None,
        timeout: Optional[float] = DEFAULT_LLM_TIMEOUT,
    ) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if max_retries < 0 or backoff < 0:
            raise ValueError("max_retries and backoff must be >= 0")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds or None, got {timeout}")
        self.timeout = timeout
        self.llm = llm
        self.cache = (
            cache if isinstance(cache, ResponseCache) or cache is None else ResponseCache(cache)
        )
        self.num_workers = num_workers
        self.max_retries = max_retries
        self.backoff = backoff
        self.function_calling = (
            bool(llm.metadata.is_function_calling_model)
            if use_function_calling is None
            else use_function_calling
        )
        self.stats = LLMStats()
        self._thread_slots = threading.BoundedSemaphore(num_workers)
        self._loop_slots: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        self._loop_slots_lock = threading.Lock()

    @property
    def model_name(self) -> str:
        """Cache namespace: the LLM class and model name."""
        return f"{type(self.llm).__name__}/{self.llm.metadata.model_name}"

    def flush(self) -> None:
        """Persist the cache snapshot (the journal already holds every answer)."""
        if self.cache is not None:
            self.cache.flush()

    # public API ---------------------------------------------------------------------------

    def structured(
        self, prompt: PromptLike, output_cls: Type[Model], *, kind: str, **prompt_args: Any
    ) -> Model:
        """``output_cls`` filled by the LLM from ``prompt`` (sync; uses the LLM's sync methods)."""
        return run_sync(self._structured(prompt, output_cls, kind, prompt_args, blocking=True))

    async def astructured(
        self, prompt: PromptLike, output_cls: Type[Model], *, kind: str, **prompt_args: Any
    ) -> Model:
        """Async ``structured``."""
        return await self._structured(prompt, output_cls, kind, prompt_args, blocking=False)

    def complete(self, prompt: PromptLike, *, kind: str, **prompt_args: Any) -> str:
        """The LLM's text answer to ``prompt`` (sync)."""
        return run_sync(self._complete(prompt, kind, prompt_args, blocking=True))

    async def acomplete(self, prompt: PromptLike, *, kind: str, **prompt_args: Any) -> str:
        """Async ``complete``."""
        return await self._complete(prompt, kind, prompt_args, blocking=False)

    # internals ----------------------------------------------------------------------------

    def _format(
        self, prompt: PromptLike, prompt_args: dict[str, Any]
    ) -> tuple[BasePromptTemplate, str]:
        template = PromptTemplate(prompt) if isinstance(prompt, str) else prompt
        if isinstance(prompt, str) and not prompt_args:
            return template, prompt
        return template, template.format(llm=self.llm, **prompt_args)

    def _cache_get(self, key: str) -> Optional[str]:
        return self.cache.get(key) if self.cache is not None else None

    def _cache_put(self, key: str, value: str) -> None:
        if self.cache is not None:
            self.cache.put(key, value)

    async def _complete(
        self, prompt: PromptLike, kind: str, prompt_args: dict[str, Any], *, blocking: bool
    ) -> str:
        _, text = self._format(prompt, prompt_args)
        key = ResponseCache.make_key(self.model_name, f"{kind}:text", text)
        cached = self._cache_get(key)
        if cached is not None:
            self.stats.add(cache_hits=1)
            return cached
        try:
            answer = await self._text_call(text, kind, blocking)
        except Exception:
            self.stats.add(failures=1)
            raise
        self._cache_put(key, answer)
        return answer

    async def _structured(
        self,
        prompt: PromptLike,
        output_cls: Type[Model],
        kind: str,
        prompt_args: dict[str, Any],
        *,
        blocking: bool,
    ) -> Model:
        template, text = self._format(prompt, prompt_args)
        key = ResponseCache.make_key(self.model_name, f"{kind}:{output_cls.__name__}", text)
        cached = self._cache_get(key)
        if cached is not None:
            try:
                result = output_cls.model_validate_json(cached)
                self.stats.add(cache_hits=1)
                return result
            except ValidationError:
                logger.warning("Cached %s answer no longer validates; asking again.", kind)
        try:
            if self.function_calling:
                result = await self._function_call(
                    template, text, output_cls, kind, prompt_args, blocking
                )
            else:
                result = await self._parsed_call(text, output_cls, kind, blocking)
        except Exception:
            self.stats.add(failures=1)
            raise
        self._cache_put(key, result.model_dump_json())
        return result

    async def _parsed_call(
        self, text: str, output_cls: Type[Model], kind: str, blocking: bool
    ) -> Model:
        """Text completion parsed as JSON, with one repair round showing the LLM its mistake."""

        async def ask_repair(repair: str) -> str:
            self.stats.add(repairs=1)
            return await self._text_call(repair, kind, blocking)

        answer = await self._text_call(text, kind, blocking)
        result, _ = await parse_with_repair(
            answer, output_cls, prompt=text, ask=ask_repair, what=kind
        )
        return result

    async def _function_call(
        self,
        template: BasePromptTemplate,
        text: str,
        output_cls: Type[Model],
        kind: str,
        prompt_args: dict[str, Any],
        blocking: bool,
    ) -> Model:
        """llama-index's function-calling structured prediction; tokens are estimated (the
        program hides the provider's usage report)."""
        predict = self.llm.structured_predict if blocking else self.llm.astructured_predict
        call = functools.partial(predict, output_cls, template, **prompt_args)
        try:
            result = await self._with_retries(call, kind, blocking)
        except (ValueError, TypeError, RecursionError) as exc:
            # llama-index parses the tool call's arguments itself (unbounded: a deeply nested
            # answer raises RecursionError there); all of these are unusable output
            raise LLMOutputError(
                f"The LLM's {kind} function call did not yield a valid {output_cls.__name__}: {exc}"
            ) from exc
        self.stats.add(
            prompt_tokens=count_tokens(text),
            completion_tokens=count_tokens(result.model_dump_json()),
        )
        return result

    async def _text_call(self, text: str, kind: str, blocking: bool) -> str:
        """One completion (with retries); records the provider's token usage or counts it."""
        call = functools.partial(self.llm.complete if blocking else self.llm.acomplete, text)
        response = await self._with_retries(call, kind, blocking)
        answer = response.text or ""
        prompt_tokens, completion_tokens = usage_of(response)
        self.stats.add(
            prompt_tokens=count_tokens(text) if prompt_tokens is None else prompt_tokens,
            completion_tokens=(
                count_tokens(answer) if completion_tokens is None else completion_tokens
            ),
        )
        return answer

    async def _with_retries(self, call: Callable[[], Any], kind: str, blocking: bool) -> Any:
        """Run ``call`` in a concurrency slot, retrying exceptions (timeouts included) with
        exponential backoff."""
        attempt = 0
        while True:
            try:
                async with self._slot(blocking):
                    self.stats.add(kind=kind, calls=1)
                    return await self._attempt(call, kind, blocking, attempt)
            except Exception as exc:
                if attempt >= self.max_retries:
                    raise
                delay = self.backoff * 2**attempt
                attempt += 1
                self.stats.add(retries=1)
                logger.warning(
                    "LLM %s call failed (%s: %s); retry %d in %.2fs",
                    kind,
                    type(exc).__name__,
                    exc,
                    attempt,
                    delay,
                )
                await asyncio.sleep(delay)

    async def _attempt(
        self, call: Callable[[], Any], kind: str, blocking: bool, attempt: int
    ) -> Any:
        """One request, given up after ``timeout`` seconds (``LLMTimeoutError``).

        ``asyncio.wait`` rather than ``wait_for``: a ``TimeoutError`` raised by the LLM client
        itself stays that client's error instead of passing for ours.
        """
        if self.timeout is None:
            result = call()
            return result if blocking else await result
        task = asyncio.ensure_future(in_thread(call, stoppable=False) if blocking else call())
        task.add_done_callback(_retrieve_outcome)
        try:
            done, _ = await asyncio.wait({task}, timeout=self.timeout)
        except BaseException:  # we were cancelled: so is the request
            task.cancel()
            raise
        if task in done:
            return task.result()
        task.cancel()
        self.stats.add(timeouts=1)
        raise LLMTimeoutError(
            f"the LLM's {kind} call timed out after {self.timeout:g} s "
            f"(attempt {attempt + 1} of {self.max_retries + 1}; LLMRunner(timeout=...) sets "
            "the limit)"
        )

    @contextlib.asynccontextmanager
    async def _slot(self, blocking: bool) -> AsyncIterator[None]:
        """A concurrency slot, released on success, error and cancellation alike."""
        if blocking:
            self._thread_slots.acquire()
            try:
                yield
            finally:
                self._thread_slots.release()
            return
        async with self._loop_semaphore(asyncio.get_running_loop()):
            yield

    def _loop_semaphore(self, loop: asyncio.AbstractEventLoop) -> asyncio.Semaphore:
        """This loop's semaphore (an ``asyncio.Semaphore`` is bound to one loop).

        Sync wrappers run loops in several threads at once; the lock keeps two threads from
        creating a loop's semaphore twice or dropping each other's, either of which would let
        more than ``num_workers`` calls run in that loop. Loops are kept by strong reference
        (uvloop's cannot be weakly referenced) and dropped once closed.
        """
        with self._loop_slots_lock:
            semaphore = self._loop_slots.get(loop)
            if semaphore is None:
                for closed in [lp for lp in self._loop_slots if lp.is_closed()]:
                    del self._loop_slots[closed]
                semaphore = self._loop_slots[loop] = asyncio.Semaphore(self.num_workers)
            return semaphore


def _retrieve_outcome(task: "asyncio.Future[Any]") -> None:
    """Read an abandoned request's outcome so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()
