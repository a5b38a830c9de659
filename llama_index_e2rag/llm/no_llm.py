"""``NoLLM``: "no LLM" for LlamaIndex components that want an LLM object they will not call.

Some LlamaIndex constructors resolve an LLM even when the way they are used never calls one:
``QueryFusionRetriever(..., num_queries=1)`` only asks its LLM for the *extra* queries, and
``RetrieverQueryEngine.from_args(retriever, response_synthesizer=...)`` only builds a synthesizer
from it when none is given. Both fall back to ``Settings.llm``, which without a configured LLM
builds OpenAI's and fails offline (``ImportError: llama-index-llms-openai`` or no key). Passing
``llm=NoLLM()`` says "there is none" for that one object, where ``Settings.llm = None`` (which
LlamaIndex turns into a ``MockLLM``) says it for the whole process.

Unlike ``MockLLM``, which answers every prompt by echoing it, ``NoLLM`` refuses to be called: a
``QueryFusionRetriever`` left at ``num_queries=4`` fails in one line instead of searching with
lines of its own prompt. This library reads ``NoLLM`` (and ``Settings.llm = None``) as "no LLM"
everywhere: ``E2RAGIndex(llm=NoLLM())`` answers extractively.
"""

from __future__ import annotations

from typing import Any, NoReturn

from llama_index.core.base.llms.types import CompletionResponseGen
from llama_index.core.llms.mock import MockLLM

from llama_index_e2rag.errors import MissingModelError


class NoLLM(MockLLM):
    """An LLM slot filled with "none": accepted where an LLM object is required, never called."""

    @classmethod
    def class_name(cls) -> str:
        return "NoLLM"

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> NoReturn:
        _refuse(prompt)

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        _refuse(prompt)


def _refuse(prompt: str) -> NoReturn:
    first_line = prompt.strip().splitlines()[0][:80] if prompt.strip() else ""
    raise MissingModelError(
        "an LLM was asked to complete a prompt but NoLLM stands in for one (no LLM is "
        f"configured); prompt begins {first_line!r}. Pass a real llm=..., or use the "
        "component without generation (e.g. QueryFusionRetriever(num_queries=1))"
    )
