"""The one door to LLMs: the runner, its response cache, output parsing and prompt text.

``llama_index_e2rag.llm`` is a documented import path: the runner's public names are exported
here lazily (PEP 562), so importing one of this package's modules (``llm.cache``, ``llm.parsing``)
does not load the runner and llama-index's LLM classes with it.
"""

from __future__ import annotations

from llama_index_e2rag.lazy import lazy_exports

_RUNNER = "llama_index_e2rag.llm.runner"
_LAZY = {name: _RUNNER for name in (
    "CACHE_VERSION", "DEFAULT_LLM_TIMEOUT", "JSON_REPAIR_PROMPT", "LLMRunner", "LLMStats",
    "OutputParseError", "ResponseCache", "count_tokens", "parse_json_output", "parse_with_repair",
    "resolve_llm", "run_sync")}

__all__ = sorted(_LAZY)

__getattr__ = lazy_exports(globals(), _LAZY)
