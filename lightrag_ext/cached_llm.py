"""Structured LLM calls through LightRAG's role LLM functions and its LLM response cache.

The event pass (``extract`` role, extraction cache) and the query-cue step (``keyword`` role,
query cache) ask for JSON with the shared prompts of ``llama_index_e2rag.extract.prompts`` and
parse it with the shared parser and its one repair round (``llm_parsing.parse_with_repair``,
the code ``LLMRunner`` uses), so both packages accept and reject the same answers. Answers are
cached under our own cache types, and only once they parse: a malformed answer is asked again
next time instead of being replayed forever. Parsing is the shared, bounded parser's (size and
nesting depth are checked before ``json`` sees an answer), so any unusable answer is an
``LLMOutputError``.

No timeout of our own: the role functions are LightRAG's wrapped ones, whose queue gives up on a
call after ``2 * default_llm_timeout`` seconds (``LLM_TIMEOUT``, 240 by default; per role
``role_llm_configs[role].timeout``) with a ``TimeoutError`` ("Worker execution timeout after
N s"), so wrapping them again would only add a second, competing limit.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional, Type, TypeVar

from lightrag.utils import (
    CacheData,
    compute_args_hash,
    generate_cache_key,
    get_llm_cache_identity,
    handle_cache,
    remove_think_tags,
    save_to_cache,
    serialize_llm_cache_identity,
)
from pydantic import BaseModel

from llama_index_e2rag.llm.parsing import OutputParseError, parse_json_output, parse_with_repair

from lightrag_ext.host import LLMHost
from lightrag_ext.version import check_lightrag_compat

# Every module that calls into LightRAG's internals (rag, backfill, layer, query, the server)
# imports this one, so the guard runs here, before any of them can be used; ``import
# lightrag_ext`` alone stays as light as ``import lightrag``.
check_lightrag_compat()

logger = logging.getLogger(__name__)

Model = TypeVar("Model", bound=BaseModel)
#: LightRAG's cache mode of extraction answers; query-time answers use the query mode instead.
EXTRACTION_MODE = "default"


class CachedStructuredLLM:
    """One LightRAG role LLM asked for ``output_cls`` JSON, through LightRAG's response cache.

    Args:
        rag: the LightRAG instance (its role functions, cache and cache switches).
        role: LightRAG LLM role (``"extract"`` for indexing, ``"keyword"`` for query cues).
        mode: LightRAG cache mode: ``"default"`` for extraction (cached when
            ``enable_llm_cache_for_entity_extract``), a query mode otherwise (cached when
            ``enable_llm_cache``), as LightRAG's own ``handle_cache`` decides.
        llm_kwargs: extra keyword arguments for the role function (e.g. a queue priority).
    """

    def __init__(
        self,
        rag: LLMHost,
        *,
        role: str = "extract",
        mode: str = EXTRACTION_MODE,
        llm_kwargs: Optional[dict[str, Any]] = None,
    ) -> None:
        config = rag._build_global_config()
        self._llm: Callable[..., Any] = config["role_llm_funcs"][role]
        self._llm_kwargs = dict(llm_kwargs or {})
        self._identity = serialize_llm_cache_identity(get_llm_cache_identity(config, role))
        self._mode = mode
        enabled = (
            rag.enable_llm_cache_for_entity_extract
            if mode == EXTRACTION_MODE
            else rag.enable_llm_cache
        )
        self._cache = rag.llm_response_cache if enabled else None

    async def structured(
        self,
        prompt: str,
        output_cls: Type[Model],
        *,
        cache_type: str,
        chunk_id: Optional[str] = None,
    ) -> tuple[Model, Optional[str]]:
        """Parsed answer and its cache key; raises ``LLMOutputError`` when it cannot be parsed."""
        args_hash = compute_args_hash(prompt, "\n<llm_identity>\n", self._identity)
        cache_key = generate_cache_key(self._mode, cache_type, args_hash)
        cached = await handle_cache(self._cache, args_hash, prompt, self._mode, cache_type)
        where = f" (chunk {chunk_id})" if chunk_id else ""
        if cached is not None:
            try:
                return parse_json_output(cached[0], output_cls), cache_key
            except OutputParseError:
                logger.warning("Cached %s answer%s no longer parses", cache_type, where)

        async def ask(text: str) -> str:
            return remove_think_tags(await self._llm(text, **self._llm_kwargs))

        parsed, answer = await parse_with_repair(
            await ask(prompt), output_cls, prompt=prompt, ask=ask, what=f"{cache_type}{where}"
        )
        if self._cache is None:
            return parsed, None
        await save_to_cache(
            self._cache,
            CacheData(
                args_hash=args_hash,
                content=answer,
                prompt=prompt,
                mode=self._mode,
                cache_type=cache_type,
                chunk_id=chunk_id,
            ),
        )
        return parsed, cache_key
