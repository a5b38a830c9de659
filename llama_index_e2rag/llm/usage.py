"""What LLM calls spent: the runner's counters and token counts (reported, or counted offline).

Apart from the runner so that code reading or showing the figures (``E2RAGIndex.llm_stats``,
``e2rag show``, the benchmarks) and the offline token count (chunk sizes) need no LLM class.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field, fields
from typing import Any, Optional


@dataclass
class LLMStats:
    """What the runner spent: requests sent, answers reused, failures, tokens.

    ``calls`` counts every request sent to the LLM (retried attempts and JSON repairs included);
    ``failures`` counts runner calls that ended in an error after retries and repair;
    ``timeouts`` counts requests given up at the runner's ``timeout`` (each is then retried like
    any failed request, so one timed-out call may count several).
    """

    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    timeouts: int = 0
    retries: int = 0
    repairs: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls_by_kind: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    def add(self, kind: Optional[str] = None, **deltas: int) -> None:
        """Thread-safe increments (sync wrappers may run in worker threads)."""
        with self._lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)
            if kind is not None and deltas.get("calls"):
                self.calls_by_kind[kind] = self.calls_by_kind.get(kind, 0) + deltas["calls"]

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_lock"}
            data["calls_by_kind"] = dict(self.calls_by_kind)
        return data


_WORD_PIECES = re.compile(r"\w{1,4}|[^\w\s]")


def count_tokens(text: str) -> int:
    """cl100k_base token count, offline.

    llama-index-core ships the cl100k_base vocabulary in its package data and its
    ``get_tokenizer()`` loads it from there (no download). If that ever fails, a word-piece
    estimate (runs of up to four word characters, each punctuation mark) stands in; it is within
    ~20% of cl100k on English prose.
    """
    try:
        from llama_index.core.utils import get_tokenizer  # deferred: llama-index, ~2 s

        return len(get_tokenizer()(text))
    except Exception:  # noqa: BLE001 - any tokenizer trouble falls back to the estimate
        return len(_WORD_PIECES.findall(text))


def usage_of(response: Any) -> tuple[Optional[int], Optional[int]]:
    """(prompt, completion) tokens the provider reported, if it did."""
    extra = getattr(response, "additional_kwargs", None) or {}
    usage: Any = extra if "prompt_tokens" in extra or "input_tokens" in extra else None
    if usage is None:
        raw = getattr(response, "raw", None)
        usage = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
    if usage is None:
        return None, None

    def read(*names: str) -> Optional[int]:
        for name in names:
            value = usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)
            if isinstance(value, int):
                return value
        return None

    return read("prompt_tokens", "input_tokens"), read("completion_tokens", "output_tokens")
